/**
 * The dead-letter record of parked webhook events: what a letter keeps (escaped, truncated, never
 * the record or a signature), its bound per environment, newest first, in memory and in a real
 * Redis shared by two readers; and the webhook route's answer when the record cannot take a letter.
 */
import http from 'node:http';
import express from 'express';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import { createMemoryEventDeduplicator } from '../../src/events/dedup/memory-event-dedup.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import { createWebhookRouter } from '../../src/events/receiving/webhook-route.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent, postSignedEvent } from '../support/harness/events.ts';
import {
  createDeadLetterRecord,
  createMemoryDeadLetters,
  createRedisDeadLetters,
  deadLetterEnvironmentOf,
  deadLetterOf,
  printable,
  type DeadLetter,
  type DeadLetterRecord,
} from '../../src/events/receiving/dead-letters.ts';
import { parsePlatformEvent } from '../../src/events/receiving/platform-event.ts';
import { connectRedis, uniqueRedisPrefix } from '../support/harness/redis.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const poisonous = {
  id: 'evt_1',
  type: 'account.updated',
  occurredAt: '2026-01-02T03:04:05.678Z',
  environment: 'live',
  data: {
    customerId: '\ud800',
    resourceType: 'account',
    resourceId: 'acc_1',
    object: { id: 'acc_1', holder: 'Ada Lovelace', iban: 'GB00TEST' },
  },
};

function letterOf(body: unknown, receivedAt: number, webhookId = 'evt_1'): DeadLetter {
  const parsed = parsePlatformEvent(JSON.stringify(body));
  if (parsed.ok) throw new Error('expected a refused event');
  return deadLetterOf({
    poison: parsed,
    value: parsed.value,
    webhookId,
    bodyBytes: 321,
    environment: deadLetterEnvironmentOf(undefined, parsed.value),
    receivedAt,
  });
}

describe('a dead letter', () => {
  test('keeps the identifying members escaped, and nothing of the record', () => {
    const letter = letterOf(poisonous, Date.UTC(2026, 0, 2));
    expect(letter).toEqual({
      receivedAt: '2026-01-02T00:00:00.000Z',
      environment: 'live',
      reason: 'invalid_text',
      pointer: '/data/customerId',
      detail: 'a string is not well-formed Unicode (a lone surrogate)',
      webhookId: 'evt_1',
      bodyBytes: 321,
      event: {
        id: 'evt_1',
        type: 'account.updated',
        occurredAt: '2026-01-02T03:04:05.678Z',
        environment: 'live',
        customerId: '\\ud800',
        resourceType: 'account',
        resourceId: 'acc_1',
      },
    });
    expect(JSON.stringify(letter)).not.toContain('Lovelace');
  });

  test('is filed under the route environment, else the one the body names, else unknown', () => {
    expect(deadLetterEnvironmentOf('sandbox', { environment: 'live' })).toBe('sandbox');
    expect(deadLetterEnvironmentOf(undefined, { environment: 'live' })).toBe('live');
    expect(deadLetterEnvironmentOf(undefined, { environment: 'staging' })).toBe('unknown');
    expect(deadLetterEnvironmentOf(undefined, 'not an object')).toBe('unknown');
  });

  test('printable: controls, non-ASCII, lone surrogates and backslashes escaped; long strings cut', () => {
    expect(printable('evt_\u0000\n\u001b[31m\\é\ud800😀')).toBe(
      'evt_\\u0000\\u000a\\u001b[31m\\\\\\u00e9\\ud800\\ud83d\\ude00',
    );
    const cut = printable('\ud800'.repeat(10_000));
    expect(cut).toBe(`${'\\ud800'.repeat(21)}…(10000 characters)`);
    expect(printable('a'.repeat(128))).toBe('a'.repeat(128));
  });
});

/** Files `count` letters of `environment`, a millisecond apart, ids `evt_<n>`. */
async function file(record: DeadLetterRecord, environment: string, count: number, from = 0): Promise<void> {
  for (let index = from; index < from + count; index += 1) {
    await record.add(
      letterOf(
        { ...poisonous, id: `evt_${index}`, environment },
        Date.UTC(2026, 0, 1) + index,
        `evt_${index}`,
      ),
    );
  }
}

