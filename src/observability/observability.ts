/**
 * Puts the facade's metrics and audit trail together for `createApp`: the upstream observer both
 * listen through, the audit trail's Apollo plugin, and `/metrics`, always on a server of its own
 * (`METRICS_PORT`, 9464 by default), the way an orchestrator scrapes it: the public port never
 * shows other callers' operations, upstream routes or webhook outcomes.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ApolloServerPlugin } from '@apollo/server';
import express, { type RequestHandler } from 'express';
import type { MetricsConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { UpstreamObserver } from '../upstream/client.ts';
import { createAuditTrail, type AuditableContext, type AuditTrail } from './audit-trail.ts';
import { createMetrics, type LiveTransportNumbers, type Metrics } from './metrics.ts';
import type { AnswerCacheStats } from '../graph/answer-cache.ts';
import type { ResponseCacheStats } from '../upstream/response-cache.ts';

/** The path metrics are served at, on whichever port. */
const METRICS_PATH = '/metrics';

export interface ObservabilityOptions {
  config: MetricsConfig;
  /** Where audit lines go (a logger of their own, never filtered by LOG_LEVEL). */
  auditLogger: Logger;
  /** Metrics built elsewhere (tests); default: new ones in a registry of their own. */
  metrics?: Metrics;
  /** The current trace id, when tracing is on (audit lines carry it). */
  traceId?: () => string | undefined;
  /** Each live transport's open connections and running subscriptions, read at each scrape. */
  live: () => readonly LiveTransportNumbers[];
  /** The event log's length and this replica's lag, read at each scrape. */
  eventLog?: () => Promise<{ environment: string; length: number; lagSeconds: number }[]>;
  /** Refuses a request to the metrics server whose Host is not allowed (DNS rebinding); see app.ts. */
  hostCheck?: RequestHandler;
  /** The upstream response cache's counts, read at each scrape; undefined when it is off. */
  responseCache?: () => ResponseCacheStats | undefined;
  /** The answer cache's counts, read at each scrape; undefined when it is off. */
  answerCache?: () => AnswerCacheStats | undefined;
  /**
   * GET routes served beside `/metrics`, on this port only, by path: what only operators read (the
   * parked webhook events, docs/operations.md).
   */
  operatorRoutes?: Readonly<Record<string, RequestHandler>>;
}

export interface Observability {
  readonly metrics: Metrics;
  readonly audit: AuditTrail;
  /** Metrics and the audit trail, for `createUpstreamClient({ observer })`. */
  readonly upstreamObserver: UpstreamObserver;
  readonly plugins: ApolloServerPlugin<AuditableContext>[];
  /** Starts the metrics server on its own port (`METRICS_PORT`); resolves with its base URL. */
  listen(host: string): Promise<string>;
  close(): Promise<void>;
}

export function createObservability(options: ObservabilityOptions): Observability {
  const metrics =
    options.metrics ??
    createMetrics({
      maxOperationNames: options.config.maxOperationNames,
      live: options.live,
      ...(options.eventLog === undefined ? {} : { eventLog: options.eventLog }),
      ...(options.responseCache === undefined ? {} : { responseCache: options.responseCache }),
      ...(options.answerCache === undefined ? {} : { answerCache: options.answerCache }),
    });
  const audit = createAuditTrail({
    logger: options.auditLogger,
    ...(options.traceId === undefined ? {} : { traceId: options.traceId }),
  });
  const observers = [metrics.upstreamObserver, audit.upstreamObserver];
  let server: http.Server | undefined;

  return {
    metrics,
    audit,
    upstreamObserver: {
      attempt: (report) => {
        for (const observer of observers) observer.attempt?.(report);
      },
      call: (report) => {
        for (const observer of observers) observer.call?.(report);
      },
      circuit: (change) => {
        for (const observer of observers) observer.circuit?.(change);
      },
    },
    plugins: [audit.plugin],
    async listen(host) {
      const metricsApp = express();
      metricsApp.disable('x-powered-by');
      if (options.hostCheck !== undefined) metricsApp.use(options.hostCheck);
      metricsApp.get(METRICS_PATH, metrics.handler());
      for (const [path, handler] of Object.entries(options.operatorRoutes ?? {}))
        metricsApp.get(path, handler);
      metricsApp.use((_request, response) => {
        response.status(404).json({ error: 'not found' });
      });
      const listening = http.createServer(metricsApp);
      server = listening;
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(options.config.port, host, () => {
          listening.off('error', reject);
          resolve();
        });
      });
      const { port } = listening.address() as AddressInfo;
      return `http://${host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? 'localhost' : host}:${port}`;
    },
    async close() {
      if (server === undefined) return;
      const closing = server;
      server = undefined;
      closing.closeAllConnections();
      await new Promise<void>((resolve) => closing.close(() => resolve()));
    },
  };
}
