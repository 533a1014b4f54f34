/**
 * The idle-time memory release of a real facade process started as shipped: `npm start` (whose
 * script runs node with `--expose-gc`), the embedded emulator and OpenID provider. A few hundred
 * graphql-ws subscriptions receive events and leave; `/metrics` and the log tell what the release
 * did: nothing while operations and deliveries ran, exactly one memory-reducing collection once
 * the process had been idle for MEMORY_RELEASE_IDLE_MS after them, and none again while it stays
 * idle. Started without `--expose-gc`, the release says it cannot run and does nothing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { connectLive, type LiveClient } from '../support/harness/live-client.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { scrape, valueOf } from '../support/metrics.ts';
import { useNpmStart, type NpmStart } from '../support/npm-start.ts';

const processes = useNpmStart();

/** Short, so the test waits little; long enough that the busy phase never pauses this long. */
const IDLE_MS = 3_000;
const CONNECTIONS = 15;
const SUBSCRIPTIONS_PER_CONNECTION = 20;
const SUBSCRIBERS = CONNECTIONS * SUBSCRIPTIONS_PER_CONNECTION;
const RELEASED = 'memory released after idle';
/** The idle period of the delivery case: a delivery held back three times as long. */
const DELIVERY_IDLE_MS = 2_000;

const ACCOUNT_CHANGED = `subscription {
  accountChanged(customerId: "cus_ada", accountId: "acc_ada_sol") { type account { balances { available } } }
}`;

/** `npm start` itself (npm runs the package's start script, with `--expose-gc`), once it listens. */
function npmStart(env: Record<string, string>): Promise<NpmStart> {
  return processes.start({ LOG_LEVEL: 'info', ...env }, 'npm');
}

/** The release's numbers and the live subscriptions, from one scrape. */
async function releaseMetrics(metricsUrl: string) {
  const samples = await scrape(metricsUrl);
  return {
    armed: valueOf(samples, 'facade_memory_release_armed'),
    releases: valueOf(samples, 'facade_memory_releases_total'),
    releasedBytes: valueOf(samples, 'facade_memory_released_bytes_total'),
    subscriptions: valueOf(samples, 'facade_graphql_ws_subscriptions'),
    connections: valueOf(samples, 'facade_graphql_ws_connections'),
  };
}

/**
 * A facade whose idle period is {@link DELIVERY_IDLE_MS}, with a signed-in graphql-ws client, for
 * the cases where work waits on the upstream past that period: `query` sends an HTTP query,
 * `burst` sends many at once (so the RSS has grown over the RSS at start when the idle period ends),
 * and `holdBack` delays every upstream read of one emulator route for several idle periods.
 */
async function heldBackFacade(env: Record<string, string> = {}) {
  const facade = await npmStart({
    MEMORY_RELEASE_IDLE_MS: String(DELIVERY_IDLE_MS),
    MEMORY_RELEASE_MIN_GROWTH_PERCENT: '0',
    // The held-back work's deadline well past its read.
    OPERATION_TIMEOUT_MS: String(DELIVERY_IDLE_MS * 10),
    // The graphql-ws `subscription started` line is a debug one.
    LOG_LEVEL: 'debug',
    ...env,
  });
  const { token } = facade;
  const client = processes.keep(
    connectLive(facade.graphqlUrl.replace(/^http/, 'ws'), { Authorization: `Bearer ${token}` }),
  );
  const query = (text: string) =>
    fetch(facade.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: text }),
    }).then((response) => response.status);
  return {
    facade,
    client,
    query,
    async burst(count: number) {
      const statuses = await Promise.all(
        Array.from({ length: count }, () => query('{ customer(id: "cus_ada") { id displayName } }')),
      );
      expect(new Set(statuses)).toEqual(new Set([200]));
    },
    async holdBack(route: string) {
      const faults = await fetch(`${facade.emulatorUrl}/_emulator/faults`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          rules: [{ route, kind: 'delay', rate: 1, delayMs: DELIVERY_IDLE_MS * 3 }],
        }),
      });
      expect(faults.status).toBeLessThan(300);
    },
  };
}

