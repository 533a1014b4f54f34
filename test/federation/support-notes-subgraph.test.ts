import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createSupportNotesServer } from '../../examples/support-notes/server.ts';
import { useProcesses, waitUntilReady } from '../support/processes.ts';

type GraphQLResponse = { data?: Record<string, unknown> | null; errors?: { message: string }[] };

describe('the support-notes example subgraph over HTTP', () => {
  const server = createSupportNotesServer();
  let url = '';

  beforeAll(async () => {
    ({ url } = await server.listen(0));
  });
  afterAll(async () => {
    await server.close();
  });

  async function post(source: string, variables?: Record<string, unknown>) {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: source, variables }),
    });
    return { status: response.status, body: (await response.json()) as GraphQLResponse };
  }

  async function query(source: string, variables?: Record<string, unknown>): Promise<GraphQLResponse> {
    const { status, body } = await post(source, variables);
    expect(status).toBe(200);
    return body;
  }

  test('lists a customer’s notes newest first, pointing at accounts by their key', async () => {
    const result = await query(`{
      supportNotes(customerId: "cus_acme") { id status createdAt account { __typename customerId id } }
    }`);
    expect(result).toEqual({
      data: {
        supportNotes: [
          {
            id: 'note_003',
            status: 'OPEN',
            createdAt: '2025-01-09T10:30:00Z',
            account: { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_polygon' },
          },
          {
            id: 'note_002',
            status: 'OPEN',
            createdAt: '2025-01-08T14:02:00Z',
            account: { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
          },
          {
            id: 'note_001',
            status: 'RESOLVED',
            createdAt: '2025-01-06T09:15:00Z',
            account: { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
          },
          { id: 'note_004', status: 'RESOLVED', createdAt: '2025-01-03T16:45:00Z', account: null },
        ],
      },
    });
  });

  test('answers null for an unknown note id and rejects a bad status with a validation error', async () => {
    expect(await query('{ supportNote(id: "note_missing") { id } }')).toEqual({
      data: { supportNote: null },
    });
    const bad = await post('query ($s: SupportNoteStatus) { supportNotes(status: $s) { id } }', {
      s: 'CLOSED',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.data).toBeUndefined();
    expect(bad.body.errors?.[0]?.message).toMatch(/SupportNoteStatus/);
  });

  test('resolves Customer representations through _entities, in order, for known and unknown ids', async () => {
    const result = await query(
      `query ($representations: [_Any!]!) {
        _entities(representations: $representations) {
          ... on Customer { id openSupportNoteCount supportNotes(status: OPEN) { id } }
        }
      }`,
      {
        representations: [
          { __typename: 'Customer', id: 'cus_ada' },
          { __typename: 'Customer', id: 'cus_nobody' },
          { __typename: 'Customer', id: 'cus_acme' },
        ],
      },
    );
    expect(result).toEqual({
      data: {
        _entities: [
          { id: 'cus_ada', openSupportNoteCount: 1, supportNotes: [{ id: 'note_005' }] },
          { id: 'cus_nobody', openSupportNoteCount: 0, supportNotes: [] },
          { id: 'cus_acme', openSupportNoteCount: 2, supportNotes: [{ id: 'note_003' }, { id: 'note_002' }] },
        ],
      },
    });
  });

  test('publishes its SDL with the federation link and the facade keys it relies on', async () => {
    const result = await query('{ _service { sdl } }');
    const sdl = (result.data?._service as { sdl: string }).sdl;
    expect(sdl).toContain('@link(url: "https://specs.apollo.dev/federation/v2.14"');
    expect(sdl).toContain('type Customer @key(fields: "id")');
    expect(sdl).toContain('type Account @key(fields: "customerId id", resolvable: false)');
  });
});

describe('npm run example:subgraph', () => {
  const processes = useProcesses();

  function start(env: Record<string, string>): { child: ChildProcess; output: () => string } {
    const child = processes.spawn(process.execPath, ['examples/support-notes/main.ts'], {
      cwd: new URL('../..', import.meta.url),
      // As a user runs it: vitest's NODE_ENV=test would switch off Apollo Server's own signal handling.
      env: { ...process.env, NODE_ENV: 'production', HOST: '127.0.0.1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += String(chunk)));
    child.stderr!.on('data', (chunk) => (output += String(chunk)));
    return { child, output: () => output };
  }

  test('serves the subgraph on the port it is given and exits 0 on SIGTERM', async () => {
    const { child, output } = start({ PORT: '0' });
    const exited = once(child, 'exit');
    const ready = /ready at (http:\/\/\S+)/;
    await waitUntilReady(child, () => ready.test(output()), 'the subgraph to be ready', { output });
    const url = ready.exec(output())![1]!;
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ supportNotes(customerId: "cus_acme") { id } }' }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as GraphQLResponse).data?.supportNotes).toHaveLength(4);

    child.kill('SIGTERM');
    expect(await exited).toEqual([0, null]);
  });

  test('refuses a bad PORT with a clear message and exit code 1', async () => {
    const { child, output } = start({ PORT: 'eighty' });
    expect(await once(child, 'exit')).toEqual([1, null]);
    expect(output()).toContain('PORT must be an integer from 0 to 65535, got "eighty".');
  });
});
