/**
 * `/readyz` and an upstream that hangs (a TCP proxy in front of the emulator that accepts
 * connections and answers nothing) or answers late (the emulator's `delay` fault): every answer
 * comes within the upstream deadline, 200 `degraded` with `probe_timeout` (503 for
 * `?environment=`), the probe under way is not started again for each request (connections
 * counted at the proxy), and its answer, or the next probe's once the upstream answers again, is
 * what a later check reads.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { startEmulator, LIVE_KEY, SANDBOX_KEY, type RunningEmulator } from '../support/harness/emulator.ts';
import { startFacade, type RunningFacade } from '../support/harness/facade.ts';
import { startTcpProxy, type TcpProxy } from '../support/harness/tcp-proxy.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';

/** How long `/readyz` waits for the upstream's probe here. */
const DEADLINE_MS = 300;
/**
 * What every answer must come within: the deadline and room for a loaded machine, and well under
 * the upstream client's own header timeout below, which is what `/readyz` waited for before.
 */
const BOUND_MS = 2_000;
/** The upstream client gives up on a request's head after this (a hung probe ends then). */
const HEADERS_TIMEOUT_MS = 4_000;
const CACHE_MS = 1_000;

/** What a test started, closed after it whatever happens. */
const started: { emulator?: RunningEmulator; proxy?: TcpProxy; facade?: RunningFacade } = {};

afterEach(async () => {
  await started.facade?.close();
  await started.proxy?.close();
  await started.emulator?.close();
  delete started.facade;
  delete started.proxy;
  delete started.emulator;
});

/** The emulator, a proxy in front of it, and a facade whose upstream is the proxy. */
async function facadeBehindProxy(
  env: Record<string, string> = {},
): Promise<{ emulator: RunningEmulator; proxy: TcpProxy; facade: RunningFacade }> {
  const emulator = (started.emulator = await startEmulator());
  const proxy = (started.proxy = await startTcpProxy({
    host: '127.0.0.1',
    port: Number(new URL(emulator.url).port),
  }));
  const facade = (started.facade = await startFacade(`http://127.0.0.1:${proxy.port}`, {
    env: {
      READINESS_UPSTREAM_DEADLINE_MS: String(DEADLINE_MS),
      READINESS_CACHE_MS: String(CACHE_MS),
      UPSTREAM_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      // Nothing but `/readyz` calls the upstream in the background.
      RECONCILE_INTERVAL_SECONDS: '0',
      ...env,
    },
  }));
  return { emulator, proxy, facade };
}

interface Answer {
  status: number;
  body: { status: string; upstream?: { reachable: boolean; reason?: string }; [key: string]: unknown };
  ms: number;
}

/** One `/readyz` (with `query`), timed from the request to the whole body. */
async function readiness(facade: RunningFacade, query = ''): Promise<Answer> {
  const startedAt = performance.now();
  const response = await fetch(`${facade.url}/readyz${query}`);
  const body = (await response.json()) as Answer['body'];
  return { status: response.status, body, ms: performance.now() - startedAt };
}

