/**
 * `npm run schema:check`: the SDL against schema/released.graphql. Run as the command runs, on a
 * copy of schema/graph/ changed on purpose: a removed field fails it, the same removal acknowledged
 * passes, an added field passes.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const temporary: string[] = [];
afterEach(() => {
  for (const directory of temporary.splice(0)) rmSync(directory, { recursive: true, force: true });
});

/** A copy of schema/graph/ with `edit` applied to one file, and an acknowledgement list. */
function changedSchema(file: string, edit: (sdl: string) => string, acknowledged: unknown[] = []) {
  const directory = mkdtempSync(join(tmpdir(), 'schema-check-'));
  temporary.push(directory);
  const schemaDir = join(directory, 'graph');
  cpSync(join(ROOT, 'schema/graph'), schemaDir, { recursive: true });
  const path = join(schemaDir, file);
  const before = readFileSync(path, 'utf8');
  const after = edit(before);
  expect(after).not.toBe(before);
  writeFileSync(path, after);
  const acknowledgedPath = join(directory, 'acknowledged.json');
  writeFileSync(acknowledgedPath, JSON.stringify(acknowledged));
  return { schemaDir, acknowledgedPath };
}

function runCheck(args: string[]) {
  const result = spawnSync(process.execPath, ['scripts/check-schema.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const removeExternalId = (sdl: string) => sdl.replace(/^\s+"[^"\n]*"\n\s+externalId: String!\n/m, '\n');

describe('npm run schema:check', () => {
  it('passes on the schema as it is', () => {
    const { status, stdout } = runCheck([]);
    expect(status).toBe(0);
    expect(stdout).toContain('No unacknowledged breaking change');
  });

  it('fails on a removed field, naming the change', () => {
    const { schemaDir, acknowledgedPath } = changedSchema('customers.graphql', removeExternalId);
    const { status, stderr } = runCheck(['--schema-dir', schemaDir, '--acknowledged', acknowledgedPath]);
    expect(status).toBe(1);
    expect(stderr).toContain('[FIELD_REMOVED] Customer.externalId');
  });

  it('passes when that removal is acknowledged', () => {
    const { schemaDir, acknowledgedPath } = changedSchema('customers.graphql', removeExternalId, [
      { type: 'FIELD_REMOVED', path: 'Customer.externalId', reason: 'replaced by Customer.name' },
    ]);
    const { status, stdout } = runCheck(['--schema-dir', schemaDir, '--acknowledged', acknowledgedPath]);
    expect(status).toBe(0);
    expect(stdout).toContain('Acknowledged breaking changes:\n  [FIELD_REMOVED] Customer.externalId');
  });

  it('passes on an added field, listing it', () => {
    const { schemaDir, acknowledgedPath } = changedSchema('customers.graphql', (sdl) =>
      sdl.replace(/^type Customer(.*)\{\n/m, 'type Customer$1{\n  "A new field."\n  nickname: String\n'),
    );
    const { status, stdout } = runCheck(['--schema-dir', schemaDir, '--acknowledged', acknowledgedPath]);
    expect(status).toBe(0);
    expect(stdout).toContain('[FIELD_ADDED] Customer.nickname');
  });
});
