/**
 * The edge defences' part of the configuration: which browser origins may call the facade, how many
 * proxies stand in front of it, the rate limits, and the trusted-documents manifest. Read by
 * `loadConfig` in `src/config.ts`, which reports every problem at once (see docs/security.md).
 */
import { EnvReader, type Env, type ReportProblem } from '../env-reader.ts';
import { parseCallbackPrefixes, type CallbackUrlPrefix } from './callback-urls.ts';
import { parseClientBudgets, type ClientBudgets } from './client-budgets.ts';

/** Per-window budgets; every bucket shares one window length. */
export interface RateLimitsConfig {
  /** `RATE_LIMIT_ENABLED`: off means every budget is unlimited (tests, a facade behind its own limiter). */
  enabled: boolean;
  /** `RATE_LIMIT_WINDOW_SECONDS`: the length of one counting window. */
  windowSeconds: number;
  /**
   * `RATE_LIMIT_REQUESTS`: GraphQL operations per window per caller, over HTTP and every live
   * transport alike (a subscription spends from this budget, so moving queries buys nothing).
   */
  requests: number;
  /**
   * `RATE_LIMIT_BY_CLIENT`: operations per window of each named client (the token's `client_id`,
   * else `azp`), one budget for all of that client's tokens, instead of `requests` per subject.
   */
  byClient?: ClientBudgets;
  /**
   * `RATE_LIMIT_CLIENT_SUBJECT_SHARE`: the percentage of a named client's budget one subject of it
   * (a user, a tenant) may spend per window, so no tenant of a shared client can spend the whole
   * pool; a token the client holds for itself (its `sub` is its client id) spends the whole pool.
   * 100 turns the shares off. Absent: 100.
   */
  clientSubjectShare?: number;
  /**
   * `RATE_LIMIT_UPSTREAM_CALLS`: upstream calls one caller's operations may send per window, counted
   * by what each sent (`upstreamCalls`), over every transport; once spent, its next operation waits.
   * Absent: not counted.
   */
  upstreamCalls?: number;
  /** `RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT`: upstream calls per window of each named client, all its tokens together. */
  upstreamCallsByClient?: ClientBudgets;
  /** `RATE_LIMIT_FAILED_AUTH`: failed authentications per window per client address. */
  failedAuth: number;
  /**
   * `RATE_LIMIT_LIVE_CONNECTS` (once `RATE_LIMIT_WS_CONNECTS`, the field's name): connections per
   * window per authenticated caller, over every live transport together.
   */
  wsConnects: number;
  /**
   * `RATE_LIMIT_LIVE_OPERATIONS` (once `RATE_LIMIT_SUBSCRIPTIONS`, the field's name): operations
   * one caller may have running at once on one replica, over every live transport together. Each
   * subscription that hears an event costs a queue, an execution and a message, so without a cap a
   * caller could multiply the work of every event by subscribing again and again.
   */
  subscriptions: number;
}

export interface EdgeConfig {
  /** `CORS_ORIGINS`: browser origins allowed to call the facade, each `scheme://host[:port]`. */
  corsOrigins: readonly string[];
  /**
   * `CORS_ALLOWED_HEADERS`: request headers a browser may send beyond the defaults of
   * `src/http/cors.ts` (e.g. a header of the company's own), lower case.
   */
  corsAllowedHeaders: readonly string[];
  /** `TRUST_PROXY`: proxy hops in front of the facade whose `X-Forwarded-For` entries are believed. */
  trustProxy: number;
  rateLimits: RateLimitsConfig;
  /** `TRUSTED_DOCUMENTS`: path of a persisted-operation manifest; unset, any operation is accepted. */
  trustedDocumentsPath: string | undefined;
  /**
   * `TRUSTED_DOCUMENTS_MODE`: `enforce` refuses an operation missing from the manifest; `log-only`
   * runs it, logs it and counts it (`graphql_untrusted_operations_total`), for a rollout.
   */
  trustedDocumentsMode: TrustedDocumentsMode;
  /**
   * `SUBSCRIPTION_CALLBACK_ALLOWED_URLS`: the URL prefixes callback subscriptions may name (a
   * gateway's callback endpoint); none by default, so every callback subscription is refused.
   */
  callbackUrls: readonly CallbackUrlPrefix[];
  /**
   * `HTTP_BATCH_MAX_OPERATIONS`: operations one batched HTTP request (a JSON array) may hold; a
   * larger batch is refused whole. 0: batches are refused.
   */
  batchMaxOperations: number;
}

