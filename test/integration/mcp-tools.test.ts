/**
 * The MCP endpoint's tools through the same door as HTTP, with the official SDK's client over
 * Streamable HTTP against a real facade on a real port, tokens of the run's issuer, and the
 * emulator counting upstream calls: one tool per trusted query and mutation of the manifest
 * (`TRUSTED_DOCUMENTS`, examples/web's and one with a documentation comment), their input schemas
 * from their variables, a call as acme making exactly the upstream calls the same operation makes
 * over HTTP, another customer refused with none, a mutation in the audit trail under its tool,
 * records and metrics with `transport="mcp"`, the admission order of a request, no tool that runs a
 * document of the caller's own, and a reloaded manifest changing the tool list with
 * `notifications/tools/list_changed`.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { admissionStepsOf } from '../../src/edge/door/door.ts';
import {
  connectMcp,
  mcpRequest,
  openRawSession,
  type McpRawAnswer,
  type McpTestClient,
} from '../support/harness/mcp-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { scrape, deltas } from '../support/metrics.ts';
import { tokenFor } from '../support/tokens.ts';

const ACCOUNTS = `# The accounts of one customer with their available balances.
# Reads the customer and its first ten accounts.
query CustomerAccounts($customerId: ID!) {
  customer(id: $customerId) { id accounts(first: 10) { nodes { id currency balances { currency available } } } }
}`;
const LATER = 'query ApiStatus { apiStatus { reachable } }';

const directory = await mkdtemp(join(tmpdir(), 'mcp-tools-'));
const manifestPath = join(directory, 'manifest.json');
const webManifest = JSON.parse(
  await readFile(new URL('../../examples/web/src/gql/persisted-documents.json', import.meta.url), 'utf8'),
) as Record<string, string>;
await writeFile(manifestPath, JSON.stringify({ ...webManifest, 'customer-accounts': ACCOUNTS }));
afterAll(() => rm(directory, { recursive: true, force: true }));

const stack = useStack({ env: { TRUSTED_DOCUMENTS: manifestPath, CACHE_ENABLED: 'false' } });

const clients: McpTestClient[] = [];
afterAll(async () => {
  for (const client of clients) await client.close();
});
const connectAs = async (caller: 'acme' | 'globex' | 'operator'): Promise<McpTestClient> => {
  const client = await connectMcp(stack.facadeUrl, await tokenFor(caller));
  clients.push(client);
  return client;
};

const structured = (result: unknown) =>
  (result as { structuredContent?: unknown }).structuredContent as {
    data?: Record<string, unknown> | null;
    errors?: { message: string; extensions?: { code?: string } }[];
  };

describe('tools: the trusted operations, through the door', () => {
  test('lists one tool per trusted query and mutation, with descriptions and input schemas', async () => {
    const { tools } = await (await connectAs('acme')).client.listTools();
    const names = tools.map((tool) => tool.name).sort();
    // examples/web's subscription (AccountChanges) is left to resources; the schema tools are acme's too.
    expect(names).toEqual(
      [
        'CustomerAccounts',
        'Dashboard',
        'LiveBalance',
        'MyCustomers',
        'TopUp',
        'search_schema',
        'validate_document',
      ].sort(),
    );
    const accounts = tools.find((tool) => tool.name === 'CustomerAccounts')!;
    expect(accounts.description).toBe(
      'The accounts of one customer with their available balances. Reads the customer and its first ten accounts.',
    );
    expect(accounts.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(accounts.inputSchema).toEqual({
      type: 'object',
      properties: { customerId: { type: 'string', description: "The customer's id (`cus_...`)." } },
      required: ['customerId'],
      additionalProperties: false,
    });
    const dashboard = tools.find((tool) => tool.name === 'Dashboard')!;
    // No comment in codegen's manifest: the schema's description of what it selects.
    expect(dashboard.description).toContain('`customer`: A customer by id');
    expect(dashboard.inputSchema.required).toEqual(['customerId', 'first']);
    expect(dashboard.inputSchema.properties).toMatchObject({
      first: { type: 'integer', minimum: -2_147_483_648, maximum: 2_147_483_647 },
      after: { type: ['string', 'null'] },
    });
    const topUp = tools.find((tool) => tool.name === 'TopUp')!;
    expect(topUp.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(topUp.inputSchema).toMatchObject({
      required: ['input'],
      properties: { input: { $ref: '#/$defs/SandboxTopUpInput' } },
      $defs: {
        SandboxTopUpInput: {
          type: 'object',
          required: ['accountId', 'amount', 'currency', 'idempotencyKey'],
          additionalProperties: false,
          properties: {
            amount: { type: 'string', pattern: '^-?\\d+(\\.\\d+)?$', maxLength: 40 },
            customerId: { type: ['string', 'null'] },
          },
        },
      },
    });
  });

  test('a call as acme makes exactly the upstream calls the same operation makes over HTTP', async () => {
    const client = await connectAs('acme');
    const variables = { customerId: 'cus_acme', first: 5 };
    const dashboard =
      webManifest[Object.keys(webManifest).find((id) => webManifest[id]!.includes('query Dashboard'))!]!;
    const overHttp = await stack.facade.queryAs('acme', dashboard, variables);
    expect(overHttp.body.errors).toBeUndefined();
    const httpCalls = await stack.upstreamCalls();
    await stack.resetUpstreamCalls();

    const result = await client.client.callTool({ name: 'Dashboard', arguments: variables });
    expect(result.isError).toBeUndefined();
    expect(structured(result)).toEqual({ data: overHttp.body.data });
    expect(JSON.parse((result.content as { text: string }[])[0]!.text)).toEqual({ data: overHttp.body.data });
    const calls = await stack.upstreamCalls();
    expect(calls.byRoute).toEqual(httpCalls.byRoute);
    expect(calls.total).toBe(2);
  });

  test('another customer is refused with no upstream call', async () => {
    const client = await connectAs('globex');
    const result = await client.client.callTool({
      name: 'CustomerAccounts',
      arguments: { customerId: 'cus_acme' },
    });
    expect(result.isError).toBe(true);
    expect(structured(result).data).toEqual({ customer: null });
    expect(structured(result).errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a mutation is audited under its tool; records and metrics say transport="mcp"', async () => {
    const client = await connectAs('acme');
    const before = await scrape(stack.metricsUrl);
    const logged = stack.logs().length;
    const result = await client.client.callTool({
      name: 'TopUp',
      arguments: {
        input: {
          accountId: 'acc_acme_eth',
          customerId: 'cus_acme',
          amount: '1.00',
          currency: 'USDC',
          idempotencyKey: `mcp-${Date.now()}`,
        },
      },
    });
    expect(result.isError).toBeUndefined();
    expect(structured(result).data?.['sandboxTopUp']).toMatchObject({ topUp: { state: expect.any(String) } });
    const lines = stack
      .logs()
      .slice(logged)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const audit = lines.find((line) => line['log'] === 'audit');
    expect(audit).toMatchObject({
      actor: { subject: expect.any(String), client: 'test-acme' },
      // examples/web's document selects `__typename` at its root too, which the trail lists as HTTP's does.
      operation: { name: 'TopUp', fields: ['__typename', 'sandboxTopUp'], tool: 'TopUp' },
      upstream: { method: 'POST', route: '/v3/sandbox/accounts/{accountId}/topup' },
    });
    expect(lines.find((line) => line['msg'] === 'graphql operation')).toMatchObject({
      transport: 'mcp',
      operationName: 'TopUp',
      status: 200,
      errorCodes: [],
    });
    const after = await scrape(stack.metricsUrl);
    expect(deltas(before, after, 'graphql_operations_total', { transport: 'mcp' })).toEqual({
      '{operation_name="TopUp",operation_type="mutation",outcome="ok",transport="mcp"}': 1,
    });
  });

  test('a tool call takes the declared steps of a request, once', async () => {
    // A session without the GET stream, whose own request would take steps meanwhile.
    const headers = await openRawSession(stack.facadeUrl, await tokenFor('acme'));
    const steps: string[] = [];
    const stop = stack.app.lifecycle.on('admissionStep', ({ step }) => steps.push(step));
    let answer: McpRawAnswer | undefined;
    try {
      answer = await mcpRequest(
        stack.facadeUrl,
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'CustomerAccounts', arguments: { customerId: 'cus_acme' } },
        },
        headers,
      );
    } finally {
      stop();
    }
    expect(answer?.status).toBe(200);
    expect(steps).toEqual(admissionStepsOf('request'));
  });

  test('no tool runs a document of the caller’s own', async () => {
    const client = await connectAs('acme');
    const mutation =
      'mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", amount: "5.00", currency: "USDC", idempotencyKey: "x" }) { topUp { id } } }';
    for (const name of ['graphql', 'execute', 'query', 'run_operation']) {
      await expect(client.client.callTool({ name, arguments: { query: mutation } })).rejects.toThrow(
        /Unknown tool/,
      );
    }
    // A listed tool takes its variables and nothing else: a document beside them is refused.
    const smuggled = await client.client.callTool({
      name: 'CustomerAccounts',
      arguments: { customerId: 'cus_acme', query: mutation },
    });
    expect(smuggled.isError).toBe(true);
    expect(structured(smuggled).errors?.[0]).toMatchObject({
      message: expect.stringMatching(/Unknown argument "query"/),
      extensions: { code: 'BAD_USER_INPUT' },
    });
    // Validation reads it, runs nothing, and says it is not listed.
    const validated = await client.client.callTool({
      name: 'validate_document',
      arguments: { document: mutation },
    });
    expect(structured(validated)).toEqual({ valid: true, listed: false });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('the schema tools search and validate without running anything', async () => {
    const client = await connectAs('acme');
    const found = await client.client.callTool({
      name: 'search_schema',
      arguments: { query: 'available balance' },
    });
    const matches = (found.structuredContent as { matches: { coordinate: string }[] }).matches;
    expect(matches.map((match) => match.coordinate)).toContain('Balance.available');
    const invalid = await client.client.callTool({
      name: 'validate_document',
      arguments: { document: '{ customer(id: "cus_acme") { balance } }' },
    });
    expect(structured(invalid)).toMatchObject({
      valid: false,
      listed: false,
      errors: [{ message: 'Cannot query field "balance" on type "Customer".' }],
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a reloaded manifest changes the tool list and tells every session', async () => {
    const client = await connectAs('operator');
    await writeFile(
      manifestPath,
      JSON.stringify({ ...webManifest, 'customer-accounts': ACCOUNTS, 'api-status': LATER }),
    );
    expect(await stack.app.reloadTrustedDocuments()).toMatchObject({ ok: true });
    await waitFor(() => client.toolListChanges() === 1, 'notifications/tools/list_changed');
    const { tools } = await client.client.listTools();
    expect(tools.map((tool) => tool.name)).toContain('ApiStatus');
    const status = await client.client.callTool({ name: 'ApiStatus', arguments: {} });
    expect(structured(status).data).toEqual({ apiStatus: { reachable: true } });
  });
});
