/**
 * The emulator as the tests start it: on a free loopback port, demo data, fast webhook retries,
 * with its REST API called as any client would and its test controls (`/_emulator`) behind named
 * helpers: upstream request counts and faults.
 */
import { createEmulator, type EmulatorOptions } from '../../../emulator/index.ts';

export type { EmulatorOptions };

// Response bodies are asserted with toMatchObject; a loose type keeps the tests readable.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** The emulator's default sandbox key (read_write). */
export const SANDBOX_KEY = 'sk_sandbox_emulator';
/** The emulator's default sandbox key with the read_only scope. */
export const READ_ONLY_KEY = 'sk_sandbox_emulator_readonly';
/** The emulator's default live key. */
export const LIVE_KEY = 'sk_live_emulator';

/** Counts of `/v3` requests the emulator received since the last reset. */
export interface UpstreamCalls {
  total: number;
  byRoute: Record<string, number>;
}

/** A fault configuration of the emulator (`PUT /_emulator/faults`). */
export interface FaultSpec {
  latency?: { fixedMs: number; jitterMs: number };
  rules?: {
    route?: string;
    kind: 'internal_error' | 'request_failed' | 'reset' | 'stall' | 'delay';
    rate?: number;
    times?: number;
    /** For `delay`: how long the answer is held back. */
    delayMs?: number;
  }[];
}

export interface RunningEmulator {
  /** Base URL, no path. */
  url: string;
  /**
   * Calls the emulator's REST API like any client would (the sandbox key unless `key` says
   * otherwise; an `Idempotency-Key` on every write). The body is parsed JSON, left untyped for tests.
   */
  rest(
    method: string,
    path: string,
    options?: { key?: string; body?: unknown },
  ): Promise<{ status: number; body: Json }>;
  /** Counts of `/v3` requests received since the last reset. */
  upstreamCalls(): Promise<UpstreamCalls>;
  /**
   * Counts of `/v3` requests whose key the emulator accepted since the last reset, by the key's
   * identity id (`sandbox-read-write`, `live-read-write`): which key the facade sent.
   */
  upstreamCallsByKey(): Promise<Record<string, number>>;
  resetUpstreamCalls(): Promise<void>;
  setFaults(spec: FaultSpec): Promise<void>;
  clearFaults(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts an emulator with demo data on a free loopback port. Webhook retries start at 50 ms (the
 * emulator's own default is a second), so a delivery that had to be retried still arrives within a
 * test. Always `close()` it.
 */
export async function startEmulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emulator = createEmulator({ data: 'demo', webhookRetryBaseMs: 50, ...options });
  const { url } = await emulator.listen(0, '127.0.0.1');
  let request = 0;

  const control = async (method: string, path: string, body?: unknown): Promise<Response> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      throw new Error(
        `Emulator control ${method} ${path} failed: ${response.status} ${await response.text()}`,
      );
    }
    return response;
  };

  return {
    url,
    async rest(method, path, { key = SANDBOX_KEY, body } = {}) {
      request += 1;
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          'x-api-key': key,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(method === 'GET' ? {} : { 'idempotency-key': `test-${process.pid}-${Date.now()}-${request}` }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text === '' ? undefined : (JSON.parse(text) as Json) };
    },
    async upstreamCalls() {
      const counts = (await (await control('GET', '/_emulator/requests')).json()) as UpstreamCalls;
      return { total: counts.total, byRoute: counts.byRoute };
    },
    async upstreamCallsByKey() {
      const counts = (await (await control('GET', '/_emulator/requests/by-key')).json()) as {
        byKeyId: Record<string, number>;
      };
      return counts.byKeyId;
    },
    async resetUpstreamCalls() {
      await control('DELETE', '/_emulator/requests');
    },
    async setFaults(spec) {
      await control('PUT', '/_emulator/faults', {
        latency: spec.latency ?? { fixedMs: 0, jitterMs: 0 },
        rules: spec.rules ?? [],
      });
    },
    async clearFaults() {
      await control('DELETE', '/_emulator/faults');
    },
    close: () => emulator.close(),
  };
}
