/**
 * The seam between replay and live, driven event by event: the feed's list read publishes events
 * on a real event log while it runs, so every interleaving the algorithm must handle is exercised on
 * purpose rather than left to the timing of a real upstream.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { cursorCodec, type CursorCodec } from '../../src/events/log/cursor-codec.ts';
import type { EventLog } from '../../src/events/log/event-log.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import type { LiveSession } from '../../src/events/delivery/live-context.ts';
import {
  DROP,
  openLiveStream,
  type ChangeFeed,
  type LiveDelivery,
  type ReplayedChange,
} from '../../src/events/delivery/live-stream.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import { openSubscriberQueue, type SubscriberQueue } from '../../src/events/delivery/subscriber-queue.ts';
import type { GraphContext } from '../../src/graph/context.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent } from '../support/harness/events.ts';
import { waitFor } from '../support/harness/wait.ts';

type Change = { source: 'replay' | 'live'; resourceId: string; at: string; eventId?: string };

const at = (second: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();

let bus: EventLog;
const queues: SubscriberQueue[] = [];
afterEach(async () => {
  await Promise.all(queues.splice(0).map((queue) => queue.return()));
  await bus?.close();
});

/** A session over a real in-memory event log; contexts are opaque tokens (the feed below reads nothing). */
function session(
  cursors: CursorCodec = cursorCodec(undefined),
  limit?: number,
): LiveSession & { contexts: number } {
  bus = createMemoryEventLog({ logger: createLogger({ level: 'silent' }) });
  const live = {
    environment: 'sandbox' as const,
    cursors,
    contexts: 0,
    async openQueue(accept: (event: PlatformEvent) => boolean) {
      const queue = await openSubscriberQueue({
        log: bus,
        environment: 'sandbox',
        accept,
        ...(limit === undefined ? {} : { limit }),
      });
      queues.push(queue);
      return queue;
    },
    createEventContext() {
      live.contexts += 1;
      return { id: live.contexts } as unknown as GraphContext;
    },
    eventContext() {
      return live.createEventContext();
    },
    sharedExecution: <T>(_context: GraphContext, run: () => Promise<T>) => run(),
    liveQuery: () => Promise.reject(new Error('no live query in these tests')),
  };
  return live;
}

function accountEvent(resourceId: string, second: number): PlatformEvent {
  return makeEvent({
    occurredAt: at(second),
    data: { customerId: 'cus_1', resourceType: 'account', resourceId, object: { id: resourceId } },
  });
}

/** A feed whose list read runs `duringList` (publishing events) before answering `listed`. */
function feed(
  listed: { resourceId: string; updatedAt: string }[],
  duringList: () => Promise<void> = async () => {},
): ChangeFeed<Change> {
  return {
    accept: (event) => event.data.customerId === 'cus_1',
    async toPayload(event) {
      if (event.data.resourceId === 'acc_refused') return DROP;
      return { source: 'live', resourceId: event.data.resourceId, at: event.occurredAt, eventId: event.id };
    },
    async replay(): Promise<ReplayedChange<Change>[]> {
      await duringList();
      return listed.map(({ resourceId, updatedAt }) => ({
        resourceId,
        updatedAt,
        payload: { source: 'replay', resourceId, at: updatedAt },
      }));
    },
  };
}

async function take(stream: AsyncIterator<LiveDelivery>, count: number): Promise<Change[]> {
  const changes: Change[] = [];
  while (changes.length < count) {
    const next = await stream.next();
    if (next.done) throw new Error(`the stream ended after ${changes.length} of ${count} changes`);
    if (next.value.kind !== 'change') throw new Error(`unexpected ${next.value.kind}`);
    changes.push(next.value.payload as Change);
  }
  return changes;
}

