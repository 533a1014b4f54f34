/**
 * Rolling trusted documents out: in log-only mode an operation missing from the manifest runs, is
 * logged and is counted, over HTTP and over graphql-ws alike; in enforce mode it is still refused
 * over both; the manifest is read again without a restart (`app.reloadTrustedDocuments()`, which
 * SIGHUP calls in a real process), and a manifest that does not parse leaves the old one in use.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useNpmStart } from '../support/npm-start.ts';
import { tokenFor } from '../support/tokens.ts';

const LISTED = 'query Mine { customer(id: "cus_acme") { id } }';
const UNLISTED = 'query Unlisted { customer(id: "cus_acme") { id status } }';
const UNLISTED_SUBSCRIPTION = 'subscription Unlisted { accountChanged(customerId: "cus_acme") { type } }';

/** A manifest file in a directory of its own (graphql-codegen's `{ "<id>": "<document>" }`). */
function manifestOf(documents: Record<string, string>): string {
  const path = join(mkdtempSync(join(tmpdir(), 'trusted-rollout-')), 'persisted-documents.json');
  writeFileSync(path, JSON.stringify(documents));
  return path;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

async function acme(): Promise<{ Authorization: string }> {
  return { Authorization: `Bearer ${await tokenFor('acme')}` };
}

/** POSTs `body` as acme; the status, the data and the first error's code. */
async function postAsAcme(
  stack: Stack,
  body: Record<string, unknown>,
): Promise<{ status: number; data: unknown; code: string | undefined }> {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: (await acme()).Authorization },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
  return { status: response.status, data: json.data, code: json.errors?.[0]?.extensions?.code };
}