describe.each([
  ['in memory', (): DeadLetterRecord => createMemoryDeadLetters({ maxPerEnvironment: 3 })],
  [
    'in Redis',
    (): DeadLetterRecord => {
      const client = connectRedis();
      cleanups.push(() => client.quit());
      return createRedisDeadLetters({ client, keyPrefix: uniqueRedisPrefix(), maxPerEnvironment: 3 });
    },
  ],
])('the record %s', (_name, open) => {
  test('keeps at most its bound per environment, the oldest dropped, listed newest first', async () => {
    const record = open();
    await file(record, 'live', 5);
    await file(record, 'staging', 2, 10);
    const listed = await record.list(100);
    expect(listed.map((letter) => [letter.environment, letter.webhookId])).toEqual([
      ['unknown', 'evt_11'],
      ['unknown', 'evt_10'],
      ['live', 'evt_4'],
      ['live', 'evt_3'],
      ['live', 'evt_2'],
    ]);
    expect((await record.list(2)).map((letter) => letter.webhookId)).toEqual(['evt_11', 'evt_10']);
  });
});

describe('the record in Redis', () => {
  test('is one per environment for every replica: what one files, another lists', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const [first, second] = [connectRedis(), connectRedis()];
    cleanups.push(
      () => first.quit(),
      () => second.quit(),
    );
    const filing = createDeadLetterRecord(
      first,
      { redisKeyPrefix: keyPrefix, webhooks: { deadLettersMax: 2 } },
      'live',
    );
    const listing = createDeadLetterRecord(
      second,
      { redisKeyPrefix: keyPrefix, webhooks: { deadLettersMax: 2 } },
      'live',
    );
    await file(filing, 'live', 3);
    expect((await listing.list(10)).map((letter) => letter.webhookId)).toEqual(['evt_2', 'evt_1']);
    expect(await second.xlen(`${keyPrefix}events:dead-letters:live`)).toBe(2);
  });

  test('leaves out an entry that is not a letter (another process wrote it)', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const client = connectRedis();
    cleanups.push(() => client.quit());
    const record = createRedisDeadLetters({ client, keyPrefix, maxPerEnvironment: 10 });
    await file(record, 'live', 1);
    const key = `${keyPrefix}events:dead-letters:live`;
    await client.xadd(key, '*', 'letter', '{"receivedAt":"2030-01-01T00:00:00.000Z","reason":"made_up"}');
    await client.xadd(key, '*', 'letter', 'not json');
    await client.xadd(key, '*', 'other', 'field');
    expect((await record.list(10)).map((letter) => letter.webhookId)).toEqual(['evt_0']);
  });

  test('rejects, rather than hangs, when Redis cannot be reached', async () => {
    // A port nothing listens on: the connection fails, commands are refused after two retries.
    const client = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 1, lazyConnect: false });
    client.on('error', () => undefined);
    cleanups.push(async () => client.disconnect());
    const record = createRedisDeadLetters({ client, keyPrefix: uniqueRedisPrefix(), maxPerEnvironment: 10 });
    await expect(record.add(letterOf(poisonous, Date.now()))).rejects.toThrow();
    await expect(record.list(10)).rejects.toThrow();
  });
});

describe('a poison event the record cannot take', () => {
  test('is answered 503 with Retry-After, so the upstream retries it, and nothing is published', async () => {
    const client = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    cleanups.push(async () => client.disconnect());
    const lines: string[] = [];
    const logger = createLogger({ level: 'debug', write: (line) => lines.push(line) });
    const log = createMemoryEventLog({ logger });
    cleanups.push(() => log.close());
    const published: PlatformEvent[] = [];
    await log.subscribe('sandbox', ({ event }) => published.push(event));
    const secret = generateWebhookSecret();
    const router = createWebhookRouter({
      secrets: () => [secret],
      dedup: createMemoryEventDeduplicator(),
      log,
      logger,
      deadLetters: createRedisDeadLetters({ client, keyPrefix: uniqueRedisPrefix(), maxPerEnvironment: 10 }),
    });
    const app = express();
    app.use('/webhooks/platform', router.router);
    const server = http.createServer(app).listen(0, '127.0.0.1');
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    const url = `http://127.0.0.1:${port}/webhooks/platform`;

    const event = makeEvent();
    const poison = { ...event, data: { ...event.data, customerId: '\ud800' } };
    const answer = await postSignedEvent(url, secret, poison);
    expect(answer).toMatchObject({ status: 503, retryAfter: '1', body: { title: 'Event not recorded' } });
    expect(published).toEqual([]);
    expect(lines.some((line) => line.includes('could not record a webhook event'))).toBe(true);
  });
});
