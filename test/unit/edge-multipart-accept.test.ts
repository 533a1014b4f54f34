/**
 * Which `Accept` headers choose Apollo's multipart subscriptions at `/graphql`: what Apollo's
 * clients send (quoted or not, any case, among other media ranges), and not what asks for
 * something else (JSON, `@defer`'s incremental delivery, a mere `multipart/mixed`).
 */
import { describe, expect, test } from 'vitest';
import { acceptsMultipartSubscriptions } from '../../src/edge/multipart.ts';

describe('the Accept header that chooses multipart subscriptions', () => {
  test.each([
    'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9',
    'multipart/mixed;subscriptionSpec=1.0, application/json',
    'multipart/mixed; subscriptionSpec="1.0", application/json',
    'application/json, Multipart/Mixed;SubscriptionSpec=1.0',
  ])('%s is taken', (accept) => {
    expect(acceptsMultipartSubscriptions(accept)).toBe(true);
  });

  test.each([
    undefined,
    '',
    'application/json',
    'text/event-stream',
    'multipart/mixed',
    'multipart/mixed;deferSpec=20220824,application/json',
    'multipart/mixed;subscriptionSpec=2.0',
    'application/json;subscriptionSpec=1.0',
  ])('%s is not', (accept) => {
    expect(acceptsMultipartSubscriptions(accept)).toBe(false);
  });
});
