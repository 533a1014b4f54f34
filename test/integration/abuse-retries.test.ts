/**
 * Exactly once for money: a client that times out and sends its mutation again never makes the
 * upstream execute it twice, under latency, stalls and faults. The key is the client's own
 * (`input.idempotencyKey` is required), and every error of a mutation hands it back.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { type Stack, useStack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';

const stack = useStack({ env: { OPERATION_TIMEOUT_MS: '2000' } });

/** An effectful mutation, how to send it with a key, and how to count what it made. */
interface Effect {
  name: string;
  route: string;
  document: string;
  variables(key: string): Record<string, unknown>;
  /** A number the mutation raises by exactly one (or by the amount) each time it executes. */
  measure(stack: Stack): Promise<number>;
}

const EFFECTS: Effect[] = [
  {
    name: 'sandboxTopUp',
    route: 'POST /v3/sandbox/accounts/{accountId}/topup',
    document: `mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } idempotencyKey replayed } }`,
    variables: (key) => ({
      input: { accountId: 'acc_globex_eth', amount: '10.00', currency: 'USDC', idempotencyKey: key },
    }),
    async measure(stack) {
      const result = await stack.query<{ account: { balances: { available: string }[] } }>(
        '{ account(customerId: "cus_globex", id: "acc_globex_eth") { balances { available } } }',
      );
      return Number(result.body.data!.account.balances[0]!.available);
    },
  },
  {
    name: 'createRelatedParty',
    route: 'POST /v3/customers/{customerId}/related-parties',
    document: `mutation ($input: CreateRelatedPartyInput!) { createRelatedParty(input: $input) { relatedParty { id } idempotencyKey replayed } }`,
    variables: (key) => ({
      input: {
        customerId: 'cus_acme',
        partyType: 'person',
        roles: ['DIRECTOR'],
        person: { firstName: 'Katherine', lastName: 'Johnson', residenceCountry: 'US' },
        idempotencyKey: key,
      },
    }),
    async measure(stack) {
      const result = await stack.query<{ customer: { relatedParties: { nodes: unknown[] } } }>(
        '{ customer(id: "cus_acme") { relatedParties(first: 100) { nodes { id } } } }',
      );
      return result.body.data!.customer.relatedParties.nodes.length;
    },
  },
  {
    name: 'createCustomer',
    route: 'POST /v3/customers',
    document: `mutation ($input: CreateCustomerInput!) { createCustomer(input: $input) { customer { id } idempotencyKey replayed } }`,
    variables: (key) => ({
      input: { type: 'business', externalId: `ext-${key}`, displayName: 'Retry Ltd', idempotencyKey: key },
    }),
    async measure(stack) {
      const result = await stack.query<{ customers: { nodes: unknown[] } }>(
        '{ customers(first: 100) { nodes { id } } }',
      );
      return result.body.data!.customers.nodes.length;
    },
  },
];

/** POSTs like a client with a short timeout: resolves to 'timed out' when it gives up. */
async function sendGivingUpAfter(document: string, variables: Record<string, unknown>, timeoutMs: number) {
  try {
    await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        ...(await bearer('operator')),
      },
      body: JSON.stringify({ query: document, variables }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return 'answered';
  } catch {
    return 'timed out';
  }
}

/** Resolves once the emulator has answered `count` requests of `route` with a 2xx status. */
async function upstreamAnswered(route: string, count: number): Promise<void> {
  for (let poll = 0; poll < 500; poll++) {
    const log = (await (await fetch(`${stack.emulatorUrl}/_emulator/requests`)).json()) as {
      requests: { route: string; status: number | null }[];
    };
    const answered = log.requests.filter(
      (request) => request.route === route && request.status !== null && request.status < 300,
    ).length;
    if (answered >= count) return;
    await sleep(10);
  }
  throw new Error(`the emulator never answered ${count} ${route} request(s)`);
}

