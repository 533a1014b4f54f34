/**
 * The budgets every live transport shares are named for all of them (`RATE_LIMIT_LIVE_CONNECTS`,
 * `RATE_LIMIT_LIVE_OPERATIONS`); their graphql-ws names of before (`RATE_LIMIT_WS_CONNECTS`,
 * `RATE_LIMIT_SUBSCRIPTIONS`) are still read, with a warning, and a problem when both are set.
 */
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { readEdgeConfig } from '../../src/edge/config.ts';

/** The variables a configuration cannot start without. */
const REQUIRED = {
  UPSTREAM_BASE_URL: 'https://api.platform.test',
  UPSTREAM_API_KEY: 'sk_test',
  AUTH_ISSUER: 'https://id.platform.test',
  AUTH_AUDIENCE: 'platform-graphql-facade',
};

function read(env: Record<string, string>) {
  const problems: string[] = [];
  const warnings: string[] = [];
  const config = readEdgeConfig(
    env,
    (name, problem) => problems.push(`${name}: ${problem}`),
    (warning) => warnings.push(warning),
  );
  const limits = config.rateLimits;
  return {
    limits,
    read: { connects: limits.wsConnects, operations: limits.subscriptions },
    problems,
    warnings,
  };
}

describe('the live budgets’ names', () => {
  test('the new names are read, with no warning', () => {
    expect(read({ RATE_LIMIT_LIVE_CONNECTS: '7', RATE_LIMIT_LIVE_OPERATIONS: '9' })).toMatchObject({
      read: { connects: 7, operations: 9 },
      problems: [],
      warnings: [],
    });
  });

  test('the old names are still read, each with a warning naming the new one', () => {
    const {
      read: values,
      problems,
      warnings,
    } = read({
      RATE_LIMIT_WS_CONNECTS: '7',
      RATE_LIMIT_SUBSCRIPTIONS: '9',
    });
    expect(values).toEqual({ connects: 7, operations: 9 });
    expect(problems).toEqual([]);
    expect(warnings).toEqual([
      'RATE_LIMIT_WS_CONNECTS is the old name of RATE_LIMIT_LIVE_CONNECTS: it is read, but set RATE_LIMIT_LIVE_CONNECTS instead',
      'RATE_LIMIT_SUBSCRIPTIONS is the old name of RATE_LIMIT_LIVE_OPERATIONS: it is read, but set RATE_LIMIT_LIVE_OPERATIONS instead',
    ]);
  });

  test('a bad value under an old name is reported under that name', () => {
    const { problems } = read({ RATE_LIMIT_SUBSCRIPTIONS: '0' });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual(['RATE_LIMIT_SUBSCRIPTIONS']);
  });

  test('both names at once is a problem: which one holds would be a guess', () => {
    const { limits, problems } = read({ RATE_LIMIT_LIVE_OPERATIONS: '9', RATE_LIMIT_SUBSCRIPTIONS: '3' });
    expect(problems).toEqual([
      'RATE_LIMIT_SUBSCRIPTIONS: is the old name of RATE_LIMIT_LIVE_OPERATIONS, which is set too: set RATE_LIMIT_LIVE_OPERATIONS alone',
    ]);
    expect(limits.subscriptions).toBe(9);
    expect(() =>
      loadConfig({
        ...REQUIRED,
        RATE_LIMIT_LIVE_OPERATIONS: '9',
        RATE_LIMIT_SUBSCRIPTIONS: '3',
      }),
    ).toThrow(/RATE_LIMIT_SUBSCRIPTIONS: is the old name of RATE_LIMIT_LIVE_OPERATIONS/);
  });

  test('loadConfig keeps the warnings for the start to log', () => {
    expect(loadConfig({ ...REQUIRED, RATE_LIMIT_WS_CONNECTS: '5' }).warnings).toEqual([
      'RATE_LIMIT_WS_CONNECTS is the old name of RATE_LIMIT_LIVE_CONNECTS: it is read, but set RATE_LIMIT_LIVE_CONNECTS instead',
    ]);
    expect(loadConfig({ ...REQUIRED, RATE_LIMIT_LIVE_CONNECTS: '5' }).warnings).toEqual([]);
  });
});
