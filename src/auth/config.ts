/**
 * Caller authentication's part of the configuration: whether callers must present an OpenID
 * Connect access token, which issuer and audience it must carry, and which claims hold a caller's
 * roles and customers. Read by `loadConfig` in `src/config.ts`, which reports every problem at once.
 */
import { EnvReader, type Env, type ReportProblem } from '../env-reader.ts';

/** Asymmetric JWS algorithms a token may be signed with; symmetric ones would need a shared secret. */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number];

/** How a token is checked and read (`AUTH_*`); the input of `createTokenVerifier`. */
export interface OidcConfig {
  /** `AUTH_ISSUER`: compared byte for byte with a token's `iss` (a trailing slash matters). */
  issuer: string;
  /** `AUTH_AUDIENCE`: one of a token's `aud` values must be exactly this. */
  audience: string;
  /**
   * `AUTH_JWKS_URL`. Undefined: the `jwks_uri` of the issuer's discovery document
   * (`<issuer>/.well-known/openid-configuration`), fetched on first use and kept.
   */
  jwksUrl: string | undefined;
  /** `AUTH_ALGORITHMS`: signature algorithms accepted, asymmetric only. */
  algorithms: readonly AsymmetricAlgorithm[];
  /** `AUTH_CLOCK_TOLERANCE_SECONDS`: leeway on `exp` and `nbf` for clocks that drift apart. */
  clockToleranceSeconds: number;
  /** `AUTH_CUSTOMER_IDS_CLAIM`: the claim listing the customers a caller may act for. */
  customerIdsClaim: string;
  /** `AUTH_ROLES_CLAIM`: the claim listing a caller's roles. */
  rolesClaim: string;
  /** `AUTH_OPERATOR_ROLE`: the role that sees every customer. */
  operatorRole: string;
  /**
   * `AUTH_ENVIRONMENT_CLAIM`: the claim naming the upstream environment (`sandbox` or `live`) a
   * caller is bound to, read when the facade holds a key per environment. Absent: `environment`.
   */
  environmentClaim?: string;
  /**
   * `AUTH_CONTRACT_CLAIM`: the claim naming the contract (the filtered schema) a caller is served.
   * Absent: `contract`.
   */
  contractClaim?: string;
}

export type AuthConfig =
  | {
      /** `AUTH_MODE=none`: the facade is open and every caller is `OPEN_CALLER`. */
      readonly mode: 'none';
      /** `AUTH_ALLOW_CALLER_API_KEY`: a caller's own `X-API-Key` is passed to the upstream. */
      readonly allowCallerApiKey: boolean;
    }
  | {
      /** `AUTH_MODE=oidc` (the default): callers present a bearer access token. */
      readonly mode: 'oidc';
      /**
       * How tokens are checked. Undefined only when `AUTH_ISSUER` is unset and
       * `AUTH_ALLOW_CALLER_API_KEY` is on: then callers authenticate with their own API key alone.
       */
      readonly oidc: OidcConfig | undefined;
      readonly allowCallerApiKey: boolean;
    };

export const AUTH_CONFIG_DEFAULTS = {
  AUTH_MODE: 'oidc',
  AUTH_ALGORITHMS: ['RS256', 'PS256', 'ES256', 'EdDSA'],
  AUTH_CLOCK_TOLERANCE_SECONDS: 5,
  AUTH_CUSTOMER_IDS_CLAIM: 'customer_ids',
  AUTH_ROLES_CLAIM: 'roles',
  AUTH_OPERATOR_ROLE: 'operator',
  AUTH_ENVIRONMENT_CLAIM: 'environment',
  AUTH_CONTRACT_CLAIM: 'contract',
  AUTH_ALLOW_CALLER_API_KEY: false,
} as const;

/**
 * Reads the `AUTH_*` variables from `env`, calling `report(name, problem)` once per bad variable,
 * so the caller can list every problem together. With the default mode (`oidc`), `AUTH_ISSUER` and
 * `AUTH_AUDIENCE` are required unless `AUTH_ALLOW_CALLER_API_KEY` is on: a facade that can accept
 * no caller at all is a mistake, and an open one must be asked for with `AUTH_MODE=none`.
 */
