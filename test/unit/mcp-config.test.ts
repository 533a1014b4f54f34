import { describe, expect, test } from 'vitest';
import { MCP_CONFIG_DEFAULTS, readMcpConfig } from '../../src/edge/mcp/config.ts';

function read(env: Record<string, string>) {
  const problems: string[] = [];
  const config = readMcpConfig(env, (name, problem) => problems.push(`${name}: ${problem}`));
  return { config, problems };
}

describe('readMcpConfig', () => {
  test('defaults: served, bounded, the resource URL from each request', () => {
    expect(read({})).toEqual({
      problems: [],
      config: {
        enabled: true,
        maxSessions: 1_000,
        maxSessionsPerCaller: 10,
        sessionIdleMs: 1_800_000,
        resourceUrl: undefined,
      },
    });
    expect(MCP_CONFIG_DEFAULTS.MCP_SESSION_IDLE_MS).toBe(1_800_000);
  });

  test('reads every variable; the resource URL without a trailing slash', () => {
    const { config, problems } = read({
      MCP_ENABLED: 'false',
      MCP_MAX_SESSIONS: '50',
      MCP_MAX_SESSIONS_PER_CALLER: '2',
      MCP_SESSION_IDLE_MS: '60000',
      MCP_RESOURCE_URL: 'https://api.example.com/mcp/',
    });
    expect(problems).toEqual([]);
    expect(config).toEqual({
      enabled: false,
      maxSessions: 50,
      maxSessionsPerCaller: 2,
      sessionIdleMs: 60_000,
      resourceUrl: 'https://api.example.com/mcp',
    });
  });

  test('reports every bad variable once, by name, and keeps the defaults for them', () => {
    const { config, problems } = read({
      MCP_ENABLED: 'sometimes',
      MCP_MAX_SESSIONS: '0',
      MCP_MAX_SESSIONS_PER_CALLER: 'many',
      MCP_SESSION_IDLE_MS: '10',
      MCP_RESOURCE_URL: 'https://api.example.com/mcp?tenant=1',
    });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual([
      'MCP_RESOURCE_URL',
      'MCP_ENABLED',
      'MCP_MAX_SESSIONS',
      'MCP_MAX_SESSIONS_PER_CALLER',
      'MCP_SESSION_IDLE_MS',
    ]);
    expect(config).toMatchObject({ maxSessions: 1_000, maxSessionsPerCaller: 10, sessionIdleMs: 1_800_000 });
  });
});
