/**
 * The upstream's part of the configuration: its origin and keys (one, or one per environment, each
 * from a variable or a mounted file), timeouts, connections, retries and call budget, the response
 * cache, and what an outage does. Every bad value is reported through the reader at once, and a
 * key's value is never part of a message.
 */
import type { EnvReader } from '../env-reader.ts';
import { PLATFORM_ENVIRONMENTS } from '../platform-environment.ts';
import type { UpstreamConfig } from './client.ts';
import type { CircuitConfig } from './circuit-breaker.ts';
import { ENVIRONMENT_KEY_VARIABLES, type EnvironmentKeys } from './environment-keys.ts';
import { keyOfFileText, readKeyFileSync } from './key-source.ts';
import type { ResponseCacheConfig } from './response-cache.ts';

/** The defaults of the upstream's variables (part of the facade's `CONFIG_DEFAULTS`). */
export const UPSTREAM_CONFIG_DEFAULTS = {
  UPSTREAM_CONNECT_TIMEOUT_MS: 5_000,
  UPSTREAM_HEADERS_TIMEOUT_MS: 15_000,
  UPSTREAM_BODY_TIMEOUT_MS: 15_000,
  UPSTREAM_CONNECTIONS: 64,
  UPSTREAM_MAX_CALLS_PER_OPERATION: 100,
  UPSTREAM_RETRY_MAX_ATTEMPTS: 3,
  UPSTREAM_RETRY_BUDGET: 10,
  UPSTREAM_RETRY_BASE_DELAY_MS: 100,
  UPSTREAM_RETRY_MAX_DELAY_MS: 2_000,
  UPSTREAM_DOCS_URL: 'https://docs.platform.test/v3',
  CACHE_ENABLED: true,
  CACHE_MAX_AGE_SECONDS: 30,
  CACHE_MAX_BYTES: 64 * 1024 * 1024,
  CACHE_ANSWERS_MAX_BYTES: 16 * 1024 * 1024,
  CACHE_STALE_IF_ERROR_SECONDS: 300,
  UPSTREAM_CIRCUIT_FAILURES: 5,
  UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS: 2_000,
} as const;

/** What an upstream outage does (`UPSTREAM_CIRCUIT_*`, `CACHE_STALE_IF_ERROR_SECONDS`). */
export interface OutageConfig {
  circuit: CircuitConfig;
  staleIfErrorSeconds: number;
}

/** `UPSTREAM_*` and `CACHE_*`: the upstream client's configuration. */
export function readUpstreamConfig(reader: EnvReader): UpstreamConfig {
  const upstream: UpstreamConfig = {
    baseUrl: readBaseUrl(reader, 'UPSTREAM_BASE_URL'),
    ...readUpstreamKeys(reader),
    connectTimeoutMs: reader.integer(
      'UPSTREAM_CONNECT_TIMEOUT_MS',
      UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_CONNECT_TIMEOUT_MS,
      1,
      600_000,
    ),
    headersTimeoutMs: reader.integer(
      'UPSTREAM_HEADERS_TIMEOUT_MS',
      UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_HEADERS_TIMEOUT_MS,
      1,
      600_000,
    ),
    bodyTimeoutMs: reader.integer(
      'UPSTREAM_BODY_TIMEOUT_MS',
      UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_BODY_TIMEOUT_MS,
      1,
      600_000,
    ),
    connections: reader.integer(
      'UPSTREAM_CONNECTIONS',
      UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_CONNECTIONS,
      1,
      10_000,
    ),
    maxCallsPerOperation: reader.integer(
      'UPSTREAM_MAX_CALLS_PER_OPERATION',
      UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_MAX_CALLS_PER_OPERATION,
      1,
      1_000_000,
    ),
    retry: {
      maxAttempts: reader.integer(
        'UPSTREAM_RETRY_MAX_ATTEMPTS',
        UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_RETRY_MAX_ATTEMPTS,
        1,
        10,
      ),
      budget: reader.integer(
        'UPSTREAM_RETRY_BUDGET',
        UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_RETRY_BUDGET,
        0,
        1_000,
      ),
      baseDelayMs: reader.integer(
        'UPSTREAM_RETRY_BASE_DELAY_MS',
        UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_RETRY_BASE_DELAY_MS,
        0,
        60_000,
      ),
      maxDelayMs: reader.integer(
        'UPSTREAM_RETRY_MAX_DELAY_MS',
        UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_RETRY_MAX_DELAY_MS,
        0,
        600_000,
      ),
    },
    problemDocsUrl: reader
      .string('UPSTREAM_DOCS_URL', UPSTREAM_CONFIG_DEFAULTS.UPSTREAM_DOCS_URL)
      .replace(/\/+$/, ''),
    cache: readCacheConfig(reader),
  };
  if (upstream.retry.maxDelayMs < upstream.retry.baseDelayMs) {
    reader.report(
      'UPSTREAM_RETRY_MAX_DELAY_MS',
      `must be at least UPSTREAM_RETRY_BASE_DELAY_MS (${upstream.retry.baseDelayMs})`,
    );
  }
  return upstream;
}

