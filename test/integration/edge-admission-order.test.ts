/**
 * One admission order, one executor of it: every transport (HTTP, graphql-ws, SSE, multipart, the
 * HTTP callback protocol, MCP) takes the door's steps as src/edge/door/door.ts declares them
 * (`ADMISSION_ORDER`), run by the door itself, HTTP included (Apollo Server executes what the door admitted, and words a refused
 * document with the door's options). Each step reports itself through `app.lifecycle`
 * (`admissionStep`); each transport's record is pinned to the declared list, and a document over a
 * parse or a validation limit reads the same over HTTP (Apollo's words) as over SSE (the door's own).
 */
import { afterAll, describe, expect, test } from 'vitest';
import { admissionStepsOf } from '../../src/edge/door/door.ts';
import {
  callbackExtension,
  startCallbackReceiver,
  subscribeByCallback,
  UNKNOWN,
} from '../support/harness/callback-receiver.ts';
import { mcpRequest, openRawSession } from '../support/harness/mcp-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

/** A gateway's callback endpoint the facade may call (the callback protocol's subscriptions). */
const gateway = await startCallbackReceiver();
afterAll(() => gateway.close());

const stack = useStack({
  env: { WEBHOOK_REGISTER: 'true', SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `${gateway.url}/callback/` },
});

const SUBSCRIPTION = `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId } }`;

/** The steps the door reports while `run` runs. */
async function stepsOf(run: () => Promise<void>): Promise<string[]> {
  const steps: string[] = [];
  const stop = stack.app.lifecycle.on('admissionStep', ({ step }) => steps.push(step));
  try {
    await run();
  } finally {
    stop();
  }
  return steps;
}

const operator = async () => ({ authorization: `Bearer ${await tokenFor('operator')}` });

async function postHttp(query: string): Promise<{ status: number; body: { errors?: unknown[] } }> {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(await operator()) },
    body: JSON.stringify({ query }),
  });
  return { status: response.status, body: (await response.json()) as { errors?: unknown[] } };
}

