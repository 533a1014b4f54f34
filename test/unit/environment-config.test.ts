/**
 * The configuration of sandbox and live in one deployment: a key per environment (each also from a
 * file), never beside `UPSTREAM_API_KEY`, and only with callers whose tokens can name their
 * environment.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { boundEnvironment, environmentOfClaim } from '../../src/upstream/environment-keys.ts';

const BASE = {
  UPSTREAM_BASE_URL: 'https://api.example.test',
  AUTH_ISSUER: 'https://id.example.test',
  AUTH_AUDIENCE: 'platform-graphql-facade',
};

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('a key per environment', () => {
  test('both keys: one per environment, from a variable or a file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'config-env-key-'));
    const file = join(dir, 'live-key');
    writeFileSync(file, 'sk_live_from_file\n');
    const config = loadConfig({
      ...BASE,
      UPSTREAM_API_KEY_SANDBOX: 'sk_sandbox_1',
      UPSTREAM_API_KEY_LIVE_FILE: file,
    });
    expect(config.upstream.environmentKeys).toEqual({
      sandbox: { apiKey: 'sk_sandbox_1' },
      live: { apiKey: 'sk_live_from_file', apiKeyFile: file },
    });
  });

  test('UPSTREAM_API_KEY alone keeps one key and no environments', () => {
    expect(
      loadConfig({ ...BASE, UPSTREAM_API_KEY: 'sk_sandbox_1' }).upstream.environmentKeys,
    ).toBeUndefined();
  });

  test('UPSTREAM_API_KEY beside a key per environment is refused, the values never shown', () => {
    const problems = problemsOf({ ...BASE, UPSTREAM_API_KEY: 'sk_one', UPSTREAM_API_KEY_LIVE: 'sk_live_2' });
    expect(problems).toEqual([
      'UPSTREAM_API_KEY: and UPSTREAM_API_KEY_LIVE are both set; set either one key or a key per environment',
    ]);
    expect(problems.join('\n')).not.toContain('sk_');
  });

  test('an open facade, or callers’ own keys, cannot be bound to an environment', () => {
    const both = { ...BASE, UPSTREAM_API_KEY_SANDBOX: 'sk_s', UPSTREAM_API_KEY_LIVE: 'sk_l' };
    expect(problemsOf({ ...both, AUTH_MODE: 'none' })[0]).toMatch(/^AUTH_MODE: none cannot be used/);
    expect(problemsOf({ ...both, AUTH_ALLOW_CALLER_API_KEY: 'true' })[0]).toMatch(
      /^AUTH_ALLOW_CALLER_API_KEY: cannot be used/,
    );
  });

  test('a bad key in one environment is reported under its own variable', () => {
    expect(
      problemsOf({ ...BASE, UPSTREAM_API_KEY_SANDBOX: 'has space', UPSTREAM_API_KEY_LIVE: 'sk_l' }),
    ).toEqual([
      'UPSTREAM_API_KEY_SANDBOX: must contain only visible ASCII characters (no spaces or line breaks)',
    ]);
  });

  test('per-environment webhook secrets are read, and a malformed one is reported by name', () => {
    expect(problemsOf({ ...BASE, UPSTREAM_API_KEY: 'k', WEBHOOK_SECRETS_LIVE: 'not-a-secret' })).toEqual([
      'WEBHOOK_SECRETS_LIVE: 1 of 1 entries are not "whsec_" followed by base64',
    ]);
  });
});

describe('the environment a caller is bound to', () => {
  test('the claim names sandbox or live exactly; anything else names none', () => {
    expect(['sandbox', 'live', 'Live', ' live', 1, null, ['live']].map(environmentOfClaim)).toEqual([
      'sandbox',
      'live',
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  test('a configured claimed environment binds; an unconfigured one or none (with both configured) binds nothing', () => {
    expect(boundEnvironment('live', ['sandbox', 'live'])).toBe('live');
    expect(boundEnvironment(undefined, ['sandbox', 'live'])).toBeUndefined();
    expect(boundEnvironment('live', ['sandbox'])).toBeUndefined();
    expect(boundEnvironment(undefined, ['sandbox'])).toBe('sandbox');
  });
});
