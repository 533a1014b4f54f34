/**
 * `npm run bench:slow-readers`: what readers that stop reading cost the facade, against readers
 * that keep up, in the same run. The facade (one process, in-memory log, the default
 * `SUBSCRIPTION_QUEUE_LIMIT`) and the emulator run as separate processes; two GraphQL-over-SSE
 * readers subscribe to one account with a wide selection (its size per event is reported), and
 * BENCH_SLOW_READERS_EVENTS (2,100) signed `account.updated` webhooks are posted one after another.
 *
 * - **Keeping up**: the two readers read everything; the facade's resident memory before the first
 *   post and once both hold every event.
 * - **Stalled**: the same two readers pause their reads from the first byte (Node's HTTP client,
 *   so the kernel's buffers fill as they would on a stalled network); a third reader that keeps
 *   up tells when every event went out. The facade's resident memory before and then; then the
 *   stalled readers resume, and what each received is counted: the events it had been handed, and
 *   whether it then got `SUBSCRIPTION_OVERFLOW` and `complete` (the queue's overflow policy).
 *
 * The report gives both growths and their ratio, with the machine's load average.
 */
import http from 'node:http';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { ACCOUNT_ID, CUSTOMER_ID, accountUpdated, postSigned, startFacade } from './lib/live-facade.ts';
import { startEmulatorService, type ServiceProcess } from './processes.ts';

const eventCount = positiveIntegerFromEnv('BENCH_SLOW_READERS_EVENTS', 2_100);
const MIB = 1024 * 1024;

// Within the default query limits (15 aliases, 1,000 tokens): fourteen reads of the account's
// every field and its customer's.
const WIDE = `subscription Wide {
  accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}") {
    eventId ${Array.from({ length: 14 }, (_, i) => `a${i}: account { ...Everything }`).join(' ')}
  }
}
fragment Everything on Account {
  id customerId type network origin status openTaskIds currency label isDefault
  balances { currency available pending }
  details { __typename }
  customer { id nodeId type externalId displayName email status createdAt updatedAt }
}`;

interface Reader {
  /** `next` messages with data received so far. */
  readonly delivered: number;
  /** Bytes of the stream received so far. */
  readonly bytes: number;
  /** The stream ended with `SUBSCRIPTION_OVERFLOW`, then `complete`. */
  readonly overflowed: boolean;
  readonly completed: boolean;
  resume(): void;
  ended: Promise<void>;
  close(): void;
}

async function openReader(facade: ServiceProcess, stalled: boolean): Promise<Reader> {
  const request = http.request(`${facade.url}/graphql/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
  });
  request.end(JSON.stringify({ query: WIDE }));
  const [response] = (await once(request, 'response')) as [http.IncomingMessage];
  if (response.statusCode !== 200) {
    let body = '';
    for await (const chunk of response) body += String(chunk);
    throw new Error(`the stream was answered ${String(response.statusCode)}: ${body}`);
  }
  if (stalled) response.pause();
  const reader = {
    delivered: 0,
    bytes: 0,
    overflowed: false,
    completed: false,
    resume: () => void response.resume(),
    ended: Promise.resolve(),
    close: () => request.destroy(),
  };
  let partial = '';
  reader.ended = new Promise<void>((resolve) => {
    response.on('data', (chunk: Buffer) => {
      reader.bytes += chunk.length;
      const blocks = (partial + chunk.toString('utf8')).split('\n\n');
      partial = blocks.pop() ?? '';
      for (const block of blocks) {
        if (block.includes('SUBSCRIPTION_OVERFLOW')) reader.overflowed = true;
        else if (block.includes('event: next')) reader.delivered += 1;
        else if (block.includes('event: complete')) reader.completed = true;
      }
    });
    response.once('end', resolve);
    response.once('close', resolve);
  });
  // Adding the listener above does not resume a stream paused before it.
  if (stalled) response.pause();
  return reader;
}

/** Posts `count` signed events one after another; each is acknowledged before the next. */
async function postEvents(facade: ServiceProcess, secret: string, count: number): Promise<void> {
  for (let index = 0; index < count; index += 1) {
    const answer = await postSigned(facade.url, secret, accountUpdated(index));
    if (answer.status >= 300) throw new Error(`a webhook was answered ${answer.status}`);
  }
}

async function until(done: () => boolean, what: string, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const mib = (bytes: number): string => (bytes / MIB).toFixed(0);

async function main(): Promise<void> {
  const load = loadavg();
  const secret = generateWebhookSecret();
  const emulator = await startEmulatorService();
  const facade = await startFacade(emulator.url, secret, undefined, 'bench-slow-readers', 0);
  try {
    // Keeping up.
    const keeping = [await openReader(facade, false), await openReader(facade, false)];
    await sleep(500);
    const keepingBefore = await facade.rssBytes();
    await postEvents(facade, secret, eventCount);
    await until(() => keeping.every((reader) => reader.delivered === eventCount), 'the readers to keep up');
    const keepingAfter = await facade.rssBytes();
    const eventBytes = keeping[0]!.bytes / eventCount;
    for (const reader of keeping) reader.close();
    await sleep(1_000);

    // Stalled, with a third reader that keeps up telling when every event went out.
    const stalled = [await openReader(facade, true), await openReader(facade, true)];
    const sentinel = await openReader(facade, false);
    await sleep(500);
    const stalledBefore = await facade.rssBytes();
    await postEvents(facade, secret, eventCount);
    await until(() => sentinel.delivered === eventCount, 'the sentinel to receive every event');
    const stalledAfter = await facade.rssBytes();
    for (const reader of stalled) reader.resume();
    await Promise.race([Promise.all(stalled.map((reader) => reader.ended)), sleep(120_000)]);
    sentinel.close();

    const keptGrowth = keepingAfter - keepingBefore;
    const stalledGrowth = stalledAfter - stalledBefore;
    console.log(`slow readers: ${eventCount} events of ${(eventBytes / 1024).toFixed(1)} KiB each (as sent)`);
    console.log(
      `  keeping up: facade RSS ${mib(keepingBefore)} -> ${mib(keepingAfter)} MiB (${keptGrowth >= 0 ? '+' : ''}${mib(keptGrowth)} MiB)`,
    );
    console.log(
      `  two stalled: facade RSS ${mib(stalledBefore)} -> ${mib(stalledAfter)} MiB (${stalledGrowth >= 0 ? '+' : ''}${mib(stalledGrowth)} MiB)`,
    );
    console.log(`  growth stalled / keeping up: ${(stalledGrowth / Math.max(keptGrowth, MIB)).toFixed(2)}`);
    for (const [index, reader] of stalled.entries()) {
      console.log(
        `  stalled reader ${index + 1}: ${reader.delivered} events handed, then ${
          reader.overflowed ? 'SUBSCRIPTION_OVERFLOW' : 'no overflow notice'
        }${reader.completed ? ' and complete' : ', not completed'}`,
      );
    }
    console.log(
      `  load average before ${load.map((value) => value.toFixed(2)).join(' ')}, after ${loadavg()
        .map((value) => value.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    await facade.stop();
    await emulator.stop();
  }
}

await main();
