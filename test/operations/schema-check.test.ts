/**
 * `npm run schema:check`: the SDL against schema/released.graphql, judged by the operations clients
 * ship (the manifests of schema/client-manifests.json: the web example's persisted documents and
 * the Kubernetes base's copy). Run as the command runs, on a copy of schema/graph/ changed on
 * purpose: a breaking change to what an operation reads fails it and names the operations; the
 * same kind of change to what no operation reads passes, reported; an acknowledgement passes a
 * change in use. The enum cases add a manifest of their own (the web example reads no enum).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const WEB_MANIFEST = join(ROOT, 'examples/web/src/gql/persisted-documents.json');
const temporary: string[] = [];
afterEach(() => {
  for (const directory of temporary.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function temporaryDirectory(): string {
  const directory = mkdtempSync(join(tmpdir(), 'schema-check-'));
  temporary.push(directory);
  return directory;
}

/** A copy of schema/graph/ with `edit` applied to one file, and an acknowledgement list. */
function changedSchema(file: string, edit: (sdl: string) => string, acknowledged: unknown[] = []) {
  const directory = temporaryDirectory();
  const schemaDir = join(directory, 'graph');
  cpSync(join(ROOT, 'schema/graph'), schemaDir, { recursive: true });
  const path = join(schemaDir, file);
  const before = readFileSync(path, 'utf8');
  const after = edit(before);
  expect(after).not.toBe(before);
  writeFileSync(path, after);
  const acknowledgedPath = join(directory, 'acknowledged.json');
  writeFileSync(acknowledgedPath, JSON.stringify(acknowledged));
  return ['--schema-dir', schemaDir, '--acknowledged', acknowledgedPath];
}

/** A manifest configuration: the web example's manifest and an Apollo-format one of `operations`. */
function manifestsWith(operations: Record<string, string>): string[] {
  const directory = temporaryDirectory();
  writeFileSync(
    join(directory, 'partners.json'),
    JSON.stringify({
      format: 'apollo-persisted-query-manifest',
      version: 1,
      operations: Object.entries(operations).map(([name, body], index) => ({
        id: `op-${index}`,
        name,
        type: 'query',
        body,
      })),
    }),
  );
  const config = join(directory, 'client-manifests.json');
  writeFileSync(
    config,
    JSON.stringify({
      manifests: [
        { name: 'web example', path: WEB_MANIFEST },
        { name: 'partner app', path: 'partners.json' },
      ],
    }),
  );
  return ['--manifests', config];
}

