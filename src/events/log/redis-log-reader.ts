/**
 * How one replica reads an environment's Redis stream: a blocking `XREAD` on a connection of its
 * own, from its own position, each batch handed to the listeners once the replicas hold it; and the
 * reading of stream entries and `XINFO STREAM` that the log shares.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from '../../logger.ts';
import { replicaAcksOf, type ReplicaAcks } from '../../redis.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { ReplicaAckPolicy } from '../../redis-config.ts';
import { compareCursors, fromLogMessage, LOG_START, type LoggedEvent } from './event-log.ts';

/** Events read by one XREAD at most: a replica catching up reads in batches of this size. */
const READ_BATCH = 500;

/** Pause before reading again after a failed read (the connection reconnects meanwhile). */
const RETRY_DELAY_MS = 250;

/** What the log reader of one environment on this replica holds. */
export interface Reader {
  connection: Redis;
  /** The cursor of the last event read (and handed to the listeners). */
  position: string;
  /** Connections lost so far: a batch read on one is not vouched for on the next. */
  dropped: number;
}

/** Part of `XINFO STREAM`'s answer, by name. */
export interface StreamInfo {
  length: number;
  /** Every event ever appended, trimmed or not (Redis 7). */
  entriesAdded: number;
  lastGeneratedId: string;
  firstEntryId: string | undefined;
}

/** What the read loop of {@link createReadLoop} needs of the log. */
export interface ReadLoopParts {
  logger: Logger;
  /** How many replicas must hold a batch before it is delivered (none by default). */
  acks?: ReplicaAckPolicy | undefined;
  /** How long one XREAD waits for an event before asking again. Default 5 s. */
  blockMs?: number | undefined;
  keyOf: (environment: PlatformEnvironment) => string;
  deliver: (environment: PlatformEnvironment, logged: LoggedEvent) => void;
  isClosed: () => boolean;
  /** Where a reader PUBLISHes its position: a write of its own for `WAIT` to cover. */
  channel: string;
}

/**
 * The loop that reads one environment's stream on one replica: XREAD from its position, wait until
 * the replicas hold the batch, hand it to the listeners, move on. After a lost connection it first
 * checks its position against the stream's head: a promoted replica or a Redis restarted from its
 * AOF may end before it (what it lacks was never acknowledged), and the ids it gives new events
 * would then be compared against a position they may not pass.
 */
export function createReadLoop(
  parts: ReadLoopParts,
): (environment: PlatformEnvironment, reader: Reader) => Promise<void> {
  const { logger, keyOf, isClosed } = parts;
  const blockMs = parts.blockMs ?? 5_000;
  const policy = parts.acks ?? { replicas: 0, timeoutMs: 0 };

  /** Resolves once the replicas hold what `reader` read; throws when its connection changed meanwhile. */
  const untilHeld = async (
    environment: PlatformEnvironment,
    reader: Reader,
    acks: ReplicaAcks,
  ): Promise<void> => {
    if (policy.replicas === 0) return;
    const dropped = reader.dropped;
    let waitingSince: number | undefined;
    while (!isClosed()) {
      // The reader's own write comes after every append it read: acknowledged, they are too.
      await reader.connection.publish(parts.channel, reader.position);
      const asked = Date.now();
      const held = await acks.held();
      // The batch was read on a connection now lost: the node behind the next may not hold it.
      if (reader.dropped !== dropped)
        throw new Error('the connection changed before the replicas acknowledged');
      if (held) return;
      // WAIT answers early only when it failed: no loop at full speed against a node that refuses it.
      if (Date.now() - asked < policy.timeoutMs / 2) await sleep(RETRY_DELAY_MS);
      waitingSince ??= Date.now();
      if (Date.now() - waitingSince > 5_000) {
        waitingSince = Date.now();
        logger.warn('events wait for the replicas to acknowledge them', {
          environment,
          replicas: policy.replicas,
          position: reader.position,
        });
      }
    }
  };

  /** After a reconnection: a position past the stream's head reads on from the head. */
  const checkHead = async (environment: PlatformEnvironment, reader: Reader): Promise<void> => {
    const head = (await streamInfoOf(reader.connection, keyOf(environment)))?.lastGeneratedId ?? LOG_START;
    if (compareCursors(reader.position, head) <= 0) return;
    logger.warn("the event log ends before this replica's position; reading on from its head", {
      environment,
      position: reader.position,
      head,
    });
    reader.position = head;
  };

  return async (environment: PlatformEnvironment, reader: Reader): Promise<void> => {
    const acks = replicaAcksOf(reader.connection, policy);
    let lastLogged = 0;
    let checkedAfter = reader.dropped;
    while (!isClosed()) {
      try {
        if (checkedAfter !== reader.dropped) {
          const dropped = reader.dropped;
          await checkHead(environment, reader);
          checkedAfter = dropped;
        }
        const reply = await reader.connection.xread(
          'COUNT',
          READ_BATCH,
          'BLOCK',
          blockMs,
          'STREAMS',
          keyOf(environment),
          reader.position,
        );
        const entries = reply?.flatMap(([, read]) => read) ?? [];
        if (entries.length === 0) continue;
        await untilHeld(environment, reader, acks);
        for (const [cursor, fields] of entries) {
          // The position moves past a malformed entry too: reading it again would not mend it.
          reader.position = cursor;
          const logged = toLoggedEvent(cursor, fields, environment, logger);
          if (logged !== undefined) parts.deliver(environment, logged);
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
        await sleep(RETRY_DELAY_MS);
      }
    }
  };
}

/** What XINFO STREAM says of the stream at `key`; undefined when nothing was ever appended. */
export async function streamInfoOf(client: Redis, key: string): Promise<StreamInfo | undefined> {
  try {
    return toStreamInfo((await client.call('XINFO', 'STREAM', key)) as unknown[]);
  } catch (error) {
    // No stream yet: nothing was ever appended in this environment.
    if (error instanceof Error && /no such key/i.test(error.message)) return undefined;
    throw error;
  }
}

function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** Reads `XINFO STREAM`'s flat name/value answer. */
export function toStreamInfo(reply: unknown[]): StreamInfo {
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
export function toLoggedEvent(
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
