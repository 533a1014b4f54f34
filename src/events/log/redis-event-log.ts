/**
 * The event log in Redis Streams, shared by every replica: one stream per environment, appended
 * once per event (`XADD`, trimmed to the retention), read by each replica from its own position
 * with a blocking `XREAD` on a connection of its own.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../../logger.ts';
import type { EventTracer } from '../event-tracing.ts';
import type { PlatformEnvironment } from '../event-types.ts';
import {
  appendedAt,
  compareCursors,
  DEFAULT_LOG_RETENTION,
  fromLogMessage,
  LOG_START,
  toLogMessage,
  type EventLog,
  type LoggedEvent,
  type LogRead,
  type LogRetention,
} from './event-log.ts';
import { createLogListeners } from './log-listeners.ts';

/** Options of {@link createRedisEventLog}. */
export interface RedisEventLogOptions {
  /** Connection for XADD, XRANGE and XINFO; shared with other non-blocking users, not closed here. */
  client: Redis;
  /**
   * Opens the connection a replica reads the log on: a blocking XREAD holds its connection, so it
   * cannot share one. Called once per environment listened to; closed by `close()`.
   */
  openReader: (environment: PlatformEnvironment) => Redis;
  /** Prefix of the stream keys (`<prefix>events:log:<environment>`). Default `facade:`. */
  keyPrefix?: string;
  retention?: LogRetention;
  logger: Logger;
  /** Traces each append and carries its context to every replica (tracing on). */
  tracer?: EventTracer;
  /** How long one XREAD waits for an event before asking again. Default 5 s. */
  blockMs?: number;
}

/** Events read by one XREAD at most: a replica catching up reads in batches of this size. */
const READ_BATCH = 500;

/** Pause before reading again after a failed read (the connection reconnects meanwhile). */
const RETRY_DELAY_MS = 250;

/** What the log reader of one environment on this replica holds. */
interface Reader {
  connection: Redis;
  /** The cursor of the last event read (and handed to the listeners). */
  position: string;
}

/** Part of `XINFO STREAM`'s answer, by name. */
interface StreamInfo {
  length: number;
  /** Every event ever appended, trimmed or not (Redis 7). */
  entriesAdded: number;
  lastGeneratedId: string;
  firstEntryId: string | undefined;
}

/**
 * An {@link EventLog} over Redis Streams.
 *
 * Each replica reads each environment's stream from its own position, so a replica whose Redis
 * connection drops for a while reads on from where it stopped once it is back: its subscribers
 * receive what they missed, in order, once. Nothing is acknowledged to Redis (no consumer group):
 * every replica reads every event, and the position is the replica's alone.
 */
