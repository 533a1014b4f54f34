/**
 * Poison events: a signed webhook the facade can never process (a lone surrogate in `customerId`
 * or `resourceId`, ...) is parked in the dead-letter record and answered 202, the one answer the
 * upstream does not retry, with no upstream call, no append to the event log, a metric, one log
 * line and a listing on the metrics port only. Real facades against the emulator; the emulator's
 * own delivery engine shows the upstream stops after one attempt; a real Redis shared by replicas.
 * (When the record cannot take a poison event: test/events/dead-letters.test.ts.)
 */
import http from 'node:http';
import { afterEach, describe, expect, test } from 'vitest';
import { createWebhookDispatcher } from '../../emulator/webhooks/dispatcher.ts';
import type { WebhookEventEnvelope } from '../../emulator/webhooks/types.ts';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import type { DeadLetter } from '../../src/events/receiving/dead-letters.ts';
import { makeEvent, postSignedEvent } from '../support/harness/events.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { requiredValueOf, scrape, valueOf } from '../support/metrics.ts';
import { waitFor } from '../support/harness/wait.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const PARKED_LINE = 'parked a webhook event that can never be processed';

/** `event` with `data` members replaced. */
function withData(event: PlatformEvent, data: Partial<PlatformEvent['data']>): PlatformEvent {
  return { ...event, data: { ...event.data, ...data } };
}

/** The listing of the stack's first facade (or `facade`), on its metrics port. */
async function deadLetters(
  stack: Stack,
  facade = 0,
  query = '',
): Promise<{ status: number; body: { deadLetters: DeadLetter[]; limit: number } }> {
  const url = new URL(stack.facades[facade]!.metricsUrl);
  const response = await fetch(`${url.origin}/dead-letters${query}`);
  return {
    status: response.status,
    body: (await response.json()) as { deadLetters: DeadLetter[]; limit: number },
  };
}

/** Parked lines the facade logged, parsed. */
function parkedLines(stack: Stack): Record<string, unknown>[] {
  return stack
    .logs()
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === PARKED_LINE);
}

