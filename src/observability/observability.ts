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
import { createMetrics, type Metrics } from './metrics.ts';
import { watchScrapeSources, type ScrapeSources } from './scrape-metrics.ts';

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
  /** Refuses a request to the metrics server whose Host is not allowed (DNS rebinding); see app.ts. */
  hostCheck?: RequestHandler;
}

export interface Observability {
  readonly metrics: Metrics;
  readonly audit: AuditTrail;
  /** Metrics and the audit trail, for `createUpstreamClient({ observer })`. */
  readonly upstreamObserver: UpstreamObserver;
  readonly plugins: ApolloServerPlugin<AuditableContext>[];
  /**
   * Reads `sources` at each scrape (the live transports, the event log, the caches), once the parts
   * that hold those numbers are built: the metrics come first, since those parts count through them.
   */
  watch(sources: ScrapeSources): void;
  /**
   * Serves a GET route beside `/metrics`, on this port only: what only operators read (the parked
   * webhook events, docs/operations.md), given once the part that holds it is built.
   */
  serveOperatorRoute(path: string, handler: RequestHandler): void;
  /** Starts the metrics server on its own port (`METRICS_PORT`); resolves with its base URL. */
  listen(host: string): Promise<string>;
  close(): Promise<void>;
}

export function createObservability(options: ObservabilityOptions): Observability {
  const metrics = options.metrics ?? createMetrics({ maxOperationNames: options.config.maxOperationNames });
  const audit = createAuditTrail({
    logger: options.auditLogger,
    ...(options.traceId === undefined ? {} : { traceId: options.traceId }),
  });
  const observers = [metrics.upstreamObserver, audit.upstreamObserver];
  let server: http.Server | undefined;
  const operatorRoutes = new Map<string, RequestHandler>();

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
    watch: (sources) => watchScrapeSources(metrics, sources),
    serveOperatorRoute: (path, handler) => {
      operatorRoutes.set(path, handler);
    },
    async listen(host) {
      const metricsApp = express();
      metricsApp.disable('x-powered-by');
      if (options.hostCheck !== undefined) metricsApp.use(options.hostCheck);
      metricsApp.get(METRICS_PATH, metrics.handler());
      for (const [path, handler] of operatorRoutes) metricsApp.get(path, handler);
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