async function topUp(emulatorUrl: string): Promise<void> {
  const response = await fetch(`${emulatorUrl}/v3/sandbox/accounts/acc_ada_sol/topup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': SANDBOX_KEY },
    body: JSON.stringify({ amount: '1.00', currency: 'USDC' }),
  });
  expect(response.status).toBe(200);
}

describe('memory release after idle', () => {
  test('none while subscribers receive events, exactly one once the process has been idle after they left, none again while it stays idle', async () => {
    const facade = await npmStart({
      MEMORY_RELEASE_IDLE_MS: String(IDLE_MS),
      // Any growth: a few hundred subscribers may grow the RSS by less than the default 20 %.
      MEMORY_RELEASE_MIN_GROWTH_PERCENT: '0',
      // One demo caller holds every subscription: above its default limits of 200 and 600.
      RATE_LIMIT_SUBSCRIPTIONS: String(SUBSCRIBERS),
      RATE_LIMIT_REQUESTS: '2000',
    });
    const { token } = facade;
    expect(await releaseMetrics(facade.metricsUrl)).toMatchObject({ armed: 1, releases: 0 });

    const wsUrl = facade.graphqlUrl.replace(/^http/, 'ws');
    const clients: LiveClient[] = [];
    const subscriptions: ReturnType<LiveClient['subscribe']>[] = [];
    for (let index = 0; index < CONNECTIONS; index += 1) {
      const client = processes.keep(connectLive(wsUrl, { Authorization: `Bearer ${token}` }));
      clients.push(client);
      for (let each = 0; each < SUBSCRIPTIONS_PER_CONNECTION; each += 1) {
        subscriptions.push(client.subscribe(ACCOUNT_CHANGED));
      }
    }
    let live = await releaseMetrics(facade.metricsUrl);
    await waitFor(
      () => live.subscriptions === SUBSCRIBERS,
      `${SUBSCRIBERS} subscriptions to run`,
      undefined,
      async () => {
        live = await releaseMetrics(facade.metricsUrl);
      },
    );

    // Busy for several idle periods: events delivered to every subscriber, one after the other,
    // and a query over HTTP beside each.
    const events = 6;
    for (let event = 1; event <= events; event += 1) {
      await topUp(facade.emulatorUrl);
      const query = await fetch(facade.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: '{ customer(id: "cus_ada") { id displayName } }' }),
      });
      expect(query.status).toBe(200);
      await waitFor(
        () => subscriptions.every((received) => received.data.length === event),
        `event ${event} at every subscriber`,
      );
    }
    expect(subscriptions.flatMap((received) => received.errors)).toEqual([]);
    const whileBusy = await releaseMetrics(facade.metricsUrl);
    expect(whileBusy).toMatchObject({ armed: 1, releases: 0, subscriptions: SUBSCRIBERS });
    expect(facade.logged(RELEASED)).toEqual([]);

    // Every subscriber leaves: half stop their subscriptions, the other half close their sockets.
    subscriptions.slice(0, SUBSCRIBERS / 2).forEach((received) => received.stop());
    await Promise.all(clients.slice(CONNECTIONS / 2).map((client) => client.dispose()));
    await Promise.all(clients.map((client) => client.dispose()));
    await waitFor(
      () => live.subscriptions === 0 && live.connections === 0,
      'every subscriber to leave',
      undefined,
      async () => {
        live = await releaseMetrics(facade.metricsUrl);
      },
    );

    // Watched in the log, not by scraping: a scrape is work on the facade's event loop.
    await waitFor(
      () => facade.logged(RELEASED).length > 0,
      'a release after the idle period',
      loadScaledMs(IDLE_MS * 5),
    );
    // Idle for several more periods: nothing new ran, so nothing more is collected.
    await sleep(IDLE_MS * 3);
    const after = await releaseMetrics(facade.metricsUrl);
    expect(after.releases).toBe(1);
    expect(after.releasedBytes).toBeGreaterThan(0);

    const [released] = facade.logged(RELEASED);
    expect(facade.logged(RELEASED)).toHaveLength(1);
    expect(released).toMatchObject({ level: 'info', component: 'memory' });
    expect(released!.rssAfterMiB as number).toBeLessThan(released!.rssBeforeMiB as number);
    expect(released!.idleMs as number).toBeGreaterThanOrEqual(IDLE_MS);
    // It came after the last operation ended, by at least the idle period.
    const lastOperation = facade
      .logged('graphql operation')
      .map((entry) => Date.parse(entry.time as string))
      .reduce((latest, time) => Math.max(latest, time), 0);
    expect(facade.logged('graphql operation')).toHaveLength(SUBSCRIBERS + events);
    expect(Date.parse(released!.time as string) - lastOperation).toBeGreaterThanOrEqual(IDLE_MS);
  });

  test('an event whose delivery waits on the upstream past the idle period is not collected under: the release follows it', async () => {
    const { facade, client, query, burst, holdBack } = await heldBackFacade();
    await burst(100);
    const received = client.subscribe(ACCOUNT_CHANGED);
    await waitFor(() => facade.logged('subscription started').length === 1, 'the subscription to start');
    // The delivery's read of the account is held back for several idle periods.
    await holdBack('getAccount');
    // Work just ran (a query that reads no account): the idle period runs from here.
    expect(await query('{ customer(id: "cus_ada") { id displayName } }')).toBe(200);
    await topUp(facade.emulatorUrl);
    await waitFor(() => received.data.length === 1, 'the event at the subscriber', loadScaledMs(20_000));
    expect(received.errors).toEqual([]);
    // Nobody else ran, but a subscriber waited on its delivery all along: nothing was collected.
    expect(facade.logged(RELEASED)).toEqual([]);
    const delivered = Date.now();
    await waitFor(
      () => facade.logged(RELEASED).length > 0,
      'a release after the delivery',
      loadScaledMs(DELIVERY_IDLE_MS * 10),
    );
    expect(Date.parse(facade.logged(RELEASED)[0]!.time as string)).toBeGreaterThanOrEqual(delivered);
    await client.dispose();
  });

  test('a subscription whose replay waits on the upstream past the idle period is not collected under while it opens', async () => {
    // The replay reads the upstream, not an answer the queries before it left.
    const { facade, client, query, burst, holdBack } = await heldBackFacade({ CACHE_ENABLED: 'false' });
    await burst(100);
    // The replay's read of the customer is held back for several idle periods.
    await holdBack('getCustomer');
    // Work just ran (an operation that reads nothing): the idle period runs from here.
    expect(await query('{ __typename }')).toBe(200);
    client.subscribe(
      'subscription { customerChanged(customerId: "cus_ada", since: "2000-01-01T00:00:00Z") { type } }',
    );
    await waitFor(
      () => facade.logged('subscription started').length === 1,
      'the subscription to start',
      loadScaledMs(20_000),
    );
    // The subscriber waited on its replay all along: nothing was collected.
    expect(facade.logged(RELEASED)).toEqual([]);
    await waitFor(
      () => facade.logged(RELEASED).length > 0,
      'a release once it listens',
      loadScaledMs(DELIVERY_IDLE_MS * 10),
    );
    await client.dispose();
  });

  test('a @live query whose first execution waits on the upstream past the idle period is not collected under', async () => {
    const { facade, client, query, burst, holdBack } = await heldBackFacade();
    // Queries that read no account, so the live query's read is the upstream's; a burst large
    // enough that the RSS has grown over the RSS at start.
    await burst(300);
    // The live query's read of the account is held back for several idle periods.
    await holdBack('getAccount');
    expect(await query('{ __typename }')).toBe(200);
    const received = client.subscribe(
      'query @live { account(customerId: "cus_ada", id: "acc_ada_sol") { id } }',
    );
    await waitFor(() => received.data.length === 1, 'the first answer', loadScaledMs(20_000));
    expect(received.errors).toEqual([]);
    // The watcher waited on its first answer all along: nothing was collected.
    expect(facade.logged(RELEASED)).toEqual([]);
    const answered = Date.now();
    await waitFor(
      () => facade.logged(RELEASED).length > 0,
      'a release after the first answer',
      loadScaledMs(DELIVERY_IDLE_MS * 10),
    );
    expect(Date.parse(facade.logged(RELEASED)[0]!.time as string)).toBeGreaterThanOrEqual(answered);
    await client.dispose();
  });

  test('started without --expose-gc, the release says it cannot run and stays disarmed', async () => {
    const facade = await processes.start({ MEMORY_RELEASE_IDLE_MS: String(IDLE_MS) });
    const metricsUrl = facade.logged('facade listening')[0]!.metrics as string;
    expect(await releaseMetrics(metricsUrl)).toMatchObject({ armed: 0, releases: 0 });
    const [warning] = facade.lines.filter(
      (entry) =>
        typeof entry.msg === 'string' &&
        entry.msg.startsWith('memory release is on but node was started without --expose-gc'),
    );
    expect(warning).toMatchObject({ level: 'warn', component: 'memory' });
  });
});
