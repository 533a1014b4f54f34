/**
 * Publishing each new event once, and durably: what the webhook route and the reconciler do with an
 * event. The claim of event-dedup.ts, then the append and the mark "seen"; in Redis the append and
 * the mark are one step, and with replicas to wait for (`REDIS_MIN_REPLICAS_ACK`) the answer says
 * whether they hold both, so that nothing is acknowledged that a failover could take back.
 *
 * A retry after an answer that was not durable finds the mark (or, when a failover lost it, finds
 * neither mark nor event, and appends afresh): a mark without its event cannot exist, as the mark is
 * written after the event in the same atomic step, and replicas and the AOF hold a prefix of what
 * the primary wrote.
 */
import type { Logger } from '../../logger.ts';
import type { ReplicaAcks } from '../../redis.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { EventLog } from '../log/event-log.ts';
import type { RedisEventLog } from '../log/redis-event-log.ts';
import type { ClaimResult, EventDeduplicator } from './event-dedup.ts';
import type { RedisEventDeduplicator } from './redis-event-dedup.ts';

/** What {@link EventPublisher.claim} answers: a {@link ClaimResult}, or a `seen` the replicas do not hold yet. */
export type PublishClaim = ClaimResult | 'seen_unconfirmed';

/** What {@link EventPublisher.publish} answers. */
export type Publication =
  /** Appended at `cursor`; `durable`: enough replicas hold it (always true with none to wait for). */
  | { published: true; cursor: string; durable: boolean }
  /** The claim was gone (expired and taken by another delivery, or lost in a failover): nothing appended. */
  | { published: false };

/** Claims and publishes events once, across deliveries and replicas. */
export interface EventPublisher {
  /**
   * Takes `eventId` for this delivery (`claimed`), or says it is being published (`in_flight`) or
   * was (`seen`, once the replicas hold it; `seen_unconfirmed` while they do not).
   */
  claim(eventId: string): Promise<PublishClaim>;
  /**
   * Appends a claimed event and marks it seen. Throws when the log did not take it, after giving
   * the claim up, so that the next delivery publishes it.
   */
  publish(event: PlatformEvent): Promise<Publication>;
}

/**
 * Publishing through any log and store: append, then confirm (the in-memory log and store, where
 * there is nothing to wait for and no failover to survive).
 */
export function createEventPublisher(parts: {
  dedup: EventDeduplicator;
  log: Pick<EventLog, 'append'>;
  logger: Logger;
}): EventPublisher {
  const { dedup, log, logger } = parts;
  return {
    claim: (eventId) => dedup.claim(eventId),
    async publish(event) {
      const cursor = await appendOrRelease(dedup, event, () => log.append(event));
      // Published: from here the delivery is acknowledged whatever happens, or a retry after the
      // claim expired would publish the event a second time.
      await dedup.confirm(event.id).catch((error: unknown) => {
        logger.error('published an event but could not record it as seen', {
          eventId: event.id,
          error: String(error),
        });
      });
      return { published: true, cursor, durable: true };
    },
  };
}

/**
 * Publishing to the Redis event log: the append writes the mark itself (`appendMarked`), and a
 * `WAIT` on the connection both are made on says whether `acks.policy.replicas` replicas hold them.
 * The store and the log must use that connection (the log's `appender`).
 */
export function createRedisEventPublisher(parts: {
  dedup: RedisEventDeduplicator;
  log: RedisEventLog;
  acks: ReplicaAcks;
}): EventPublisher {
  const { dedup, log, acks } = parts;
  return {
    async claim(eventId) {
      const claim = await dedup.claim(eventId);
      if (claim !== 'seen') return claim;
      // The claim refreshed the mark, a write after the event's: held, the event is held too.
      return (await acks.held()) ? 'seen' : 'seen_unconfirmed';
    },
    async publish(event) {
      const mark = dedup.markOf(event.id);
      if (mark === undefined) throw new Error('publish() of an event this delivery has not claimed');
      const cursor = await appendOrRelease(dedup, event, () => log.appendMarked(event, mark));
      dedup.marked(event.id);
      if (cursor === undefined) return { published: false };
      return { published: true, cursor, durable: await acks.held() };
    },
  };
}

/** Runs `append`; if it fails, gives the claim up (only if still this delivery's) and rethrows. */
async function appendOrRelease<T>(
  dedup: EventDeduplicator,
  event: PlatformEvent,
  append: () => Promise<T>,
): Promise<T> {
  try {
    return await append();
  } catch (error) {
    await dedup.release(event.id).catch(() => undefined);
    throw error;
  }
}