export function readAuthConfig(env: Env, report: ReportProblem): AuthConfig {
  const reader = new EnvReader(env, report);
  const mode = reader.oneOf('AUTH_MODE', ['oidc', 'none'], AUTH_CONFIG_DEFAULTS.AUTH_MODE);
  const allowCallerApiKey = reader.boolean(
    'AUTH_ALLOW_CALLER_API_KEY',
    AUTH_CONFIG_DEFAULTS.AUTH_ALLOW_CALLER_API_KEY,
  );
  if (mode === 'none') return { mode, allowCallerApiKey };

  const issuer = readIssuer(reader);
  const audience = reader.trimmed('AUTH_AUDIENCE');
  const jwksUrl = readJwksUrl(reader);
  const algorithms = readAlgorithms(reader);
  const clockToleranceSeconds = reader.integer(
    'AUTH_CLOCK_TOLERANCE_SECONDS',
    AUTH_CONFIG_DEFAULTS.AUTH_CLOCK_TOLERANCE_SECONDS,
    0,
    300,
  );
  const customerIdsClaim = reader.string(
    'AUTH_CUSTOMER_IDS_CLAIM',
    AUTH_CONFIG_DEFAULTS.AUTH_CUSTOMER_IDS_CLAIM,
  );
  const rolesClaim = reader.string('AUTH_ROLES_CLAIM', AUTH_CONFIG_DEFAULTS.AUTH_ROLES_CLAIM);
  const operatorRole = reader.string('AUTH_OPERATOR_ROLE', AUTH_CONFIG_DEFAULTS.AUTH_OPERATOR_ROLE);
  const environmentClaim = reader.trimmed('AUTH_ENVIRONMENT_CLAIM');
  const contractClaim = reader.trimmed('AUTH_CONTRACT_CLAIM');

  const issuerSet = reader.trimmed('AUTH_ISSUER') !== undefined;
  if (!issuerSet && !allowCallerApiKey) {
    reader.report(
      'AUTH_ISSUER',
      'is required when AUTH_MODE is oidc (the default): set AUTH_ISSUER and AUTH_AUDIENCE, ' +
        'or AUTH_MODE=none for an open facade, ' +
        'or AUTH_ALLOW_CALLER_API_KEY=true to accept callers by their own API key only',
    );
  } else if (!issuerSet && (audience !== undefined || jwksUrl !== undefined)) {
    // Harmless alone, but a sign that AUTH_ISSUER was forgotten or misspelled.
    reader.report('AUTH_ISSUER', 'is required with AUTH_AUDIENCE or AUTH_JWKS_URL');
  }
  if (issuerSet && audience === undefined) {
    reader.report('AUTH_AUDIENCE', 'is required with AUTH_ISSUER (the audience tokens are issued for)');
  }
  if (issuer === undefined || audience === undefined) return { mode, oidc: undefined, allowCallerApiKey };
  return {
    mode,
    oidc: {
      issuer,
      audience,
      jwksUrl,
      algorithms,
      clockToleranceSeconds,
      customerIdsClaim,
      rolesClaim,
      operatorRole,
      ...(environmentClaim === undefined ? {} : { environmentClaim }),
      ...(contractClaim === undefined ? {} : { contractClaim }),
    },
    allowCallerApiKey,
  };
}

/** The issuer exactly as given (trimmed): `new URL().href` would add a trailing slash that `iss` lacks. */
function readIssuer(reader: EnvReader): string | undefined {
  const value = reader.trimmed('AUTH_ISSUER');
  const url = reader.httpUrl('AUTH_ISSUER');
  if (value === undefined || url === undefined) return undefined;
  if (url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    // OpenID Connect Discovery: an issuer identifier has no query or fragment.
    reader.report('AUTH_ISSUER', `must have no query or fragment, got ${JSON.stringify(value)}`);
    return undefined;
  }
  return value;
}

function readJwksUrl(reader: EnvReader): string | undefined {
  return reader.httpUrl('AUTH_JWKS_URL')?.href;
}

function readAlgorithms(reader: EnvReader): readonly AsymmetricAlgorithm[] {
  const fallback = AUTH_CONFIG_DEFAULTS.AUTH_ALGORITHMS;
  const value = reader.trimmed('AUTH_ALGORITHMS');
  if (value === undefined) return fallback;
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const refused = names.filter((name) => name.toLowerCase() === 'none' || /^HS\d+$/i.test(name));
  if (refused.length > 0) {
    reader.report(
      'AUTH_ALGORITHMS',
      `${refused.map((name) => JSON.stringify(name)).join(', ')} refused: unsigned tokens and shared-secret ` +
        `(HS*) signatures are never accepted, since anyone holding the issuer's public keys could forge them; ` +
        `use asymmetric algorithms only (${ASYMMETRIC_ALGORITHMS.join(', ')})`,
    );
    return fallback;
  }
  const unknown = names.filter((name) => !(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0) {
    reader.report(
      'AUTH_ALGORITHMS',
      `must be a comma-separated list of ${ASYMMETRIC_ALGORITHMS.join(', ')}, got ${JSON.stringify(value)}`,
    );
    return fallback;
  }
  return [...new Set(names as AsymmetricAlgorithm[])];
}
