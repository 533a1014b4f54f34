import { describe, expect, test } from 'vitest';
import { readAuthConfig } from '../../src/auth/config.ts';

function read(env: Record<string, string>) {
  const problems: string[] = [];
  const config = readAuthConfig(env, (name, problem) => problems.push(`${name}: ${problem}`));
  return { config, problems };
}

const ISSUER = 'https://id.example.test/realms/platform';

describe('readAuthConfig', () => {
  test('an issuer and an audience are enough: every other variable has its default', () => {
    expect(read({ AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: 'platform-graphql-facade' })).toEqual({
      problems: [],
      config: {
        mode: 'oidc',
        allowCallerApiKey: false,
        oidc: {
          issuer: ISSUER,
          audience: 'platform-graphql-facade',
          jwksUrl: undefined,
          algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
          clockToleranceSeconds: 5,
          customerIdsClaim: 'customer_ids',
          rolesClaim: 'roles',
          operatorRole: 'operator',
        },
      },
    });
  });

  test('reads every variable', () => {
    const { config, problems } = read({
      AUTH_MODE: 'oidc',
      AUTH_ISSUER: ` ${ISSUER}/ `,
      AUTH_AUDIENCE: 'facade',
      AUTH_JWKS_URL: 'https://id.example.test/keys',
      AUTH_ALGORITHMS: 'ES256, PS256,ES256',
      AUTH_CLOCK_TOLERANCE_SECONDS: '0',
      AUTH_CUSTOMER_IDS_CLAIM: 'https://platform.example.test/customers',
      AUTH_ROLES_CLAIM: 'realm_access.roles',
      AUTH_OPERATOR_ROLE: 'platform-admin',
      AUTH_ALLOW_CALLER_API_KEY: 'true',
    });
    expect(problems).toEqual([]);
    expect(config).toEqual({
      mode: 'oidc',
      allowCallerApiKey: true,
      oidc: {
        // Kept as written (trailing slash included): `iss` is compared byte for byte.
        issuer: `${ISSUER}/`,
        audience: 'facade',
        jwksUrl: 'https://id.example.test/keys',
        algorithms: ['ES256', 'PS256'],
        clockToleranceSeconds: 0,
        customerIdsClaim: 'https://platform.example.test/customers',
        rolesClaim: 'realm_access.roles',
        operatorRole: 'platform-admin',
      },
    });
  });

  test('the issuer keeps its exact spelling: no trailing slash is added', () => {
    const { config } = read({ AUTH_ISSUER: 'http://127.0.0.1:4100', AUTH_AUDIENCE: 'facade' });
    expect(config.mode === 'oidc' && config.oidc?.issuer).toBe('http://127.0.0.1:4100');
  });

  test('AUTH_MODE=none opens the facade and needs no issuer', () => {
    expect(read({ AUTH_MODE: 'none' })).toEqual({
      problems: [],
      config: { mode: 'none', allowCallerApiKey: false },
    });
  });

  test('the default mode without an issuer is refused, saying how to fix it', () => {
    const { problems } = read({});
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^AUTH_ISSUER: is required when AUTH_MODE is oidc/);
    expect(problems[0]).toContain('AUTH_MODE=none');
  });

  test('callers may authenticate with their own API key alone', () => {
    expect(read({ AUTH_ALLOW_CALLER_API_KEY: '1' })).toEqual({
      problems: [],
      config: { mode: 'oidc', oidc: undefined, allowCallerApiKey: true },
    });
  });

  test('an audience without an issuer is reported as a forgotten issuer', () => {
    const { problems } = read({ AUTH_ALLOW_CALLER_API_KEY: 'true', AUTH_AUDIENCE: 'facade' });
    expect(problems).toEqual(['AUTH_ISSUER: is required with AUTH_AUDIENCE or AUTH_JWKS_URL']);
  });

  test('an issuer without an audience is refused', () => {
    const { config, problems } = read({ AUTH_ISSUER: ISSUER });
    expect(problems).toEqual([
      'AUTH_AUDIENCE: is required with AUTH_ISSUER (the audience tokens are issued for)',
    ]);
    expect(config).toEqual({ mode: 'oidc', oidc: undefined, allowCallerApiKey: false });
  });

  test.each([
    ['none', '"none"'],
    ['RS256,HS256', '"HS256"'],
    ['hs512, none', '"hs512", "none"'],
  ])('AUTH_ALGORITHMS=%s is refused: unsigned and shared-secret algorithms never pass', (value, named) => {
    const { config, problems } = read({
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: 'facade',
      AUTH_ALGORITHMS: value,
    });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`AUTH_ALGORITHMS: ${named} refused`);
    expect(problems[0]).toContain('asymmetric algorithms only');
    expect(config.mode === 'oidc' && config.oidc?.algorithms).toEqual(['RS256', 'PS256', 'ES256', 'EdDSA']);
  });

  test('reports every bad variable once', () => {
    const { problems } = read({
      AUTH_MODE: 'jwt',
      AUTH_ALLOW_CALLER_API_KEY: 'maybe',
      AUTH_ISSUER: 'https://id.example.test/?tenant=1',
      AUTH_JWKS_URL: 'ftp://id.example.test/keys',
      AUTH_ALGORITHMS: 'RS256,XS1',
      AUTH_CLOCK_TOLERANCE_SECONDS: '301',
    });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual([
      'AUTH_MODE',
      'AUTH_ALLOW_CALLER_API_KEY',
      'AUTH_ISSUER',
      'AUTH_JWKS_URL',
      'AUTH_ALGORITHMS',
      'AUTH_CLOCK_TOLERANCE_SECONDS',
      'AUTH_AUDIENCE',
    ]);
    expect(problems[2]).toBe(
      'AUTH_ISSUER: must have no query or fragment, got "https://id.example.test/?tenant=1"',
    );
  });

  test('an issuer or key-set URL with credentials is refused without echoing them', () => {
    const { problems } = read({
      AUTH_ISSUER: 'https://admin:hunter2@id.example.test',
      AUTH_AUDIENCE: 'facade',
      AUTH_JWKS_URL: 'https://admin:hunter2@id.example.test/keys',
    });
    expect(problems).toEqual([
      'AUTH_ISSUER: must not contain credentials',
      'AUTH_JWKS_URL: must not contain credentials',
    ]);
  });
});
