/**
 * The MCP endpoint's part of the configuration (`MCP_*`): whether `/mcp` is served, how many
 * sessions a replica holds and for how long, and the URL clients reach it at (the protected
 * resource's identifier in its OAuth metadata). Read by `loadConfig` in `src/config.ts`, which
 * reports every problem at once (docs/mcp.md).
 */
import { EnvReader, type Env, type ReportProblem } from '../../env-reader.ts';

/** `MCP_*`. */
export interface McpConfig {
  /** `MCP_ENABLED`: serve `/mcp` and its protected-resource metadata. */
  readonly enabled: boolean;
  /** `MCP_MAX_SESSIONS`: sessions one replica holds at once; a new one past it is refused (503). */
  readonly maxSessions: number;
  /**
   * `MCP_MAX_SESSIONS_PER_CALLER`: sessions one caller (subject and client) holds on one replica;
   * its oldest is ended when it opens one more, so a client that lost its session id is never
   * locked out, and no caller can fill the replica's sessions.
   */
  readonly maxSessionsPerCaller: number;
  /** `MCP_SESSION_IDLE_MS`: a session with no request and no open stream for this long is ended. */
  readonly sessionIdleMs: number;
  /**
   * `MCP_RESOURCE_URL`: the URL clients reach `/mcp` at, the `resource` of its OAuth metadata.
   * Unset: the request's own scheme and `Host` (`X-Forwarded-Proto` believed with `TRUST_PROXY`).
   */
  readonly resourceUrl: string | undefined;
}

/** Documented defaults, also shown in the README's configuration table. */
export const MCP_CONFIG_DEFAULTS = {
  MCP_ENABLED: true,
  MCP_MAX_SESSIONS: 1_000,
  MCP_MAX_SESSIONS_PER_CALLER: 10,
  // Half an hour: an agent between two questions keeps its session, a forgotten one goes.
  MCP_SESSION_IDLE_MS: 30 * 60 * 1000,
} as const;

/** Reads `MCP_*` from `env`, calling `report(name, problem)` once per bad variable. */
export function readMcpConfig(env: Env, report: ReportProblem): McpConfig {
  const reader = new EnvReader(env, report);
  const resource = reader.httpUrl('MCP_RESOURCE_URL', { refuseQueryAndFragment: true });
  return {
    enabled: reader.boolean('MCP_ENABLED', MCP_CONFIG_DEFAULTS.MCP_ENABLED),
    maxSessions: reader.integer('MCP_MAX_SESSIONS', MCP_CONFIG_DEFAULTS.MCP_MAX_SESSIONS, 1, 1_000_000),
    maxSessionsPerCaller: reader.integer(
      'MCP_MAX_SESSIONS_PER_CALLER',
      MCP_CONFIG_DEFAULTS.MCP_MAX_SESSIONS_PER_CALLER,
      1,
      10_000,
    ),
    sessionIdleMs: reader.integer(
      'MCP_SESSION_IDLE_MS',
      MCP_CONFIG_DEFAULTS.MCP_SESSION_IDLE_MS,
      1_000,
      7 * 24 * 60 * 60 * 1000,
    ),
    resourceUrl: resource === undefined ? undefined : resource.href.replace(/\/+$/, ''),
  };
}
