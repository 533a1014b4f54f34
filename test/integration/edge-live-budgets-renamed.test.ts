/**
 * A facade started with a live budget under its graphql-ws name of before holds the caller to it
 * over every live transport, and says at start which name to set instead; under the new name, the
 * same cap and no warning.
 */
import { describe, expect, test } from 'vitest';
import { startStack } from '../support/harness/stack.ts';
import { openSseStream } from '../support/harness/sse-stream.ts';
import { bearer, tokenFor } from '../support/tokens.ts';

const WATCH = 'subscription { accountChanged(customerId: "cus_acme") { accountId } }';

describe.each([
  ['RATE_LIMIT_SUBSCRIPTIONS', true],
  ['RATE_LIMIT_LIVE_OPERATIONS', false],
])('the running-operation cap set as %s', (setting, warned) => {
  test(`holds a caller to 1 over graphql-ws and SSE together, ${warned ? 'with' : 'without'} a warning at start`, async () => {
    const stack = await startStack({ env: { [setting]: '1' } });
    try {
      const warnings = stack
        .logs()
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line['level'] === 'warn' && String(line['msg']).includes('old name'));
      expect(warnings.map((line) => line['msg'])).toEqual(
        warned
          ? [
              'RATE_LIMIT_SUBSCRIPTIONS is the old name of RATE_LIMIT_LIVE_OPERATIONS: it is read, but set RATE_LIMIT_LIVE_OPERATIONS instead',
            ]
          : [],
      );
      const running = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` }).subscribe(WATCH);
      await stack.subscriptionsStarted(1);
      const refused = await openSseStream(stack.facadeUrl, WATCH, await bearer('acme'));
      expect(refused.status).toBe(429);
      expect(refused.text).toContain('RATE_LIMITED');
      running.stop();
      await stack.subscriptionsCompleted(1);
    } finally {
      await stack.close();
    }
  });
});
