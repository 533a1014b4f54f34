/**
 * The event log of a single replica (no `REDIS_URL`): bounded by the retention, lost on restart.
 */
import type { Logger } from '../../logger.ts';
import type { EventTracer } from '../event-tracing.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import {
  appendedAt,
  compareCursors,
  DEFAULT_LOG_RETENTION,
  type EventLog,
  type LoggedEvent,
  type LogRetention,
} from './event-log.ts';
import { createLogListeners } from './log-listeners.ts';

/** Options of {@link createMemoryEventLog}. */
export interface MemoryEventLogOptions {
  retention?: LogRetention;
  /** Prefix of the log's name in traces (`<prefix>events:log:<environment>`, as in Redis). Default `facade:`. */
  keyPrefix?: string;
  logger: Logger;
  /** Traces each append (tracing on). */
  tracer?: EventTracer;
  /** The clock; tests move it. */
  now?: () => number;
}

/** One environment's log in memory. */
interface MemoryLog {
  entries: LoggedEvent[];
  /** The cursor of the last event appended, or the log's creation when none was. */
  head: string;
  /** The cursor of the last event handed to the listeners. */
  delivered: string;
  /**
   * Nothing at or before this is known to the log: the last event trimmed, or the log's creation
   * (a cursor from before this process began cannot be resumed from: what happened since is lost).
   */
  forgottenUpTo: string;
}

/**
 * An {@link EventLog} in this process's memory. Cursors have the Redis stream id's shape
 * (`<milliseconds>-<sequence>`), so a client cannot tell the two apart. Listeners hear an event on
 * the next turn of the event loop after its append resolved (in order), as they would through Redis.
 */
export function createMemoryEventLog(options: MemoryEventLogOptions): EventLog {
  const retention = options.retention ?? DEFAULT_LOG_RETENTION;
  const now = options.now ?? Date.now;
  const createdAt = `${now()}-0`;
  const logs = new Map<PlatformEnvironment, MemoryLog>();
  const listeners = createLogListeners(options.logger);
  let closed = false;

  const logOf = (environment: PlatformEnvironment): MemoryLog => {
    let log = logs.get(environment);
    if (log === undefined) {
      log = { entries: [], head: createdAt, delivered: createdAt, forgottenUpTo: createdAt };
      logs.set(environment, log);
    }
    return log;
  };

  const nextCursor = (log: MemoryLog): string => {
    const milliseconds = now();
    const [headMs, headSeq] = log.head.split('-').map(Number) as [number, number];
    return milliseconds > headMs ? `${milliseconds}-0` : `${headMs}-${headSeq + 1}`;
  };

  const trim = (log: MemoryLog): void => {
    const excess =
      'events' in retention
        ? log.entries.length - retention.events
        : countOlderThan(log.entries, now() - retention.seconds * 1000);
    if (excess <= 0) return;
    const removed = log.entries.splice(0, excess);
    log.forgottenUpTo = removed.at(-1)!.cursor;
  };

  return {
    async append(event) {
      if (closed) throw new Error('the event log is closed');
      const log = logOf(event.environment);
      const write = (carried: LoggedEvent['published']): Promise<string> => {
        const cursor = nextCursor(log);
        const logged: LoggedEvent =
          carried === undefined ? { cursor, event } : { cursor, event, published: carried };
        log.entries.push(logged);
        log.head = cursor;
        trim(log);
        // The append resolves (and the webhook is acknowledged) before thousands of listeners run.
        setImmediate(() => {
          log.delivered = cursor;
          listeners.deliver(event.environment, logged);
        });
        return Promise.resolve(cursor);
      };
      const { tracer } = options;
      const name = `${options.keyPrefix ?? 'facade:'}events:log:${event.environment}`;
      return tracer === undefined ? write(undefined) : tracer.publish(event, name, write);
    },

    async subscribe(environment, onEvent) {
      if (closed) throw new Error('the event log is closed');
      const log = logOf(environment);
      return { position: log.delivered, stop: listeners.add(environment, onEvent) };
    },

    async readAfter(environment, after, count) {
      const log = logOf(environment);
      const ahead = compareCursors(after, log.head) > 0;
      if (ahead || compareCursors(after, log.forgottenUpTo) < 0) {
        return { expired: true, oldest: log.entries[0]?.cursor, ahead };
      }
      const start = firstAfter(log.entries, after);
      return { expired: false, events: log.entries.slice(start, start + count) };
    },

    async stats(environment) {
      const log = logOf(environment);
      const next = log.entries[firstAfter(log.entries, log.delivered)];
      return {
        length: log.entries.length,
        lagSeconds: next === undefined ? 0 : Math.max(0, now() - appendedAt(next.cursor)) / 1000,
      };
    },

    async close() {
      closed = true;
      listeners.clear();
    },
  };
}

/** The index of the first entry after `cursor` (binary search: entries are in cursor order). */
function firstAfter(entries: readonly LoggedEvent[], cursor: string): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareCursors(entries[middle]!.cursor, cursor) <= 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** How many of the oldest entries were appended before `before` (milliseconds). */
function countOlderThan(entries: readonly LoggedEvent[], before: number): number {
  let count = 0;
  while (count < entries.length && appendedAt(entries[count]!.cursor) < before) count += 1;
  return count;
}
