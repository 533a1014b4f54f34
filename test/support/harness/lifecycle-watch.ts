/**
 * Waiting on a facade's lifecycle hooks (`app.lifecycle`, src/observability/lifecycle.ts) instead of
 * on its log lines: counts of each event since the facade started, and promises that resolve from
 * the hook itself, no polling. Only for facades in this process; one started as a child process
 * (`npm start`, the compose twin) can be watched through its output alone.
 */
import type { Lifecycle, LifecycleEventName, LifecycleEvents } from '../../../src/observability/lifecycle.ts';

/** How long a wait lasts before it fails with what it waited for (a test's own timeout is longer). */
const WAIT_MS = 10_000;

const EVENT_NAMES: readonly LifecycleEventName[] = [
  'operationStarted',
  'operationCompleted',
  'subscriptionStarted',
  'subscriptionCompleted',
  'webhookEventPublished',
];

/** One facade's lifecycle, counted from the moment it is watched (right after `createApp`). */
export interface LifecycleWatch {
  /** How many `event`s the facade told since it was watched. */
  count(event: LifecycleEventName): number;
  /** Resolves once `count(event)` reaches `total`; `what` names it in the failure. */
  reached(event: LifecycleEventName, total: number, what: string): Promise<void>;
  /** The next `event` (that `matching` accepts, when given) told from now on. */
  next<E extends LifecycleEventName>(
    event: E,
    matching?: (message: LifecycleEvents[E]) => boolean,
  ): Promise<LifecycleEvents[E]>;
  /** Stops listening; pending waits fail. */
  close(): void;
}

/** Watches `lifecycle` from now on. */
export function watchLifecycle(lifecycle: Lifecycle): LifecycleWatch {
  const counts = new Map<LifecycleEventName, number>(EVENT_NAMES.map((name) => [name, 0]));
  const waiters = new Set<{ check(): boolean; fail(reason: string): void }>();
  const stops = EVENT_NAMES.map((name) =>
    lifecycle.on(name, () => {
      counts.set(name, (counts.get(name) ?? 0) + 1);
      for (const waiter of [...waiters]) waiter.check();
    }),
  );

  /**
   * A promise resolved by what `start` sets up (its `check` runs now and after every event; `stop`
   * when it settles), or failed after {@link WAIT_MS} with `describe()`.
   */
  function wait<T>(
    start: (resolve: (value: T) => void) => { check(): boolean; stop?(): void },
    describe: () => string,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const finish = (): void => {
        clearTimeout(timer);
        waiters.delete(waiter);
        hooks.stop?.();
      };
      const waiter = {
        check: () => hooks.check(),
        fail(reason: string) {
          finish();
          reject(new Error(`${reason}: ${describe()}`));
        },
      };
      const timer = setTimeout(() => waiter.fail('timed out waiting'), WAIT_MS);
      const hooks = start((value) => {
        finish();
        resolve(value);
      });
      waiters.add(waiter);
      waiter.check();
    });
  }

  return {
    count: (event) => counts.get(event) ?? 0,
    reached(event, total, what) {
      return wait<undefined>(
        (resolve) => ({
          check() {
            if ((counts.get(event) ?? 0) < total) return false;
            resolve(undefined);
            return true;
          },
        }),
        () => `${what} (${counts.get(event) ?? 0} of ${total} ${event} so far)`,
      );
    },
    next(event, matching) {
      return wait(
        (resolve) => {
          const stop = lifecycle.on(event, (message) => {
            if (matching === undefined || matching(message)) resolve(message);
          });
          return { check: () => false, stop };
        },
        () => `the next ${event}`,
      );
    },
    close() {
      for (const stop of stops) stop();
      for (const waiter of [...waiters]) waiter.fail('the facade closed while waiting');
    },
  };
}
