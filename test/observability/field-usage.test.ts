/**
 * Field usage from real recorded traffic across two replicas sharing the run's Redis: what each
 * client's operations used (over HTTP, graphql-ws and SSE, queries, a mutation's variables, a
 * subscription), counted once per operation whichever replica ran it, served by `GET /usage` on
 * either replica's metrics port, and nothing of any value in it. Then `npm run schema:check --
 * --usage` against that traffic, read from the downloaded export and from Redis itself: a change
 * that breaks what a client sent fails and names the client and the operation; one nobody used
 * passes; and per contract, hiding a field from partners breaks the partner that read it.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { USAGE_FORMAT, type UsageReport, type UsedOperation } from '../../src/observability/usage-store.ts';
import { openSseStream } from '../support/harness/sse-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer, tokenFor } from '../support/tokens.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DASHBOARD =
  'query Dashboard { customer(id: "cus_acme") { id displayName accounts(first: 5) { nodes { id label } } } }';
const PARTNER_ACCOUNTS =
  'query PartnerAccounts { customer(id: "cus_acme") { accounts { nodes { id label } } } }';
const ADD_PARTY =
  'mutation AddParty($input: CreateRelatedPartyInput!) { createRelatedParty(input: $input) { relatedParty { id roles } } }';
const PARTY_INPUT = {
  customerId: 'cus_acme',
  partyType: 'person',
  roles: ['DIRECTOR'],
  title: 'Secretary Zelda',
  person: { firstName: 'Zelda', lastName: 'Quuxley', residenceCountry: 'US' },
  idempotencyKey: 'field-usage-secret-key',
};
const WATCH = 'subscription Watch { accountChanged(customerId: "cus_acme") { accountId } }';
const TAIL = 'subscription Tail { accountChanged(customerId: "cus_acme") { accountId occurredAt } }';
const WEB = { 'apollographql-client-name': 'web', 'apollographql-client-version': '1.4.0' };

const stack = useStack({ facades: 2, redis: true, env: { USAGE_FLUSH_SECONDS: '1' } });
/** The usage read back; empty until both replicas' counts arrived. */
let report: UsageReport = { format: USAGE_FORMAT, from: '', to: '', operations: [], dropped: 0 };
const temporary: string[] = [];

function find(operation: string, client: string): UsedOperation {
  const found = report.operations.find((used) => used.operation === operation && used.client === client);
  if (found === undefined) throw new Error(`no ${operation} of ${client} in ${JSON.stringify(report)}`);
  return found;
}