describe('a client that retries after a timeout', () => {
  test.each(EFFECTS)(
    '$name: the retry with the same key replays; the upstream executed it once',
    async (effect) => {
      const before = await effect.measure(stack);
      const key = randomUUID();
      await stack.resetUpstreamCalls();
      await stack.setFaults({ latency: { fixedMs: 300, jitterMs: 0 } });

      // The client gives up before the answer arrives; the upstream still executes the first request.
      expect(await sendGivingUpAfter(effect.document, effect.variables(key), 50)).toBe('timed out');
      await upstreamAnswered(effect.route, 1);
      await stack.clearFaults();

      const retry = await stack.query<Record<string, { idempotencyKey: string; replayed: boolean }>>(
        effect.document,
        effect.variables(key),
      );

      expect(retry.body.errors).toBeUndefined();
      expect(Object.values(retry.body.data!)[0]).toMatchObject({ idempotencyKey: key, replayed: true });
      expect((await stack.upstreamCalls()).byRoute[effect.route]).toBe(2);
      const after = await effect.measure(stack);
      expect(after - before).toBe(effect.name === 'sandboxTopUp' ? 10 : 1);
    },
  );

  test('a retry while the first is still running is refused as in progress, with the key, and executes nothing', async () => {
    const [topUp] = EFFECTS;
    const before = await topUp!.measure(stack);
    const key = randomUUID();
    // Long enough that the retry (three quick attempts) is over well before the first completes.
    await stack.setFaults({ latency: { fixedMs: 1500, jitterMs: 0 } });

    const first = sendGivingUpAfter(topUp!.document, topUp!.variables(key), 50);
    // The first request holds the key upstream from the moment it is received.
    expect(await first).toBe('timed out');
    const retry = await stack.query(topUp!.document, topUp!.variables(key));

    expect(retry.body.errors?.[0]).toMatchObject({
      path: ['sandboxTopUp'],
      extensions: { code: 'IDEMPOTENCY_REQUEST_IN_PROGRESS', idempotencyKey: key },
    });
    await upstreamAnswered(topUp!.route, 1);
    await stack.clearFaults();
    expect((await topUp!.measure(stack)) - before).toBe(10);
  });

  test('a mutation whose upstream call stalls past the deadline answers UPSTREAM_TIMEOUT with its key; the retry executes it once', async () => {
    const [topUp] = EFFECTS;
    const before = await topUp!.measure(stack);
    const key = randomUUID();
    await stack.setFaults({ rules: [{ route: topUp!.route, kind: 'stall', rate: 1, times: 1 }] });

    const stalled = await stack.query(topUp!.document, topUp!.variables(key));

    expect(stalled.status).toBe(200);
    expect(stalled.body.data).toEqual({ sandboxTopUp: null });
    expect(stalled.body.errors).toEqual([
      expect.objectContaining({
        message: 'The operation ran out of time before the upstream API answered.',
        path: ['sandboxTopUp'],
        extensions: expect.objectContaining({ code: 'UPSTREAM_TIMEOUT', idempotencyKey: key }),
      }),
    ]);
    // Cancelled, never retried past the deadline: one call.
    expect((await stack.upstreamCalls()).byRoute[topUp!.route]).toBe(1);

    const retry = await stack.query<{ sandboxTopUp: { replayed: boolean } }>(
      topUp!.document,
      topUp!.variables(key),
    );
    expect(retry.body.data?.sandboxTopUp.replayed).toBe(false);
    expect((await topUp!.measure(stack)) - before).toBe(10);
  });
});

describe('a mutation without a key', () => {
  test('is refused before any upstream call, inline or through variables', async () => {
    const inline = await stack.query(
      'mutation { sandboxTopUp(input: { accountId: "acc_globex_eth", amount: "10.00", currency: "USDC" }) { replayed } }',
    );
    const [topUp] = EFFECTS;
    const { idempotencyKey: _key, ...withoutKey } = topUp!.variables('unused').input as Record<
      string,
      unknown
    >;
    const variables = await stack.query(topUp!.document, { input: withoutKey });

    expect(inline.status).toBe(400);
    expect(inline.body.errors?.[0]).toMatchObject({
      message: expect.stringContaining('idempotencyKey'),
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    expect(variables.status).toBe(400);
    expect(variables.body.errors?.[0]).toMatchObject({
      message: expect.stringContaining('idempotencyKey'),
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('every error of a mutation carries its idempotency key', () => {
  test('an upstream refusal (NOT_FOUND) and a retryable failure after every attempt (UPSTREAM_UNAVAILABLE)', async () => {
    const notFound = await stack.query(
      'mutation ($input: ArchiveRelatedPartyInput!) { archiveRelatedParty(input: $input) { replayed } }',
      {
        input: { customerId: 'cus_acme', relatedPartyId: 'rp_missing', idempotencyKey: 'archive-missing-1' },
      },
    );
    expect(notFound.body.errors?.[0]?.extensions).toMatchObject({
      code: 'NOT_FOUND',
      idempotencyKey: 'archive-missing-1',
    });

    const [topUp] = EFFECTS;
    await stack.setFaults({ rules: [{ route: topUp!.route, kind: 'request_failed', rate: 1 }] });
    const unavailable = await stack.query(topUp!.document, topUp!.variables('top-up-502-1'));
    expect(unavailable.body.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      idempotencyKey: 'top-up-502-1',
    });
    // Every attempt carried the same key: the upstream saw three tries of one request.
    expect((await stack.upstreamCalls()).byRoute[topUp!.route]).toBe(3);
  });

  test('in a document of two mutations, each error carries its own key', async () => {
    const result = await stack.query(
      `mutation ($a: ArchiveRelatedPartyInput!, $b: ArchiveRelatedPartyInput!) {
        a: archiveRelatedParty(input: $a) { replayed }
        b: archiveRelatedParty(input: $b) { replayed }
      }`,
      {
        a: { customerId: 'cus_acme', relatedPartyId: 'rp_missing_a', idempotencyKey: 'key-a' },
        b: { customerId: 'cus_acme', relatedPartyId: 'rp_missing_b', idempotencyKey: 'key-b' },
      },
    );

    // Each error names its own mutation's key (however many of the two ran before data was nulled).
    expect(result.body.errors?.length).toBeGreaterThan(0);
    for (const error of result.body.errors ?? []) {
      expect(error.extensions?.idempotencyKey).toBe(`key-${String(error.path?.[0])}`);
    }
  });
});
