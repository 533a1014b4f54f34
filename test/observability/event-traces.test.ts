/**
 * An event's way from the webhook to each subscriber, as spans: one receipt span per webhook POST,
 * one publish span under it whose context travels with the event (through Redis to the other
 * replicas), and one delivery span per subscriber, each the root of a trace of its own linked to
 * the publish span, with that subscriber's upstream reads under it.
 *
 * Real facades in process (tracing asked for by their configuration), real graphql-ws clients,
 * signed webhook deliveries, the run's real Redis. The OpenTelemetry SDK is started here, before
 * any facade, with an in-memory exporter and no instrumentation: the spans are the facade's own
 * (that a receipt sits under the HTTP server span is `traces.test.ts`'s, with the real entry).
 */
import { NodeSDK } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { SpanKind } from '@opentelemetry/api';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import { startFacade, type RunningFacade } from '../support/harness/facade.ts';
import { connectLive, type LiveClient } from '../support/harness/live-client.ts';
import { connectRedis, requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const exporter = new InMemorySpanExporter();
const sdk = new NodeSDK({
  spanProcessors: [new SimpleSpanProcessor({ exporter })],
  instrumentations: [],
  resourceDetectors: [],
  metricReaders: [],
  logRecordProcessors: [],
});
sdk.start();
afterAll(async () => {
  await sdk.shutdown();
});

/** What turns tracing on in a facade's configuration (the spans go to the SDK started above). */
const TRACING_ON = { OTEL_TRACES_EXPORTER: 'console' };
const FACADE_SCOPE = 'platform-graphql-facade';

const secret = generateWebhookSecret();
const stack = useStack({ env: { ...TRACING_ON, WEBHOOK_SECRETS: secret } });

function accountUpdated(customerId: string, accountId: string) {
  return upstreamEvent({
    type: 'account.updated',
    environment: 'sandbox',
    customerId,
    resourceType: 'account',
    resourceId: accountId,
  });
}

const bearer = async (caller: 'acme' | 'operator') => ({ Authorization: `Bearer ${await tokenFor(caller)}` });

const ACCOUNT_CHANGED = `subscription AcmeEthWatch {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId account { id customer { id } } }
}`;

/** The facade's event spans of one event, by kind of step. */
function eventSpans(eventId: string) {
  const of = (name: string) =>
    exporter
      .getFinishedSpans()
      .filter((span) => span.name === name && span.attributes['facade.event.id'] === eventId);
  return { receipts: of('receive webhook'), publishes: of('publish event'), deliveries: of('deliver event') };
}

const traceIdOf = (span: ReadableSpan) => span.spanContext().traceId;
const spanIdOf = (span: ReadableSpan) => span.spanContext().spanId;

/** The spans of `span`'s trace that descend from it. */
function descendantsOf(span: ReadableSpan): ReadableSpan[] {
  const trace = exporter.getFinishedSpans().filter((candidate) => traceIdOf(candidate) === traceIdOf(span));
  const byId = new Map(trace.map((candidate) => [spanIdOf(candidate), candidate]));
  return trace.filter((candidate) => {
    for (let parent = candidate.parentSpanContext; parent !== undefined;) {
      if (parent.spanId === spanIdOf(span)) return true;
      parent = byId.get(parent.spanId)?.parentSpanContext;
    }
    return false;
  });
}

/** The upstream call spans the facade made under `span`. */
const upstreamCallsUnder = (span: ReadableSpan) =>
  descendantsOf(span).filter(
    (candidate) => candidate.instrumentationScope.name === FACADE_SCOPE && candidate.kind === SpanKind.CLIENT,
  );

/** No attribute of any span holds a secret, a key, a token or a signature. */
async function expectNothingSecretIn(spans: readonly ReadableSpan[]): Promise<void> {
  const forbidden = [secret, SANDBOX_KEY, await tokenFor('operator'), await tokenFor('acme'), 'v1,'];
  for (const span of spans) {
    for (const value of Object.values(span.attributes)) {
      for (const text of forbidden) expect(String(value)).not.toContain(text);
    }
  }
}

describe('an event from webhook to subscribers', () => {
  test('one receipt, one publish under it, and a trace per subscriber linked to the publish with its reads', async () => {
    const operator = stack.connect(await bearer('operator')).subscribe(ACCOUNT_CHANGED);
    const acme = stack.connect(await bearer('acme')).subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(2);

    const event = accountUpdated('cus_acme', 'acc_acme_eth');
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    await waitFor(() => operator.data.length === 1 && acme.data.length === 1, 'both subscribers');
    for (const received of [operator, acme]) {
      expect(received.data).toEqual([
        {
          accountChanged: {
            eventId: event.id,
            account: { id: 'acc_acme_eth', customer: { id: 'cus_acme' } },
          },
        },
      ]);
    }
    await waitFor(() => eventSpans(event.id).deliveries.length === 2, 'both delivery spans');
    await waitFor(
      () => eventSpans(event.id).receipts.length === 1,
      'the receipt span (ended with the answer)',
    );

    const { receipts, publishes, deliveries } = eventSpans(event.id);
    const [receipt] = receipts;
    expect(receipt!.kind).toBe(SpanKind.INTERNAL);
    expect(receipt!.attributes).toEqual({
      'facade.event.id': event.id,
      'facade.event.type': 'account.updated',
      'facade.webhook.outcome': 'accepted',
    });
    // One publish, a producer span child of the receipt, in its trace.
    expect(publishes).toHaveLength(1);
    const [publish] = publishes;
    expect(publish!.kind).toBe(SpanKind.PRODUCER);
    expect(traceIdOf(publish!)).toBe(traceIdOf(receipt!));
    expect(publish!.parentSpanContext?.spanId).toBe(spanIdOf(receipt!));
    expect(publish!.attributes).toMatchObject({
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'publish',
      'messaging.destination.name': 'facade:events:log:sandbox',
      'messaging.message.id': event.id,
      'facade.event.type': 'account.updated',
    });

    // A consumer span per subscriber, each the root of its own trace, linked to the publish.
    expect(deliveries).toHaveLength(2);
    expect(new Set(deliveries.map(traceIdOf)).size).toBe(2);
    for (const delivery of deliveries) {
      expect(delivery.kind).toBe(SpanKind.CONSUMER);
      expect(delivery.parentSpanContext).toBeUndefined();
      expect(traceIdOf(delivery)).not.toBe(traceIdOf(publish!));
      expect(delivery.links.map((link) => [link.context.traceId, link.context.spanId])).toEqual([
        [traceIdOf(publish!), spanIdOf(publish!)],
      ]);
      expect(delivery.attributes).toMatchObject({
        'messaging.operation.type': 'process',
        'messaging.message.id': event.id,
        'facade.event.type': 'account.updated',
        'facade.delivery.outcome': 'delivered',
        'graphql.operation.type': 'subscription',
        'graphql.operation.name': 'AcmeEthWatch',
      });
      // The subscriber's reads (the account for the payload, its customer for the selection) are
      // the delivery span's children, and the delivery's trace holds nothing else of the facade's.
      expect(
        upstreamCallsUnder(delivery)
          .map((span) => span.name)
          .sort(),
      ).toEqual(['GET /v3/customers/{customerId}', 'GET /v3/customers/{customerId}/accounts/{accountId}']);
      const facadeSpansOfTrace = exporter
        .getFinishedSpans()
        .filter(
          (span) =>
            traceIdOf(span) === traceIdOf(delivery) && span.instrumentationScope.name === FACADE_SCOPE,
        );
      expect(facadeSpansOfTrace).toHaveLength(3);
    }

    await expectNothingSecretIn(exporter.getFinishedSpans());
    operator.stop();
    acme.stop();
  });

  test('a duplicate delivery makes a receipt span with outcome duplicate and no publish; a forged one names no event', async () => {
    const event = accountUpdated('cus_acme', 'acc_acme_eth');
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    expect(await postSignedEvent(stack.facade.webhookUrl, secret, event)).toMatchObject({
      status: 200,
      body: { duplicate: true },
    });
    const forged = accountUpdated('cus_acme', 'acc_acme_eth');
    expect((await postSignedEvent(stack.facade.webhookUrl, generateWebhookSecret(), forged)).status).toBe(
      401,
    );

    await waitFor(() => eventSpans(event.id).receipts.length === 2, 'both receipt spans');
    const { receipts, publishes } = eventSpans(event.id);
    expect(receipts.map((span) => span.attributes['facade.webhook.outcome']).sort()).toEqual([
      'accepted',
      'duplicate',
    ]);
    expect(publishes).toHaveLength(1);
    const duplicate = receipts.find((span) => span.attributes['facade.webhook.outcome'] === 'duplicate')!;
    expect(descendantsOf(duplicate).filter((span) => span.name === 'publish event')).toEqual([]);

    // A forged delivery is never parsed: its span has the outcome and nothing of the body.
    await waitFor(
      () =>
        exporter
          .getFinishedSpans()
          .some(
            (span) =>
              span.name === 'receive webhook' && span.attributes['facade.webhook.outcome'] === 'forged',
          ),
      'the forged receipt span',
    );
    const forgedSpans = exporter
      .getFinishedSpans()
      .filter(
        (span) => span.name === 'receive webhook' && span.attributes['facade.webhook.outcome'] === 'forged',
      );
    expect(forgedSpans.map((span) => span.attributes)).toEqual([{ 'facade.webhook.outcome': 'forged' }]);
    expect(eventSpans(forged.id)).toEqual({ receipts: [], publishes: [], deliveries: [] });
  });

  test('an event the upstream refuses the subscriber makes a delivery span with outcome dropped, and no payload', async () => {
    const acme = stack
      .connect(await bearer('acme'))
      .subscribe(`subscription { events(customerId: "cus_acme") { eventId } }`);
    await stack.subscriptionsStarted(1);

    // An account acme does not have: the read is refused (404), so the event is not acme's to see.
    const refused = accountUpdated('cus_acme', 'acc_acme_missing');
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, refused)).status).toBe(200);
    const marker = accountUpdated('cus_acme', 'acc_acme_eth');
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, marker)).status).toBe(200);
    await waitFor(() => acme.data.length === 1, 'the marker');
    expect(acme.data).toEqual([{ events: { eventId: marker.id } }]);

    await waitFor(() => eventSpans(refused.id).deliveries.length === 1, 'the dropped delivery span');
    const [dropped] = eventSpans(refused.id).deliveries;
    expect(dropped!.attributes['facade.delivery.outcome']).toBe('dropped');
    expect(dropped!.links).toHaveLength(1);
    expect(upstreamCallsUnder(dropped!).map((span) => span.attributes['http.response.status_code'])).toEqual([
      404,
    ]);
    acme.stop();
  });

  test('an event the subscription’s replay already showed makes a delivery span with outcome skipped, and no read', async () => {
    const replaying = stack
      .connect(await bearer('operator'))
      .subscribe(
        `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth", since: "2001-01-01T00:00:00Z") { eventId replayed } }`,
      );
    await stack.subscriptionsStarted(1);
    await waitFor(() => replaying.data.length === 1, 'the replayed account');
    expect(replaying.data[0].accountChanged.replayed).toBe(true);

    // A change older than the replayed record: the replay showed that state already.
    const older = { ...accountUpdated('cus_acme', 'acc_acme_eth'), occurredAt: '2001-06-01T00:00:00.000Z' };
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, older)).status).toBe(200);
    const marker = accountUpdated('cus_acme', 'acc_acme_eth');
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, marker)).status).toBe(200);
    await waitFor(() => replaying.data.length === 2, 'the marker');
    expect(replaying.data[1]).toEqual({ accountChanged: { eventId: marker.id, replayed: false } });

    await waitFor(() => eventSpans(older.id).deliveries.length === 1, 'the skipped delivery span');
    const [skipped] = eventSpans(older.id).deliveries;
    expect(skipped!.attributes['facade.delivery.outcome']).toBe('skipped');
    expect(upstreamCallsUnder(skipped!)).toEqual([]);
    replaying.stop();
  });
});