async function usageOf(metricsUrl: string, days = '1'): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${new URL(metricsUrl).origin}/usage?days=${days}`);
  return { status: response.status, body: await response.json() };
}

async function post(facade: number, query: string, headers: Record<string, string>, variables?: object) {
  const response = await fetch(stack.facades[facade]!.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { errors?: unknown };
  expect(body.errors).toBeUndefined();
}

beforeAll(async () => {
  const acme = { ...(await bearer('acme')), ...WEB };
  for (let i = 0; i < 3; i += 1) await post(0, DASHBOARD, acme);
  for (let i = 0; i < 2; i += 1) await post(1, DASHBOARD, acme);
  await post(1, ADD_PARTY, await bearer('webApp'), { input: PARTY_INPUT });
  await post(0, PARTNER_ACCOUNTS, {
    ...(await bearer('partner')),
    'apollographql-client-name': 'partner-portal',
  });
  const watching = stack.facades[1]!.connect({ Authorization: `Bearer ${await tokenFor('acme')}` }).subscribe(
    WATCH,
  );
  await stack.facades[1]!.subscriptionsStarted(1);
  watching.stop();
  // Over SSE, the client names itself in the stream request's headers.
  const tailing = await openSseStream(stack.facades[0]!.url, TAIL, {
    ...(await bearer('acme')),
    'apollographql-client-name': 'ops-cli',
    'apollographql-client-version': '2.0',
  });
  expect(tailing.status).toBe(200);
  await stack.facades[0]!.subscriptionsStarted(1);
  tailing.close();
  // Each replica hands its counts to Redis every second: both replicas' are read back together.
  await waitFor(
    () =>
      report.operations.find((used) => used.operation === 'Dashboard')?.count === 5 &&
      report.operations.length === 5,
    'both replicas’ usage in Redis',
    undefined,
    async () => {
      report = (await usageOf(stack.facades[0]!.metricsUrl)).body as UsageReport;
    },
  );
});

afterAll(() => {
  for (const directory of temporary.splice(0)) rmSync(directory, { recursive: true, force: true });
});

describe('what each client’s operations used, across two replicas', () => {
  test('a query run on both replicas is one operation, counted five times, with what it selected and passed', () => {
    const dashboard = find('Dashboard', 'test-acme');
    expect(dashboard).toMatchObject({
      contract: null,
      clientName: 'web',
      clientVersion: '1.4.0',
      type: 'query',
      count: 5,
      firstDay: report.to,
      lastDay: report.to,
    });
    expect(dashboard.coordinates).toEqual(
      expect.arrayContaining([
        'Query.customer',
        'Query.customer(id:)',
        'Customer',
        'Customer.displayName',
        'Customer.accounts(first:)',
        'AccountConnection.nodes',
        'Account.label',
      ]),
    );
    expect(dashboard.coordinates).not.toContain('Account.status');
  });

  test('a mutation’s variables give the input fields and enum values it sent, and no value', () => {
    const addParty = find('AddParty', 'test-web-app');
    expect(addParty.coordinates).toEqual(
      expect.arrayContaining([
        'Mutation.createRelatedParty(input:)',
        'CreateRelatedPartyInput.roles',
        'CreateRelatedPartyInput.person',
        'PersonInput.firstName',
        'RelatedPartyRole.DIRECTOR',
        'RelatedParty.roles',
      ]),
    );
    expect(addParty.coordinates).not.toContain('CreateRelatedPartyInput.entity');
    expect(addParty.coordinates).not.toContain('RelatedPartyRole.OFFICER');
    const text = JSON.stringify(report);
    for (const value of ['cus_acme', 'Zelda', 'Quuxley', 'field-usage-secret-key', 'acc_acme']) {
      expect(text).not.toContain(value);
    }
  });

  test('a partner’s operation names its contract; subscriptions over graphql-ws and SSE are recorded too', () => {
    expect(find('PartnerAccounts', 'test-partner')).toMatchObject({
      contract: 'partner',
      clientName: 'partner-portal',
    });
    expect(find('Watch', 'test-acme')).toMatchObject({ type: 'subscription', count: 1, clientName: null });
    const tail = find('Tail', 'test-acme');
    expect(tail).toMatchObject({
      type: 'subscription',
      count: 1,
      clientName: 'ops-cli',
      clientVersion: '2.0',
    });
    expect(tail.coordinates).toEqual(
      expect.arrayContaining(['Subscription.accountChanged(customerId:)', 'AccountChangedEvent.occurredAt']),
    );
  });

  test('either replica serves the same usage; a window outside 1 to USAGE_DAYS is refused', async () => {
    expect((await usageOf(stack.facades[1]!.metricsUrl)).body).toEqual(report);
    expect((await usageOf(stack.facades[0]!.metricsUrl, '0')).status).toBe(400);
    expect((await usageOf(stack.facades[0]!.metricsUrl, '15')).status).toBe(400);
    expect((await usageOf(stack.facades[0]!.metricsUrl, 'x')).status).toBe(400);
  });
});

/** A copy of schema/graph/ with `edit` applied to `file`, and a configuration listing no manifest. */
function changed(file: string, edit: (sdl: string) => string): string[] {
  const directory = mkdtempSync(join(tmpdir(), 'usage-check-'));
  temporary.push(directory);
  cpSync(join(ROOT, 'schema/graph'), join(directory, 'graph'), { recursive: true });
  const path = join(directory, 'graph', file);
  const before = readFileSync(path, 'utf8');
  writeFileSync(path, edit(before));
  expect(readFileSync(path, 'utf8')).not.toBe(before);
  writeFileSync(join(directory, 'manifests.json'), JSON.stringify({ manifests: [] }));
  writeFileSync(join(directory, 'usage.json'), JSON.stringify(report));
  return ['--schema-dir', join(directory, 'graph'), '--manifests', join(directory, 'manifests.json')];
}

function check(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, ['scripts/check-schema.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, REDIS_URL: '', REDIS_KEY_PREFIX: '', ...env },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const fromFile = (args: string[]) => [
  ...args,
  '--usage',
  '7',
  '--usage-file',
  join(args[1]!, '../usage.json'),
];
const removeLine = (pattern: RegExp) => (sdl: string) => sdl.replace(pattern, '\n');
/** Removes `field` (and its one-line description) from `CreateRelatedPartyInput`, not from the output type. */
const removeInputField = (field: string) => (sdl: string) =>
  sdl.replace(
    new RegExp(`(input CreateRelatedPartyInput \\{[\\s\\S]*?)\\n\\s+"[^"\\n]*"\\n\\s+${field}\\n`),
    '$1\n',
  );

