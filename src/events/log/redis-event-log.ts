/**
 * The event log in Redis Streams, shared by every replica: one stream per environment, appended
 * once per event (`XADD`, trimmed to the retention), read by each replica from its own position
 * with a blocking `XREAD` on a connection of its own, and handed to the listeners once the replicas
 * hold it (`REDIS_MIN_REPLICAS_ACK`).
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../../logger.ts';
import type { ReplicaAckPolicy } from '../../redis-config.ts';
import type { EventTracer } from '../event-tracing.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import {
  appendedAt,
  compareCursors,
  DEFAULT_LOG_RETENTION,
  LOG_START,
  toLogMessage,
  type EventLog,
  type LoggedEvent,
  type LogRead,
  type LogRetention,
} from './event-log.ts';
import { createLogListeners } from './log-listeners.ts';
import {
  createReadLoop,
  streamInfoOf,
  toLoggedEvent,
  toStreamInfo,
  type Reader,
  type StreamInfo,
} from './redis-log-reader.ts';

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
  /**
   * The connection appends are made on (`appendMarked`, `append`), so that a `WAIT` on it covers
   * them; default `client`. Not closed here.
   */
  appender?: Redis;
  /**
   * How many replicas must hold an event before this replica's listeners hear it (and a replay
   * reads it), as a webhook is acknowledged only then: a failover cannot take back an event a
   * subscriber saw. Default none to wait for.
   */
  acks?: ReplicaAckPolicy;
}

/** A claim of the de-duplication store the append turns into "seen" in the same step. */
export interface SeenMark {
  /** The event id's key in the store. */
  key: string;
  /** What the key holds while this delivery's claim lasts. */
  token: string;
  /** How long the key then keeps the event seen. */
  ttlMs: number;
}

/** An {@link EventLog} in Redis Streams, with the append that is also the de-duplication's "seen". */
export interface RedisEventLog extends EventLog {
  /**
   * Appends `event` and turns `mark`'s claim into "seen <cursor>" as one atomic step (one script:
   * its effects reach replicas and the AOF as one transaction), but only while the claim is still
   * `mark.token`. Resolves with the cursor, or undefined when the claim is gone (expired and taken
   * by another delivery, or lost in a failover): then nothing was appended. A promoted replica or a
   * restart from the AOF therefore never holds the mark without the event.
   */
  appendMarked(event: PlatformEvent, mark: SeenMark): Promise<string | undefined>;
  /** The connection appends are made on (a `WAIT` there covers them). */
  readonly appender: Redis;
}

// Appends only while the claim is this delivery's, and marks the event seen with its cursor in the
// same step. KEYS: stream, claim. ARGV: token, seen ttl, message, trimming strategy and threshold.
const APPEND_MARKED = `if redis.call('GET', KEYS[2]) ~= ARGV[1] then return false end
local id = redis.call('XADD', KEYS[1], ARGV[4], '~', ARGV[5], '*', 'm', ARGV[3])
redis.call('SET', KEYS[2], 'seen ' .. id, 'PX', ARGV[2])
return id`;

/**
 * An {@link EventLog} over Redis Streams.
 *
 * Each replica reads each environment's stream from its own position, so a replica whose Redis
 * connection drops for a while (a partition, a failover) reads on from where it stopped once it is
 * back: its subscribers receive what they missed, in order, once. Nothing is acknowledged to Redis
 * (no consumer group): every replica reads every event, and the position is the replica's alone.
 */
export function createRedisEventLog(options: RedisEventLogOptions): RedisEventLog {
  const { client, logger, tracer } = options;
  const appender = options.appender ?? client;
  const prefix = options.keyPrefix ?? 'facade:';
  const retention = options.retention ?? DEFAULT_LOG_RETENTION;
  const keyOf = (environment: PlatformEnvironment): string => `${prefix}events:log:${environment}`;
  const listeners = createLogListeners(logger);
  const readers = new Map<PlatformEnvironment, Promise<Reader>>();
  const durableReads = (options.acks?.replicas ?? 0) > 0;
  let closed = false;
  // Read through a function: the read loop must see a `close()` that happened while it awaited.
  const readLoop = createReadLoop({
    ...options,
    keyOf,
    deliver: (environment, logged) => listeners.deliver(environment, logged),
    isClosed: () => closed,
    channel: `${prefix}events:durable-reads`,
  });

  /** Starts reading `environment`'s stream from its head now, once per process. */
  const readerOf = (environment: PlatformEnvironment): Promise<Reader> => {
    let reader = readers.get(environment);
    if (reader === undefined) {
      reader = (async () => {
        const info = await streamInfoOf(client, keyOf(environment));
        const started: Reader = {
          connection: options.openReader(environment),
          position: info?.lastGeneratedId ?? LOG_START,
          dropped: 0,
        };
        started.connection.on('close', () => (started.dropped += 1));
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

  /** Appends `event` through `command` (given its stream key and message), traced when tracing is on. */
  const appendWith = async <T>(
    event: PlatformEvent,
    command: (key: string, message: string) => Promise<T>,
  ): Promise<T> => {
    if (closed) throw new Error('the event log is closed');
    const key = keyOf(event.environment);
    const write = (carried: LoggedEvent['published']): Promise<T> =>
      command(key, toLogMessage(event, carried));
    return tracer === undefined ? write(undefined) : tracer.publish(event, key, write);
  };

  return {
    appender,
    async append(event) {
      return appendWith(event, async (key, message) => {
        const cursor = await appender.xadd(key, ...trimmingOf(retention), '*', 'm', message);
        if (cursor === null) throw new Error('XADD appended nothing');
        return cursor;
      });
    },

    async appendMarked(event, mark) {
      return appendWith(event, async (key, message) => {
        const [strategy, , threshold] = trimmingOf(retention);
        const args = [mark.token, mark.ttlMs, message, strategy, threshold];
        const cursor = await appender.eval(APPEND_MARKED, 2, key, mark.key, ...args);
        return typeof cursor === 'string' ? cursor : undefined;
      });
    },

    async subscribe(environment, onEvent) {
      if (closed) throw new Error('the event log is closed');
      const reader = await readerOf(environment);
      return { position: reader.position, stop: listeners.add(environment, onEvent) };
    },

    async readAfter(environment, after, count): Promise<LogRead> {
      // With replicas to wait for, a replay reads no further than this replica's reader has
      // delivered (what they hold); the live listeners hear the rest once they do.
      const reader = durableReads ? await readers.get(environment)?.catch(() => undefined) : undefined;
      // One transaction: the range and what was trimmed are seen at the same instant.
      const replies = await client
        .multi()
        .call('XINFO', 'STREAM', keyOf(environment))
        .xrange(keyOf(environment), `(${after}`, reader?.position ?? '+', 'COUNT', count)
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
function trimmingOf(
  retention: LogRetention,
): [strategy: string, approximately: '~', threshold: string | number] {
  return 'events' in retention
    ? ['MAXLEN', '~', retention.events]
    : ['MINID', '~', `${Date.now() - retention.seconds * 1000}-0`];
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
