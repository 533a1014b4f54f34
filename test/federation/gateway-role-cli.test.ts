/**
 * The shipped Hive Gateway configuration (deploy/gateway.config.ts) carrying the gateway role, with
 * the `hive-gateway` CLI itself as a child process: given its own client at the issuer
 * (`GATEWAY_CLIENT_ID`, `GATEWAY_CLIENT_SECRET`) and `GATEWAY_INLINE_TRACES=true`, it sends its own
 * token in `X-Gateway-Authorization` beside the caller's and asks for a trace, and the facade
 * behind it answers with `ftv1`. A recording proxy between the gateway and the facade (the
 * supergraph routes `platform` through it) shows what the gateway sent and what the facade answered.
 * A caller cannot claim the role through the gateway: the headers it sends are not passed on, a
 * gateway without a client of its own sends neither, and no trace reaches a caller's answer.
 * `GATEWAY_METRICS=true` serves Prometheus metrics on `/metrics`, and the client address the facade
 * gets is one entry of `X-Forwarded-For`: the address the gateway saw, or with
 * `GATEWAY_TRUST_PROXY=1` the one the proxy in front of it appended, never what a client wrote.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Trace } from '@apollo/usage-reporting-protobuf';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { useProcesses } from '../support/processes.ts';
import { issuerEnv, TEST_CLIENTS, tokenFor } from '../support/tokens.ts';

const processes = useProcesses();

/** One request the gateway sent the facade, and the facade's answer. */
interface Exchange {
  headers: IncomingHttpHeaders;
  body: { query?: string };
  answer: { data?: unknown; extensions?: Record<string, unknown> };
}

let federation: FederationStack;
let proxy: Server;
const exchanges: Exchange[] = [];
/** With a client of its own and traces asked for. */
let tracing: RunningGatewayProcess;
/** Without a client of its own (compose.yaml's demo gateway). */
let plain: RunningGatewayProcess;

