/**
 * The MCP endpoint against an attacker, on a real facade with tokens of the run's issuer and the
 * emulator counting upstream calls: no token (401 naming the protected-resource metadata, which
 * names the issuer), an expired one, a hostile `Origin` (DNS rebinding), another caller's session
 * id (404 as if unknown, the owner's session untouched), a body too big and an input nested deep,
 * a path-normalising proxy in front (`/mcp/../graphql`, `/%6Dcp`), more sessions than a caller may
 * hold, and a spent operation budget. None of them reaches the upstream.
 */
import { request as httpRequest } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { connectMcp, initializeMessage, mcpRequest, openRawSession } from '../support/harness/mcp-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { startNormalisingProxy, type NormalisingProxy } from '../support/normalising-proxy.ts';
import { issuerEnv, issuerSignedToken, tokenFor } from '../support/tokens.ts';

const ACCOUNTS =
  'query CustomerAccounts($customerId: ID!) { customer(id: $customerId) { id accounts(first: 5) { nodes { id } } } }';
const TOP_UP = 'mutation TopUp($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }';

const directory = await mkdtemp(join(tmpdir(), 'mcp-attacks-'));
const manifestPath = join(directory, 'manifest.json');
await writeFile(manifestPath, JSON.stringify({ 'customer-accounts': ACCOUNTS, 'top-up': TOP_UP }));
afterAll(() => rm(directory, { recursive: true, force: true }));

const INITIALIZE = initializeMessage('attacker');
const TOOLS_LIST = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
const callAccounts = (customerId: unknown) => ({
  jsonrpc: '2.0',
  id: 3,
  method: 'tools/call',
  params: { name: 'CustomerAccounts', arguments: { customerId } },
});

/** A raw HTTP request whose path is sent exactly as written (fetch would resolve `..` itself). */
function rawRequest(
  base: string,
  path: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(base);
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const sent = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': String(Buffer.byteLength(text)),
          ...headers,
        },
      },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () =>
          resolve({
            status: answer.statusCode ?? 0,
            headers: answer.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    sent.on('error', reject);
    sent.end(text);
  });
}

