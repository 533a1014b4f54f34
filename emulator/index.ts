/**
 * The stateful emulator of the Platform API v3: `createEmulator()` builds it, `listen()` serves it.
 * It shares no code with the facade (`src/`); the two meet only at the HTTP contract
 * `schema/upstream/openapi.yaml`.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDomain } from './domain/index.ts';
import { DEFAULT_API_KEYS } from './http/auth.ts';
import { createEmulatorHttp } from './http/server.ts';
import type { ApiKeyConfig, DataSet, EmulatorBackend, EmulatorLogger } from './http/types.ts';
import { createWebhookDispatcher } from './webhooks/dispatcher.ts';

/** Options of {@link createEmulator}. Every member is optional; the defaults are the documented behaviour. */
export type EmulatorOptions = {
  /** Starting data of both environments. Default `demo` (see emulator/README.md). */
  data?: DataSet;
  /** Accepted API keys. Default: `sk_sandbox_emulator`, `sk_sandbox_emulator_readonly`, `sk_live_emulator`. */
  apiKeys?: readonly ApiKeyConfig[];
  /** `{docs_url}` of problem `type`s. Default `https://docs.platform.test/v3`. */
  docsUrl?: string;
  /** How long an idempotent response is replayed. Default 24 h. */
  idempotencyRetentionMs?: number;
  /** First webhook retry delay; each next one doubles. Default 1000 ms. */
  webhookRetryBaseMs?: number;
  /** Webhook attempts per delivery, the first included. Default 8. */
  webhookMaxAttempts?: number;
  /** Delay before a pending transfer completes. Default 50 ms. */
  transferSettleMs?: number;
  /** Receives unexpected errors (and, from `main.ts`, start-up lines). Default: errors to stderr. */
  logger?: EmulatorLogger;
};

/** A running (or ready to run) emulator. */
export type Emulator = {
  /** Starts serving. Port 0 picks a free port; the host defaults to loopback. */
  listen(port?: number, host?: string): Promise<{ url: string; port: number }>;
  /** Stops serving, destroys open connections (stalled ones included) and stops every timer. Idempotent. */
  close(): Promise<void>;
  /** Base URL, e.g. `http://127.0.0.1:4010`. Throws before `listen()` resolves. */
  readonly url: string;
};

const CONSOLE_ERRORS: EmulatorLogger = {
  info: () => undefined,
  warn: (message, fields) => console.warn(message, fields ?? ''),
  error: (message, fields) => console.error(message, fields ?? ''),
};

/** Builds an emulator with its own store, webhook dispatcher and HTTP server. Nothing listens yet. */
export function createEmulator(options: EmulatorOptions = {}): Emulator {
  // Checked, not trusted: JavaScript callers pass anything.
  const data: unknown = options.data ?? 'demo';
  if (data !== 'demo' && data !== 'empty')
    throw new RangeError(`data must be "demo" or "empty"; got ${String(data)}`);
  const logger = options.logger ?? CONSOLE_ERRORS;

  const dispatcher = createWebhookDispatcher({
    ...(options.webhookRetryBaseMs !== undefined ? { retryBaseMs: options.webhookRetryBaseMs } : {}),
    ...(options.webhookMaxAttempts !== undefined ? { maxAttempts: options.webhookMaxAttempts } : {}),
  });
  const domain = createDomain({
    data,
    ...(options.transferSettleMs !== undefined ? { transferSettleMs: options.transferSettleMs } : {}),
    logger,
    publishEvent: (event) => {
      for (const target of domain.activeEndpointsFor(event.environment, event.type))
        dispatcher.deliver(target, event);
    },
  });
  const backend: EmulatorBackend = {
    handlers: domain.handlers,
    reset: (next) => domain.reset(next),
    webhookDeliveries: () => dispatcher.deliveries(),
    close: async () => {
      domain.close();
      await dispatcher.close();
    },
  };

  const http = createEmulatorHttp({
    backend,
    apiKeys: options.apiKeys ?? DEFAULT_API_KEYS,
    ...(options.docsUrl !== undefined ? { docsUrl: options.docsUrl } : {}),
    ...(options.idempotencyRetentionMs !== undefined
      ? { idempotencyRetentionMs: options.idempotencyRetentionMs }
      : {}),
    logger,
  });
  // Idle connections are kept 10 s past the advertised 5 s (Node's slack is 1 s): a client in the same
  // process (the facade in `npm start` and in tests) sends on a connection its timers say is fresh,
  // and after a long synchronous stretch the server's expired idle timer would run before the read of
  // that request and reset it (see src/http/server-timeouts.ts).
  const server: Server = createServer(
    { keepAliveTimeout: 5_000, keepAliveTimeoutBuffer: 10_000 },
    http.listener,
  );
  // A malformed request line or header never reaches the listener; answer it and drop the socket.
  server.on('clientError', http.clientError);

  let baseUrl: string | undefined;
  let closing: Promise<void> | undefined;

  return {
    async listen(port = 0, host = '127.0.0.1') {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const address = server.address() as AddressInfo;
      const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      baseUrl = `http://${shownHost}:${address.port}`;
      return { url: baseUrl, port: address.port };
    },
    close() {
      closing ??= (async () => {
        const stopped = server.listening
          ? new Promise<void>((resolve) => server.close(() => resolve()))
          : Promise.resolve();
        server.closeAllConnections();
        await Promise.all([stopped, backend.close()]);
      })();
      return closing;
    },
    get url() {
      if (baseUrl === undefined) throw new Error('The emulator is not listening yet; await listen() first.');
      return baseUrl;
    },
  };
}

export type { ApiKeyConfig, DataSet, EmulatorLogger } from './http/types.ts';
export { DEFAULT_API_KEYS } from './http/auth.ts';