describe('npm run schema:check -- --usage, against the recorded traffic', () => {
  test('a removed field a client sent fails, naming the client, its version and the operation', () => {
    const { status, stderr } = check(
      fromFile(changed('accounts.graphql', removeLine(/^\s+"[^"\n]*"\n\s+label: String!\n/m))),
    );
    expect(status).toBe(1);
    expect(stderr).toContain(
      "  [FIELD_REMOVED] Account.label: Field 'label' was removed from object type 'Account'\n" +
        '      used by test-acme web@1.4.0: Dashboard; test-partner partner-portal: PartnerAccounts\n',
    );
  });

  test('a removed field no client sent passes, reported as unused and listed as a candidate for removal', () => {
    const { status, stdout, stderr } = check(
      fromFile(changed('accounts.graphql', removeLine(/^\s+"[^"\n]*"\n\s+status: String!\n/m))),
    );
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(stdout).toContain(
      "  [FIELD_REMOVED] Account.status: Field 'status' was removed from object type 'Account'\n",
    );
    expect(stdout).toMatch(/candidates for removal; not judged\):\n(?:.*\n)* {2}Account: [^\n]*\bnetwork\b/);
  });

  test('an input field is judged by what was sent: one never sent passes, one sent fails', () => {
    const unsent = check(
      fromFile(changed('related-parties.graphql', removeInputField('hasControl: Boolean'))),
    );
    expect(unsent.stderr).toBe('');
    expect(unsent.status).toBe(0);
    const sent = check(fromFile(changed('related-parties.graphql', removeInputField('title: String'))));
    expect(sent.status).toBe(1);
    expect(sent.stderr).toContain('  [INPUT_FIELD_REMOVED] CreateRelatedPartyInput.title: ');
    expect(sent.stderr).toContain('      used by test-web-app: AddParty\n');
  });

  test('read from Redis itself (REDIS_URL, REDIS_KEY_PREFIX), the same failure', () => {
    const args = changed('accounts.graphql', removeLine(/^\s+"[^"\n]*"\n\s+label: String!\n/m));
    const { status, stdout, stderr } = check([...args, '--usage', '7'], {
      REDIS_URL: stack.config.events.redisUrl!,
      REDIS_KEY_PREFIX: stack.config.events.redisKeyPrefix,
    });
    expect(stdout).toMatch(/Recorded usage \(Redis, [-\d]+ to [-\d]+\): 5 operations of 3 clients/);
    expect(status).toBe(1);
    expect(stderr).toContain(
      'used by test-acme web@1.4.0: Dashboard; test-partner partner-portal: PartnerAccounts',
    );
  });

  test('per contract: hiding a field from partners breaks the partner that read it, not the whole schema', () => {
    const args = changed('accounts.graphql', (sdl) =>
      sdl.replace(/^(\s+)label: String!$/m, '$1label: String! @tag(name: "internal")'),
    );
    // The released schema as it would be once the contracts' tags are released.
    const released = join(args[1]!, '../released.graphql');
    expect(check(['--release', '--released', released]).status).toBe(0);
    const { status, stdout, stderr } = check([...fromFile(args), '--released', released]);
    expect(status).toBe(1);
    expect(stderr).toContain(
      'Contract partner: Breaking changes for operations clients ship, since the released schema (schema/released.graphql):\n' +
        "  [FIELD_REMOVED] Account.label: Field 'label' was removed from object type 'Account'\n" +
        '      used by test-partner partner-portal: PartnerAccounts\n',
    );
    expect(stderr).not.toContain('used by test-acme');
    expect(stdout).not.toContain(
      "[FIELD_REMOVED] Account.label: Field 'label' was removed from object type 'Account'\n      used by test-acme",
    );
  });

  test('usage with operations counted beyond its bounds judges nothing: exit code 2, whatever the change', () => {
    const args = changed('accounts.graphql', removeLine(/^\s+"[^"\n]*"\n\s+status: String!\n/m));
    const crowded = join(args[1]!, '../crowded.json');
    writeFileSync(crowded, JSON.stringify({ ...report, dropped: 3 }));
    const { status, stderr } = check([...args, '--usage', '7', '--usage-file', crowded]);
    expect(status).toBe(2);
    expect(stderr).toContain('3 operations were counted beyond USAGE_MAX_OPERATIONS');
  });

  test('an export that is no export is refused with exit code 2', () => {
    const args = changed('accounts.graphql', removeLine(/^\s+"[^"\n]*"\n\s+status: String!\n/m));
    const bogus = join(args[1]!, '../bogus.json');
    writeFileSync(bogus, JSON.stringify({ operations: [] }));
    const { status, stderr } = check([...args, '--usage', '7', '--usage-file', bogus]);
    expect(status).toBe(2);
    expect(stderr).toContain('is no export of GET /usage');
  });
});
