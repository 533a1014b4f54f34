/**
 * Every mutation of the schema once against the emulator's demo data, and the idempotency
 * contract through GraphQL: a retried mutation replays, a reused key with other input conflicts.
 */
import { describe, expect, it } from 'vitest';
import type { GraphQLResult } from '../support/harness/facade.ts';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

type Payload = Record<string, unknown> & { idempotencyKey: string; replayed: boolean };

/** Runs a one-mutation document and returns its payload, failing on any error. */
async function mutate(document: string, variables?: Record<string, unknown>): Promise<Payload> {
  const result: GraphQLResult<Record<string, Payload>> = await stack.query(document, variables);
  expect(result.body.errors).toBeUndefined();
  const payload = Object.values(result.body.data!)[0];
  expect(payload).toBeDefined();
  return payload!;
}

const IDEMPOTENCY = 'idempotencyKey replayed';

describe('mutations against the demo data', () => {
  it('createCustomer creates a customer and reports the idempotency key it was sent with', async () => {
    const payload = await mutate(`mutation {
      createCustomer(input: { idempotencyKey: "graph-mutations-1", type: "business", externalId: "initech", displayName: "Initech" }) {
        customer { id type externalId displayName email status } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.customer).toEqual({
      id: expect.stringMatching(/^cus_/),
      type: 'business',
      externalId: 'initech',
      displayName: 'Initech',
      email: null,
      status: 'active',
    });
    expect(payload.idempotencyKey).toBe('graph-mutations-1');
    expect(payload.replayed).toBe(false);
  });

  it('createRelatedParty creates a party, and its customer is read again after the change', async () => {
    const payload = await mutate(`mutation {
      createRelatedParty(input: { idempotencyKey: "graph-mutations-2",
        customerId: "cus_globex"
        partyType: "person"
        roles: [DIRECTOR, BENEFICIARY]
        title: "Non-executive Director"
        person: { firstName: "Ada", lastName: "Yonath", residenceCountry: "IL" }
      }) {
        relatedParty { id customerId partyType roles title displayName person { firstName } customer { id } }
        ${IDEMPOTENCY}
      }
    }`);

    expect(payload.relatedParty).toEqual({
      id: expect.stringMatching(/^rp_/),
      customerId: 'cus_globex',
      partyType: 'person',
      roles: ['DIRECTOR', 'BENEFICIARY'],
      title: 'Non-executive Director',
      displayName: 'Ada Yonath',
      person: { firstName: 'Ada' },
      customer: { id: 'cus_globex' },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/customers/{customerId}/related-parties': 1,
      'GET /v3/customers/{customerId}': 1,
    });
  });

  it('archiveRelatedParty archives a party, which leaves the list', async () => {
    const payload = await mutate(`mutation {
      archiveRelatedParty(input: { idempotencyKey: "graph-mutations-3", customerId: "cus_globex", relatedPartyId: "rp_globex_treasurer" }) {
        relatedParty { id archivedAt } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.relatedParty).toEqual({ id: 'rp_globex_treasurer', archivedAt: expect.any(String) });
    const list = await stack.query<{ customer: { relatedParties: { nodes: { id: string }[] } } }>(
      `{ customer(id: "cus_globex") { relatedParties { nodes { id } } } }`,
    );
    expect(list.body.data!.customer.relatedParties.nodes.map((node) => node.id)).not.toContain(
      'rp_globex_treasurer',
    );
  });

  it('setAccountFees replaces the developer fee, and the account shows it', async () => {
    const payload = await mutate(`mutation {
      setAccountFees(input: { idempotencyKey: "graph-mutations-4",
        customerId: "cus_acme", accountId: "acc_acme_polygon"
        breakdown: { developer: { fixed: "1.25", bips: 75 } }
      }) {
        fees { accountId breakdown { developer { fixed bips } } }
        account { id fees { breakdown { developer { fixed bips } } } }
        ${IDEMPOTENCY}
      }
    }`);

    expect(payload.fees).toEqual({
      accountId: 'acc_acme_polygon',
      breakdown: { developer: { fixed: '1.25', bips: 75 } },
    });
    expect(payload.account).toEqual({
      id: 'acc_acme_polygon',
      fees: { breakdown: { developer: { fixed: '1.25', bips: 75 } } },
    });
  });

  it('setAccountFees with developer null removes the fee', async () => {
    const payload = await mutate(`mutation {
      setAccountFees(input: { idempotencyKey: "graph-mutations-5", customerId: "cus_acme", accountId: "acc_acme_polygon", breakdown: { developer: null } }) {
        fees { breakdown { developer { bips } } } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.fees).toEqual({ breakdown: { developer: null } });
  });

  it('archiveAccount archives an account that nothing depends on', async () => {
    const payload = await mutate(`mutation {
      archiveAccount(input: { idempotencyKey: "graph-mutations-6", customerId: "cus_globex", accountId: "acc_globex_external" }) {
        account { id status archivedAt } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.account).toEqual({
      id: 'acc_globex_external',
      status: 'archived',
      archivedAt: expect.any(String),
    });
  });

  it('archiveCustomerDocument archives a document, which then reads as NOT_FOUND', async () => {
    const payload = await mutate(`mutation {
      archiveCustomerDocument(input: { idempotencyKey: "graph-mutations-7", customerId: "cus_globex", documentId: "doc_globex_registration" }) {
        document { id status archivedAt } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.document).toEqual({
      id: 'doc_globex_registration',
      status: 'archived',
      archivedAt: expect.any(String),
    });
    const read = await stack.query(
      `{ customerDocument(customerId: "cus_globex", id: "doc_globex_registration") { id } }`,
    );
    expect(read.body.data).toEqual({ customerDocument: null });
    expect(read.body.errors![0]!.extensions!.code).toBe('NOT_FOUND');
  });

  it('creates, updates and archives a webhook endpoint, showing its signing secret once, in the create payload only', async () => {
    const created = await mutate(`mutation {
      createWebhookEndpoint(input: { idempotencyKey: "graph-mutations-8",
        url: "https://hooks.example.test/platform", events: ["account.updated", "rule.updated"], description: "Ops"
      }) {
        webhookEndpoint { id url events description status } signingSecret ${IDEMPOTENCY}
      }
    }`);
    const endpoint = created.webhookEndpoint as { id: string };
    expect(created.webhookEndpoint).toEqual({
      id: expect.stringMatching(/^we_/),
      url: 'https://hooks.example.test/platform',
      events: ['account.updated', 'rule.updated'],
      description: 'Ops',
      status: 'active',
    });
    const secret = created.signingSecret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    // Never logged: not by the request log, the upstream client's debug lines or the audit trail.
    expect(stack.logs().some((line) => line.includes(secret) || line.includes('whsec_'))).toBe(false);
    // Never in a later read.
    const read = await stack.query(
      `query Read($id: ID!) { webhookEndpoint(id: $id) { id url events description status createdAt updatedAt archivedAt } }`,
      { id: endpoint.id },
    );
    expect(read.body.errors).toBeUndefined();
    expect(JSON.stringify(read.body)).not.toContain('whsec_');

    const updated = await mutate(
      `mutation Update($id: ID!) {
        updateWebhookEndpoint(input: { idempotencyKey: "graph-mutations-9", webhookEndpointId: $id, status: "disabled", description: null }) {
          webhookEndpoint { id status description } ${IDEMPOTENCY}
        }
      }`,
      { id: endpoint.id },
    );
    expect(updated.webhookEndpoint).toEqual({ id: endpoint.id, status: 'disabled', description: null });

    const archived = await mutate(
      `mutation Archive($id: ID!) {
        archiveWebhookEndpoint(input: { idempotencyKey: "graph-mutations-10", webhookEndpointId: $id }) {
          webhookEndpoint { id status archivedAt } ${IDEMPOTENCY}
        }
      }`,
      { id: endpoint.id },
    );
    expect(archived.webhookEndpoint).toEqual({
      id: endpoint.id,
      status: 'archived',
      archivedAt: expect.any(String),
    });

    const listed = await stack.query<{ webhookEndpoints: { nodes: { id: string; status: string }[] } }>(
      `{ webhookEndpoints(first: 100) { nodes { id status } } }`,
    );
    expect(listed.body.data!.webhookEndpoints.nodes).toContainEqual({ id: endpoint.id, status: 'archived' });
  });

  it('creates a rule, then pauses, resumes and archives it', async () => {
    const created = await mutate(`mutation {
      createRule(input: { idempotencyKey: "graph-mutations-11",
        customerId: "cus_ada"
        description: "Sweep everyday funds to savings"
        trigger: { accountId: "acc_ada_sol" }
        action: { account: { accountId: "acc_ada_polygon" } }
      }) {
        rule {
          id status description triggerAccountId trigger { id } action { accountId account { label } destination { recipientId } }
        }
        ${IDEMPOTENCY}
      }
    }`);
    const rule = created.rule as { id: string };
    expect(created.rule).toEqual({
      id: expect.stringMatching(/^rul_/),
      status: 'active',
      description: 'Sweep everyday funds to savings',
      triggerAccountId: 'acc_ada_sol',
      trigger: { id: 'acc_ada_sol' },
      action: { accountId: 'acc_ada_polygon', account: { label: 'Savings (Polygon)' }, destination: null },
    });

    for (const [mutation, status] of [
      ['pauseRule', 'paused'],
      ['resumeRule', 'active'],
      ['archiveRule', 'archived'],
    ] as const) {
      const payload = await mutate(
        `mutation Transition($id: ID!) {
          ${mutation}(input: { idempotencyKey: "graph-mutations-12-${mutation}", customerId: "cus_ada", ruleId: $id }) { rule { id status } ${IDEMPOTENCY} }
        }`,
        { id: rule.id },
      );
      expect(payload.rule).toEqual({ id: rule.id, status });
      expect(payload.replayed).toBe(false);
    }
  });

  it('sandboxTopUp credits an issued wallet, and the balance shows it', async () => {
    const payload = await mutate(`mutation {
      sandboxTopUp(input: { idempotencyKey: "graph-mutations-13", accountId: "acc_globex_eth", amount: "250.50", currency: "USDC" }) {
        topUp { id type state from { amount currency } to { identifier } } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.topUp).toEqual({
      id: expect.stringMatching(/^tu_/),
      type: 'wallet_to_wallet',
      state: 'completed',
      from: { amount: '250.50', currency: 'USDC' },
      to: { identifier: '0x71C7656EC7ab88b098defB751B7401B5f6d8976F' },
    });
    const account = await stack.query(
      `{ account(customerId: "cus_globex", id: "acc_globex_eth") { balances { available } } }`,
    );
    expect(account.body.data).toEqual({ account: { balances: [{ available: '98250.50' }] } });
  });

  it('sandboxSetCapabilityStatus forces a capability, and its applications follow', async () => {
    const payload = await mutate(`mutation {
      sandboxSetCapabilityStatus(input: { idempotencyKey: "graph-mutations-14", customerId: "cus_globex", capabilityId: "cap_globex_ach", status: "ready" }) {
        capability { id status statusReason { code } applications { status } } ${IDEMPOTENCY}
      }
    }`);

    expect(payload.capability).toEqual({
      id: 'cap_globex_ach',
      status: 'ready',
      statusReason: null,
      applications: [{ status: 'approved' }],
    });
  });
});

describe('idempotency through mutations', () => {
  const CREATE_PARTY = /* GraphQL */ `
    mutation Create($key: String!, $title: String!) {
      createRelatedParty(
        input: {
          customerId: "cus_acme"
          partyType: "person"
          roles: [OTHER]
          title: $title
          person: { firstName: "Mary", lastName: "Jackson", residenceCountry: "US" }
          idempotencyKey: $key
        }
      ) {
        relatedParty {
          id
          title
        }
        idempotencyKey
        replayed
      }
    }
  `;

  it('replays a retried mutation: the same resource, replayed true, nothing created twice', async () => {
    const key = `retry-${Date.now()}`;
    const first = await mutate(CREATE_PARTY, { key, title: 'Engineer' });
    const retry = await mutate(CREATE_PARTY, { key, title: 'Engineer' });

    expect(first).toMatchObject({ idempotencyKey: key, replayed: false });
    expect(retry).toEqual({ relatedParty: first.relatedParty, idempotencyKey: key, replayed: true });
  });

  it('refuses the same key with other input as IDEMPOTENCY_CONFLICT', async () => {
    const key = `conflict-${Date.now()}`;
    await mutate(CREATE_PARTY, { key, title: 'Engineer' });

    const reused = await stack.query(CREATE_PARTY, { key, title: 'Mathematician' });

    // The payload is nullable: the failed mutation is null, not the whole of `data`.
    expect(reused.body.data).toEqual({ createRelatedParty: null });
    expect(reused.body.errors).toHaveLength(1);
    expect(reused.body.errors![0]).toMatchObject({
      path: ['createRelatedParty'],
      extensions: {
        code: 'IDEMPOTENCY_CONFLICT',
        problem: { status: 409, code: 'idempotency_conflict', retryable: false },
      },
    });
  });

  it('names the input field an upstream validation error points at', async () => {
    const result = await stack.query(`mutation {
      createRelatedParty(input: { idempotencyKey: "graph-mutations-15",
        customerId: "cus_acme", partyType: "person", roles: [OTHER]
        person: { firstName: " Mary", lastName: "Jackson", residenceCountry: "US" }
      }) { relatedParty { id } }
    }`);

    expect(result.body.errors![0]).toMatchObject({
      extensions: {
        code: 'BAD_USER_INPUT',
        problem: {
          code: 'validation_error',
          errors: [
            expect.objectContaining({ pointer: '/person/firstName', path: ['input', 'person', 'firstName'] }),
          ],
        },
      },
    });
  });
});