function runCheck(args: string[]) {
  const result = spawnSync(process.execPath, ['scripts/check-schema.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Removes `name: <type>` and the one-line description above it from an SDL file. */
const removeField = (name: string, type: string) => (sdl: string) =>
  sdl.replace(new RegExp(`^\\s+"[^"\\n]*"\\n\\s+${name}: ${type.replace(/[![\]]/g, '\\$&')}\\n`, 'm'), '\n');
const removeEnumValue = (value: string) => (sdl: string) =>
  sdl.replace(new RegExp(`^\\s+"[^"\\n]*"\\n\\s+${value}\\n`, 'm'), '\n');

const WEB_ACCOUNT_READERS =
  'web example: AccountChanges, Dashboard, TopUp; kubernetes base: AccountChanges, Dashboard, TopUp';
const PARTY_ROLES = `query PartyRoles($customerId: ID!) { customer(id: $customerId) { relatedParties(first: 5) { nodes { id roles } } } }`;

describe('npm run schema:check', () => {
  it('passes on the schema as it is, reading both configured manifests', () => {
    const { status, stdout } = runCheck([]);
    expect(status).toBe(0);
    expect(stdout).toContain(
      'web example (examples/web/src/gql/persisted-documents.json) 5, kubernetes base (deploy/kubernetes/trusted-documents.json) 5',
    );
    expect(stdout).toContain('No unacknowledged breaking change for the operations clients ship.');
  });

  it('fails on a removed field the web example selects, naming its operations', () => {
    const { status, stdout, stderr } = runCheck(
      changedSchema('accounts.graphql', removeField('label', 'String!')),
    );
    expect(status).toBe(1);
    expect(stderr).toContain(
      `Breaking changes for operations clients ship, since the released schema (schema/released.graphql):\n` +
        `  [FIELD_REMOVED] Account.label: Field 'label' was removed from object type 'Account'\n` +
        `      used by ${WEB_ACCOUNT_READERS}\n`,
    );
    // The operations no longer validate: graphql-js's message for each, explained by the change.
    expect(stdout).toContain('  web example: Dashboard: Cannot query field "label" on type "Account".');
    expect(stderr).not.toContain('no breaking change explains');
  });

  it('passes on the same removal of a field no manifest selects, reporting it as unused', () => {
    const { status, stdout, stderr } = runCheck(
      changedSchema('accounts.graphql', removeField('status', 'String!')),
    );
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(stdout).toContain(
      'Breaking changes no operation of the client manifests uses (reported; no acknowledgement needed):\n' +
        "  [FIELD_REMOVED] Account.status: Field 'status' was removed from object type 'Account'\n",
    );
    expect(stdout).not.toMatch(/Account\.status[^\n]*\n\s+used by/);
  });

  it('passes when the removal of a used field is acknowledged, still naming the operations', () => {
    const { status, stdout, stderr } = runCheck(
      changedSchema('accounts.graphql', removeField('label', 'String!'), [
        { type: 'FIELD_REMOVED', path: 'Account.label', reason: 'clients moved to Account.name' },
      ]),
    );
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(stdout).toContain(
      'Acknowledged breaking changes:\n' +
        `  [FIELD_REMOVED] Account.label: Field 'label' was removed from object type 'Account'\n` +
        `      used by ${WEB_ACCOUNT_READERS}\n`,
    );
    expect(stdout).toContain('Client operations that no longer validate, broken by a change above:');
  });

  it('fails on a change to an argument an operation passes, and passes on one no operation passes', () => {
    // MyCustomers sends `customers(first: 10)`; no operation sends `after` to `customers`.
    const retypeFirst = (sdl: string) =>
      sdl.replace(
        /^(\s+)first: Int\n(\s+"The `endCursor`[^\n]*\n\s+after: String\n\s+"Only customers)/m,
        '$1first: String\n$2',
      );
    const used = runCheck(changedSchema('customers.graphql', retypeFirst));
    expect(used.status).toBe(1);
    expect(used.stderr).toContain(
      `  [FIELD_ARGUMENT_TYPE_CHANGED] Query.customers.first: Type for argument 'first' on field 'Query.customers' changed from 'Int' to 'String'\n` +
        '      used by web example: MyCustomers; kubernetes base: MyCustomers\n',
    );

    const dropAfter = (sdl: string) =>
      sdl.replace(/^\s+"The `endCursor`[^\n]*\n\s+after: String\n(\s+"Only customers)/m, '\n$1');
    const unused = runCheck(changedSchema('customers.graphql', dropAfter));
    expect(unused.stderr).toBe('');
    expect(unused.status).toBe(0);
    expect(unused.stdout).toMatch(
      /no acknowledgement needed\):\n {2}\[FIELD_ARGUMENT_REMOVED\] Query\.customers\.after: [^\n]*\n(?! {6}used by)/,
    );
  });

  it('fails on an added required argument to a field an operation selects, naming it', () => {
    const requireSince = (sdl: string) =>
      sdl.replace(
        /^(\s+)updatedSince: DateTime\n(\s+\): CustomerConnection!)/m,
        '$1updatedSince: DateTime\n$1"A new required argument."\n$1region: String!\n$2',
      );
    const { status, stderr } = runCheck(changedSchema('customers.graphql', requireSince));
    expect(status).toBe(1);
    expect(stderr).toContain(
      '  [FIELD_ARGUMENT_ADDED] Query.customers.region: ' +
        "Argument 'region: String!' added to field 'Query.customers'\n" +
        '      used by web example: MyCustomers; kubernetes base: MyCustomers\n',
    );
  });

  it('fails when an argument no operation passes becomes required, naming the operations selecting its field', () => {
    // MyCustomers selects `customers` without `updatedSince`: once required, it no longer validates.
    const requireUpdatedSince = (sdl: string) =>
      sdl.replace(
        /^(\s+)updatedSince: DateTime\n(\s+\): CustomerConnection!)/m,
        '$1updatedSince: DateTime!\n$2',
      );
    const { status, stdout, stderr } = runCheck(changedSchema('customers.graphql', requireUpdatedSince));
    expect(status).toBe(1);
    expect(stderr).toContain(
      "  [FIELD_ARGUMENT_TYPE_CHANGED] Query.customers.updatedSince: Type for argument 'updatedSince' on field 'Query.customers' changed from 'DateTime' to 'DateTime!'\n" +
        '      used by web example: MyCustomers; kubernetes base: MyCustomers\n',
    );
    expect(stdout).toContain(
      '  web example: MyCustomers: Field "customers" argument "updatedSince" of type "DateTime!" is required, but it was not provided.',
    );
  });

  it('fails on an enum value removed from an enum an operation reads, and passes on one none reads', () => {
    const manifests = manifestsWith({ PartyRoles: PARTY_ROLES });
    const used = runCheck([
      ...changedSchema('related-parties.graphql', removeEnumValue('OFFICER')),
      ...manifests,
    ]);
    expect(used.status).toBe(1);
    expect(used.stderr).toContain(
      "  [ENUM_VALUE_REMOVED] RelatedPartyRole.OFFICER: Enum value 'OFFICER' was removed from enum 'RelatedPartyRole'\n" +
        '      used by partner app: PartyRoles\n',
    );
    // The operation still validates (it reads the enum, does not name the value): the usage index,
    // not validation, catches it.
    expect(used.stdout).not.toContain('no longer validate');

    const unused = runCheck([...changedSchema('base.graphql', removeEnumValue('NETWORK')), ...manifests]);
    expect(unused.stderr).toBe('');
    expect(unused.status).toBe(0);
    expect(unused.stdout).toContain(
      "no acknowledgement needed):\n  [ENUM_VALUE_REMOVED] StatusReasonActor.NETWORK: Enum value 'NETWORK' was removed from enum 'StatusReasonActor'\n",
    );
  });

  it('fails on an operation that does not validate even with the schema unchanged, naming it', () => {
    const { status, stderr } = runCheck(
      manifestsWith({ Typo: 'query Typo { customers(first: 1) { nodes { displayNmae } } }' }),
    );
    expect(status).toBe(1);
    expect(stderr).toContain(
      'Client operations that do not validate against the schema, and no breaking change explains:\n' +
        '  partner app: Typo: Cannot query field "displayNmae" on type "Customer". Did you mean "displayName"?\n',
    );
  });

  it('refuses a configuration naming a manifest that cannot be read, with exit code 2', () => {
    const directory = temporaryDirectory();
    const config = join(directory, 'client-manifests.json');
    writeFileSync(config, JSON.stringify({ manifests: [{ name: 'gone', path: 'missing.json' }] }));
    const { status, stderr } = runCheck(['--manifests', config]);
    expect(status).toBe(2);
    expect(stderr).toContain('The client manifests cannot be read: Trusted documents manifest');
    expect(stderr).toContain('cannot be read: ENOENT');
  });

  it('counts every breaking change as in use when no manifest is configured', () => {
    const directory = temporaryDirectory();
    const config = join(directory, 'client-manifests.json');
    writeFileSync(config, JSON.stringify({ manifests: [] }));
    const { status, stdout, stderr } = runCheck([
      ...changedSchema('accounts.graphql', removeField('status', 'String!')),
      '--manifests',
      config,
    ]);
    expect(status).toBe(1);
    expect(stdout).toContain('every breaking change counts as in use');
    expect(stderr).toContain(
      "  [FIELD_REMOVED] Account.status: Field 'status' was removed from object type 'Account'\n" +
        '      used by: not judged from the manifests, so counted as in use',
    );
  });

  it('passes on an added field, listing it', () => {
    const { status, stdout } = runCheck(
      changedSchema('customers.graphql', (sdl) =>
        sdl.replace(/^type Customer(.*)\{\n/m, 'type Customer$1{\n  "A new field."\n  nickname: String\n'),
      ),
    );
    expect(status).toBe(0);
    expect(stdout).toContain('[FIELD_ADDED] Customer.nickname');
  });
});