describe('two replicas sharing Redis', () => {
  let emulator: RunningEmulator;
  let receiving: RunningFacade;
  let other: RunningFacade;
  let redis: Redis;
  const prefix = uniqueRedisPrefix();
  const clients: LiveClient[] = [];

  beforeAll(async () => {
    const shared = {
      ...TRACING_ON,
      REDIS_URL: requireRedisUrl(),
      REDIS_KEY_PREFIX: prefix,
      WEBHOOK_SECRETS: secret,
    };
    emulator = await startEmulator();
    receiving = await startFacade(emulator.url, { env: shared });
    other = await startFacade(emulator.url, { env: shared });
    redis = connectRedis();
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.dispose()));
    redis?.disconnect();
    await other?.close();
    await receiving?.close();
    await emulator?.close();
  });

  async function subscribeOnOther(): Promise<ReturnType<LiveClient['subscribe']>> {
    const client = connectLive(other.wsUrl, await bearer('operator'));
    clients.push(client);
    return client.subscribe(`subscription { events(customerId: "cus_acme") { eventId } }`);
  }

  test('the other replica’s delivery span links to the receiving replica’s publish span, its context carried in the message', async () => {
    const received = await subscribeOnOther();
    await other.subscriptionsStarted(1);

    const event = accountUpdated('cus_acme', 'acc_acme_eth');
    expect((await postSignedEvent(receiving.webhookUrl, secret, event)).status).toBe(200);
    await waitFor(() => received.data.length === 1, 'the event on the other replica');
    expect(received.data).toEqual([{ events: { eventId: event.id } }]);
    await waitFor(() => eventSpans(event.id).deliveries.length === 1, 'the delivery span');

    const { publishes, deliveries } = eventSpans(event.id);
    expect(publishes).toHaveLength(1);
    const [publish] = publishes;
    const [delivery] = deliveries;
    expect(delivery!.links.map((link) => [link.context.traceId, link.context.spanId])).toEqual([
      [traceIdOf(publish!), spanIdOf(publish!)],
    ]);
    expect(delivery!.attributes['facade.delivery.outcome']).toBe('delivered');
    expect(upstreamCallsUnder(delivery!).length).toBeGreaterThan(0);

    // In the log: the event's own members, and the publish span's context beside them.
    const entries = await redis.xrange(`${prefix}events:log:sandbox`, '-', '+');
    const message = entries
      .map(([, fields]) => JSON.parse(fields[1]!) as Record<string, unknown>)
      .find((m) => m.id === event.id);
    expect(message).toEqual({
      ...event,
      traceContext: { traceparent: `00-${traceIdOf(publish!)}-${spanIdOf(publish!)}-01` },
    });
    received.stop();
  });

  test('a message with no trace context or a garbled one is delivered all the same, its span linked to nothing', async () => {
    const received = await subscribeOnOther();
    await other.subscriptionsStarted(2);

    const garbled: unknown[] = [
      undefined,
      'not an object',
      [],
      { traceparent: 42 },
      { traceparent: '00-zzzz-yyyy-01' },
      { traceparent: `00-${'0'.repeat(32)}-${'0'.repeat(16)}-01` },
      { traceparent: `ff-${'a'.repeat(32)}-${'b'.repeat(16)}-01` },
      { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01${'x'.repeat(10_000)}` },
      { traceparent: { toString: 'x' }, tracestate: 'a=b' },
    ];
    const events = garbled.map(() => accountUpdated('cus_acme', 'acc_acme_eth'));
    for (const [index, event] of events.entries()) {
      const message = garbled[index] === undefined ? event : { ...event, traceContext: garbled[index] };
      await redis.xadd(`${prefix}events:log:sandbox`, '*', 'm', JSON.stringify(message));
    }
    // And one with a well-formed traceparent but a garbled tracestate: linked, without the state.
    const linkedEvent = accountUpdated('cus_acme', 'acc_acme_eth');
    const traceId = 'a'.repeat(32);
    const spanId = 'b'.repeat(16);
    await redis.xadd(
      `${prefix}events:log:sandbox`,
      '*',
      'm',
      JSON.stringify({
        ...linkedEvent,
        traceContext: { traceparent: `00-${traceId}-${spanId}-01`, tracestate: '\u0000'.repeat(600) },
      }),
    );

    await waitFor(() => received.data.length === events.length + 1, 'every event');
    expect(received.data).toEqual(
      [...events, linkedEvent].map((event) => ({ events: { eventId: event.id } })),
    );
    await waitFor(
      () => [...events, linkedEvent].every((event) => eventSpans(event.id).deliveries.length === 1),
      'every delivery span',
    );
    for (const event of events) {
      const [delivery] = eventSpans(event.id).deliveries;
      expect(delivery!.links).toEqual([]);
      expect(delivery!.attributes['facade.delivery.outcome']).toBe('delivered');
    }
    const [linked] = eventSpans(linkedEvent.id).deliveries;
    expect(
      linked!.links.map((link) => [link.context.traceId, link.context.spanId, link.context.traceState]),
    ).toEqual([[traceId, spanId, undefined]]);
    // Nothing of the garbage reached a log line as an error: the replica kept serving.
    expect(other.logs().filter((line) => line.includes('"level":"error"'))).toEqual([]);
    received.stop();
  });
});