/** `CACHE_*`: the upstream response cache and the whole answers made from it. */
function readCacheConfig(reader: EnvReader): ResponseCacheConfig {
  return {
    enabled: reader.boolean('CACHE_ENABLED', UPSTREAM_CONFIG_DEFAULTS.CACHE_ENABLED),
    maxAgeSeconds: reader.integer(
      'CACHE_MAX_AGE_SECONDS',
      UPSTREAM_CONFIG_DEFAULTS.CACHE_MAX_AGE_SECONDS,
      1,
      86_400,
    ),
    maxBytes: reader.integer('CACHE_MAX_BYTES', UPSTREAM_CONFIG_DEFAULTS.CACHE_MAX_BYTES, 4_096, 2 ** 40),
    answersMaxBytes: reader.integer(
      'CACHE_ANSWERS_MAX_BYTES',
      UPSTREAM_CONFIG_DEFAULTS.CACHE_ANSWERS_MAX_BYTES,
      0,
      2 ** 40,
    ),
  };
}

/** `UPSTREAM_CIRCUIT_*` and `CACHE_STALE_IF_ERROR_SECONDS` (0 turns either off). */
export function readOutageConfig(reader: EnvReader): OutageConfig {
  const { UPSTREAM_CIRCUIT_FAILURES, UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS, CACHE_STALE_IF_ERROR_SECONDS } =
    UPSTREAM_CONFIG_DEFAULTS;
  return {
    circuit: {
      failures: reader.integer('UPSTREAM_CIRCUIT_FAILURES', UPSTREAM_CIRCUIT_FAILURES, 0, 1_000),
      probeIntervalMs: reader.integer(
        'UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS',
        UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS,
        100,
        600_000,
      ),
    },
    staleIfErrorSeconds: reader.integer(
      'CACHE_STALE_IF_ERROR_SECONDS',
      CACHE_STALE_IF_ERROR_SECONDS,
      0,
      86_400,
    ),
  };
}

/**
 * The facade's upstream keys: `UPSTREAM_API_KEY` alone (one environment, today's behaviour), or a
 * key per environment (`UPSTREAM_API_KEY_SANDBOX`, `UPSTREAM_API_KEY_LIVE`, each also `*_FILE`),
 * never both kinds.
 */
function readUpstreamKeys(
  reader: EnvReader,
): Pick<UpstreamConfig, 'apiKey' | 'apiKeyFile' | 'environmentKeys'> {
  const named = PLATFORM_ENVIRONMENTS.filter((environment) => {
    const name = ENVIRONMENT_KEY_VARIABLES[environment];
    return reader.trimmed(name) !== undefined || reader.trimmed(`${name}_FILE`) !== undefined;
  });
  if (named.length === 0) return readKey(reader, 'UPSTREAM_API_KEY');
  if (
    reader.trimmed('UPSTREAM_API_KEY') !== undefined ||
    reader.trimmed('UPSTREAM_API_KEY_FILE') !== undefined
  ) {
    reader.report(
      'UPSTREAM_API_KEY',
      `and ${named.map((environment) => ENVIRONMENT_KEY_VARIABLES[environment]).join(' and ')} are both set; set either one key or a key per environment`,
    );
  }
  const environmentKeys: EnvironmentKeys = {};
  for (const environment of named) {
    environmentKeys[environment] = readKey(reader, ENVIRONMENT_KEY_VARIABLES[environment]);
  }
  const first = environmentKeys[named[0]!]!;
  return { apiKey: first.apiKey, environmentKeys };
}

/** The upstream origin (and optional path prefix), without credentials, query or trailing slash. */
function readBaseUrl(reader: EnvReader, name: string): string {
  if (reader.trimmed(name) === undefined) {
    reader.report(name, 'is required (the upstream API origin, e.g. https://api.example.com)');
    return '';
  }
  // Paths are appended to it, so a query or fragment is refused too; the key has its own variable.
  const url = reader.httpUrl(name, { refuseQueryAndFragment: true });
  if (url === undefined) return '';
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/**
 * A required key from `name`, or from the file `${name}_FILE` names (a mounted secret; read again
 * while the facade runs, see `src/upstream/key-source.ts`). Never both. Messages never include
 * the value.
 */
function readKey(reader: EnvReader, name: string): { apiKey: string; apiKeyFile?: string } {
  const fileVariable = `${name}_FILE`;
  const file = reader.trimmed(fileVariable);
  if (file === undefined) return { apiKey: readSecret(reader, name) };
  if (reader.trimmed(name) !== undefined) {
    reader.report(fileVariable, `and ${name} are both set; set one of them`);
    return { apiKey: '' };
  }
  // Bounded, and never blocked on a pipe: the same reading as every reload's.
  const content = readKeyFileSync(file);
  if ('problem' in content) {
    reader.report(fileVariable, `${content.problem}: ${file}`);
    return { apiKey: '' };
  }
  const read = keyOfFileText(content.text);
  if ('problem' in read) {
    reader.report(fileVariable, `${read.problem}: ${file}`);
    return { apiKey: '' };
  }
  return { apiKey: read.key, apiKeyFile: file };
}

/** A required key of visible ASCII; the messages never include the value. */
function readSecret(reader: EnvReader, name: string): string {
  const value = reader.verbatim(name);
  if (value === undefined || value.trim() === '') {
    reader.report(name, 'is required');
    return '';
  }
  // The value itself is never echoed: only what is wrong with it.
  if (!/^[\x21-\x7e]+$/.test(value)) {
    reader.report(name, 'must contain only visible ASCII characters (no spaces or line breaks)');
    return '';
  }
  return value;
}