/** Opens an SSE stream for `query`: its status, and its JSON body when it is not a stream. */
async function openSse(query: string): Promise<{ status: number; body?: unknown; close(): void }> {
  const abort = new AbortController();
  const response = await fetch(`${stack.facadeUrl}/graphql/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...(await operator()) },
    body: JSON.stringify({ query }),
    signal: abort.signal,
  });
  const streaming = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
  return {
    status: response.status,
    ...(streaming ? {} : { body: await response.json() }),
    close: () => abort.abort(),
  };
}

const firstError = (body: unknown) => {
  const [error] = (body as { errors: { message: string; extensions: { code: string } }[] }).errors;
  return { message: error!.message, code: error!.extensions.code };
};

describe('the door’s one admission order', () => {
  test('HTTP takes the declared steps of a request, a kept document included', async () => {
    const expected = admissionStepsOf('request');
    expect(expected).toEqual([
      'connect',
      'operation-budget',
      'trusted-document',
      'parse',
      'validate',
      'operation-checks',
    ]);
    const query = '{ customer(id: "cus_acme") { id } }';
    for (let run = 0; run < 2; run += 1) {
      const steps = await stepsOf(async () => {
        expect((await postHttp(query)).status).toBe(200);
      });
      expect(steps).toEqual(expected);
    }
  });

  test('graphql-ws and SSE take the declared steps of a live connection', async () => {
    const expected = admissionStepsOf('live');
    expect(expected).toEqual([
      'connect',
      'hold',
      'credential-current',
      'operation-budget',
      'trusted-document',
      'parse',
      'validate',
      'operation-checks',
    ]);
    let subscription: { stop(): void } | undefined;
    const overWebSocket = await stepsOf(async () => {
      subscription = stack
        .connect({ authorization: (await operator()).authorization })
        .subscribe(SUBSCRIPTION);
      await stack.subscriptionsStarted(1);
    });
    expect(overWebSocket).toEqual(expected);
    subscription?.stop();
    await stack.subscriptionsCompleted(1);

    let stream: { status: number; close(): void } | undefined;
    const overSse = await stepsOf(async () => {
      stream = await openSse(SUBSCRIPTION);
      await stack.subscriptionsStarted(1);
    });
    expect(stream?.status).toBe(200);
    expect(overSse).toEqual(expected);
    stream?.close();
    await stack.subscriptionsCompleted(1);
  });

  test('the multipart protocol takes the declared steps of a live connection', async () => {
    let response: Response | undefined;
    const abort = new AbortController();
    const overMultipart = await stepsOf(async () => {
      response = await fetch(stack.graphqlUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9',
          ...(await operator()),
        },
        body: JSON.stringify({ query: SUBSCRIPTION }),
        signal: abort.signal,
      });
      await stack.subscriptionsStarted(1);
    });
    expect(response?.status).toBe(200);
    expect(overMultipart).toEqual(admissionStepsOf('live'));
    abort.abort();
    await stack.subscriptionsCompleted(1);
  });

  test('the HTTP callback protocol takes the declared steps of a live connection', async () => {
    let status: number | undefined;
    const overCallback = await stepsOf(async () => {
      status = (
        await subscribeByCallback(
          stack.graphqlUrl,
          await operator(),
          SUBSCRIPTION,
          callbackExtension(gateway.url),
        )
      ).status;
      await stack.subscriptionsStarted(1);
    });
    expect(status).toBe(200);
    expect(overCallback).toEqual(admissionStepsOf('live'));
    // The gateway forgets it at the next event: the facade's side ends.
    gateway.answerWith(UNKNOWN);
    await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '1.00', currency: 'USDC' },
    });
    await stack.subscriptionsCompleted(1);
  });

  test('MCP takes the declared steps: a resource read a request’s, a resource subscription a live connection’s', async () => {
    const session = await openRawSession(stack.facadeUrl, await tokenFor('operator'));
    const uri = 'platform://customers/cus_acme/accounts';
    const send = (method: string) =>
      mcpRequest(stack.facadeUrl, { jsonrpc: '2.0', id: 2, method, params: { uri } }, session);
    const overRead = await stepsOf(async () => {
      expect((await send('resources/read')).status).toBe(200);
    });
    expect(overRead).toEqual(admissionStepsOf('request'));
    const overSubscribe = await stepsOf(async () => {
      expect((await send('resources/subscribe')).status).toBe(200);
    });
    expect(overSubscribe).toEqual(admissionStepsOf('live'));
    await mcpRequest(stack.facadeUrl, undefined, session, 'DELETE');
  });

  test('a refusal stops the order at its step: a query over SSE is refused after validation, nothing run', async () => {
    await stack.resetUpstreamCalls();
    let answer: { status: number; body?: unknown } | undefined;
    const steps = await stepsOf(async () => {
      answer = await openSse('{ customer(id: "cus_acme") { id } }');
    });
    expect(answer?.status).toBe(400);
    expect(firstError(answer?.body).code).toBe('BAD_REQUEST');
    expect(steps).toEqual(admissionStepsOf('live'));
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('Apollo parses and validates HTTP operations with the door’s options: the same answers as over SSE', async () => {
    const { maxTokens } = stack.config.queryLimits;
    const tooLong = `{ ${'__typename '.repeat(maxTokens + 1)}}`;
    // Deeper than QUERY_MAX_DEPTH, however connections are counted.
    const levels = stack.config.queryLimits.maxDepth + 1;
    const tooDeep = `{ customer(id: "cus_acme") { ${'accounts { nodes { customer { '.repeat(levels)}id${' } } }'.repeat(levels)} } }`;
    for (const document of [tooLong, tooDeep]) {
      const overHttp = await postHttp(document);
      const overSse = await openSse(document);
      // (Apollo answers `application/json` requests 200 with the errors; the door's table, 400.)
      expect(overSse.status).toBe(400);
      expect(firstError(overHttp.body)).toEqual(firstError(overSse.body));
    }
    expect(firstError((await postHttp(tooLong)).body).code).toBe('GRAPHQL_PARSE_FAILED');
    expect(firstError((await postHttp(tooDeep)).body).code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});
