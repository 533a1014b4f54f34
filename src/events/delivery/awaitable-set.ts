/**
 * A set whose emptying can be awaited. Shutdown waits for the running subscriptions to complete,
 * and token expiry for a connection's subscriptions to end, on this rather than by polling.
 */
export class AwaitableSet<T> extends Set<T> {
  #waiters = new Set<() => void>();

  override delete(value: T): boolean {
    const deleted = super.delete(value);
    if (this.size === 0) this.#wake();
    return deleted;
  }

  override clear(): void {
    super.clear();
    this.#wake();
  }

  /** Resolves once the set is empty, or after `timeoutMs`, whichever comes first. */
  async emptied(timeoutMs: number): Promise<void> {
    if (this.size === 0) return;
    const { promise, resolve } = Promise.withResolvers<undefined>();
    const wake = (): void => resolve(undefined);
    this.#waiters.add(wake);
    const timer = setTimeout(wake, Math.max(0, timeoutMs));
    try {
      await promise;
    } finally {
      clearTimeout(timer);
      this.#waiters.delete(wake);
    }
  }

  #wake(): void {
    for (const wake of this.#waiters) wake();
    this.#waiters.clear();
  }
}
