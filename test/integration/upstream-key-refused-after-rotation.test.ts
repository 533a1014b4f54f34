/**
 * A 401 on the old key just after a rotation: the upstream client against a plain HTTP server
 * that holds a request until the test has rotated the key, then refuses the old key. The call is
 * sent once more, with the new key and the same Idempotency-Key; a 401 on a key that did not
 * change is never retried, and is the facade's outage (`credential_refused`), not the caller's
 * refusal; a caller's own key refused is that caller's answer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { PLATFORM_SCOPE } from '../../src/upstream/access.ts';
import { createUpstreamClient, type UpstreamClient } from '../../src/upstream/client.ts';
import { createUpstreamContext } from '../../src/upstream/context.ts';
import type { CurrentKey } from '../../src/upstream/credentials.ts';
import {
  refusedCredentialOf,
  UpstreamProblemError,
  UpstreamUnavailableError,
} from '../../src/upstream/errors.ts';
import { sendEffect } from '../../src/upstream/request.ts';

const OLD_KEY = 'sk_old_key_value';
const NEW_KEY = 'sk_new_key_value';

interface Seen {
  apiKey: string | undefined;
  idempotencyKey: string | undefined;
}

let server: http.Server;
let client: UpstreamClient;
const seen: Seen[] = [];
const lines: string[] = [];
/** Called with each request once it arrived; it answers when the test lets it. */
let onRequest: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) =>
  res.writeHead(500).end();

const refuse = (res: http.ServerResponse): void => {
  res.writeHead(401, { 'content-type': 'application/problem+json' });
  res.end(
    JSON.stringify({
      type: 'https://docs.platform.test/v3/errors/unauthorized',
      title: 'Unauthorized',
      status: 401,
      code: 'unauthorized',
      detail: 'The API key in X-API-Key is not valid. Check that it was not rotated.',
    }),
  );
};
const accept = (res: http.ServerResponse): void => {
  res.writeHead(201, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ data: { id: 'tu_1' } }));
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const header = (name: string) => req.headers[name] as string | undefined;
      seen.push({ apiKey: header('x-api-key'), idempotencyKey: header('idempotency-key') });
      onRequest(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  client = createUpstreamClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: 'unused',
    connectTimeoutMs: 1_000,
    headersTimeoutMs: 5_000,
    bodyTimeoutMs: 5_000,
    connections: 2,
    maxCallsPerOperation: 100,
    retry: { maxAttempts: 3, budget: 10, baseDelayMs: 1, maxDelayMs: 5 },
    problemDocsUrl: 'https://docs.platform.test/v3',
    logger: createLogger({ level: 'debug', write: (line) => lines.push(line) }),
  });
});

afterAll(async () => {
  await client?.close();
  await new Promise((resolve) => server?.close(resolve));
});

/** A key source the test rotates by hand. */
function rotatingKey(): CurrentKey & { rotate(): void } {
  let key = OLD_KEY;
  return { current: () => key, partition: () => 'test#0', rotate: () => (key = NEW_KEY) };
}

describe('a 401 after a rotation', () => {
  test('the old key refused while the call was on its way: sent once more with the new key', async () => {
    seen.length = 0;
    const key = rotatingKey();
    onRequest = (req, res) => {
      if (req.headers['x-api-key'] === OLD_KEY) {
        // The rotation happens while this request is with the upstream; then the old key is revoked.
        key.rotate();
        refuse(res);
      } else accept(res);
    };
    const up = createUpstreamContext(client, { apiKey: key, scope: PLATFORM_SCOPE });
    const result = await sendEffect<{ id: string }>(up, 'POST', '/v3/sandbox/accounts/acc_1/topup', {
      amount: '1.00',
      currency: 'USDC',
    });
    expect(result.data).toEqual({ id: 'tu_1' });
    expect(seen.map((request) => request.apiKey)).toEqual([OLD_KEY, NEW_KEY]);
    // The same Idempotency-Key both times: the upstream can only do the write once.
    expect(seen[0]!.idempotencyKey).toBeDefined();
    expect(seen[1]!.idempotencyKey).toBe(seen[0]!.idempotencyKey);
    expect(lines.some((line) => line.includes('sending it again with the new key'))).toBe(true);
    for (const line of lines) {
      expect(line).not.toContain(OLD_KEY);
      expect(line).not.toContain(NEW_KEY);
    }
  });

  test('a 401 on a key that did not change is sent once, and is the facade’s outage: credential_refused', async () => {
    seen.length = 0;
    onRequest = (_req, res) => refuse(res);
    const up = createUpstreamContext(client, { apiKey: rotatingKey(), scope: PLATFORM_SCOPE });
    const error = await sendEffect(up, 'POST', '/v3/sandbox/accounts/acc_1/topup', {}).catch(
      (caught: unknown) => caught,
    );
    // The facade's own key: no verdict on the caller (docs/errors.md, `credential_refused`).
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect((error as UpstreamUnavailableError).reason).toBe('credential_refused');
    expect(refusedCredentialOf(error)?.status).toBe(401);
    expect(seen).toHaveLength(1);
  });

  test('a caller’s own key is never swapped: its 401 is sent once', async () => {
    seen.length = 0;
    onRequest = (_req, res) => refuse(res);
    const up = createUpstreamContext(client, { apiKey: OLD_KEY, scope: PLATFORM_SCOPE });
    await expect(sendEffect(up, 'POST', '/v3/sandbox/accounts/acc_1/topup', {})).rejects.toBeInstanceOf(
      UpstreamProblemError,
    );
    expect(seen.map((request) => request.apiKey)).toEqual([OLD_KEY]);
  });
});
