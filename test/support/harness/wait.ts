/**
 * Waiting for what a test can only observe from outside: what a client received, what the emulator
 * recorded, what a child process logged. What an in-process facade does is waited on through its
 * lifecycle hooks instead (lifecycle-watch.ts).
 */
import { describeLoad, loadScaledMs } from '../load-budget.ts';

/**
 * Resolves when `condition` holds, polling (running `refresh` before each check when given);
 * rejects with `message` after `timeoutMs`, by default 10 s stretched by the machine's load (what is
 * observed from outside is another process's or another server's work, which the load slows).
 */
export async function waitFor(
  condition: () => boolean,
  message: string,
  timeoutMs = loadScaledMs(10_000),
  refresh?: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await refresh?.();
    if (condition()) return;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting: ${message} (${String(timeoutMs)} ms, ${describeLoad()})`);
    await new Promise((resolve) => setTimeout(resolve, refresh === undefined ? 10 : 50));
  }
}
