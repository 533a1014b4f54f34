/**
 * Inline traces (`ftv1`) asked for by callers that are not a gateway, by every way Apollo Server
 * takes an operation: a customer's or an operator's token, a caller's own platform key, a GET, a
 * batch, the header's value in capitals, and a token whose roles claim is a string naming a role
 * other than the gateway's. None gets a trace. A gateway's own trace of an operation that fails
 * carries the error as the answer does, masked as the answer is, never more.
 */
import { Trace } from '@apollo/usage-reporting-protobuf';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { startFacade, type RunningFacade } from '../support/harness/facade.ts';
import { bearer, issuerSignedToken } from '../support/tokens.ts';

const QUERY = '{ customer(id: "cus_acme") { id } }';
const ASK_FOR_TRACE = { 'apollo-federation-include-trace': 'ftv1' };

let emulator: RunningEmulator;
let facade: RunningFacade;

beforeAll(async () => {
  emulator = await startEmulator();
  facade = await startFacade(emulator.url);
});

afterAll(async () => {
  await facade?.close();
  await emulator?.close();
});

/** Every `extensions` object of an answer, one per operation of a batch. */
function extensionsOf(body: unknown): (Record<string, unknown> | undefined)[] {
  const answers = Array.isArray(body) ? body : [body];
  return answers.map((answer) => (answer as { extensions?: Record<string, unknown> }).extensions);
}

describe('inline traces asked for by callers that are not a gateway', () => {
  test.each([
    ['a customer’s token', async () => bearer('acme')],
    ['an operator’s token', async () => bearer('operator')],
    ['a caller’s own platform key', async () => ({ 'x-api-key': SANDBOX_KEY })],
    [
      'a token whose roles claim is a string with a role beside the gateway’s name',
      async () => ({
        authorization: `Bearer ${await issuerSignedToken({ roles: 'gateways gateway-reader' })}`,
      }),
    ],
  ])('%s, POST with the header: no trace', async (_name, credentials) => {
    const answer = await facade.query(QUERY, undefined, { ...(await credentials()), ...ASK_FOR_TRACE });
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    expect(extensionsOf(answer.body)[0]?.['ftv1']).toBeUndefined();
  });

  test('a customer’s GET, with the header in capitals: no trace', async () => {
    const url = new URL(facade.graphqlUrl);
    url.searchParams.set('query', QUERY);
    const response = await fetch(url, {
      headers: {
        ...(await bearer('acme')),
        'Apollo-Federation-Include-Trace': 'ftv1',
        'apollo-require-preflight': 'true',
        accept: 'application/json',
      },
    });
    const body: unknown = await response.json();
    // Whether GET is served or refused, nothing in it is a trace.
    expect(JSON.stringify(body)).not.toContain('ftv1');
  });

  test('a customer’s batch: no trace in any of its answers', async () => {
    const response = await fetch(facade.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await bearer('acme')), ...ASK_FOR_TRACE },
      body: JSON.stringify([{ query: QUERY }, { query: QUERY }]),
    });
    const body: unknown = await response.json();
    for (const extensions of extensionsOf(body)) expect(extensions?.['ftv1']).toBeUndefined();
    expect(JSON.stringify(body)).not.toContain('ftv1');
  });
});

describe('a gateway’s trace of a failing operation', () => {
  test('carries no more of an error than the answer does', async () => {
    await emulator.setFaults({ rules: [{ route: 'getCustomer', kind: 'internal_error' }] });
    try {
      const answer = await facade.query(QUERY, undefined, { ...(await bearer('gateway')), ...ASK_FOR_TRACE });
      const { errors, extensions } = answer.body as {
        errors?: { message: string }[];
        extensions?: Record<string, unknown>;
      };
      expect(errors?.length).toBeGreaterThan(0);
      const ftv1 = extensions?.['ftv1'];
      expect(typeof ftv1).toBe('string');
      const trace = Trace.decode(Buffer.from(ftv1 as string, 'base64'));
      const traced: { message: string; json: string }[] = [];
      const visit = (node: Trace.INode | null | undefined): void => {
        if (node == null) return;
        for (const error of node.error ?? [])
          traced.push({ message: error.message ?? '', json: error.json ?? '' });
        for (const child of node.child ?? []) visit(child);
      };
      visit(trace.root);
      expect(traced.length).toBeGreaterThan(0);
      const answered = new Set(errors!.map((error) => error.message));
      for (const { message, json } of traced) {
        // Apollo's own masking, or the very message the caller was answered with.
        expect(message === '<masked>' || answered.has(message)).toBe(true);
        for (const text of [message, json]) {
          expect(text).not.toContain(emulator.url);
          expect(text).not.toContain(SANDBOX_KEY);
          expect(text).not.toContain('correlationId');
        }
      }
    } finally {
      await emulator.setFaults({ rules: [] });
    }
  });
});
