/**
 * The ordered log of verified, de-duplicated events, one per environment: what every replica's
 * subscribers are fed from, and what a subscriber that reconnects resumes from (by cursor).
 */
import { readEventTraceContext, type EventTraceContext } from '../../observability/trace-context.ts';
import { TRACE_CONTEXT_MEMBER } from '../event-tracing.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { toPlatformEvent } from '../receiving/platform-event.ts';

/** One event as the log holds it: its place in the log, and what its append carried. */
export interface LoggedEvent {
  /**
   * Where the event sits in its environment's log: an opaque string to clients, ordered within one
   * log (`<milliseconds>-<sequence>`, the Redis stream id, or the same shape in memory).
   */
  cursor: string;
  event: PlatformEvent;
  /** With tracing on, the trace context of the append's span (see `../event-tracing.ts`). */
  published?: EventTraceContext;
}

/** What {@link EventLog.readAfter} answers. */
export type LogRead =
  /** The events after the cursor, oldest first, at most the count asked for. */
  | { expired: false; events: LoggedEvent[] }
  /**
   * Some event after the cursor is no longer held (retention), or the cursor is not one of this
   * log's: the caller cannot be given everything after it. `oldest` is the oldest cursor held;
   * `ahead`: the cursor is ahead of the log's head (rather than older than what it holds).
   */
  | { expired: true; oldest: string | undefined; ahead: boolean };

/** A live listener of the log and where it started. */
export interface LogSubscription {
  /** The log position the listener starts after: it hears every event appended after it. */
  position: string;
  /** Stops listening; calling it twice is harmless. */
  stop(): void;
}

/** What the metrics read of one environment's log on this replica. */
export interface LogStats {
  /** Events held. */
  length: number;
  /** Seconds since the oldest event this replica has not yet read was appended; 0 when caught up. */
  lagSeconds: number;
}

/**
 * The event log: appended once per event by whichever replica received it, read in order by every
 * replica (each from its own position), and read from any cursor still held by a subscriber that
 * resumes.
 *
 * A message in the log is the event's JSON with, when tracing is on, the trace context of its
 * append span beside it (`traceContext`); one without it, or with a garbled one, is delivered all
 * the same.
 */
export interface EventLog {
  /** Appends `event` to its environment's log. Resolves with its cursor once the log holds it. */
  append(event: PlatformEvent): Promise<string>;
  /**
   * Calls `onEvent` for every event of `environment` after the returned position, in log order,
   * once each, also across a lost and regained connection to the log. `onEvent` must not throw or
   * block: the listeners are called one after the other.
   */
  subscribe(
    environment: PlatformEnvironment,
    onEvent: (logged: LoggedEvent) => void,
  ): Promise<LogSubscription>;
  /** At most `count` events of `environment` after `after`, oldest first, or that they are gone. */
  readAfter(environment: PlatformEnvironment, after: string, count: number): Promise<LogRead>;
  /** The log's length and this replica's lag behind its head (metrics). */
  stats(environment: PlatformEnvironment): Promise<LogStats>;
  /** Stops every listener and releases connections. The log's content is left alone. */
  close(): Promise<void>;
}

/** The position before every event: a log that has held nothing is at it. */
export const LOG_START = '0-0';

/** A cursor as numbers, for ordering. */
type CursorParts = readonly [milliseconds: number, sequence: number];

const CURSOR = /^(\d{1,16})-(\d{1,16})$/;

/** The parts of `cursor`, or undefined when it is not a cursor's shape. */
function cursorParts(cursor: string): CursorParts | undefined {
  const match = CURSOR.exec(cursor);
  if (match === null) return undefined;
  const milliseconds = Number(match[1]);
  const sequence = Number(match[2]);
  if (!Number.isSafeInteger(milliseconds) || !Number.isSafeInteger(sequence)) return undefined;
  return [milliseconds, sequence];
}

/** Whether `value` has the shape of a cursor (it may still be unknown to the log). */
export function isCursor(value: string): boolean {
  return cursorParts(value) !== undefined;
}

/** Orders two well-formed cursors: negative when `a` comes first. */
export function compareCursors(a: string, b: string): number {
  const [aMs, aSeq] = cursorParts(a) ?? [0, 0];
  const [bMs, bSeq] = cursorParts(b) ?? [0, 0];
  return aMs === bMs ? aSeq - bSeq : aMs - bMs;
}

/** When the event at `cursor` was appended (its milliseconds part). */
export function appendedAt(cursor: string): number {
  return cursorParts(cursor)?.[0] ?? 0;
}

/**
 * How much a log keeps (`EVENT_LOG_RETENTION`): a number of events, or an age. Older events are
 * trimmed as new ones are appended; a cursor older than what is kept answers `CURSOR_EXPIRED`.
 */
export type LogRetention = { events: number } | { seconds: number };

/** The default retention: the last 10 000 events of each environment. */
export const DEFAULT_LOG_RETENTION: LogRetention = { events: 10_000 };

/**
 * Reads `EVENT_LOG_RETENTION`: a count of events (`10000`) or an age with a unit (`90s`, `30m`,
 * `24h`, `7d`). Undefined when it is neither.
 */
export function parseLogRetention(value: string): LogRetention | undefined {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  if (match === null) return undefined;
  const amount = Number(match[1]);
  if (amount < 1) return undefined;
  const unit = match[2];
  if (unit === '') return { events: amount };
  const seconds = amount * { s: 1, m: 60, h: 3600, d: 86_400 }[unit as 's' | 'm' | 'h' | 'd'];
  return { seconds };
}

/** The message a log entry holds: the event, and the trace context of its append when there is one. */
export function toLogMessage(event: PlatformEvent, carried: EventTraceContext | undefined): string {
  return JSON.stringify(carried === undefined ? event : { ...event, [TRACE_CONTEXT_MEMBER]: carried });
}

/**
 * The event a log entry holds, checked like any input (another process wrote it), or the reason
 * it cannot be delivered. A garbled trace context is dropped alone.
 */
export function fromLogMessage(
  cursor: string,
  message: string,
  environment: PlatformEnvironment,
): { ok: true; logged: LoggedEvent } | { ok: false; reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  const parsed = toPlatformEvent(value);
  if (!parsed.ok) return { ok: false, reason: parsed.message };
  if (parsed.event.environment !== environment) {
    return { ok: false, reason: 'environment does not match the log' };
  }
  const published = readEventTraceContext((value as Record<string, unknown>)[TRACE_CONTEXT_MEMBER]);
  return {
    ok: true,
    logged:
      published === undefined ? { cursor, event: parsed.event } : { cursor, event: parsed.event, published },
  };
}
