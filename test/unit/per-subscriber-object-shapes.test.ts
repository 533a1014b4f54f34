/**
 * Every subscriber holds a push-pull queue and a subscriber queue for its subscription's whole
 * life: each must stay an object of V8's fast mode. An object literal that puts a computed key
 * after a getter is built in dictionary mode, a hash table of about 450 bytes more per object
 * (measured with `npm run bench:transports` and BENCH_TRANSPORTS_HEAP_SNAPSHOTS).
 */
import { setFlagsFromString } from 'node:v8';
import { afterEach, expect, test } from 'vitest';
import { createPushPullQueue } from '../../src/events/delivery/push-pull-queue.ts';
import { openSubscriberQueue } from '../../src/events/delivery/subscriber-queue.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import { createLogger } from '../../src/logger.ts';

// V8's own answer, through its natives syntax (allowed from here on, for functions compiled later).
setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('object', 'return %HasFastProperties(object)') as (
  object: object,
) => boolean;

const logs: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const log of logs.splice(0)) await log.close();
});

test('a push-pull queue has fast properties', () => {
  const queue = createPushPullQueue<number>();
  expect(hasFastProperties(queue)).toBe(true);
  queue.end();
});

test('a subscriber queue has fast properties', async () => {
  const log = createMemoryEventLog({ logger: createLogger({ level: 'silent' }) });
  logs.push(log);
  const queue = await openSubscriberQueue({ log, environment: 'sandbox', limit: 10 });
  expect(hasFastProperties(queue)).toBe(true);
  await queue.return();
});