describe('replay then live, at the seam', () => {
  test('an event published during the list read whose change the list shows is delivered once, as replayed', async () => {
    const live = session();
    const stream = await openLiveStream(
      live,
      feed([{ resourceId: 'acc_a', updatedAt: at(10) }], async () => {
        await bus.append(accountEvent('acc_a', 10));
      }),
    );
    // A marker published after the replay: everything before it has been through the seam.
    await bus.append(accountEvent('acc_marker', 20));
    const changes = await take(stream, 2);
    expect(changes.map((change) => [change.source, change.resourceId])).toEqual([
      ['replay', 'acc_a'],
      ['live', 'acc_marker'],
    ]);
    await stream.return?.();
  });

  test('an event published during the list read that is newer than the listed record is delivered live too', async () => {
    const live = session();
    // The list read the record at 10; it changed again at 11 while later pages were read.
    const stream = await openLiveStream(
      live,
      feed([{ resourceId: 'acc_a', updatedAt: at(10) }], async () => {
        await bus.append(accountEvent('acc_a', 11));
      }),
    );
    const changes = await take(stream, 2);
    expect(changes).toMatchObject([
      { source: 'replay', resourceId: 'acc_a', at: at(10) },
      { source: 'live', resourceId: 'acc_a', at: at(11) },
    ]);
    await stream.return?.();
  });

  test('an event for a resource the list did not show (created or archived meanwhile) is delivered live', async () => {
    const live = session();
    const stream = await openLiveStream(
      live,
      feed([{ resourceId: 'acc_a', updatedAt: at(10) }], async () => {
        await bus.append(accountEvent('acc_b', 9));
      }),
    );
    const changes = await take(stream, 2);
    expect(changes.map((change) => [change.source, change.resourceId])).toEqual([
      ['replay', 'acc_a'],
      ['live', 'acc_b'],
    ]);
    await stream.return?.();
  });

  test('a late redelivery of a change older than the replayed state is skipped; later changes are not', async () => {
    const live = session();
    const stream = await openLiveStream(live, feed([{ resourceId: 'acc_a', updatedAt: at(10) }]));
    await bus.append(accountEvent('acc_a', 5));
    await bus.append(accountEvent('acc_a', 10));
    await bus.append(accountEvent('acc_a', 12));
    const changes = await take(stream, 2);
    expect(changes).toMatchObject([
      { source: 'replay', at: at(10) },
      { source: 'live', at: at(12) },
    ]);
    await stream.return?.();
  });

  test('replays in updatedAt order, each resource once, before anything live', async () => {
    const live = session();
    const stream = await openLiveStream(
      live,
      feed(
        [
          { resourceId: 'acc_c', updatedAt: at(30) },
          { resourceId: 'acc_a', updatedAt: at(10) },
          { resourceId: 'acc_b', updatedAt: at(20) },
        ],
        async () => {
          await bus.append(accountEvent('acc_d', 40));
        },
      ),
    );
    const changes = await take(stream, 4);
    expect(changes.map((change) => `${change.source}:${change.resourceId}`)).toEqual([
      'replay:acc_a',
      'replay:acc_b',
      'replay:acc_c',
      'live:acc_d',
    ]);
    await stream.return?.();
  });

  test('each live event gets a context of its own; a refused one is skipped', async () => {
    const live = session();
    const stream = await openLiveStream(live, { ...feed([]), replay: undefined });
    const before = live.contexts;
    await bus.append(accountEvent('acc_refused', 1));
    await bus.append(accountEvent('acc_a', 2));
    await bus.append(accountEvent('acc_a', 3));
    const deliveries: LiveDelivery[] = [];
    for (let i = 0; i < 2; i += 1) {
      const next = await stream.next();
      if (!next.done) deliveries.push(next.value);
    }
    const contexts = deliveries.map((delivery) => (delivery.kind === 'change' ? delivery.context : null));
    expect(contexts[0]).not.toBe(contexts[1]);
    expect(live.contexts - before).toBe(3);
    await stream.return?.();
  });

  test('a failed list read stops listening and fails the subscription', async () => {
    const live = session();
    const failing: ChangeFeed<Change> = {
      ...feed([]),
      replay: () => Promise.reject(new Error('list refused')),
    };
    await expect(openLiveStream(live, failing)).rejects.toThrow('list refused');
    expect(queues).toHaveLength(1);
    await expect(queues[0]!.next()).resolves.toEqual({ value: undefined, done: true });
  });
});

describe('the cursors a stream hands out', () => {
  test('callers bound to an environment are handed its form: replayed and live changes alike', async () => {
    const live = session(cursorCodec('sandbox'));
    const stream = await openLiveStream(live, feed([{ resourceId: 'acc_a', updatedAt: at(10) }]));
    const appended = await bus.append(accountEvent('acc_b', 20));
    const cursors: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const next = await stream.next();
      if (!next.done && next.value.kind === 'change') cursors.push(next.value.cursor);
    }
    expect(cursors).toEqual([`sandbox~${queues[0]!.position}`, `sandbox~${appended}`]);
    await stream.return?.();
  });

  test('an overflow names where to resume in the same form', async () => {
    const live = session(cursorCodec('sandbox'), 1);
    const stream = await openLiveStream(live, { ...feed([]), replay: undefined });
    // A second listener of the log, opened after the stream's: once it holds the three events, the
    // stream's queue (limit 1) has been handed them too, and has overflowed.
    const witness = await openSubscriberQueue({ log: bus, environment: 'sandbox', accept: () => true });
    queues.push(witness);
    for (let second = 1; second <= 3; second += 1) await bus.append(accountEvent('acc_a', second));
    await waitFor(() => witness.size === 3, 'the log to hand out the three events');
    const next = await stream.next();
    expect(next.value).toMatchObject({
      kind: 'overflow',
      resumeAfter: `sandbox~${queues[0]!.position}`,
    });
    await stream.return?.();
  });

  test('with UPSTREAM_API_KEY alone they are the log positions as they are', async () => {
    const live = session();
    const stream = await openLiveStream(live, { ...feed([]), replay: undefined });
    const appended = await bus.append(accountEvent('acc_a', 1));
    const next = await stream.next();
    expect(next.value).toMatchObject({ kind: 'change', cursor: appended });
    await stream.return?.();
  });
});