/** What the door does with an operation missing from the manifest. */
const TRUSTED_DOCUMENTS_MODES = ['enforce', 'log-only'] as const;
export type TrustedDocumentsMode = (typeof TRUSTED_DOCUMENTS_MODES)[number];

/** Documented defaults, also shown in the README's configuration table. */
export const EDGE_CONFIG_DEFAULTS = {
  TRUST_PROXY: 0,
  RATE_LIMIT_ENABLED: true,
  RATE_LIMIT_WINDOW_SECONDS: 60,
  // Ten operations a second, sustained over a minute: far above an interactive client.
  RATE_LIMIT_REQUESTS: 600,
  // Half: a tenant of a shared client may never spend it all, and two busy tenants both get theirs.
  RATE_LIMIT_CLIENT_SUBJECT_SHARE: 50,
  // Fifty a second over a minute: thirty operations at the per-operation ceiling (100), not three thousand a second.
  RATE_LIMIT_UPSTREAM_CALLS: 3_000,
  // Enough for a client retrying with an expired token; far too few to guess one.
  RATE_LIMIT_FAILED_AUTH: 20,
  RATE_LIMIT_LIVE_CONNECTS: 60,
  // A subscription per resource kind for a few dozen customers; an operator listens with `events`.
  RATE_LIMIT_LIVE_OPERATIONS: 200,
  TRUSTED_DOCUMENTS_MODE: 'enforce',
  // Apollo Client's BatchHttpLink sends at most ten operations a batch unless told otherwise.
  HTTP_BATCH_MAX_OPERATIONS: 10,
} as const;

/**
 * Settings that hold for every live transport, once named after graphql-ws: the old name is still
 * read when the new one is not set, with a warning at start.
 */
const RENAMED_SETTINGS = {
  RATE_LIMIT_LIVE_CONNECTS: 'RATE_LIMIT_WS_CONNECTS',
  RATE_LIMIT_LIVE_OPERATIONS: 'RATE_LIMIT_SUBSCRIPTIONS',
} as const;

/**
 * Reads the edge variables from `env`, calling `report(name, problem)` once per bad variable and
 * using the default for it, so the caller can list every problem together, and `warn(message)`
 * once per setting given under its old name.
 */
export function readEdgeConfig(
  env: Env,
  report: ReportProblem,
  warn: (message: string) => void = () => undefined,
): EdgeConfig {
  const reader = new EnvReader(env, report);
  /** The name `setting` is given under: its old one only when the new one is unset. */
  const named = (setting: keyof typeof RENAMED_SETTINGS): string => {
    const old = RENAMED_SETTINGS[setting];
    if (reader.trimmed(old) === undefined) return setting;
    if (reader.trimmed(setting) !== undefined) {
      reader.report(old, `is the old name of ${setting}, which is set too: set ${setting} alone`);
      return setting;
    }
    warn(`${old} is the old name of ${setting}: it is read, but set ${setting} instead`);
    return old;
  };
  return {
    corsOrigins: readCorsOrigins(reader),
    corsAllowedHeaders: readCorsAllowedHeaders(reader),
    trustProxy: reader.integer('TRUST_PROXY', EDGE_CONFIG_DEFAULTS.TRUST_PROXY, 0, 10),
    rateLimits: {
      enabled: reader.boolean('RATE_LIMIT_ENABLED', EDGE_CONFIG_DEFAULTS.RATE_LIMIT_ENABLED),
      windowSeconds: reader.integer(
        'RATE_LIMIT_WINDOW_SECONDS',
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_WINDOW_SECONDS,
        1,
        24 * 60 * 60,
      ),
      requests: reader.integer(
        'RATE_LIMIT_REQUESTS',
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_REQUESTS,
        1,
        10_000_000,
      ),
      byClient: readClientBudgets(reader, 'RATE_LIMIT_BY_CLIENT'),
      clientSubjectShare: reader.integer(
        'RATE_LIMIT_CLIENT_SUBJECT_SHARE',
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_CLIENT_SUBJECT_SHARE,
        1,
        100,
      ),
      upstreamCalls: reader.integer(
        'RATE_LIMIT_UPSTREAM_CALLS',
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_UPSTREAM_CALLS,
        1,
        100_000_000,
      ),
      upstreamCallsByClient: readClientBudgets(reader, 'RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT'),
      failedAuth: reader.integer(
        'RATE_LIMIT_FAILED_AUTH',
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_FAILED_AUTH,
        1,
        1_000_000,
      ),
      wsConnects: reader.integer(
        named('RATE_LIMIT_LIVE_CONNECTS'),
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_LIVE_CONNECTS,
        1,
        1_000_000,
      ),
      subscriptions: reader.integer(
        named('RATE_LIMIT_LIVE_OPERATIONS'),
        EDGE_CONFIG_DEFAULTS.RATE_LIMIT_LIVE_OPERATIONS,
        1,
        1_000_000,
      ),
    },
    trustedDocumentsPath: reader.trimmed('TRUSTED_DOCUMENTS'),
    trustedDocumentsMode: reader.oneOf(
      'TRUSTED_DOCUMENTS_MODE',
      TRUSTED_DOCUMENTS_MODES,
      EDGE_CONFIG_DEFAULTS.TRUSTED_DOCUMENTS_MODE,
    ),
    callbackUrls: readCallbackUrls(reader),
    batchMaxOperations: reader.integer(
      'HTTP_BATCH_MAX_OPERATIONS',
      EDGE_CONFIG_DEFAULTS.HTTP_BATCH_MAX_OPERATIONS,
      0,
      100,
    ),
  };
}

