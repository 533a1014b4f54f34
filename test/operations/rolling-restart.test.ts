/**
 * A rolling restart loses nothing, in small (bench/rolling-restart.ts measures it with 200
 * subscribers): compose.yaml's twin behind a Service that balances over the ready replicas, 20
 * subscribers (half graphql-ws, half SSE) resuming with `after` whenever their subscription ends,
 * top-ups made at the emulator and delivered by its webhooks, a query load through the gateway,
 * and each replica in turn taken out of the Service, stopped with SIGTERM, started again and ready.
 * The twin's processes come through test/support/processes.ts: stopped however the test ended, their
 * readiness waits stretched by the machine's load, and this file in the serial `processes` project.
 */
import { describe, expect, it } from 'vitest';
import { measureRollingRestart } from '../../bench/rolling-restart.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { useProcesses } from '../support/processes.ts';
import { facadeReadsSentinels } from './sentinel-support.ts';

const processes = useProcesses();

describe('a rolling restart of the replicas', () => {
  // The replicas share the event log through compose.yaml's Sentinels: a facade that does not read
  // REDIS_SENTINELS shares nothing, and subscribers of the other replica would miss every event.
  it.skipIf(!facadeReadsSentinels())(
    'delivers every event once to every subscriber, and every query answers',
    async () => {
      const report = await measureRollingRestart({
        subscribers: 20,
        rounds: 1,
        eventIntervalMs: 300,
        queryRate: 10,
        queryConcurrency: 2,
        preStopMs: 1_000,
        webhooks: 'service',
        spawn: processes.spawn,
        readyWithinMs: loadScaledMs(30_000),
      });
      expect(report.restarts.map(({ replica, exitCode }) => ({ replica, exitCode }))).toEqual([
        { replica: 'facade-a', exitCode: 0 },
        { replica: 'facade-b', exitCode: 0 },
      ]);
      // Every top-up is one account event, and each was sent during the restarts.
      expect(report.topUps.failed).toBe(0);
      expect(report.events).toBe(report.topUps.made);
      expect(report.events).toBeGreaterThan(0);
      expect({
        missed: report.missed,
        duplicates: report.duplicates,
        unknown: report.unknown,
        delivered: report.delivered,
      }).toEqual({ missed: 0, duplicates: 0, unknown: 0, delivered: report.expected });
      expect(report.webhookAttempts.gaveUp).toBe(0);
      // Every subscriber was on a restarted replica: each subscription ended and was resumed.
      expect(report.resumes).toBeGreaterThanOrEqual(20);
      const endedBy = (how: string): number =>
        Object.entries(report.endings)
          .filter(([key]) => key.endsWith(how))
          .reduce((sum, [, count]) => sum + count, 0);
      expect(endedBy('graphql-ws complete')).toBeGreaterThanOrEqual(10);
      expect(endedBy('sse complete')).toBeGreaterThanOrEqual(10);
      // Each ended with `complete` from a draining replica: none cut (a socket closed without a close
      // frame, a stream that failed).
      expect(Object.keys(report.endings).filter((key) => !/: (graphql-ws|sse) complete$/.test(key))).toEqual(
        [],
      );
      expect(report.subscriptionErrors).toEqual({});
      expect(report.queries.reasons).toEqual({});
      expect(report.queries.ok).toBeGreaterThan(0);
    },
    600_000,
  );
});