export function createRedisEventLog(options: RedisEventLogOptions): EventLog {
  const { client, logger, tracer } = options;
  const prefix = options.keyPrefix ?? 'facade:';
  const retention = options.retention ?? DEFAULT_LOG_RETENTION;
  const blockMs = options.blockMs ?? 5_000;
  const keyOf = (environment: PlatformEnvironment): string => `${prefix}events:log:${environment}`;
  const listeners = createLogListeners(logger);
  const readers = new Map<PlatformEnvironment, Promise<Reader>>();
  let closed = false;
  // Read through a function: the read loop must see a `close()` that happened while it awaited.
  const isClosed = (): boolean => closed;

  const readLoop = async (environment: PlatformEnvironment, reader: Reader): Promise<void> => {
    let lastLogged = 0;
    while (!isClosed()) {
      try {
        const reply = await reader.connection.xread(
          'COUNT',
          READ_BATCH,
          'BLOCK',
          blockMs,
          'STREAMS',
          keyOf(environment),
          reader.position,
        );
        for (const [, entries] of reply ?? []) {
          for (const [cursor, fields] of entries) {
            // The position moves past a malformed entry too: reading it again would not mend it.
            reader.position = cursor;
            const logged = toLoggedEvent(cursor, fields, environment, logger);
            if (logged !== undefined) listeners.deliver(environment, logged);
          }
        }
      } catch (error) {
        if (isClosed()) return;
        // One line every few seconds while Redis is away; the loop reads on from its position.
        if (Date.now() - lastLogged > 5_000) {
          lastLogged = Date.now();
          logger.warn('reading the event log failed; reading on from the last position', {
            environment,
            position: reader.position,
            error: error instanceof Error ? error.message : String(error),
          });
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
      }
    }
  };

  /** Starts reading `environment`'s stream from its head now, once per process. */
  const readerOf = (environment: PlatformEnvironment): Promise<Reader> => {
    let reader = readers.get(environment);
    if (reader === undefined) {
      reader = (async () => {
        const info = await streamInfoOf(client, keyOf(environment));
        const started: Reader = {
          connection: options.openReader(environment),
          position: info?.lastGeneratedId ?? LOG_START,
        };
        void readLoop(environment, started);
        return started;
      })();
      readers.set(environment, reader);
      // A failed start is retried by the next subscriber rather than remembered.
      reader.catch(() => {
        if (readers.get(environment) === reader) readers.delete(environment);
      });
    }
    return reader;
  };

  return {
    async append(event) {
      if (closed) throw new Error('the event log is closed');
      const key = keyOf(event.environment);
      const write = async (carried: LoggedEvent['published']): Promise<string> => {
        const cursor = await client.xadd(
          key,
          ...trimmingOf(retention),
          '*',
          'm',
          toLogMessage(event, carried),
        );
        if (cursor === null) throw new Error('XADD appended nothing');
        return cursor;
      };
      return tracer === undefined ? write(undefined) : tracer.publish(event, key, write);
    },

    async subscribe(environment, onEvent) {
      if (closed) throw new Error('the event log is closed');
      const reader = await readerOf(environment);
      return { position: reader.position, stop: listeners.add(environment, onEvent) };
    },

    async readAfter(environment, after, count): Promise<LogRead> {
      // One transaction: the range and what was trimmed are seen at the same instant.
      const replies = await client
        .multi()
        .call('XINFO', 'STREAM', keyOf(environment))
        .xrange(keyOf(environment), `(${after}`, '+', 'COUNT', count)
        .exec();
      const [infoReply, rangeReply] = replies ?? [];
      const infoError = infoReply?.[0];
      if (infoError != null && !/no such key/i.test(infoError.message)) throw infoError;
      if (rangeReply?.[0] != null) throw rangeReply[0];
      const info = infoError == null ? toStreamInfo(infoReply?.[1] as unknown[]) : undefined;
      const ahead = compareCursors(after, info?.lastGeneratedId ?? LOG_START) > 0;
      if (ahead || isExpired(after, info)) return { expired: true, oldest: info?.firstEntryId, ahead };
      const events: LoggedEvent[] = [];
      for (const [cursor, fields] of (rangeReply?.[1] ?? []) as [string, string[]][]) {
        const logged = toLoggedEvent(cursor, fields, environment, logger);
        if (logged !== undefined) events.push(logged);
      }
      return { expired: false, events };
    },

    async stats(environment) {
      const reader = await readers.get(environment)?.catch(() => undefined);
      const length = await client.xlen(keyOf(environment));
      if (reader === undefined) return { length, lagSeconds: 0 };
      const [next] = await client.xrange(keyOf(environment), `(${reader.position}`, '+', 'COUNT', 1);
      return {
        length,
        lagSeconds: next === undefined ? 0 : Math.max(0, Date.now() - appendedAt(next[0])) / 1000,
      };
    },

    async close() {
      if (closed) return;
      closed = true;
      listeners.clear();
      for (const reader of readers.values()) {
        // disconnect, not quit: a QUIT would wait behind the blocking XREAD.
        (await reader.catch(() => undefined))?.connection.disconnect();
      }
      readers.clear();
    },
  };
}

/** The trimming arguments of XADD: approximate (`~`), so Redis trims whole nodes, cheaply. */
function trimmingOf(retention: LogRetention): (string | number)[] {
  return 'events' in retention
    ? ['MAXLEN', '~', retention.events]
    : ['MINID', '~', `${Date.now() - retention.seconds * 1000}-0`];
}

/** What XINFO STREAM says of the stream at `key`; undefined when nothing was ever appended. */
async function streamInfoOf(client: Redis, key: string): Promise<StreamInfo | undefined> {
  try {
    return toStreamInfo((await client.call('XINFO', 'STREAM', key)) as unknown[]);
  } catch (error) {
    // No stream yet: nothing was ever appended in this environment.
    if (error instanceof Error && /no such key/i.test(error.message)) return undefined;
    throw error;
  }
}

/**
 * Whether the stream may have lost an event after `after`. Trimming removes the oldest first, so
 * once anything was trimmed, every event from the first held one to the head is held, and a cursor
 * before the first held one may have missed trimmed ones (Redis keeps no id of the last trimmed
 * entry: a cursor that is itself the last one trimmed is answered expired too, on the safe side).
 * A cursor ahead of the head is not one of this stream's (another Redis, or one that lost its data).
 */
function isExpired(after: string, info: StreamInfo | undefined): boolean {
  const head = info?.lastGeneratedId ?? LOG_START;
  if (compareCursors(after, head) > 0) return true;
  if (info === undefined || info.entriesAdded <= info.length) return false;
  return compareCursors(after, info.firstEntryId ?? head) < 0;
}

function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** Reads `XINFO STREAM`'s flat name/value answer. */
function toStreamInfo(reply: unknown[]): StreamInfo {
  const fields = new Map<string, unknown>();
  for (let index = 0; index + 1 < reply.length; index += 2)
    fields.set(String(reply[index]), reply[index + 1]);
  const firstEntry = fields.get('first-entry');
  return {
    length: Number(fields.get('length') ?? 0),
    entriesAdded: Number(fields.get('entries-added') ?? fields.get('length') ?? 0),
    lastGeneratedId: asString(fields.get('last-generated-id')) ?? LOG_START,
    firstEntryId: Array.isArray(firstEntry) ? asString(firstEntry[0]) : undefined,
  };
}

/** The event of one stream entry (`m` holds the message), or undefined (logged) when malformed. */
function toLoggedEvent(
  cursor: string,
  fields: string[],
  environment: PlatformEnvironment,
  logger: Logger,
): LoggedEvent | undefined {
  const message = fields[fields.indexOf('m') + 1];
  const read =
    fields.indexOf('m') % 2 === 0 && message !== undefined
      ? fromLogMessage(cursor, message, environment)
      : { ok: false as const, reason: 'no message field' };
  if (read.ok) return read.logged;
  logger.warn('dropped a malformed entry of the event log', { environment, cursor, reason: read.reason });
  return undefined;
}
