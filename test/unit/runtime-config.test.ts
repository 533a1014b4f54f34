import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { CONFIG_DEFAULTS, ConfigError, loadConfig } from '../../src/config.ts';
import { MAX_KEY_FILE_BYTES } from '../../src/upstream/key-source.ts';

const REQUIRED = {
  UPSTREAM_BASE_URL: 'https://api.platform.test',
  UPSTREAM_API_KEY: 'sk_live_abc123',
  AUTH_ISSUER: 'https://id.platform.test',
  AUTH_AUDIENCE: 'platform-graphql-facade',
};

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('loadConfig accepted the environment');
}

describe('loadConfig', () => {
  test('fills every default when only the upstream is given', () => {
    const config = loadConfig(REQUIRED);

    expect(config).toMatchObject({
      port: 4000,
      host: CONFIG_DEFAULTS.HOST,
      nodeEnv: 'production',
      logLevel: 'info',
      explorer: 'sandbox',
      landingPage: true,
      introspection: 'authenticated',
      queryLimits: { maxDepth: 6, maxAliases: 15, maxDirectives: 50, maxTokens: 1_000, maxCost: 5_000 },
      operationTimeoutMs: 10_000,
      shutdownDrainMs: 10_000,
      auth: { mode: 'oidc', allowCallerApiKey: false, oidc: { issuer: 'https://id.platform.test' } },
    });
    expect(config.events.webSocket).toEqual({
      maxPayloadBytes: 65_536,
      maxSubscriptionsPerConnection: 50,
      connectionInitTimeoutMs: 3_000,
      keepAliveMs: 12_000,
    });
    expect(config.upstream).toEqual({
      baseUrl: 'https://api.platform.test',
      apiKey: 'sk_live_abc123',
      connectTimeoutMs: 5_000,
      headersTimeoutMs: 15_000,
      bodyTimeoutMs: 15_000,
      connections: 64,
      maxCallsPerOperation: 100,
      retry: { maxAttempts: 3, budget: 10, baseDelayMs: 100, maxDelayMs: 2_000 },
      problemDocsUrl: 'https://docs.platform.test/v3',
      cache: {
        enabled: true,
        maxAgeSeconds: 30,
        maxBytes: 64 * 1024 * 1024,
        answersMaxBytes: 16 * 1024 * 1024,
      },
    });
  });

  test('reads every variable', () => {
    const config = loadConfig({
      ...REQUIRED,
      UPSTREAM_BASE_URL: 'http://127.0.0.1:4010/platform/',
      PORT: '8080',
      HOST: '0.0.0.0',
      NODE_ENV: 'development',
      LOG_LEVEL: 'debug',
      LANDING_PAGE: 'false',
      INTROSPECTION: 'off',
      QUERY_MAX_DEPTH: '8',
      QUERY_MAX_ALIASES: '3',
      QUERY_MAX_DIRECTIVES: '4',
      QUERY_MAX_TOKENS: '2000',
      QUERY_MAX_COST: '500',
      OPERATION_TIMEOUT_MS: '2500',
      SHUTDOWN_DRAIN_MS: '0',
      GRAPHQL_WS_MAX_PAYLOAD_BYTES: '4096',
      GRAPHQL_WS_MAX_SUBSCRIPTIONS: '2',
      GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS: '500',
      GRAPHQL_WS_KEEP_ALIVE_MS: '5000',
      UPSTREAM_CONNECT_TIMEOUT_MS: '100',
      UPSTREAM_HEADERS_TIMEOUT_MS: '200',
      UPSTREAM_BODY_TIMEOUT_MS: '300',
      UPSTREAM_CONNECTIONS: '4',
      UPSTREAM_RETRY_MAX_ATTEMPTS: '1',
      UPSTREAM_RETRY_BUDGET: '0',
      UPSTREAM_RETRY_BASE_DELAY_MS: '10',
      UPSTREAM_RETRY_MAX_DELAY_MS: '40',
      CACHE_ENABLED: 'false',
      CACHE_MAX_AGE_SECONDS: '5',
      CACHE_MAX_BYTES: '1048576',
      CACHE_ANSWERS_MAX_BYTES: '0',
    });

    expect(config).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      nodeEnv: 'development',
      logLevel: 'debug',
      explorer: 'off',
      landingPage: false,
      introspection: 'off',
      queryLimits: { maxDepth: 8, maxAliases: 3, maxDirectives: 4, maxTokens: 2_000, maxCost: 500 },
      operationTimeoutMs: 2_500,
      shutdownDrainMs: 0,
      events: {
        webSocket: {
          maxPayloadBytes: 4096,
          maxSubscriptionsPerConnection: 2,
          connectionInitTimeoutMs: 500,
          keepAliveMs: 5000,
        },
      },
      upstream: {
        baseUrl: 'http://127.0.0.1:4010/platform',
        connectTimeoutMs: 100,
        headersTimeoutMs: 200,
        bodyTimeoutMs: 300,
        connections: 4,
        retry: { maxAttempts: 1, budget: 0, baseDelayMs: 10, maxDelayMs: 40 },
        cache: { enabled: false, maxAgeSeconds: 5, maxBytes: 1_048_576, answersMaxBytes: 0 },
      },
    });
  });

  test('treats a blank variable as unset', () => {
    expect(loadConfig({ ...REQUIRED, PORT: '  ', LOG_LEVEL: '' }).port).toBe(4000);
  });

  test.each([
    [{ EXPLORER: 'graphiql' }, 'graphiql', false],
    [{ EXPLORER: 'off' }, 'off', false],
    [{ EXPLORER: 'sandbox', LANDING_PAGE: 'true' }, 'sandbox', true],
    [{ LANDING_PAGE: 'true' }, 'sandbox', true],
    [{ LANDING_PAGE: 'false', EXPLORER: 'off' }, 'off', false],
  ])('EXPLORER and the older LANDING_PAGE: %o', (env, explorer, landingPage) => {
    expect(loadConfig({ ...REQUIRED, ...env })).toMatchObject({ explorer, landingPage });
  });

  test('EXPLORER outside its values, or contradicted by LANDING_PAGE=false, is refused', () => {
    expect(problemsOf({ ...REQUIRED, EXPLORER: 'playground' })).toEqual([
      'EXPLORER: must be one of sandbox, graphiql, off, got "playground"',
    ]);
    expect(problemsOf({ ...REQUIRED, EXPLORER: 'graphiql', LANDING_PAGE: 'false' })).toEqual([
      'LANDING_PAGE: false contradicts EXPLORER=graphiql; set EXPLORER alone (sandbox, graphiql or off)',
    ]);
  });

  test('reports every bad value at once, one line each', () => {
    const problems = problemsOf({
      PORT: '70000',
      NODE_ENV: 'staging',
      LOG_LEVEL: 'loud',
      LANDING_PAGE: 'maybe',
      UPSTREAM_BASE_URL: 'ftp://api.platform.test',
      UPSTREAM_CONNECT_TIMEOUT_MS: '-5',
      UPSTREAM_CONNECTIONS: 'many',
      UPSTREAM_RETRY_MAX_ATTEMPTS: '3.5',
      CACHE_ENABLED: 'sometimes',
      CACHE_MAX_AGE_SECONDS: '0',
      CACHE_MAX_BYTES: '1k',
      CACHE_ANSWERS_MAX_BYTES: '-1',
    });

    expect(problems).toEqual([
      'PORT: must be an integer from 0 to 65535, got "70000"',
      'NODE_ENV: must be one of development, production, test, got "staging"',
      'LOG_LEVEL: must be one of debug, info, warn, error, silent, got "loud"',
      'LANDING_PAGE: must be true or false, got "maybe"',
      'UPSTREAM_BASE_URL: must use http or https, got "ftp:"',
      'UPSTREAM_API_KEY: is required',
      'UPSTREAM_CONNECT_TIMEOUT_MS: must be an integer from 1 to 600000, got "-5"',
      'UPSTREAM_CONNECTIONS: must be an integer from 1 to 10000, got "many"',
      'UPSTREAM_RETRY_MAX_ATTEMPTS: must be an integer from 1 to 10, got "3.5"',
      'CACHE_ENABLED: must be true or false, got "sometimes"',
      'CACHE_MAX_AGE_SECONDS: must be an integer from 1 to 86400, got "0"',
      'CACHE_MAX_BYTES: must be an integer from 4096 to 1099511627776, got "1k"',
      'CACHE_ANSWERS_MAX_BYTES: must be an integer from 0 to 1099511627776, got "-1"',
      expect.stringMatching(/^AUTH_ISSUER: is required when AUTH_MODE is oidc/),
    ]);
  });

  test('the idle-time memory release: on by default, switched off or tuned, bad values refused', () => {
    expect(loadConfig(REQUIRED).memoryRelease).toEqual({
      enabled: true,
      idleMs: 15_000,
      minGrowthPercent: 20,
    });
    expect(
      loadConfig({
        ...REQUIRED,
        MEMORY_RELEASE_ENABLED: 'false',
        MEMORY_RELEASE_IDLE_MS: '60000',
        MEMORY_RELEASE_MIN_GROWTH_PERCENT: '0',
      }).memoryRelease,
    ).toEqual({ enabled: false, idleMs: 60_000, minGrowthPercent: 0 });
    expect(
      problemsOf({
        ...REQUIRED,
        MEMORY_RELEASE_ENABLED: 'sometimes',
        MEMORY_RELEASE_IDLE_MS: '0',
        MEMORY_RELEASE_MIN_GROWTH_PERCENT: '1.5',
      }),
    ).toEqual([
      'MEMORY_RELEASE_ENABLED: must be true or false, got "sometimes"',
      'MEMORY_RELEASE_IDLE_MS: must be an integer from 100 to 86400000, got "0"',
      'MEMORY_RELEASE_MIN_GROWTH_PERCENT: must be an integer from 0 to 10000, got "1.5"',
    ]);
  });

  test("Redis' readiness grace: 15 s by default, 0 for none, anything else refused", () => {
    expect(loadConfig(REQUIRED).readinessRedisGraceSeconds).toBe(15);
    expect(loadConfig({ ...REQUIRED, READINESS_REDIS_GRACE_SECONDS: '0' }).readinessRedisGraceSeconds).toBe(
      0,
    );
    for (const bad of ['-1', '1.5', '3601', 'soon']) {
      expect(problemsOf({ ...REQUIRED, READINESS_REDIS_GRACE_SECONDS: bad })).toEqual([
        `READINESS_REDIS_GRACE_SECONDS: must be an integer from 0 to 3600, got "${bad}"`,
      ]);
    }
  });

  test('readiness: the upstream probe waited for 1 s by default, 10 ms to 60 s accepted, anything else refused', () => {
    expect(loadConfig(REQUIRED).readiness).toEqual({ cacheMs: 2_000, upstreamDeadlineMs: 1_000 });
    expect(
      loadConfig({ ...REQUIRED, READINESS_UPSTREAM_DEADLINE_MS: '250' }).readiness.upstreamDeadlineMs,
    ).toBe(250);
    for (const bad of ['0', '9', '60001', '1.5', 'soon']) {
      expect(problemsOf({ ...REQUIRED, READINESS_UPSTREAM_DEADLINE_MS: bad })).toEqual([
        `READINESS_UPSTREAM_DEADLINE_MS: must be an integer from 10 to 60000, got "${bad}"`,
      ]);
    }
  });

  test('the error message lists every problem on its own line', () => {
    expect(() => loadConfig({})).toThrowError(
      'Invalid configuration:\n' +
        '  - UPSTREAM_BASE_URL: is required (the upstream API origin, e.g. https://api.example.com)\n' +
        '  - UPSTREAM_API_KEY: is required\n' +
        '  - AUTH_ISSUER: is required when AUTH_MODE is oidc',
    );
  });

  test('never echoes the API key, even when it is invalid', () => {
    const problems = problemsOf({ ...REQUIRED, UPSTREAM_API_KEY: 'sk_live_has a space' });

    expect(problems).toEqual([
      'UPSTREAM_API_KEY: must contain only visible ASCII characters (no spaces or line breaks)',
    ]);
    expect(problems.join('\n')).not.toContain('sk_live');
  });

  test('UPSTREAM_API_KEY_FILE: the key read from a file, one final line break allowed; never echoed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'config-key-'));
    const { UPSTREAM_API_KEY: _key, ...withoutKey } = REQUIRED;
    const file = join(dir, 'api-key');
    writeFileSync(file, 'sk_live_from_file\n');
    expect(loadConfig({ ...withoutKey, UPSTREAM_API_KEY_FILE: file }).upstream).toMatchObject({
      apiKey: 'sk_live_from_file',
      apiKeyFile: file,
    });
    // A blank UPSTREAM_API_KEY counts as unset.
    expect(
      loadConfig({ ...REQUIRED, UPSTREAM_API_KEY: '', UPSTREAM_API_KEY_FILE: file }).upstream.apiKey,
    ).toBe('sk_live_from_file');
    expect(problemsOf({ ...REQUIRED, UPSTREAM_API_KEY_FILE: file })).toEqual([
      'UPSTREAM_API_KEY_FILE: and UPSTREAM_API_KEY are both set; set one of them',
    ]);
    const empty = join(dir, 'empty');
    writeFileSync(empty, '\n');
    expect(problemsOf({ ...withoutKey, UPSTREAM_API_KEY_FILE: empty })).toEqual([
      `UPSTREAM_API_KEY_FILE: the file is empty: ${empty}`,
    ]);
    const spaced = join(dir, 'spaced');
    writeFileSync(spaced, 'sk_live_has a space\n');
    const problems = problemsOf({ ...withoutKey, UPSTREAM_API_KEY_FILE: spaced });
    expect(problems).toEqual([
      `UPSTREAM_API_KEY_FILE: the file must hold one key of visible ASCII characters (one final line break allowed): ${spaced}`,
    ]);
    expect(problems.join('\n')).not.toContain('sk_live_has');
    expect(problemsOf({ ...withoutKey, UPSTREAM_API_KEY_FILE: join(dir, 'missing') })).toEqual([
      `UPSTREAM_API_KEY_FILE: the file cannot be read (ENOENT): ${join(dir, 'missing')}`,
    ]);
    // A named pipe with no writer would block the start for good; a huge file be read whole.
    const pipe = join(dir, 'pipe');
    execFileSync('mkfifo', [pipe]);
    expect(problemsOf({ ...withoutKey, UPSTREAM_API_KEY_FILE: pipe })).toEqual([
      `UPSTREAM_API_KEY_FILE: the file is not a regular file: ${pipe}`,
    ]);
    const huge = join(dir, 'huge');
    writeFileSync(huge, 'k'.repeat(MAX_KEY_FILE_BYTES + 1));
    expect(problemsOf({ ...withoutKey, UPSTREAM_API_KEY_FILE: huge })).toEqual([
      `UPSTREAM_API_KEY_FILE: the file holds more than ${MAX_KEY_FILE_BYTES} bytes, more than a key: ${huge}`,
    ]);
  });

  test('never quotes the credentials of a base URL it cannot parse', () => {
    expect(problemsOf({ ...REQUIRED, UPSTREAM_BASE_URL: 'https://ops:s3cret@api platform' })).toEqual([
      'UPSTREAM_BASE_URL: must be an absolute http(s) URL, got "https://[redacted]@api platform"',
    ]);
  });

  test('refuses credentials, a query or a fragment in the base URL', () => {
    expect(problemsOf({ ...REQUIRED, UPSTREAM_BASE_URL: 'https://user:secret@api.platform.test' })).toEqual([
      'UPSTREAM_BASE_URL: must not contain credentials, a query or a fragment',
    ]);
    expect(problemsOf({ ...REQUIRED, UPSTREAM_BASE_URL: 'not a url' })).toEqual([
      'UPSTREAM_BASE_URL: must be an absolute http(s) URL, got "not a url"',
    ]);
  });

  test('refuses a maximum retry delay below the base delay', () => {
    expect(
      problemsOf({ ...REQUIRED, UPSTREAM_RETRY_BASE_DELAY_MS: '500', UPSTREAM_RETRY_MAX_DELAY_MS: '100' }),
    ).toEqual(['UPSTREAM_RETRY_MAX_DELAY_MS: must be at least UPSTREAM_RETRY_BASE_DELAY_MS (500)']);
  });
});
