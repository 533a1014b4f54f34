/**
 * `.env.example` lists every variable of README's configuration table, and nothing else, so a
 * new variable cannot be documented in one place and forgotten in the other.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** The variable names of README's "Configuration" table, in order. */
function readmeVariables(): string[] {
  const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## Configuration$/m)[1]?.split(/^## /m)[0] ?? '';
  return [...section.matchAll(/^\| `([A-Z][A-Z0-9_]*)`/gm)].map((match) => match[1]!);
}

/** The variables `.env.example` sets or shows commented out. */
function exampleVariables(): { name: string; value: string; commented: boolean }[] {
  return readFileSync(resolve(ROOT, '.env.example'), 'utf8')
    .split('\n')
    .map((line) => /^(# )?([A-Z][A-Z0-9_]*)=(.*)$/.exec(line))
    .filter((match) => match !== null)
    .map((match) => ({ name: match[2]!, value: match[3]!, commented: match[1] !== undefined }));
}

describe('.env.example', () => {
  it("names exactly the variables of README's configuration table", () => {
    const documented = readmeVariables();
    expect(documented.length).toBeGreaterThan(20);
    expect(
      exampleVariables()
        .map(({ name }) => name)
        .sort(),
    ).toEqual([...documented].sort());
  });

  it('is a valid configuration once the upstream key is filled in', () => {
    const env: Record<string, string> = {};
    for (const { name, value, commented } of exampleVariables())
      if (!commented && value !== '') env[name] = value;
    expect(() => loadConfig({ ...env, UPSTREAM_API_KEY: 'sk_example' })).not.toThrow();
  });
});