describe('a poison event, one facade', () => {
  const secret = generateWebhookSecret();
  // The response cache on: dropping what an event makes stale is where a lone surrogate threw.
  const stack = useStack({ env: { WEBHOOK_SECRETS: secret, CACHE_ENABLED: 'true' } });

  test.each([
    ['customerId', { customerId: '\ud800' }, '/data/customerId', { customerId: '\\ud800' }],
    ['resourceId', { resourceId: 'acc_\ud800' }, '/data/resourceId', { resourceId: 'acc_\\ud800' }],
  ])(
    'a lone surrogate in %s: 202 parked, no upstream call, nothing appended, a metric, one log line, listed',
    async (_field, data, pointer, kept) => {
      const before = await scrape(stack.metricsUrl);
      const linesBefore = parkedLines(stack).length;
      const event = withData(makeEvent(), data);

      const answer = await postSignedEvent(stack.facade.webhookUrl, secret, event);
      expect(answer).toEqual({
        status: 202,
        body: {
          received: true,
          parked: true,
          reason: 'invalid_text',
          detail: 'a string is not well-formed Unicode (a lone surrogate)',
        },
      });

      expect((await stack.upstreamCalls()).total).toBe(0);
      const after = await scrape(stack.metricsUrl);
      const delta = (name: string, labels: Record<string, string> = {}) =>
        valueOf(after, name, labels) - valueOf(before, name, labels);
      const logLength = (samples: typeof before) =>
        requiredValueOf(samples, 'facade_event_log_length', { environment: 'sandbox' });
      expect(logLength(after)).toBe(logLength(before));
      expect(
        delta('facade_webhook_dead_letters_total', { environment: 'sandbox', reason: 'invalid_text' }),
      ).toBe(1);
      expect(delta('facade_webhook_deliveries_total', { outcome: 'dead_lettered' })).toBe(1);
      expect(delta('facade_webhook_deliveries_total', { outcome: 'unavailable' })).toBe(0);

      const lines = parkedLines(stack).slice(linesBefore);
      expect(lines).toEqual([
        expect.objectContaining({
          level: 'warn',
          eventId: event.id,
          reason: 'invalid_text',
          pointer,
          environment: 'sandbox',
        }),
      ]);

      const listed = await deadLetters(stack);
      expect(listed.status).toBe(200);
      const letter = listed.body.deadLetters.find((entry) => entry.webhookId === event.id);
      expect(letter).toMatchObject({ environment: 'sandbox', reason: 'invalid_text', pointer, event: kept });
      expect(Object.keys(letter!.event).sort()).toEqual(
        ['customerId', 'environment', 'id', 'occurredAt', 'resourceId', 'resourceType', 'type'].sort(),
      );
      expect(JSON.stringify(listed.body)).not.toMatch(/v1,|whsec_|signature/);

      // The pipeline goes on: the next event is published.
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, makeEvent())).status).toBe(200);
    },
  );

  test("the emulator's own delivery engine stops after one attempt (it would retry a 503 or a 400)", async () => {
    const dispatcher = createWebhookDispatcher({ retryBaseMs: 10, maxAttempts: 4 });
    cleanups.push(() => dispatcher.close());
    const envelope = withData(makeEvent(), { customerId: '\ud800' }) as WebhookEventEnvelope;
    dispatcher.deliver({ id: 'we_test', url: stack.facade.webhookUrl, secret }, envelope);
    await waitFor(() => dispatcher.pending() === 0, 'the delivery to finish');
    expect(
      dispatcher.deliveries().map(({ attempt, status, outcome }) => ({ attempt, status, outcome })),
    ).toEqual([{ attempt: 1, status: 202, outcome: 'delivered' }]);
  });

  test('the listing is on the metrics port only, takes a bounded limit, and refuses a foreign Host', async () => {
    expect((await fetch(`${stack.facadeUrl}/dead-letters`)).status).toBe(404);
    for (const limit of ['0', '1001', 'abc', '1.5']) {
      expect((await deadLetters(stack, 0, `?limit=${limit}`)).status, limit).toBe(400);
    }
    await postSignedEvent(stack.facade.webhookUrl, secret, withData(makeEvent(), { resourceId: '../acc_1' }));
    const one = await deadLetters(stack, 0, '?limit=1');
    expect(one.body).toMatchObject({
      limit: 1,
      deadLetters: [{ reason: 'invalid_id', event: { resourceId: '../acc_1' } }],
    });
    const metrics = new URL(stack.metricsUrl);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      http
        .get(
          {
            host: metrics.hostname,
            port: metrics.port,
            path: '/dead-letters',
            headers: { host: 'attacker.example' },
          },
          (response) => {
            response.resume();
            resolve(response.statusCode);
          },
        )
        .on('error', reject);
    });
    expect(status).toBe(421);
  });
});

describe('a poison event, two replicas on Redis', () => {
  const secret = generateWebhookSecret();
  const stack = useStack({
    redis: true,
    facades: 2,
    env: { WEBHOOK_SECRETS: secret, CACHE_ENABLED: 'true', WEBHOOK_DEAD_LETTERS_MAX: '3' },
  });

  test('parked through one replica, listed by the other; the record keeps its bound', async () => {
    const events = Array.from({ length: 5 }, () => withData(makeEvent(), { customerId: 'cus_\u0007' }));
    for (const event of events) {
      expect((await postSignedEvent(stack.facades[0]!.webhookUrl, secret, event)).status).toBe(202);
    }
    const listed = await deadLetters(stack, 1);
    expect(listed.body.deadLetters.map((letter) => letter.webhookId)).toEqual(
      events
        .slice(-3)
        .map((event) => event.id)
        .reverse(),
    );
    expect(listed.body.deadLetters[0]).toMatchObject({
      reason: 'invalid_id',
      event: { customerId: 'cus_\\u0007' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
