/**
 * Waiting for what a test can only observe from outside: what a client received, what the emulator
 * recorded, what a child process logged. What an in-process facade does is waited on through its
 * lifecycle hooks instead (lifecycle-watch.ts).
 */

/**
 * Resolves when `condition` holds, polling (running `refresh` before each check when given);
 * rejects with `message` after `timeoutMs`.
 */
export async function waitFor(
  condition: () => boolean,
  message: string,
  timeoutMs = 10_000,
  refresh?: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await refresh?.();
    if (condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${message}`);
    await new Promise((resolve) => setTimeout(resolve, refresh === undefined ? 10 : 50));
  }
}
