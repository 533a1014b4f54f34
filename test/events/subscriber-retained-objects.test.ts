/**
 * What a graphql-ws subscriber keeps for its subscription's whole life, counted by V8 itself
 * (`v8.queryObjects`, after a full collection) with the facade in this process: neither the HTTP
 * upgrade request its socket came with (graphql-ws keeps it in the connection's `extra`, and the
 * adapter's closures held its whole `onConnect` scope) nor an operation context built at
 * admission that no resolver of a subscription reads (its upstream context, credentials, call
 * budget and loaders). Each was about 1.3 and 1.6 KiB per subscriber
 * (`npm run bench:transports` with BENCH_TRANSPORTS_HEAP_SNAPSHOTS, bench/README.md).
 */
import { IncomingMessage } from 'node:http';
import { queryObjects } from 'node:v8';
import { describe, expect, test } from 'vitest';
import { createCredentials } from '../../src/upstream/credentials.ts';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();
const SUBSCRIBERS = 40;
/** Each upstream context holds one; what a key of this process holds otherwise stays put. */
const Credentials = createCredentials('sk_sandbox_counted').constructor as new (...args: never[]) => object;

function count(constructor: new (...args: never[]) => object): number {
  return queryObjects(constructor, { format: 'count' }) as number;
}

describe('a graphql-ws subscriber, once it listens', () => {
  test('holds no upgrade request and no operation context for its life', async () => {
    const before = { requests: count(IncomingMessage), credentials: count(Credentials) };
    const clients = Array.from({ length: SUBSCRIBERS }, () => stack.connect());
    const subscriptions = clients.map((client) =>
      client.subscribe(
        `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId } }`,
      ),
    );
    await stack.subscriptionsStarted(SUBSCRIBERS);
    const listening = { requests: count(IncomingMessage), credentials: count(Credentials) };
    for (const subscription of subscriptions) subscription.stop();

    // One each would be a subscriber's; a few may be any request of the moment.
    expect(listening.requests - before.requests).toBeLessThan(SUBSCRIBERS / 4);
    expect(listening.credentials - before.credentials).toBeLessThan(SUBSCRIBERS / 4);
    for (const subscription of subscriptions) expect(subscription.errors).toEqual([]);
  });
});
