import { randomUUID } from 'node:crypto';
import { createEmulator } from '../../emulator/index.ts';
import type { EmulatorOptions } from '../../emulator/index.ts';

/** The emulator's documented default keys. */
export const SANDBOX_KEY = 'sk_sandbox_emulator';
export const READ_ONLY_KEY = 'sk_sandbox_emulator_readonly';
export const LIVE_KEY = 'sk_live_emulator';

export type CallOptions = {
  /** API key; `null` sends none. Default: the sandbox read-write key. */
  key?: string | null;
  /** JSON-serialised and sent as application/json. */
  json?: unknown;
  /** Sent as is (with `contentType` when given). */
  rawBody?: string;
  contentType?: string;
  /** `auto` (default) sends a fresh key on POST/PUT/PATCH/DELETE; `null` sends none. */
  idempotencyKey?: string | null | 'auto';
  headers?: Record<string, string>;
  signal?: AbortSignal;
};

export type CallResult = {
  status: number;
  headers: Headers;
  // Tests read arbitrary JSON shapes and assert on them; a typed body would only add casts.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
};

export type EmulatorHarness = {
  url: string;
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  close(): Promise<void>;
};

/** Starts a real emulator on a free loopback port and a small fetch client for it. */
export async function startEmulator(options: EmulatorOptions = {}): Promise<EmulatorHarness> {
  const emulator = createEmulator(options);
  const { url } = await emulator.listen(0);

  return {
    url,
    close: () => emulator.close(),
    async call(method, path, callOptions = {}) {
      const headers: Record<string, string> = { ...callOptions.headers };
      const key = callOptions.key === undefined ? SANDBOX_KEY : callOptions.key;
      if (key !== null) headers['X-API-Key'] = key;
      const idempotencyKey = callOptions.idempotencyKey === undefined ? 'auto' : callOptions.idempotencyKey;
      if (idempotencyKey === 'auto') {
        if (method !== 'GET' && !path.startsWith('/_emulator')) headers['Idempotency-Key'] = randomUUID();
      } else if (idempotencyKey !== null) {
        headers['Idempotency-Key'] = idempotencyKey;
      }
      let body: string | undefined;
      if (callOptions.json !== undefined) {
        body = JSON.stringify(callOptions.json);
        headers['Content-Type'] = 'application/json';
      } else if (callOptions.rawBody !== undefined) {
        body = callOptions.rawBody;
        if (callOptions.contentType) headers['Content-Type'] = callOptions.contentType;
      }
      const response = await fetch(`${url}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        ...(callOptions.signal ? { signal: callOptions.signal } : {}),
      });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: response.status, headers: response.headers, body: parsed, text };
    },
  };
}
