/**
 * Direct delivery (`src/events/delivery/direct-delivery.ts`): the subscribers that share an event's
 * outcome get the one result made once, each from its own queue and in its order, and a subscriber
 * whose socket has not taken its last write takes nothing more until it has (its events wait in
 * its queue) while the others go on.
 */
import { expect, test } from 'vitest';
import { DirectPump, SharedOutcome } from '../../src/events/delivery/direct-delivery.ts';
import { SKIP } from '../../src/events/delivery/push-pull-queue.ts';

interface Item {
  event: string;
}

/** A subscriber: its queue of live items, its pump, and what its transport was handed. */
function subscriber(
  outcomes: Map<string, SharedOutcome<object>>,
  write: (result: object) => boolean | Promise<boolean>,
) {
  const queue: Item[] = [];
  let listener: (() => void) | undefined;
  const written: object[] = [];
  const pump = new DirectPump<object, Item, never>({
    takeLive: () => queue.shift() ?? 'empty',
    next: () => new Promise(() => undefined),
    onQueued: (next) => {
      listener = next;
    },
    stop: () => Promise.resolve(),
    shared: (item) => outcomes.get(item.event) ?? SKIP,
    delivered: () => undefined,
    slow: () => Promise.resolve(SKIP),
    first: [],
    write: (result) => {
      written.push(result);
      return write(result);
    },
    onDone: () => undefined,
  });
  // The transport asks for the ordinary way's next item, as it does while the pump runs.
  void pump.next();
  return {
    written,
    push(event: string) {
      queue.push({ event });
      listener?.();
    },
    get waiting() {
      return queue.length;
    },
  };
}

test('one outcome made once for every subscriber, each written the same result; a stalled socket holds back only its own', async () => {
  let made = 0;
  const outcomes = new Map<string, SharedOutcome<object>>();
  const outcome = (event: string) =>
    new SharedOutcome<object>(() => {
      made += 1;
      return Promise.resolve({ data: { event } });
    });
  let drained: ((open: boolean) => void) | undefined;
  const stalled = subscriber(
    outcomes,
    () =>
      new Promise<boolean>((resolve) => {
        drained = resolve;
      }),
  );
  const others = Array.from({ length: 300 }, () => subscriber(outcomes, () => true));

  outcomes.set('e1', outcome('e1'));
  for (const each of [stalled, ...others]) each.push('e1');
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  expect(made).toBe(1);
  const first = others[0]!.written[0];
  expect(first).toEqual({ data: { event: 'e1' } });
  expect(others.every((each) => each.written.length === 1 && each.written[0] === first)).toBe(true);
  expect(stalled.written).toEqual([first]);

  // The next event: every other subscriber gets it; the stalled one keeps it queued.
  outcomes.set('e2', outcome('e2'));
  for (const each of [stalled, ...others]) each.push('e2');
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  expect(made).toBe(2);
  expect(others.every((each) => each.written.length === 2)).toBe(true);
  expect(stalled.written).toHaveLength(1);
  expect(stalled.waiting).toBe(1);

  // Its socket takes the write: it goes on with what waited.
  drained?.(true);
  await new Promise((resolve) => setImmediate(resolve));
  expect(stalled.written).toHaveLength(2);
  expect(stalled.written[1]).toBe(others[0]!.written[1]);
  expect(made).toBe(2);
});
