/**
 * router.yaml against Apollo Router's own configuration schema: the JSON schema Router v2.13.1
 * generates for its configuration (the snapshot
 * `apollo-router/src/configuration/snapshots/apollo_router__configuration__tests__schema_generation.snap`
 * of github.com/apollographql/router at tag v2.13.1, commit d104ef3, its four header lines removed;
 * Elastic License 2.0, kept unchanged in test/federation/fixtures/ to check this file against).
 * The Router itself cannot be downloaded on this project's machines; its schema is what it refuses
 * a configuration by (`deny_unknown_fields` everywhere), so a key it would not read fails here.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = resolve(import.meta.dirname, '../..');
const SCHEMA = resolve(import.meta.dirname, 'fixtures/router-2.13.1-configuration.schema.json');

/** Every `${env.NAME:-default}` as its default, every `${env.NAME}` as `value`: what the Router reads. */
function expandDefaults(value: unknown, given: string): unknown {
  if (Array.isArray(value)) return value.map((item) => expandDefaults(item, given));
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, expandDefaults(item, given)]));
  if (typeof value !== 'string') return value;
  return value.replace(
    /\$\{env\.[A-Z0-9_]+(?::-([^}]*))?\}/g,
    (_match, fallback?: string) => fallback ?? given,
  );
}

function validator(): ValidateFunction {
  // The schema is draft-07 and uses the Router's own formats, which it checks itself.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  return ajv.compile(JSON.parse(readFileSync(SCHEMA, 'utf8')) as object);
}

describe("router.yaml against the Router's configuration schema", () => {
  const validate = validator();
  const router = expandDefaults(parse(readFileSync(resolve(ROOT, 'router.yaml'), 'utf8')), 'set') as Record<
    string,
    Record<string, unknown>
  >;

  it('is valid as written, its response cache and Rhai script included', () => {
    expect(validate(router) ? [] : validate.errors).toEqual([]);
    expect(router).toHaveProperty('response_cache.subgraph.subgraphs.platform.private_id', 'facade_caller');
  });

  it('refuses what the Router would: a misspelled key of the response cache, an unknown top-level key', () => {
    const misspelled = structuredClone(router);
    (misspelled.response_cache!.invalidation as Record<string, unknown>).shared_kee = 'x';
    expect(validate(misspelled)).toBe(false);
    expect(validate.errors?.map((error) => error.instancePath)).toContain('/response_cache/invalidation');
    expect(validate({ ...router, response_caches: {} })).toBe(false);
  });
});
