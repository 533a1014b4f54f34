import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { createEmulator } from '../../emulator/index.ts';
import type { EmulatorOptions } from '../../emulator/index.ts';

/*
 * Test harness of the domain tests: a real emulator on port 0, a fetch-based client that speaks
 * its HTTP API, and a real webhook receiver to observe the events a change sends.
 */

/** The emulator's default keys (docs/upstream-assumptions.md, "Authentication and environments"). */
export const SANDBOX_KEY = 'sk_sandbox_emulator';
export const LIVE_KEY = 'sk_live_emulator';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** An answer of the emulator: status, parsed JSON body and headers. */
export type ApiResponse = { status: number; body: Json; headers: Headers };

export type CallOptions = {
  body?: unknown;
  /** Default: the sandbox key. */
  key?: string;
  /** Default for POST, PUT, PATCH and DELETE: a fresh key per call. */
  idempotencyKey?: string;
};

/** A running emulator and a client for it. */
export type TestEmulator = {
  url: string;
  call(method: string, path: string, options?: CallOptions): Promise<ApiResponse>;
  get(path: string, key?: string): Promise<ApiResponse>;
  /** Restores the demo data (or the empty data set). */
  reset(data?: 'demo' | 'empty'): Promise<void>;
  close(): Promise<void>;
};

/** Starts an emulator on a free loopback port. Close it in `afterAll`. */
export async function startTestEmulator(options: EmulatorOptions = {}): Promise<TestEmulator> {
  const emulator = createEmulator({ webhookRetryBaseMs: 50, webhookMaxAttempts: 2, ...options });
  const { url } = await emulator.listen(0);

  async function call(method: string, path: string, callOptions: CallOptions = {}): Promise<ApiResponse> {
    const headers: Record<string, string> = { 'X-API-Key': callOptions.key ?? SANDBOX_KEY };
    if (method !== 'GET') headers['Idempotency-Key'] = callOptions.idempotencyKey ?? randomUUID();
    if (callOptions.body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(`${url}${path}`, {
      method,
      headers,
      ...(callOptions.body === undefined ? {} : { body: JSON.stringify(callOptions.body) }),
    });
    const text = await response.text();
    return {
      status: response.status,
      body: text === '' ? {} : (JSON.parse(text) as Json),
      headers: response.headers,
    };
  }

  return {
    url,
    call,
    get: (path, key) => call('GET', path, key === undefined ? {} : { key }),
    async reset(data = 'demo') {
      const response = await fetch(`${url}/_emulator/reset`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ data }),
      });
      if (!response.ok) throw new Error(`Reset failed with ${response.status}: ${await response.text()}`);
    },
    close: () => emulator.close(),
  };
}

/**
 * The set-up of a domain test file, registered as vitest hooks: one emulator for the file, its
 * demo data restored before each test, closed after the file. The returned client delegates to
 * it, so it can be declared at module level and used inside tests.
 */
export function useTestEmulator(options: EmulatorOptions = {}): TestEmulator {
  let started: TestEmulator | undefined;
  const current = (): TestEmulator => {
    if (!started) throw new Error('The test emulator starts in beforeAll; use it inside a test or hook.');
    return started;
  };
  beforeAll(async () => {
    started = await startTestEmulator(options);
  });
  afterAll(async () => {
    await started?.close();
  });
  beforeEach(async () => {
    await current().reset();
  });
  return {
    get url() {
      return current().url;
    },
    call: (method, path, callOptions) => current().call(method, path, callOptions),
    get: (path, key) => current().get(path, key),
    reset: (data) => current().reset(data),
    close: () => current().close(),
  };
}

/** A {@link WebhookReceiver} for the whole test file, registered as vitest hooks like {@link useTestEmulator}. */
export function useWebhookReceiver(): WebhookReceiver {
  let started: WebhookReceiver | undefined;
  const current = (): WebhookReceiver => {
    if (!started) throw new Error('The webhook receiver starts in beforeAll; use it inside a test or hook.');
    return started;
  };
  beforeAll(async () => {
    started = await startWebhookReceiver();
  });
  afterAll(async () => {
    await started?.close();
  });
  return {
    get url() {
      return current().url;
    },
    get events() {
      return current().events;
    },
    waitFor: (predicate, timeoutMs) => current().waitFor(predicate, timeoutMs),
    close: () => current().close(),
  };
}

/** A webhook event as received. */
export type ReceivedEvent = {
  id: string;
  type: string;
  occurredAt: string;
  environment: string;
  data: { customerId: string | null; resourceType: string; resourceId: string; object: Json };
};

/** A local HTTP server that accepts every webhook and keeps the parsed events. */
export type WebhookReceiver = {
  url: string;
  events: ReceivedEvent[];
  /** Resolves with the first event matching `predicate`, waiting for it when needed. */
  waitFor(predicate: (event: ReceivedEvent) => boolean, timeoutMs?: number): Promise<ReceivedEvent>;
  close(): Promise<void>;
};

/** Starts a {@link WebhookReceiver} on a free loopback port. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const events: ReceivedEvent[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      events.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ReceivedEvent);
      response.statusCode = 204;
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    events,
    waitFor: (predicate, timeoutMs = 10_000) =>
      eventually(() => {
        const found = events.find(predicate);
        if (!found)
          throw new Error(
            `No matching event among ${events.map((event) => event.type).join(', ') || 'none'}`,
          );
        return found;
      }, timeoutMs),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Retries `probe` until it returns without throwing, for background effects (settlements,
 * deliveries) whose timing a loaded machine cannot promise. Rethrows the last failure on timeout.
 */
export async function eventually<T>(probe: () => T | Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await probe();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