/** `SUBSCRIPTION_CALLBACK_ALLOWED_URLS`: comma-separated URL prefixes; unset allows none. */
function readCallbackUrls(reader: EnvReader): readonly CallbackUrlPrefix[] {
  const raw = reader.trimmed('SUBSCRIPTION_CALLBACK_ALLOWED_URLS');
  if (raw === undefined) return [];
  const parsed = parseCallbackPrefixes(raw);
  if ('problem' in parsed) {
    reader.report('SUBSCRIPTION_CALLBACK_ALLOWED_URLS', parsed.problem);
    return [];
  }
  return parsed;
}

/**
 * `CORS_ORIGINS`: comma separated, each exactly what a browser sends in `Origin` (scheme, host,
 * optional port; no path, no wildcard). Returned in the browser's own serialisation, so a plain
 * string comparison with the header is an exact match.
 */
function readCorsOrigins(reader: EnvReader): readonly string[] {
  const raw = reader.trimmed('CORS_ORIGINS');
  if (raw === undefined) return [];
  const origins = new Set<string>();
  const bad: string[] = [];
  for (const entry of raw.split(',').map((part) => part.trim())) {
    if (entry === '') continue;
    const origin = toOrigin(entry);
    if (origin === undefined) bad.push(entry);
    else origins.add(origin);
  }
  if (bad.length > 0) {
    reader.report(
      'CORS_ORIGINS',
      `each entry must be an exact origin such as https://app.example.com (http or https, no path, ` +
        `no wildcard), got ${bad.map((entry) => JSON.stringify(entry)).join(', ')}`,
    );
    return [];
  }
  return [...origins];
}

/**
 * `RATE_LIMIT_BY_CLIENT` (operations) or `RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT` (upstream calls):
 * `client_id=amount` pairs, comma separated; unset names no client.
 */
function readClientBudgets(
  reader: EnvReader,
  name: 'RATE_LIMIT_BY_CLIENT' | 'RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT',
): ClientBudgets {
  const raw = reader.trimmed(name);
  if (raw === undefined) return new Map();
  const parsed = parseClientBudgets(raw, name === 'RATE_LIMIT_BY_CLIENT' ? 'operations' : 'upstream calls');
  if ('problem' in parsed) {
    reader.report(name, parsed.problem);
    return new Map();
  }
  return parsed.budgets;
}

/** An HTTP field name (RFC 9110 §5.1: a token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/i;

/**
 * `CORS_ALLOWED_HEADERS`: comma separated header names, each a valid field name; no `*` (with it a
 * browser could send any header but still not `Authorization`, which must be named: a wildcard
 * promises what it does not give).
 */
function readCorsAllowedHeaders(reader: EnvReader): readonly string[] {
  const raw = reader.trimmed('CORS_ALLOWED_HEADERS');
  if (raw === undefined) return [];
  const names = raw
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  const bad = names.filter((name) => name === '*' || !HEADER_NAME.test(name));
  if (bad.length > 0) {
    reader.report(
      'CORS_ALLOWED_HEADERS',
      `each entry must be a header name such as x-tenant-id (no wildcard, no spaces or colons), got ` +
        bad.map((name) => JSON.stringify(name)).join(', '),
    );
    return [];
  }
  return [...new Set(names.map((name) => name.toLowerCase()))];
}

function toOrigin(entry: string): string | undefined {
  // A wildcard would turn an allow-list into "anyone"; the origin must be spelled out.
  if (entry.includes('*')) return undefined;
  if (!/^https?:\/\/[^/?#@\s]+$/i.test(entry)) return undefined;
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return undefined;
  }
  return url.origin === 'null' ? undefined : url.origin;
}
