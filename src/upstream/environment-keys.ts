/**
 * Sandbox and live in one deployment: the facade's key per environment, and which environment a
 * caller is bound to. The upstream selects the environment by the key alone (one host for both),
 * so a caller's environment decides which key every call of its operations is sent with.
 */
import { PLATFORM_ENVIRONMENTS, type PlatformEnvironment } from '../platform-environment.ts';

/** The variable of each environment's key (each also read as `<name>_FILE`). */
export const ENVIRONMENT_KEY_VARIABLES: Readonly<Record<PlatformEnvironment, string>> = {
  sandbox: 'UPSTREAM_API_KEY_SANDBOX',
  live: 'UPSTREAM_API_KEY_LIVE',
};

/** One configured key: its value at start, and the file it is read again from, if any. */
export interface ConfiguredKey {
  apiKey: string;
  apiKeyFile?: string | undefined;
}

/** The key of each configured environment (at least one). */
export type EnvironmentKeys = Partial<Record<PlatformEnvironment, ConfiguredKey>>;

/** The environments a key per environment names, in their order; undefined with one key. */
export function configuredEnvironments(
  keys: EnvironmentKeys | undefined,
): readonly PlatformEnvironment[] | undefined {
  return keys === undefined
    ? undefined
    : PLATFORM_ENVIRONMENTS.filter((environment) => keys[environment] !== undefined);
}

/** What a token's environment claim holds, as the facade reads it: one of the two names, or nothing. */
export function environmentOfClaim(value: unknown): PlatformEnvironment | undefined {
  return PLATFORM_ENVIRONMENTS.find((environment) => environment === value);
}

/**
 * The environment `claimed` binds a caller to among `configured`: the claimed one when configured;
 * the only one configured when the token names none; otherwise none (the caller is refused).
 */
export function boundEnvironment(
  claimed: PlatformEnvironment | undefined,
  configured: readonly PlatformEnvironment[],
): PlatformEnvironment | undefined {
  if (claimed !== undefined) return configured.includes(claimed) ? claimed : undefined;
  return configured.length === 1 ? configured[0] : undefined;
}