/** Forwards every request to the facade and records it with the facade's answer. */
async function startRecordingProxy(facadeGraphqlUrl: string): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        if (['host', 'connection', 'content-length', 'keep-alive'].includes(name) || value === undefined)
          continue;
        headers.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      void fetch(facadeGraphqlUrl, {
        method: req.method ?? 'POST',
        headers,
        body: body === '' ? undefined : body,
      })
        .then(async (response) => {
          const text = await response.text();
          exchanges.push({
            headers: req.headers,
            body: body === '' ? {} : (JSON.parse(body) as Exchange['body']),
            answer: JSON.parse(text) as Exchange['answer'],
          });
          res.writeHead(response.status, {
            'content-type': response.headers.get('content-type') ?? 'application/json',
          });
          res.end(text);
        })
        .catch(() => {
          res.writeHead(502).end();
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

beforeAll(async () => {
  federation = await startFederationStack();
  proxy = await startRecordingProxy(federation.stack.graphqlUrl);
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
  const supergraphSdl = federation.supergraphSdl.replaceAll(federation.stack.graphqlUrl, proxyUrl);
  expect(supergraphSdl).toContain(proxyUrl);
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  const edge = { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! };
  [tracing, plain] = await Promise.all([
    startHiveGatewayCli(processes, {
      supergraphSdl,
      env: {
        ...edge,
        GATEWAY_CLIENT_ID: TEST_CLIENTS.gateway.clientId,
        GATEWAY_CLIENT_SECRET: TEST_CLIENTS.gateway.clientSecret,
        GATEWAY_INLINE_TRACES: 'true',
        GATEWAY_METRICS: 'true',
        GATEWAY_TRUST_PROXY: '1',
      },
    }),
    startHiveGatewayCli(processes, { supergraphSdl, env: edge }),
  ]);
});

afterAll(async () => {
  await Promise.all([tracing?.close(), plain?.close()]);
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
  await federation?.close();
});

beforeEach(() => {
  exchanges.length = 0;
});

const QUERY = '{ customer(id: "cus_acme") { displayName openSupportNoteCount } }';
/** What a caller sends to claim the role and ask for a trace itself. */
async function claimingHeaders(): Promise<Record<string, string>> {
  return {
    'x-gateway-authorization': `Bearer ${await tokenFor('gateway')}`,
    'apollo-federation-include-trace': 'ftv1',
  };
}

/** The exchanges of the facade's part of a query (not the gateway's own schema reads). */
const facadeExchanges = () => exchanges.filter(({ body }) => body.query?.includes('customer') === true);

describe('a gateway with a client of its own', () => {
  test("sends its own gateway-role token beside the caller's, and the facade answers it with a trace", async () => {
    const callerToken = await tokenFor('acme');
    const answer = await postGraphQL(tracing.url, QUERY, undefined, {
      authorization: `Bearer ${callerToken}`,
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      data: { customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: expect.any(Number) } },
    });

    const [sent] = facadeExchanges();
    expect(sent).toBeDefined();
    // The caller's token decides what is read; the gateway's proves the role, and is the gateway's.
    expect(sent!.headers.authorization).toBe(`Bearer ${callerToken}`);
    const gatewayToken = /^Bearer (\S+)$/.exec(String(sent!.headers['x-gateway-authorization']))?.[1];
    expect(decodeJwt(gatewayToken!)).toMatchObject({
      client_id: TEST_CLIENTS.gateway.clientId,
      roles: ['gateway'],
    });
    expect(sent!.headers['apollo-federation-include-trace']).toBe('ftv1');
    const trace = Trace.decode(Buffer.from(String(sent!.answer.extensions?.ftv1), 'base64'));
    expect(trace.root?.child?.map((node) => node.responseName)).toEqual(['customer']);
  });

  test("passes no trace on to the caller, and none of the caller's own claim", async () => {
    const answer = await postGraphQL(tracing.url, QUERY, undefined, {
      authorization: `Bearer ${await tokenFor('acme')}`,
      ...(await claimingHeaders()),
    });
    expect(answer.status).toBe(200);
    expect(JSON.stringify(answer.body)).not.toContain('ftv1');
    const [sent] = facadeExchanges();
    // What the facade got in X-Gateway-Authorization is the gateway's own token, not the caller's.
    const sentToken = /^Bearer (\S+)$/.exec(String(sent!.headers['x-gateway-authorization']))?.[1];
    expect(sentToken).not.toBe(await tokenFor('gateway'));
    expect(decodeJwt(sentToken!).client_id).toBe(TEST_CLIENTS.gateway.clientId);
  });

  test('behind one proxy (GATEWAY_TRUST_PROXY=1), forwards the address that proxy appended, alone', async () => {
    await postGraphQL(tracing.url, QUERY, undefined, {
      authorization: `Bearer ${await tokenFor('acme')}`,
      // A client's own entry, then the one the proxy in front appended.
      'x-forwarded-for': '203.0.113.9, 198.51.100.7',
    });
    expect(facadeExchanges()[0]!.headers['x-forwarded-for']).toBe('198.51.100.7');
  });

  test('serves Prometheus metrics on /metrics', async () => {
    const response = await fetch(`${tracing.url.replace(/\/graphql$/, '')}/metrics`);
    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(/^# HELP graphql_/m);
  });
});

describe('a gateway without a client of its own', () => {
  test('passes on neither header a caller sends to claim the role, and the facade traces nothing', async () => {
    const answer = await postGraphQL(plain.url, QUERY, undefined, {
      authorization: `Bearer ${await tokenFor('acme')}`,
      ...(await claimingHeaders()),
    });
    expect(answer.status).toBe(200);
    expect(JSON.stringify(answer.body)).not.toContain('ftv1');
    const [sent] = facadeExchanges();
    expect(sent).toBeDefined();
    expect(sent!.headers['x-gateway-authorization']).toBeUndefined();
    expect(sent!.headers['apollo-federation-include-trace']).toBeUndefined();
    expect(sent!.answer.extensions?.ftv1).toBeUndefined();
  });

  test('with no proxy in front, forwards the address it saw and drops what the client wrote', async () => {
    await postGraphQL(plain.url, QUERY, undefined, {
      authorization: `Bearer ${await tokenFor('acme')}`,
      'x-forwarded-for': '203.0.113.9',
    });
    expect(facadeExchanges()[0]!.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  test('serves no /metrics', async () => {
    const response = await fetch(`${plain.url.replace(/\/graphql$/, '')}/metrics`);
    expect(response.status).not.toBe(200);
  });
});
