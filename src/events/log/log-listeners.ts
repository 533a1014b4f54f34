/**
 * The local listeners of an event log, per environment: one read of the log per replica, handed to
 * every subscriber of that replica in turn.
 */
import type { Logger } from '../../logger.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { LoggedEvent } from './event-log.ts';

type Listener = (logged: LoggedEvent) => void;

/** The listeners of one process's log reader. */
export interface LogListeners {
  /** Adds a listener; returns what removes it (twice is harmless). */
  add(environment: PlatformEnvironment, listener: Listener): () => void;
  /** Hands `logged` to every listener of `environment`; one that throws is logged, not fatal. */
  deliver(environment: PlatformEnvironment, logged: LoggedEvent): void;
  /** Listeners of `environment` now. */
  count(environment: PlatformEnvironment): number;
  clear(): void;
}

export function createLogListeners(logger: Logger): LogListeners {
  const byEnvironment = new Map<PlatformEnvironment, Set<Listener>>();
  return {
    add(environment, listener) {
      let listeners = byEnvironment.get(environment);
      if (listeners === undefined) {
        listeners = new Set();
        byEnvironment.set(environment, listeners);
      }
      // Each call is its own listener, even for the same function: its own stop removes it.
      const own: Listener = (logged) => listener(logged);
      listeners.add(own);
      return () => {
        listeners.delete(own);
      };
    },
    deliver(environment, logged) {
      for (const listener of byEnvironment.get(environment) ?? []) {
        try {
          listener(logged);
        } catch (error) {
          // A throwing listener would stop the loop and starve the other subscribers.
          logger.error('an event listener threw', { error: String(error) });
        }
      }
    },
    count: (environment) => byEnvironment.get(environment)?.size ?? 0,
    clear: () => byEnvironment.clear(),
  };
}
