/**
 * Where a started facade's spans go, and what they say of it: `scripts/start.ts` as a user runs it
 * (the OpenTelemetry entry first), spans sent to an OTLP/HTTP receiver in this process. The
 * standard protocol (protobuf) by default, JSON when asked; the resource names the service as the
 * variables say; an exporter or protocol the facade does not ship (gRPC, Zipkin) refuses the start.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { useNpmStart, type NpmStart } from '../support/npm-start.ts';

/** One export the receiver was sent. */
interface ReceivedExport {
  path: string;
  contentType: string;
  body: Buffer;
}

const received: ReceivedExport[] = [];
let receiver: http.Server;
let receiverUrl: string;

beforeAll(async () => {
  receiver = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        path: request.url ?? '',
        contentType: request.headers['content-type'] ?? '',
        body: Buffer.concat(chunks),
      });
      response.writeHead(200).end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

const processes = useNpmStart();

/** Asks the facade one named query, then stops it (SIGTERM flushes the spans still batched). */
async function queryThenStop(facade: NpmStart): Promise<void> {
  const response = await fetch(facade.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${facade.token}` },
    body: JSON.stringify({ query: 'query ExportProbe { __typename }' }),
  });
  expect(response.status).toBe(200);
  const exited = once(facade.child, 'exit');
  facade.child.kill('SIGTERM');
  expect((await exited)[0]).toBe(0);
}

/** The resource attributes of every JSON export received, as plain values. */
function resourcesOfJsonExports(): Record<string, unknown>[] {
  return received
    .filter((entry) => entry.contentType === 'application/json')
    .flatMap((entry) => {
      const payload = JSON.parse(entry.body.toString('utf8')) as {
        resourceSpans: { resource: { attributes: { key: string; value: Record<string, unknown> }[] } }[];
      };
      return payload.resourceSpans.map(({ resource }) =>
        Object.fromEntries(resource.attributes.map(({ key, value }) => [key, Object.values(value)[0]])),
      );
    });
}

describe('trace export', () => {
  test('by default, OTLP protobuf over HTTP to /v1/traces, naming the facade as the service', async () => {
    received.length = 0;
    await queryThenStop(await processes.start({ OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl }));

    expect(received.length).toBeGreaterThan(0);
    for (const entry of received) {
      expect([entry.path, entry.contentType]).toEqual(['/v1/traces', 'application/x-protobuf']);
    }
    // Protobuf carries strings as they are: the operation's span and the service's name are in it.
    const bodies = Buffer.concat(received.map((entry) => entry.body));
    expect(bodies.includes('query ExportProbe')).toBe(true);
    expect(bodies.includes('platform-graphql-facade')).toBe(true);
  });

  test('OTEL_RESOURCE_ATTRIBUTES names the service when OTEL_SERVICE_NAME does not; the process is described', async () => {
    received.length = 0;
    const facade = await processes.start({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes,deployment.environment.name=staging',
    });
    await queryThenStop(facade);

    const resources = resourcesOfJsonExports();
    expect(resources.length).toBeGreaterThan(0);
    for (const resource of resources) {
      expect(resource).toMatchObject({
        'service.name': 'from-attributes',
        'deployment.environment.name': 'staging',
        'process.pid': facade.child.pid,
        'service.instance.id': expect.any(String),
        'host.name': expect.any(String),
        'telemetry.sdk.language': 'nodejs',
      });
    }
  });

  test('OTEL_SERVICE_NAME wins over the service name in OTEL_RESOURCE_ATTRIBUTES', async () => {
    received.length = 0;
    await queryThenStop(
      await processes.start({
        OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'from-service-name',
        OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes',
      }),
    );

    const names = new Set(resourcesOfJsonExports().map((resource) => resource['service.name']));
    expect(names).toEqual(new Set(['from-service-name']));
  });
});

describe('an exporter the facade does not ship refuses the start, in one line, before anything listens', () => {
  test.each([
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json: traces are exported by OTLP over HTTP ' +
        '(a collector\'s port 4318, not its gRPC port 4317); got "grpc".\n',
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf or http/json: traces are exported by OTLP over HTTP ' +
        '(a collector\'s port 4318, not its gRPC port 4317); got "grpc".\n',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp,zipkin' },
      'OTEL_TRACES_EXPORTER may name otlp, console or none; got "zipkin".\n',
    ],
  ])('%j', async (variables, message) => {
    received.length = 0;
    const { code, stdout, stderr } = await processes.runToExit('scripts/start.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      DEV_ISSUER_PORT: '0',
      METRICS_PORT: '0',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
      ...variables,
    });
    expect(code).toBe(1);
    expect(stderr).toBe(message);
    expect(stdout).toBe('');
    expect(received).toEqual([]);
  });
});
