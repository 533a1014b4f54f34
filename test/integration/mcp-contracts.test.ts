/**
 * Contracts over MCP: a token naming the `partner` contract meets at `/mcp` the same schema it meets
 * over HTTP and every live transport (test/integration/contracts.test.ts). A tool whose operation
 * reads what the contract hides is neither listed nor callable (as if the manifest did not hold it,
 * with no upstream call), `search_schema` finds nothing the contract hides, and `validate_document`
 * answers "Cannot query field" for it; an `internal` token sees all of it. With the official SDK's
 * client over Streamable HTTP against a real facade, tokens of the run's issuer, the emulator
 * counting upstream calls.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { connectMcp, type McpTestClient } from '../support/harness/mcp-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

const ACCOUNTS = `# The accounts of one customer.
query CustomerAccounts($customerId: ID!) {
  customer(id: $customerId) { id accounts(first: 10) { nodes { id currency } } }
}`;
/** `Account.fees` is tagged internal: the partner contract hides it. */
const FEES = `# The fees of one account.
query AccountFees($customerId: ID!, $accountId: ID!) {
  account(customerId: $customerId, id: $accountId) { id fees { accountId } }
}`;

const directory = await mkdtemp(join(tmpdir(), 'mcp-contracts-'));
const manifestPath = join(directory, 'manifest.json');
await writeFile(manifestPath, JSON.stringify({ 'customer-accounts': ACCOUNTS, 'account-fees': FEES }));
afterAll(() => rm(directory, { recursive: true, force: true }));

const stack = useStack({ env: { TRUSTED_DOCUMENTS: manifestPath, CACHE_ENABLED: 'false' } });

const clients: McpTestClient[] = [];
afterAll(async () => {
  for (const client of clients) await client.close();
});
const connectAs = async (caller: 'partner' | 'internalTool'): Promise<McpTestClient> => {
  const client = await connectMcp(stack.facadeUrl, await tokenFor(caller));
  clients.push(client);
  return client;
};

const structured = (result: unknown) =>
  (result as { structuredContent?: Record<string, unknown> }).structuredContent ?? {};

describe('a partner token over MCP is served the partner contract', () => {
  test('a tool reading what the contract hides is not listed; an internal token lists it', async () => {
    const partner = (await (await connectAs('partner')).client.listTools()).tools.map((tool) => tool.name);
    expect(partner.sort()).toEqual(['CustomerAccounts', 'search_schema', 'validate_document']);
    const internal = (await (await connectAs('internalTool')).client.listTools()).tools.map(
      (tool) => tool.name,
    );
    expect(internal.sort()).toEqual([
      'AccountFees',
      'CustomerAccounts',
      'search_schema',
      'validate_document',
    ]);
  });

  test('calling that tool is an unknown tool, with no upstream call; the listed one runs', async () => {
    const { client } = await connectAs('partner');
    await expect(
      client.callTool({
        name: 'AccountFees',
        arguments: { customerId: 'cus_acme', accountId: 'acc_acme_eth' },
      }),
    ).rejects.toThrow(/Unknown tool: AccountFees/);
    expect((await stack.upstreamCalls()).total).toBe(0);

    const listed = await client.callTool({ name: 'CustomerAccounts', arguments: { customerId: 'cus_acme' } });
    expect(listed.isError).toBeUndefined();
    expect(structured(listed)['data']).toMatchObject({ customer: { id: 'cus_acme' } });
  });

  test('search_schema finds nothing the contract hides; validate_document does not know it', async () => {
    const partner = (await connectAs('partner')).client;
    const internal = (await connectAs('internalTool')).client;
    const coordinates = async (client: typeof partner) =>
      (
        structured(await client.callTool({ name: 'search_schema', arguments: { query: 'fees', limit: 50 } }))[
          'matches'
        ] as { coordinate: string }[]
      ).map((match) => match.coordinate);
    expect(await coordinates(internal)).toContain('Account.fees');
    const seenByPartner = await coordinates(partner);
    expect(seenByPartner).not.toContain('Account.fees');
    expect(seenByPartner.filter((coordinate) => coordinate.startsWith('AccountFee'))).toEqual([]);

    const document = '{ account(customerId: "cus_acme", id: "acc_acme_eth") { id fees { accountId } } }';
    const verdict = structured(
      await partner.callTool({ name: 'validate_document', arguments: { document } }),
    ) as { valid: boolean; errors?: { message: string }[] };
    expect(verdict.valid).toBe(false);
    expect(verdict.errors?.[0]?.message).toBe('Cannot query field "fees" on type "Account".');
    const internalVerdict = structured(
      await internal.callTool({ name: 'validate_document', arguments: { document } }),
    );
    expect(internalVerdict['valid']).toBe(true);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