/** `graphql_untrusted_operations_total` for `reason` and `action` (0 when never counted). */
async function untrustedCount(stack: Stack, reason: string, action: string): Promise<number> {
  const text = await (await fetch(stack.metricsUrl)).text();
  const line = text
    .split('\n')
    .find(
      (candidate) =>
        candidate.startsWith('graphql_untrusted_operations_total{') &&
        candidate.includes(`reason="${reason}"`) &&
        candidate.includes(`action="${action}"`),
    );
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

function loggedUntrusted(stack: Stack): Record<string, unknown>[] {
  return stack
    .logs()
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter(
      (line) => typeof line['msg'] === 'string' && line['msg'].startsWith('operation not in the trusted'),
    );
}

describe('TRUSTED_DOCUMENTS_MODE=log-only', () => {
  const stack = useStack({
    env: { TRUSTED_DOCUMENTS: manifestOf({ 'mine-v1': LISTED }), TRUSTED_DOCUMENTS_MODE: 'log-only' },
  });

  test('an unlisted query runs over HTTP, is logged (no token in the line) and counted', async () => {
    const answer = await postAsAcme(stack, { query: UNLISTED, operationName: 'Unlisted' });
    expect(answer).toEqual({
      status: 200,
      data: { customer: { id: 'cus_acme', status: expect.any(String) as unknown } },
      code: undefined,
    });
    expect((await stack.upstreamCalls()).total).toBe(1);
    const lines = loggedUntrusted(stack);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      reason: 'untrusted-query',
      operationName: 'Unlisted',
      subject: expect.any(String) as unknown,
      documentSha256: expect.stringMatching(/^[0-9a-f]{64}$/) as unknown,
    });
    const token = (await acme()).Authorization.slice('Bearer '.length);
    expect(JSON.stringify(lines[0])).not.toContain(token);
    expect(lines[0]).toMatchObject({ documentSha256: sha256(UNLISTED) });
    expect(await untrustedCount(stack, 'untrusted-query', 'logged')).toBe(1);
    // A listed one runs as always, and is not counted.
    expect((await postAsAcme(stack, { documentId: 'mine-v1' })).data).toEqual({
      customer: { id: 'cus_acme' },
    });
    expect(await untrustedCount(stack, 'untrusted-query', 'logged')).toBe(1);
  });

  test('an unlisted subscription runs over graphql-ws, is logged and counted, as over HTTP', async () => {
    const before = await untrustedCount(stack, 'untrusted-query', 'logged');
    const linesBefore = loggedUntrusted(stack).length;
    const received = stack.connect(await acme()).subscribe(UNLISTED_SUBSCRIPTION);
    await stack.subscriptionsStarted(1);
    expect(received.errors).toEqual([]);
    expect(await untrustedCount(stack, 'untrusted-query', 'logged')).toBe(before + 1);
    const lines = loggedUntrusted(stack).slice(linesBefore);
    expect(lines).toHaveLength(1);
    // graphql-ws's client sends no operationName: the text's hash names the document.
    expect(lines[0]).toMatchObject({
      reason: 'untrusted-query',
      documentSha256: sha256(UNLISTED_SUBSCRIPTION),
    });
    received.stop();
    await stack.subscriptionsCompleted(1);
  });

  test('an unknown id with no text is still refused: there is nothing to run, and nothing upstream', async () => {
    expect(await postAsAcme(stack, { documentId: 'not-listed' })).toEqual({
      status: 400,
      data: undefined,
      code: 'PERSISTED_QUERY_NOT_IN_LIST',
    });
    expect(await untrustedCount(stack, 'unknown-id', 'refused')).toBe(1);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('TRUSTED_DOCUMENTS_MODE=enforce (the default), and reloading the manifest', () => {
  const manifest = manifestOf({ 'mine-v1': LISTED });
  const stack = useStack({ env: { TRUSTED_DOCUMENTS: manifest } });

  test('an unlisted operation is refused over both transports, counted, and reaches nothing upstream', async () => {
    expect(await postAsAcme(stack, { query: UNLISTED })).toMatchObject({
      status: 400,
      code: 'PERSISTED_QUERY_NOT_IN_LIST',
    });
    const received = stack.connect(await acme()).subscribe(UNLISTED_SUBSCRIPTION);
    await received.done;
    expect(received.data).toEqual([]);
    expect((received.errors as { extensions?: { code?: string } }[][])[0]?.[0]?.extensions?.code).toBe(
      'PERSISTED_QUERY_NOT_IN_LIST',
    );
    expect(await untrustedCount(stack, 'untrusted-query', 'refused')).toBe(2);
    expect(await untrustedCount(stack, 'untrusted-query', 'logged')).toBe(0);
    expect(loggedUntrusted(stack)).toEqual([]);
    // Only the live connection's environment check reached the upstream.
    expect((await stack.upstreamCalls()).byRoute).not.toHaveProperty(['GET /v3/customers/{customerId}']);
  });

  test('a reload picks up a new document at once; a broken manifest keeps the old one and says why', async () => {
    expect((await postAsAcme(stack, { query: UNLISTED })).status).toBe(400);
    await writeFile(manifest, JSON.stringify({ 'mine-v1': LISTED, 'unlisted-v1': UNLISTED }));
    expect(await stack.app.reloadTrustedDocuments()).toEqual({ ok: true, size: 2 });
    expect(await postAsAcme(stack, { query: UNLISTED })).toMatchObject({ status: 200, code: undefined });
    expect((await postAsAcme(stack, { documentId: 'unlisted-v1' })).status).toBe(200);

    // Half written, as an editor might leave it: not JSON.
    await writeFile(manifest, '{ "mine-v1": ');
    const failed = await stack.app.reloadTrustedDocuments();
    expect(failed).toMatchObject({ ok: false, problem: expect.stringContaining('is not JSON') as unknown });
    const reported = stack
      .logs()
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line['msg'] === 'trusted documents not reloaded: the previous manifest stays in use');
    expect(reported).toHaveLength(1);
    expect(reported[0]).toMatchObject({ level: 'error', operations: 2 });
    // The old list still holds: both listed ones run, anything else is still refused.
    expect((await postAsAcme(stack, { documentId: 'unlisted-v1' })).status).toBe(200);
    expect((await postAsAcme(stack, { query: LISTED })).status).toBe(200);
    expect(await postAsAcme(stack, { query: UNLISTED_SUBSCRIPTION })).toMatchObject({
      status: 400,
      code: 'PERSISTED_QUERY_NOT_IN_LIST',
    });

    // An empty list is refused as at start: a reload never leaves the facade refusing everything.
    await writeFile(manifest, '{}');
    expect(await stack.app.reloadTrustedDocuments()).toMatchObject({ ok: false });
    expect((await postAsAcme(stack, { query: LISTED })).status).toBe(200);
  });
});

describe('SIGHUP reloads the manifest of a running process', () => {
  const processes = useNpmStart();

  test('a broken manifest is logged and kept out; a good one is read; the process keeps serving', async () => {
    const manifest = manifestOf({ 'mine-v1': LISTED });
    const started = await processes.start({ TRUSTED_DOCUMENTS: manifest });
    await writeFile(manifest, 'not json');
    started.child.kill('SIGHUP');
    await waitFor(
      () => started.logged('trusted documents not reloaded: the previous manifest stays in use').length === 1,
      'the failed reload to be logged',
    );
    await writeFile(manifest, JSON.stringify({ 'mine-v1': LISTED, 'unlisted-v1': UNLISTED }));
    started.child.kill('SIGHUP');
    await waitFor(() => started.logged('trusted documents reloaded').length === 1, 'the reload to be logged');
    expect(started.logged('trusted documents reloaded')[0]).toMatchObject({ operations: 2 });
    expect(started.child.exitCode).toBeNull();
    const answer = await fetch(started.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${started.token}` },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(answer.status).toBe(200);
  });
});
