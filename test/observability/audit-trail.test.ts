/**
 * The audit trail: every effectful upstream call leaves exactly one line on the audit stream, with
 * who, what, the idempotency key, the upstream's correlation id, the outcome and whether it was a
 * replay, and never anything from the input beyond ids, nor a key.
 */
import { describe, expect, it } from 'vitest';
import { apiKeyId } from '../../src/observability/audit-trail.ts';
import { createLogger } from '../../src/logger.ts';
import { READ_ONLY_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import { useStack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

const auditLines: string[] = [];
const stack = useStack({
  // Server-side callers may bring their own platform key here (the last test).
  env: { AUTH_ALLOW_CALLER_API_KEY: 'true' },
  app: {
    auditLogger: createLogger({ level: 'info', write: (line) => auditLines.push(line) }).child({
      log: 'audit',
    }),
  },
});

/** The audit lines written since `from`, parsed, without their timestamps. */
function auditSince(from: number): Record<string, unknown>[] {
  return auditLines.slice(from).map((line) => {
    const { time, ...rest } = JSON.parse(line) as Record<string, unknown>;
    expect(typeof time).toBe('string');
    return rest;
  });
}

const TOP_UP = /* GraphQL */ `
  mutation TopUp($input: SandboxTopUpInput!) {
    sandboxTopUp(input: $input) {
      idempotencyKey
      replayed
      topUp {
        id
      }
    }
  }
`;

/** The audit actor of the operator's token: its subject and OAuth client, read from the token itself. */
async function operatorActor(): Promise<{ subject: string; client: string }> {
  const payload = JSON.parse(
    Buffer.from((await tokenFor('operator')).split('.')[1]!, 'base64url').toString(),
  ) as { sub: string; client_id: string };
  expect(payload.client_id).toBe('test-operator');
  return { subject: payload.sub, client: payload.client_id };
}

/** An id of the facade's own, which the audit trail records apart from the caller's. */
const FACADE_ID = expect.stringMatching(/^req_[0-9a-f]{24}$/) as string;

describe('audit trail', () => {
  it('writes one line for a top-up, and one marked replayed for the same key again', async () => {
    const input = {
      accountId: 'acc_globex_eth',
      amount: '10.00',
      currency: 'USDC',
      idempotencyKey: 'audit-top-up-1',
    };
    const from = auditLines.length;

    const first = await stack.query<{ sandboxTopUp: { replayed: boolean; topUp: { id: string } } }>(
      TOP_UP,
      { input },
      { 'x-request-id': 'audit-req-1' },
    );
    expect(first.body.errors).toBeUndefined();
    const topUpId = first.body.data!.sandboxTopUp.topUp.id;
    const again = await stack.query<{ sandboxTopUp: { replayed: boolean } }>(
      TOP_UP,
      { input },
      { 'x-request-id': 'audit-req-2' },
    );
    expect(again.body.data!.sandboxTopUp.replayed).toBe(true);

    const actor = await operatorActor();
    const line = (callerRequestId: string, replayed: boolean) => ({
      level: 'info',
      msg: 'upstream write',
      log: 'audit',
      actor,
      // The facade's own id, apart from the caller's (which went upstream and came back).
      requestId: FACADE_ID,
      callerRequestId,
      operation: { name: 'TopUp', fields: ['sandboxTopUp'] },
      upstream: {
        method: 'POST',
        route: '/v3/sandbox/accounts/{accountId}/topup',
        status: 200,
      },
      resources: { accountId: 'acc_globex_eth', resultId: topUpId },
      idempotencyKey: 'audit-top-up-1',
      correlationId: callerRequestId,
      outcome: 'ok',
      replayed,
      attempts: 1,
    });
    expect(auditSince(from)).toEqual([line('audit-req-1', false), line('audit-req-2', true)]);
  });

  it('writes one line for a write the upstream refuses, with its problem code and no personal data', async () => {
    const from = auditLines.length;
    const result = await stack.query(
      `mutation AddDirector($input: CreateRelatedPartyInput!) {
        createRelatedParty(input: $input) { relatedParty { id } }
      }`,
      {
        input: {
          customerId: 'cus_acme',
          idempotencyKey: 'audit-refused-1',
          partyType: 'person',
          roles: ['DIRECTOR'],
          person: { firstName: '  Mary', lastName: 'Jackson', residenceCountry: 'US' },
        },
      },
      { 'x-request-id': 'audit-req-3' },
    );
    expect(result.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');

    expect(auditSince(from)).toEqual([
      {
        level: 'info',
        msg: 'upstream write',
        log: 'audit',
        actor: await operatorActor(),
        requestId: FACADE_ID,
        callerRequestId: 'audit-req-3',
        operation: { name: 'AddDirector', fields: ['createRelatedParty'] },
        upstream: { method: 'POST', route: '/v3/customers/{customerId}/related-parties', status: 400 },
        resources: { customerId: 'cus_acme' },
        idempotencyKey: 'audit-refused-1',
        correlationId: 'audit-req-3',
        outcome: 'validation_error',
        replayed: false,
        attempts: 1,
      },
    ]);
    expect(auditLines.slice(from).join('\n')).not.toMatch(/Mary|Jackson/);
  });

  it('writes nothing for reads, nor for a mutation refused before any upstream call', async () => {
    const from = auditLines.length;
    await stack.query(`{ customer(id: "cus_acme") { id } }`);
    const invalid = await stack.query(
      `mutation { sandboxTopUp(input: { accountId: "acc_globex_eth" }) { replayed } }`,
    );
    expect(invalid.status).toBe(400);
    expect(auditSince(from)).toEqual([]);
  });

  it("attributes a write with a caller's own key to that key, not to the facade, and never writes a key", async () => {
    const from = auditLines.length;
    const result = await stack.queryWithKey(READ_ONLY_KEY, TOP_UP, {
      input: {
        accountId: 'acc_globex_eth',
        amount: '1.00',
        currency: 'USDC',
        idempotencyKey: 'audit-own-key',
      },
    });
    expect(result.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const entries = auditSince(from);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      actor: { subject: apiKeyId(READ_ONLY_KEY), client: null },
      upstream: { method: 'POST', route: '/v3/sandbox/accounts/{accountId}/topup', status: 403 },
      outcome: 'forbidden',
      replayed: false,
    });
    expect(entries[0]?.idempotencyKey).toBe('audit-own-key');
    expect(auditLines.join('\n')).not.toContain(SANDBOX_KEY);
    expect(auditLines.join('\n')).not.toContain(READ_ONLY_KEY);
  });
});
