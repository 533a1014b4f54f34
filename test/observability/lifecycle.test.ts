/**
 * `app.lifecycle`: what a running facade tells listeners about its operations, its graphql-ws
 * subscriptions and the webhook events it publishes, each app of its own, and a failing listener
 * changing nothing for the caller.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { LifecycleEventName, LifecycleEvents } from '../../src/observability/lifecycle.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const secret = generateWebhookSecret();
let stack: Stack;
// Two facades in this process, as replicas are in a test.
let first: RunningFacade;
let second: RunningFacade;

beforeAll(async () => {
  stack = await startStack({ facades: 2, env: { WEBHOOK_SECRETS: secret } });
  [first, second] = stack.facades as [RunningFacade, RunningFacade];
});

afterAll(async () => {
  await stack?.close();
});

/** Every `event` message of `facade`'s app from now until `stop()`. */
function record<E extends LifecycleEventName>(facade: RunningFacade, event: E) {
  const messages: LifecycleEvents[E][] = [];
  const stop = facade.app.lifecycle.on(event, (message) => messages.push(message));
  return { messages, stop };
}

describe('operations over HTTP', () => {
  test('start with the requested name and complete with the outcome, status and error codes', async () => {
    const started = record(first, 'operationStarted');
    const completed = record(first, 'operationCompleted');
    try {
      const success = await first.query('query Ada { customer(id: "cus_ada") { id } }', undefined, {
        'x-request-id': 'lifecycle-success',
      });
      expect(success.status).toBe(200);
      const partial = await first.query(
        'query Missing { customer(id: "cus_ada") { id } account(customerId: "cus_ada", id: "acc_none") { id } }',
        undefined,
        { 'x-request-id': 'lifecycle-partial' },
      );
      expect(partial.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      const failure = await first.query('query Broken { customer(', undefined, {
        'x-request-id': 'lifecycle-failure',
      });
      expect(failure.status).toBe(400);

      expect(started.messages).toEqual([
        { requestId: 'lifecycle-success', operationName: null },
        { requestId: 'lifecycle-partial', operationName: null },
        { requestId: 'lifecycle-failure', operationName: null },
      ]);
      expect(completed.messages).toEqual([
        {
          requestId: 'lifecycle-success',
          operationName: 'Ada',
          status: 200,
          outcome: 'success',
          errorCodes: [],
          durationMs: expect.any(Number),
        },
        {
          requestId: 'lifecycle-partial',
          operationName: 'Missing',
          status: 200,
          outcome: 'partial',
          errorCodes: ['NOT_FOUND'],
          durationMs: expect.any(Number),
        },
        {
          requestId: 'lifecycle-failure',
          operationName: null,
          status: 400,
          outcome: 'failure',
          errorCodes: ['GRAPHQL_PARSE_FAILED'],
          durationMs: expect.any(Number),
        },
      ]);
    } finally {
      started.stop();
      completed.stop();
    }
  });

  test('each facade tells its own listeners only, and a stopped listener hears nothing more', async () => {
    const ofFirst = record(first, 'operationCompleted');
    const ofSecond = record(second, 'operationCompleted');
    await second.query('query OnSecond { apiStatus { reachable } }');
    ofSecond.stop();
    await second.query('query AfterStop { apiStatus { reachable } }');
    ofFirst.stop();
    expect(ofFirst.messages).toEqual([]);
    expect(ofSecond.messages.map((message) => message.operationName)).toEqual(['OnSecond']);
  });

  test('a listener that throws is logged, and the operation answers as if nobody listened', async () => {
    const stop = first.app.lifecycle.on('operationCompleted', () => {
      throw new Error('listener broke');
    });
    try {
      const result = await first.query('{ customer(id: "cus_ada") { id } }');
      expect(result).toMatchObject({ status: 200, body: { data: { customer: { id: 'cus_ada' } } } });
    } finally {
      stop();
    }
    const failures = first
      .logs()
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === 'a lifecycle listener failed');
    expect(failures).toEqual([
      expect.objectContaining({ level: 'error', event: 'operationCompleted', component: 'lifecycle' }),
    ]);
  });
});

describe('the harness waiting on the hooks', () => {
  test('nextOperationCompleted resolves with the operation the facade completes next', async () => {
    const completed = second.nextOperationCompleted((operation) => operation.operationName === 'Waited');
    const result = await second.query('query Waited { apiStatus { reachable } }', undefined, {
      'x-request-id': 'lifecycle-waited',
    });
    expect(result.status).toBe(200);
    expect(await completed).toEqual({
      requestId: 'lifecycle-waited',
      operationName: 'Waited',
      status: 200,
      outcome: 'success',
      errorCodes: [],
      durationMs: expect.any(Number),
    });
  });
});

describe('graphql-ws and webhooks', () => {
  test('a subscription is told started once it listens, and completed when the client stops it', async () => {
    const started = record(first, 'subscriptionStarted');
    const completed = record(first, 'subscriptionCompleted');
    const published = record(first, 'webhookEventPublished');
    try {
      const client = first.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
      const received = client.subscribe(
        'subscription AcmeEvents { events(customerId: "cus_acme") { eventId } }',
      );
      await waitFor(() => started.messages.length === 1, 'the subscription to start');
      expect(started.messages).toEqual([
        { subscriptionId: expect.any(String), operationName: 'AcmeEvents', subject: 'test-acme' },
      ]);

      // Started means listening: an event published now reaches it.
      const event = upstreamEvent({
        type: 'capability.status_changed',
        environment: 'sandbox',
        customerId: 'cus_acme',
        resourceType: 'capability',
        resourceId: 'cap_acme_wire',
      });
      expect((await postSignedEvent(first.webhookUrl, secret, event)).status).toBe(200);
      expect(published.messages).toEqual([
        {
          eventId: event.id,
          type: 'capability.status_changed',
          environment: 'sandbox',
          customerId: 'cus_acme',
        },
      ]);
      await waitFor(() => received.data.length === 1, 'the event');

      received.stop();
      await waitFor(() => completed.messages.length === 1, 'the subscription to complete');
      expect(completed.messages).toEqual([{ subscriptionId: started.messages[0]!.subscriptionId }]);
      // A duplicate delivery is acknowledged, not published again.
      expect((await postSignedEvent(first.webhookUrl, secret, event)).status).toBe(200);
      expect(published.messages).toHaveLength(1);
    } finally {
      started.stop();
      completed.stop();
      published.stop();
    }
  });
});
