import { describe, expect, test } from 'vitest';
import { EDGE_CONFIG_DEFAULTS, readEdgeConfig } from '../../src/edge/config.ts';

function read(env: Record<string, string>) {
  const problems: string[] = [];
  const config = readEdgeConfig(env, (name, problem) => problems.push(`${name}: ${problem}`));
  return { config, problems };
}

describe('readEdgeConfig', () => {
  test('defaults: no CORS origin, no trusted proxy, limits on, any document accepted', () => {
    expect(read({})).toEqual({
      problems: [],
      config: {
        corsOrigins: [],
        corsAllowedHeaders: [],
        trustProxy: 0,
        rateLimits: {
          enabled: true,
          windowSeconds: 60,
          requests: 600,
          byClient: new Map(),
          clientSubjectShare: 50,
          upstreamCalls: 3000,
          upstreamCallsByClient: new Map(),
          failedAuth: 20,
          wsConnects: 60,
          subscriptions: 200,
        },
        trustedDocumentsPath: undefined,
        trustedDocumentsMode: 'enforce',
        callbackUrls: [],
        batchMaxOperations: 10,
      },
    });
    expect(EDGE_CONFIG_DEFAULTS.RATE_LIMIT_REQUESTS).toBe(600);
  });

  test('reads every variable', () => {
    const { config, problems } = read({
      CORS_ORIGINS: ' https://app.example.com, http://localhost:3000 ,https://admin.example.com:8443',
      CORS_ALLOWED_HEADERS: ' X-Tenant-Id ,x-feature-flags,x-tenant-id,',
      TRUST_PROXY: '2',
      RATE_LIMIT_ENABLED: 'false',
      RATE_LIMIT_WINDOW_SECONDS: '10',
      RATE_LIMIT_REQUESTS: '50',
      RATE_LIMIT_CLIENT_SUBJECT_SHARE: '25',
      RATE_LIMIT_UPSTREAM_CALLS: '400',
      RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT: 'agents=900',
      RATE_LIMIT_FAILED_AUTH: '3',
      RATE_LIMIT_WS_CONNECTS: '7',
      RATE_LIMIT_SUBSCRIPTIONS: '9',
      TRUSTED_DOCUMENTS: ' /etc/facade/manifest.json ',
      TRUSTED_DOCUMENTS_MODE: 'log-only',
      SUBSCRIPTION_CALLBACK_ALLOWED_URLS: 'https://gateway.internal/callback, http://10.0.0.7:4000/callback/',
      HTTP_BATCH_MAX_OPERATIONS: '25',
    });
    expect(problems).toEqual([]);
    expect(config).toEqual({
      corsOrigins: ['https://app.example.com', 'http://localhost:3000', 'https://admin.example.com:8443'],
      corsAllowedHeaders: ['x-tenant-id', 'x-feature-flags'],
      trustProxy: 2,
      rateLimits: {
        enabled: false,
        windowSeconds: 10,
        requests: 50,
        byClient: new Map(),
        clientSubjectShare: 25,
        upstreamCalls: 400,
        upstreamCallsByClient: new Map([['agents', 900]]),
        failedAuth: 3,
        wsConnects: 7,
        subscriptions: 9,
      },
      trustedDocumentsPath: '/etc/facade/manifest.json',
      trustedDocumentsMode: 'log-only',
      callbackUrls: [
        { origin: 'https://gateway.internal', path: '/callback/' },
        { origin: 'http://10.0.0.7:4000', path: '/callback/' },
      ],
      batchMaxOperations: 25,
    });
  });

  test('origins are kept in the form browsers send: host lower-cased, default port dropped, duplicates once', () => {
    const { config, problems } = read({
      CORS_ORIGINS: 'HTTPS://App.Example.com:443,https://app.example.com,http://a.test:80,,',
    });
    expect(problems).toEqual([]);
    expect(config.corsOrigins).toEqual(['https://app.example.com', 'http://a.test']);
  });

  test.each([
    ['a wildcard', '*'],
    ['a wildcard subdomain', 'https://*.example.com'],
    ['a path', 'https://app.example.com/graphql'],
    ['a trailing slash', 'https://app.example.com/'],
    ['a query', 'https://app.example.com?x=1'],
    ['credentials', 'https://user:pw@app.example.com'],
    ['no scheme', 'app.example.com'],
    ['another scheme', 'ftp://app.example.com'],
    ['the null origin', 'null'],
    ['a bad port', 'https://app.example.com:99999'],
  ])('refuses an origin with %s, naming it, and allows none', (_what, entry) => {
    const { config, problems } = read({ CORS_ORIGINS: `https://ok.example.com,${entry}` });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^CORS_ORIGINS: /);
    expect(problems[0]).toContain(JSON.stringify(entry));
    // A half-applied list would hide the mistake until a browser failed.
    expect(config.corsOrigins).toEqual([]);
  });

  test('reports every bad variable once and keeps the defaults for them', () => {
    const { config, problems } = read({
      TRUST_PROXY: '-1',
      RATE_LIMIT_ENABLED: 'perhaps',
      RATE_LIMIT_WINDOW_SECONDS: '0',
      RATE_LIMIT_REQUESTS: 'many',
      RATE_LIMIT_CLIENT_SUBJECT_SHARE: '0',
      RATE_LIMIT_UPSTREAM_CALLS: '-5',
      RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT: 'agents=lots',
      RATE_LIMIT_FAILED_AUTH: '1.5',
      RATE_LIMIT_WS_CONNECTS: '0',
      TRUSTED_DOCUMENTS_MODE: 'log',
    });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual([
      'TRUST_PROXY',
      'RATE_LIMIT_ENABLED',
      'RATE_LIMIT_WINDOW_SECONDS',
      'RATE_LIMIT_REQUESTS',
      'RATE_LIMIT_CLIENT_SUBJECT_SHARE',
      'RATE_LIMIT_UPSTREAM_CALLS',
      'RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT',
      'RATE_LIMIT_FAILED_AUTH',
      'RATE_LIMIT_WS_CONNECTS',
      'TRUSTED_DOCUMENTS_MODE',
    ]);
    // A mistyped mode stops the start (loadConfig); what is read meanwhile enforces.
    expect(config.trustedDocumentsMode).toBe('enforce');
    expect(config.trustProxy).toBe(0);
    expect(config.rateLimits).toEqual({
      enabled: true,
      windowSeconds: 60,
      requests: 600,
      byClient: new Map(),
      clientSubjectShare: 50,
      upstreamCalls: 3000,
      upstreamCallsByClient: new Map(),
      failedAuth: 20,
      wsConnects: 60,
      subscriptions: 200,
    });
  });

  test.each([
    ['a wildcard', '*'],
    ['a name with a colon', 'x-tenant-id:'],
    ['a name with a space', 'x tenant'],
    ['a header with its value', 'x-tenant-id=acme'],
  ])('CORS_ALLOWED_HEADERS refuses %s, naming it, and allows no extra header', (_what, entry) => {
    const { config, problems } = read({ CORS_ALLOWED_HEADERS: `x-ok,${entry}` });
    expect(problems).toEqual([
      `CORS_ALLOWED_HEADERS: each entry must be a header name such as x-tenant-id (no wildcard, no spaces or colons), got ${JSON.stringify(entry)}`,
    ]);
    expect(config.corsAllowedHeaders).toEqual([]);
  });
});