// Each waits for the upstream client's own header timeout at least once.
describe('/readyz and an upstream that hangs', { timeout: 60_000 }, () => {
  test('answers 200 degraded (probe_timeout) within the bound, request after request, with one upstream connection at a time and none per request', async () => {
    const { proxy, facade } = await facadeBehindProxy();
    proxy.hold();
    const before = proxy.accepted();
    const answers: Answer[] = [];
    const startedAt = performance.now();
    let secondAt: number | undefined;
    // Until the first probe ended (the client's header timeout), a second began, and a cache period
    // more passed; every 100 ms, far more often than once per cache period.
    while (secondAt === undefined || performance.now() - secondAt < CACHE_MS + 500) {
      expect(performance.now() - startedAt).toBeLessThan(loadScaledMs(HEADERS_TIMEOUT_MS + 4 * CACHE_MS));
      answers.push(await readiness(facade));
      if (secondAt === undefined && proxy.accepted() - before >= 2) secondAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.body.status).toBe('degraded');
      expect(answer.body.upstream?.reachable).toBe(false);
      expect(answer.ms).toBeLessThan(BOUND_MS);
    }
    const reasons = new Set(answers.map((answer) => answer.body.upstream?.reason));
    // Past the deadline; then, for a cache period, the hung probe's own end (the client's timeout).
    expect(reasons.has('probe_timeout')).toBe(true);
    expect(
      [...reasons].filter((reason) => reason !== 'probe_timeout' && reason !== 'headers_timeout'),
    ).toEqual([]);
    // The first probe held its connection until the client's timeout; only then did a second start.
    const connections = proxy.accepted() - before;
    expect(connections).toBe(2);
    expect(answers.length).toBeGreaterThan(10 * connections);
    const timeouts = facade
      .logs()
      .filter((line) => line.includes('upstream degraded; the replica stays ready'))
      .filter((line) => line.includes('"reason":"probe_timeout"'));
    expect(timeouts.length).toBeGreaterThan(0);
  });

  test('?environment= answers 503 (probe_timeout) within the bound; /readyz stays 200 degraded', async () => {
    const { proxy, facade } = await facadeBehindProxy({
      UPSTREAM_API_KEY: '',
      UPSTREAM_API_KEY_SANDBOX: SANDBOX_KEY,
      UPSTREAM_API_KEY_LIVE: LIVE_KEY,
    });
    proxy.hold();
    const before = proxy.accepted();
    const live = await readiness(facade, '?environment=live');
    expect(live.ms).toBeLessThan(BOUND_MS);
    expect(live.status).toBe(503);
    expect(live.body).toEqual({
      status: 'unavailable',
      environment: 'live',
      upstream: { reachable: false, reason: 'probe_timeout' },
    });
    const all = await readiness(facade);
    expect(all.ms).toBeLessThan(BOUND_MS);
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      status: 'degraded',
      environments: {
        sandbox: { reachable: false, reason: 'probe_timeout' },
        live: { reachable: false, reason: 'probe_timeout' },
      },
    });
    // Past the cache period the probes under way are still waited for, not started again.
    await new Promise((resolve) => setTimeout(resolve, CACHE_MS + 100));
    const again = await readiness(facade, '?environment=sandbox');
    expect(again.ms).toBeLessThan(BOUND_MS);
    expect(again.status).toBe(503);
    expect(proxy.accepted() - before).toBe(2);
  });

  test('once the upstream answers again, the next check past the cache period reads it reachable', async () => {
    const { proxy, facade } = await facadeBehindProxy();
    proxy.hold();
    expect((await readiness(facade)).body.upstream?.reason).toBe('probe_timeout');
    proxy.restore();
    // The held probe ends at the client's timeout; the check after it asks again and gets through.
    let last: Answer | undefined;
    await waitFor(
      () => last?.body.status === 'ready',
      'a check reads the upstream reachable again',
      loadScaledMs(HEADERS_TIMEOUT_MS + 3 * CACHE_MS + 2_000),
      async () => {
        last = await readiness(facade);
        expect(last.ms).toBeLessThan(BOUND_MS);
      },
    );
    expect(last!.body).toEqual({ status: 'ready', upstream: { reachable: true, environment: 'sandbox' } });
  });
});

describe('/readyz and an upstream that answers late', () => {
  test('answers probe_timeout past the deadline, and the late answer is what the next check reads, with no second call', async () => {
    const { emulator, facade } = await facadeBehindProxy();
    await emulator.resetUpstreamCalls();
    await emulator.setFaults({ rules: [{ route: 'GET /v3/capabilities', kind: 'delay', delayMs: 1_200 }] });
    const first = await readiness(facade);
    expect(first.ms).toBeLessThan(BOUND_MS);
    expect(first.body).toEqual({
      status: 'degraded',
      upstream: { reachable: false, reason: 'probe_timeout' },
    });
    // Checks meanwhile read the probe under way (probe_timeout at once); the first after its late
    // answer reads that answer.
    let next: Answer | undefined;
    await waitFor(
      () => next?.body.status === 'ready',
      'a check reads the late answer',
      loadScaledMs(5_000),
      async () => {
        next = await readiness(facade);
        expect(next.ms).toBeLessThan(BOUND_MS);
      },
    );
    expect(next!.body).toEqual({ status: 'ready', upstream: { reachable: true, environment: 'sandbox' } });
    expect((await emulator.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
  });
});
