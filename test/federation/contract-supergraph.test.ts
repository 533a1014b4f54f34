/**
 * A contract's supergraph (`npm run supergraph -- --contract partner`): every subgraph's SDL
 * filtered by the contract's tags composes, hides what the contract hides, and a real gateway
 * serving it to partners refuses a hidden field itself; behind a gateway serving the whole
 * supergraph, the facade still refuses it to a partner token (the contract is the facade's own
 * boundary, whatever the gateway in front serves).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  composeSupergraph,
  contractSubgraphs,
  loadRepositorySubgraphs,
  withoutEdgeAuthorization,
} from '../../scripts/compose-supergraph.ts';
import { readContracts } from '../../src/graph/contracts.ts';
import { startApolloGateway, type RunningGateway } from '../support/harness/gateways.ts';
import { postGraphQL, startFederationStack, type FederationStack } from '../support/harness/federation.ts';
import { bearer } from '../support/tokens.ts';

const run = promisify(execFile);
const partner = readContracts().find(({ name }) => name === 'partner')!;
const FEES = '{ account(customerId: "cus_acme", id: "acc_acme_eth") { id fees { accountId } } }';
const NOTES = '{ customer(id: "cus_acme") { id openSupportNoteCount accounts { nodes { id label } } } }';

describe('the partner contract’s supergraph', () => {
  test('composes without errors or hints, and holds nothing the contract hides', () => {
    const { supergraphSdl, hints } = composeSupergraph(contractSubgraphs(loadRepositorySubgraphs(), partner));
    expect(hints).toEqual([]);
    expect(supergraphSdl).toContain('openSupportNoteCount');
    expect(supergraphSdl).toMatch(/type Account\b/);
    expect(supergraphSdl).not.toMatch(/\bfees:|webhookEndpoints|type WebhookEndpoint|createCustomer\(/);
  });

  test('`npm run supergraph -- --contract partner` writes it; an unknown contract is refused', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'supergraph-contract-'));
    try {
      const out = join(directory, 'partner.graphql');
      const { stdout } = await run(process.execPath, [
        'scripts/compose-supergraph.ts',
        '--contract',
        'partner',
        '--out',
        out,
      ]);
      expect(stdout).toContain(`Wrote the supergraph to ${out}`);
      expect(await readFile(out, 'utf8')).toBe(
        `${composeSupergraph(contractSubgraphs(loadRepositorySubgraphs(), partner)).supergraphSdl}\n`,
      );
      const refused = await run(process.execPath, [
        'scripts/compose-supergraph.ts',
        '--contract',
        'everyone',
      ]).catch((error: { code: number; stderr: string }) => error);
      expect(refused).toMatchObject({
        code: 1,
        stderr: expect.stringContaining('--contract must name a contract'),
      });
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe('gateways in front of the facade, a partner token', () => {
  let federation: FederationStack;
  let partnerGateway: RunningGateway;
  let wholeGateway: RunningGateway;

  beforeAll(async () => {
    federation = await startFederationStack();
    const subgraphs = withoutEdgeAuthorization(
      loadRepositorySubgraphs({
        facadeUrl: federation.stack.graphqlUrl,
        supportNotesUrl: federation.supportNotesUrl,
      }),
    );
    partnerGateway = await startApolloGateway(
      composeSupergraph(contractSubgraphs(subgraphs, partner)).supergraphSdl,
    );
    wholeGateway = await startApolloGateway(federation.apolloGatewaySupergraphSdl);
  });
  afterAll(async () => {
    await partnerGateway?.close();
    await wholeGateway?.close();
    await federation?.close();
  });

  test('reads what the contract shows through the contract’s gateway, across both subgraphs', async () => {
    const answer = await postGraphQL(partnerGateway.url, NOTES, undefined, await bearer('partner'));
    expect(answer.body.errors).toBeUndefined();
    expect(answer.body.data).toMatchObject({
      customer: { id: 'cus_acme', openSupportNoteCount: expect.any(Number) },
    });
  });

  test('is refused a hidden field by the contract’s gateway, with no upstream call', async () => {
    await federation.stack.resetUpstreamCalls();
    const answer = await postGraphQL(partnerGateway.url, FEES, undefined, await bearer('partner'));
    expect(answer.body.errors?.[0]?.message).toBe('Cannot query field "fees" on type "Account".');
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });

  test('is refused it by the facade behind a gateway serving the whole supergraph, with no upstream call', async () => {
    await federation.stack.resetUpstreamCalls();
    const answer = await postGraphQL(wholeGateway.url, FEES, undefined, await bearer('partner'));
    expect(answer.body.data?.['account'] ?? null).toBeNull();
    expect(JSON.stringify(answer.body.errors)).toContain(
      'Cannot query field \\"fees\\" on type \\"Account\\".',
    );
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
    // An internal token through the same gateway reads it.
    const internal = await postGraphQL(wholeGateway.url, FEES, undefined, await bearer('internalTool'));
    expect(internal.body.errors).toBeUndefined();
  });
});