describe('the MCP endpoint against an attacker', () => {
  const stack = useStack({
    env: {
      TRUSTED_DOCUMENTS: manifestPath,
      CORS_ORIGINS: 'https://agents.example',
      AUTH_CLOCK_TOLERANCE_SECONDS: '1',
    },
  });

  test('no token: 401 naming the protected-resource metadata, which names the issuer', async () => {
    const answer = await mcpRequest(stack.facadeUrl, INITIALIZE);
    expect(answer.status).toBe(401);
    const metadataUrl = `${stack.facadeUrl}/.well-known/oauth-protected-resource/mcp`;
    expect(answer.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrl}"`);
    expect(answer.headers.get('mcp-session-id')).toBeNull();
    expect(answer.body).toMatchObject({ jsonrpc: '2.0', error: { data: { code: 'UNAUTHENTICATED' } } });
    for (const url of [metadataUrl, `${stack.facadeUrl}/.well-known/oauth-protected-resource`]) {
      const metadata = await fetch(url);
      expect(metadata.status).toBe(200);
      expect(await metadata.json()).toEqual({
        resource: `${stack.facadeUrl}/mcp`,
        authorization_servers: [issuerEnv()['AUTH_ISSUER']],
        bearer_methods_supported: ['header'],
        resource_name: expect.any(String),
      });
    }
    // The SDK's own client, without a token, is refused the same way.
    await expect(connectMcp(stack.facadeUrl, undefined)).rejects.toThrow();
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('an expired token: 401 invalid_token, nothing run', async () => {
    const now = Math.floor(Date.now() / 1000);
    const expired = await issuerSignedToken({ iat: now - 600, exp: now - 60 });
    const answer = await mcpRequest(stack.facadeUrl, INITIALIZE, { authorization: `Bearer ${expired}` });
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toMatch(
      /^Bearer error="invalid_token", resource_metadata="/,
    );
    await expect(connectMcp(stack.facadeUrl, expired)).rejects.toThrow();
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a hostile Origin is refused before anything is opened; the facade’s own and CORS_ORIGINS are not', async () => {
    const authorization = `Bearer ${await tokenFor('acme')}`;
    const hostile = await mcpRequest(stack.facadeUrl, INITIALIZE, {
      authorization,
      origin: 'https://evil.example',
    });
    expect(hostile.status).toBe(403);
    expect(hostile.headers.get('mcp-session-id')).toBeNull();
    expect(hostile.headers.get('access-control-allow-origin')).toBeNull();
    const nullOrigin = await mcpRequest(stack.facadeUrl, INITIALIZE, { authorization, origin: 'null' });
    expect(nullOrigin.status).toBe(403);
    const own = await mcpRequest(stack.facadeUrl, INITIALIZE, { authorization, origin: stack.facadeUrl });
    expect(own.status).toBe(200);
    const listed = await mcpRequest(stack.facadeUrl, INITIALIZE, {
      authorization,
      origin: 'https://agents.example',
    });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('access-control-allow-origin')).toBe('https://agents.example');
    expect(listed.headers.get('access-control-expose-headers')).toContain('mcp-session-id');
    const preflight = await fetch(`${stack.facadeUrl}/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://agents.example',
        'access-control-request-method': 'DELETE',
        'access-control-request-headers': 'authorization, mcp-session-id, mcp-protocol-version',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('DELETE');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('mcp-session-id');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('another caller’s session id answers 404 as an unknown one; the owner’s session goes on', async () => {
    const acme = await openRawSession(stack.facadeUrl, await tokenFor('acme'));
    const sessionId = acme['mcp-session-id']!;
    const globex = { ...acme, authorization: `Bearer ${await tokenFor('globex')}` };
    for (const method of ['POST', 'GET', 'DELETE'] as const) {
      const answer = await mcpRequest(stack.facadeUrl, callAccounts('cus_globex'), globex, method);
      expect(answer.status).toBe(404);
      expect(answer.body).toMatchObject({ error: { code: -32001, message: 'Session not found' } });
    }
    const unknown = await mcpRequest(stack.facadeUrl, TOOLS_LIST, {
      ...globex,
      'mcp-session-id': crypto.randomUUID(),
    });
    expect(unknown.body).toEqual((await mcpRequest(stack.facadeUrl, TOOLS_LIST, globex)).body);
    // The SDK's client given the id sends nothing it could use.
    const borrowed = await connectMcp(stack.facadeUrl, await tokenFor('globex'), { sessionId });
    await expect(borrowed.client.listTools()).rejects.toThrow(/Session not found/);
    await borrowed.close();
    expect((await stack.upstreamCalls()).total).toBe(0);
    // The owner, with a token refreshed meanwhile (same subject and client), goes on.
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, acme)).status).toBe(200);
    const crafted = await openRawSession(stack.facadeUrl, await issuerSignedToken());
    const refreshed = { ...crafted, authorization: `Bearer ${await issuerSignedToken({ jti: 'another' })}` };
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, refreshed)).status).toBe(200);
  });

  test('a body too big and an input nested deep are refused, nothing sent upstream, the session unharmed', async () => {
    const headers = await openRawSession(stack.facadeUrl, await tokenFor('acme'));
    const huge = await mcpRequest(stack.facadeUrl, callAccounts('x'.repeat(100_000)), headers);
    expect(huge.status).toBe(413);
    expect(huge.body).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: 'The request body is too large.' },
      id: null,
    });
    const broken = await mcpRequest(stack.facadeUrl, '{"jsonrpc":"2.0","id":', headers);
    expect(broken).toMatchObject({ status: 400, body: { error: { code: -32700 } } });
    // Written as text: the test's own JSON.stringify would overflow its stack on it.
    const withArguments = (name: string, argumentsText: string) =>
      `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"${name}","arguments":${argumentsText}}}`;
    const deep = await mcpRequest(
      stack.facadeUrl,
      withArguments('CustomerAccounts', `{"customerId":${'['.repeat(10_000)}${']'.repeat(10_000)}}`),
      headers,
    );
    expect(deep.status).toBe(200);
    expect(deep.body).toMatchObject({
      result: { isError: true, structuredContent: { errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] } },
    });
    // 4,000 levels, 56 KB: within the body limit.
    const nested = `${'{"accountId":'.repeat(4_000)}"acc_acme_eth"${'}'.repeat(4_000)}`;
    const deepInput = await mcpRequest(
      stack.facadeUrl,
      withArguments('TopUp', `{"input":${nested}}`),
      headers,
    );
    expect(deepInput.body).toMatchObject({
      result: { isError: true, structuredContent: { errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] } },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
    const after = await mcpRequest(stack.facadeUrl, callAccounts('cus_acme'), headers);
    expect(after.body).toMatchObject({
      result: { structuredContent: { data: { customer: { id: 'cus_acme' } } } },
    });
  });

  test('the GET stream is cut when the token that opened it expires; the session goes on with a current one', async () => {
    const now = Math.floor(Date.now() / 1000);
    const shortLived = await issuerSignedToken({ exp: now + 2 });
    const headers = await openRawSession(stack.facadeUrl, shortLived);
    const opened = Date.now();
    // Given up after 10 s: a stream that outlives its token fails the test rather than hanging it.
    const stream = await fetch(`${stack.facadeUrl}/mcp`, {
      headers: { ...headers, accept: 'text/event-stream' },
      signal: AbortSignal.timeout(10_000),
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    // Read to its end: the server ends it at the token's expiry (with the clock tolerance, 1 s).
    const reader = stream.body!.getReader();
    while (!(await reader.read()).done) {
      // Keep-alive comments only.
    }
    const openForMs = Date.now() - opened;
    expect(openForMs).toBeGreaterThan(1_000);
    expect(openForMs).toBeLessThan(8_000);
    const current = { ...headers, authorization: `Bearer ${await issuerSignedToken()}` };
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, current)).status).toBe(200);
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, headers)).status).toBe(401);
  });

  describe('behind a path-normalising proxy', () => {
    let proxy: NormalisingProxy;
    beforeAll(async () => {
      proxy = await startNormalisingProxy(stack.facadeUrl);
    });
    afterAll(() => proxy.close());

    test('`/%6Dcp` reaches /mcp and its door; `/mcp/../graphql` reaches /graphql and its door', async () => {
      const authorization = `Bearer ${await tokenFor('acme')}`;
      const encoded = await rawRequest(proxy.url, '/%6Dcp', INITIALIZE, {});
      expect(encoded.status).toBe(401);
      expect(encoded.headers['www-authenticate']).toMatch(/resource_metadata=/);
      expect((await rawRequest(proxy.url, '/%6Dcp', INITIALIZE, { authorization })).status).toBe(200);
      // A document of the caller's own, wherever the path lands: the same door refuses it.
      const untrusted = { query: '{ customer(id: "cus_acme") { id email } }' };
      const dotted = await rawRequest(proxy.url, '/mcp/../graphql', untrusted, { authorization });
      expect(proxy.requests().map((request) => request.forwarded)).toEqual(['/mcp', '/mcp', '/graphql']);
      expect(dotted.status).toBe(400);
      expect(JSON.parse(dotted.body)).toMatchObject({
        errors: [{ extensions: { code: 'PERSISTED_QUERY_NOT_IN_LIST' } }],
      });
      expect((await rawRequest(proxy.url, '/mcp/../graphql', untrusted, {})).status).toBe(401);
      // Straight to the facade, neither path is another way in: both are unknown.
      expect((await rawRequest(stack.facadeUrl, '/%6Dcp', INITIALIZE, { authorization })).status).toBe(404);
      expect(
        (await rawRequest(stack.facadeUrl, '/mcp/../graphql', untrusted, { authorization })).status,
      ).toBe(404);
      expect((await stack.upstreamCalls()).total).toBe(0);
    });
  });
});

describe('an idle session', () => {
  const stack = useStack({ env: { MCP_SESSION_IDLE_MS: '1000' } });

  test('ends once nothing reached it for MCP_SESSION_IDLE_MS', async () => {
    const headers = await openRawSession(stack.facadeUrl, await tokenFor('acme'));
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, headers)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, headers)).status).toBe(404);
  });
});

describe('the MCP endpoint’s bounds', () => {
  const stack = useStack({
    env: {
      TRUSTED_DOCUMENTS: manifestPath,
      MCP_MAX_SESSIONS_PER_CALLER: '2',
      MCP_MAX_SESSIONS: '3',
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_REQUESTS: '12',
    },
  });

  test('a caller holds its newest sessions only; the replica no more than its maximum', async () => {
    const acme = await tokenFor('acme');
    const first = await openRawSession(stack.facadeUrl, acme);
    const second = await openRawSession(stack.facadeUrl, acme);
    const third = await openRawSession(stack.facadeUrl, acme);
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, first)).status).toBe(404);
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, second)).status).toBe(200);
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, third)).status).toBe(200);
    const globex = await openRawSession(stack.facadeUrl, await tokenFor('globex'));
    const full = await mcpRequest(stack.facadeUrl, INITIALIZE, {
      authorization: `Bearer ${await tokenFor('operator')}`,
    });
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('30');
    // A session ended by its client makes room.
    for (const ended of [second, third, globex]) {
      expect((await mcpRequest(stack.facadeUrl, undefined, ended, 'DELETE')).status).toBe(200);
    }
    expect((await mcpRequest(stack.facadeUrl, TOOLS_LIST, second)).status).toBe(404);
  });

  test('a spent operation budget answers 429 with its wait and RateLimit fields, nothing sent upstream', async () => {
    const headers = await openRawSession(stack.facadeUrl, await tokenFor('batchJob'));
    let answer = await mcpRequest(stack.facadeUrl, callAccounts('cus_acme'), headers);
    expect(answer.headers.get('ratelimit')).toMatch(/r=\d+/);
    await stack.resetUpstreamCalls();
    for (let sent = 0; sent < 12 && answer.status === 200; sent += 1) {
      answer = await mcpRequest(stack.facadeUrl, callAccounts('cus_acme'), headers);
      if (answer.status === 200) await stack.resetUpstreamCalls();
    }
    expect(answer.status).toBe(429);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(answer.body).toMatchObject({ error: { data: { code: 'RATE_LIMITED' } } });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
