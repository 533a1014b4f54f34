/**
 * Traces of a real facade process started the way `npm start` starts it (scripts/start.ts), so the
 * OpenTelemetry entry runs before the app is imported (vitest's module runner would hide express
 * from its loader hook). Spans go to an in-process OTLP receiver; a proxy in front of the emulator
 * records the `traceparent` each upstream request carried. With tracing off, the same start loads
 * not one OpenTelemetry module.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createEmulator } from '../../emulator/index.ts';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { facadeTestEnv } from '../support/harness/facade.ts';
import { connectLive } from '../support/harness/live-client.ts';
import { requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useProcesses, waitUntilReady } from '../support/processes.ts';
import { tokenFor } from '../support/tokens.ts';
import {
  OTLP_SPAN_KIND,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from './support/otlp-receiver.ts';
import { startRecordingProxy, type RecordingProxy } from './support/recording-proxy.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RECORD_MODULES = fileURLToPath(new URL('./support/record-modules.ts', import.meta.url));

const DASHBOARD = /* GraphQL */ `
  query Dashboard($id: ID!) {
    customer(id: $id) {
      id
      displayName
      accounts {
        nodes {
          id
          balances {
            currency
            available
          }
        }
      }
      relatedParties {
        nodes {
          id
          displayName
        }
      }
      capabilities {
        nodes {
          id
        }
      }
    }
  }
`;

const TOP_UP = /* GraphQL */ `
  mutation TopUp($input: SandboxTopUpInput!) {
    sandboxTopUp(input: $input) {
      replayed
    }
  }
`;

/** The caller's trace: the facade must continue it. */
const CALLER_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
/** The trace of the write that follows the dashboard query. */
const WRITE_TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const CALLER_SPAN_ID = '00f067aa0ba902b7';
/** A caller's sampled trace sent to a facade that samples no root of its own. */
const SAMPLED_BY_CALLER_TRACE_ID = '5cf92f3577b34da6a3ce929d0e0e4737';

/**
 * OpenTelemetry at work in a module URL: the SDK, an exporter, the instrumentations or their loader
 * hooks. Not the API alone: prom-client requires `@opentelemetry/api` for its exemplars whatever we
 * do, and the API without an SDK is a set of no-ops that patch nothing.
 */
const OPENTELEMETRY_MODULE =
  /@opentelemetry\/(?!api\/)|import-in-the-middle|require-in-the-middle|\/src\/observability\/(event-)?tracing(-entry)?\.ts$/;

interface Facade {
  url: string;
  lines: Record<string, unknown>[];
  child: ChildProcess;
  /** SIGTERM, then the URLs of every module the process loaded. */
  stop(): Promise<string[]>;
}

const emulator = createEmulator({ data: 'demo' });
let emulatorUrl: string;
let proxy: RecordingProxy;
let receiver: OtlpReceiver;
const processes = useProcesses();

beforeAll(async () => {
  ({ url: emulatorUrl } = await emulator.listen(0, '127.0.0.1'));
  proxy = await startRecordingProxy(emulatorUrl);
  receiver = await startOtlpReceiver();
});

afterAll(async () => {
  await proxy.close();
  await receiver.close();
  await emulator.close();
});

/** Starts `scripts/start.ts` against `upstream` with `env`; resolves once it listens. */
async function startFacade(upstream: string, env: Record<string, string>): Promise<Facade> {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.startsWith('OTEL_') && !name.startsWith('UPSTREAM_') && !name.startsWith('AUTH_'),
    ),
  );
  const modulesFile = join(mkdtempSync(join(tmpdir(), 'facade-modules-')), 'modules.json');
  const child = processes.spawn(process.execPath, ['--import', RECORD_MODULES, 'scripts/start.ts'], {
    cwd: ROOT,
    env: {
      ...inherited,
      ...facadeTestEnv(upstream),
      LOG_LEVEL: 'info',
      RECORD_MODULES_TO: modulesFile,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Record<string, unknown>[] = [];
  let url = '';
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const entry = JSON.parse(line) as Record<string, unknown>;
    lines.push(entry);
    if (entry.msg === 'facade listening') url = entry.url as string;
  });
  await waitUntilReady(child, () => url !== '', 'the facade to listen');
  return {
    url,
    lines,
    child,
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      expect(code).toBe(0);
      return JSON.parse(readFileSync(modulesFile, 'utf8')) as string[];
    },
  };
}

/** POSTs `body` to the facade as the operator (the process is not in `useStack`'s harness). */
async function postGraphQL(
  facade: Facade,
  body: { query: string; variables?: Record<string, unknown> },
  headers: Record<string, string> = {},
): Promise<{ data?: unknown; errors?: unknown }> {
  const response = await fetch(facade.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${await tokenFor('operator')}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { data?: unknown; errors?: unknown };
}

function queryDashboard(facade: Facade, headers: Record<string, string> = {}) {
  return postGraphQL(facade, { query: DASHBOARD, variables: { id: 'cus_acme' } }, headers);
}

/** The chain of ancestors of `span` within `spans`, nearest first. */
function ancestorsOf(span: ReceivedSpan, spans: readonly ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(spans.map((candidate) => [candidate.spanId, candidate]));
  const chain: ReceivedSpan[] = [];
  for (let parent = byId.get(span.parentSpanId ?? ''); parent !== undefined;) {
    chain.push(parent);
    parent = byId.get(parent.parentSpanId ?? '');
  }
  return chain;
}

describe('traces', () => {
  test('a dashboard query: one operation span, four upstream spans under it, the caller’s trace continued and sent upstream', async () => {
    const facade = await startFacade(proxy.url, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'facade-under-test',
    });
    proxy.requests.length = 0;

    const result = await queryDashboard(facade, {
      traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01`,
      'x-request-id': 'traced-dashboard-1',
    });
    expect(result.errors).toBeUndefined();
    const dashboardRequests = [...proxy.requests];
    // A write: its audit line names its trace.
    const topUp = await postGraphQL(
      facade,
      {
        query: TOP_UP,
        variables: {
          input: {
            accountId: 'acc_globex_eth',
            amount: '1.00',
            currency: 'USDC',
            idempotencyKey: 'traced-top-up-1',
          },
        },
      },
      { traceparent: `00-${WRITE_TRACE_ID}-${CALLER_SPAN_ID}-01` },
    );
    expect(topUp.errors).toBeUndefined();
    // Shutting down exports what is still buffered.
    const modules = await facade.stop();

    const spans = receiver.spans.filter((span) => span.traceId === CALLER_TRACE_ID);
    const operations = spans.filter((span) => span.attributes['graphql.operation.type'] !== undefined);
    expect(operations.map((span) => [span.name, span.attributes])).toEqual([
      [
        'query Dashboard',
        expect.objectContaining({ 'graphql.operation.name': 'Dashboard', 'graphql.operation.type': 'query' }),
      ],
    ]);
    const operation = operations[0]!;
    // The caller's span is the root's parent: the trace is continued, not restarted.
    const operationChain = ancestorsOf(operation, spans);
    expect(operationChain.at(-1)!.parentSpanId).toBe(CALLER_SPAN_ID);
    // Express's spans exist only if the loader hook saw express imported: the launcher ran first.
    expect(spans.some((span) => span.scope.includes('instrumentation-express'))).toBe(true);

    const upstream = spans.filter((span) => span.scope === 'platform-graphql-facade');
    expect(upstream).toHaveLength(4);
    expect(upstream.map((span) => span.name).sort()).toEqual([
      'GET /v3/customers/{customerId}',
      'GET /v3/customers/{customerId}/accounts',
      'GET /v3/customers/{customerId}/capabilities',
      'GET /v3/customers/{customerId}/related-parties',
    ]);
    for (const span of upstream) {
      expect(ancestorsOf(span, spans)).toContain(operation);
      expect(span.attributes).toMatchObject({
        'http.request.method': 'GET',
        'url.template': span.name.slice('GET '.length),
        'http.response.status_code': 200,
        'http.request.resend_count': 0,
        'facade.upstream.attempts': 1,
        'facade.upstream.request_id': 'traced-dashboard-1',
        'facade.upstream.correlation_id': expect.any(String),
      });
    }
    // No undici span repeats an upstream call with its URL (and ids) in it; the issuer's key
    // fetches are undici's to trace.
    const undiciUrls = spans
      .filter((span) => span.scope.includes('instrumentation-undici'))
      .map((span) => String(span.attributes['url.full']));
    expect(undiciUrls.filter((url) => url.startsWith(proxy.url))).toEqual([]);

    // Upstream, every request carried the caller's trace id and its own call span as parent.
    expect(dashboardRequests).toHaveLength(4);
    const sentParents = dashboardRequests.map((request) => {
      const [version, traceId, parentId, flags] = request.traceparent?.split('-') ?? [];
      expect([version, traceId, flags]).toEqual(['00', CALLER_TRACE_ID, '01']);
      return parentId;
    });
    expect(new Set(sentParents)).toEqual(new Set(upstream.map((span) => span.spanId)));

    // No id, key, token or header value in any attribute.
    const token = await tokenFor('operator');
    for (const span of spans) {
      expect(Object.keys(span.attributes)).not.toContain('user_agent.original');
      expect(Object.keys(span.attributes)).not.toContain('client.address');
      for (const value of Object.values(span.attributes)) {
        const text = String(value);
        expect(text).not.toContain('cus_acme');
        expect(text).not.toContain(SANDBOX_KEY);
        expect(text).not.toContain(token);
        expect(text.toLowerCase()).not.toContain('bearer');
      }
    }

    // The operation's log line names the trace.
    const logged = facade.lines.find((line) => line.msg === 'graphql operation');
    expect(logged).toMatchObject({ requestId: 'traced-dashboard-1', traceId: CALLER_TRACE_ID });
    const audit = facade.lines.filter((line) => line.log === 'audit');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ idempotencyKey: 'traced-top-up-1', traceId: WRITE_TRACE_ID });
    // The recorder would have seen OpenTelemetry (the counterpart of the next test).
    expect(modules.some((url) => OPENTELEMETRY_MODULE.test(url))).toBe(true);
  });

  test('with root spans never sampled, a request is traced only when its caller sampled it', async () => {
    const facade = await startFacade(proxy.url, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_always_off',
    });
    proxy.requests.length = 0;
    receiver.spans.length = 0;

    // No traceparent: nothing recorded, nothing sent upstream, no trace id in the log line.
    expect((await queryDashboard(facade, { 'x-request-id': 'untraced-dashboard' })).errors).toBeUndefined();
    const untracedRequests = [...proxy.requests];
    proxy.requests.length = 0;
    // A sampled traceparent: the whole tree, as with every trace sampled.
    expect(
      (
        await queryDashboard(facade, {
          traceparent: `00-${SAMPLED_BY_CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01`,
          'x-request-id': 'caller-sampled-dashboard',
        })
      ).errors,
    ).toBeUndefined();
    const sampledRequests = [...proxy.requests];
    await facade.stop();

    expect(untracedRequests).toHaveLength(4);
    expect(untracedRequests.map((request) => request.traceparent)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    const operationLines = facade.lines.filter((line) => line.msg === 'graphql operation');
    expect(operationLines.find((line) => line.requestId === 'untraced-dashboard')).not.toHaveProperty(
      'traceId',
    );
    expect(operationLines.find((line) => line.requestId === 'caller-sampled-dashboard')).toMatchObject({
      traceId: SAMPLED_BY_CALLER_TRACE_ID,
    });

    const requestSpans = receiver.spans.filter((span) => span.name !== 'graphql.parseSchema');
    expect(new Set(requestSpans.map((span) => span.traceId))).toEqual(new Set([SAMPLED_BY_CALLER_TRACE_ID]));
    expect(requestSpans.some((span) => span.scope.includes('instrumentation-express'))).toBe(true);
    expect(
      requestSpans.filter((span) => span.attributes['graphql.operation.name'] === 'Dashboard'),
    ).toHaveLength(1);
    const upstream = requestSpans.filter((span) => span.scope === 'platform-graphql-facade');
    expect(upstream).toHaveLength(4);
    expect(new Set(sampledRequests.map((request) => request.traceparent?.split('-')[3]))).toEqual(
      new Set(['01']),
    );
    expect(new Set(sampledRequests.map((request) => request.traceparent?.split('-')[2]))).toEqual(
      new Set(upstream.map((span) => span.spanId)),
    );
  });

  test('a webhook: its receipt under the HTTP server span, the publish under it (Redis’s under that), the subscriber’s delivery a trace of its own linked to the publish', async () => {
    const secret = generateWebhookSecret();
    const facade = await startFacade(proxy.url, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      WEBHOOK_SECRETS: secret,
      // Through Redis, as between replicas: the trace context rides in the message.
      REDIS_URL: requireRedisUrl(),
      REDIS_KEY_PREFIX: uniqueRedisPrefix(),
      // The line that says a subscription listens is a debug line.
      LOG_LEVEL: 'debug',
    });
    const client = connectLive(facade.url.replace(/^http/, 'ws'), {
      Authorization: `Bearer ${await tokenFor('operator')}`,
    });
    const received = client.subscribe(`subscription Watch { events(customerId: "cus_acme") { eventId } }`);
    await waitFor(() => facade.lines.some((line) => line.msg === 'subscription started'), 'the subscription');
    proxy.requests.length = 0;
    receiver.spans.length = 0;

    const event = acmeAccountUpdated();
    expect(
      (await postSignedEvent(new URL('/webhooks/platform', facade.url).href, secret, event)).status,
    ).toBe(200);
    await waitFor(() => received.data.length === 1, 'the event');
    expect(received.data).toEqual([{ events: { eventId: event.id } }]);
    const deliveryRequests = [...proxy.requests];
    await client.dispose();
    await facade.stop();

    const ofEvent = (name: string) =>
      receiver.spans.filter((span) => span.name === name && span.attributes['facade.event.id'] === event.id);
    const [receipt, ...otherReceipts] = ofEvent('receive webhook');
    expect(otherReceipts).toEqual([]);
    expect(receipt!.attributes).toMatchObject({ 'facade.webhook.outcome': 'accepted' });
    const receiptTrace = receiver.spans.filter((span) => span.traceId === receipt!.traceId);
    const server = ancestorsOf(receipt!, receiptTrace).find((span) => span.kind === OTLP_SPAN_KIND.server);
    expect(server?.scope).toBe('@opentelemetry/instrumentation-http');
    expect(server?.attributes['url.path'] ?? server?.attributes['http.target']).toBe('/webhooks/platform');

    const [publish, ...otherPublishes] = ofEvent('publish event');
    expect(otherPublishes).toEqual([]);
    expect([publish!.kind, publish!.traceId, publish!.parentSpanId]).toEqual([
      OTLP_SPAN_KIND.producer,
      receipt!.traceId,
      receipt!.spanId,
    ]);

    // The Redis script that appended it (and marked it seen) is the publish span's child.
    expect(
      receiptTrace
        .filter((span) => span.parentSpanId === publish!.spanId)
        .map((span) => [span.scope, span.name]),
    ).toEqual([['@opentelemetry/instrumentation-ioredis', 'eval']]);

    const [delivery, ...otherDeliveries] = ofEvent('deliver event');
    expect(otherDeliveries).toEqual([]);
    expect(delivery!.kind).toBe(OTLP_SPAN_KIND.consumer);
    expect(delivery!.parentSpanId).toBeUndefined();
    expect(delivery!.traceId).not.toBe(receipt!.traceId);
    expect(delivery!.links).toEqual([{ traceId: publish!.traceId, spanId: publish!.spanId }]);
    expect(delivery!.attributes).toMatchObject({
      'facade.delivery.outcome': 'delivered',
      'graphql.operation.name': 'Watch',
    });
    // The subscriber's read: a child of the delivery span, its trace sent upstream.
    const deliveryTrace = receiver.spans.filter((span) => span.traceId === delivery!.traceId);
    const reads = deliveryTrace.filter(
      (span) => span.scope === 'platform-graphql-facade' && span !== delivery,
    );
    expect(reads.map((span) => span.name)).toEqual(['GET /v3/customers/{customerId}/accounts/{accountId}']);
    expect(ancestorsOf(reads[0]!, deliveryTrace)).toContain(delivery);
    expect(deliveryRequests.map((request) => request.traceparent)).toEqual([
      `00-${delivery!.traceId}-${reads[0]!.spanId}-01`,
    ]);
    for (const span of [...receiptTrace, ...deliveryTrace]) {
      for (const value of Object.values(span.attributes)) {
        expect(String(value)).not.toContain(secret);
        expect(String(value)).not.toContain(SANDBOX_KEY);
      }
    }
  });

  test('with tracing off, not one OpenTelemetry module is loaded and log lines carry no trace id', async () => {
    const facade = await startFacade(emulatorUrl, {});
    const result = await queryDashboard(facade, {
      traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01`,
    });
    expect(result.errors).toBeUndefined();
    const modules = await facade.stop();

    expect(modules.some((url) => url.endsWith('/src/app.ts'))).toBe(true);
    expect(modules.filter((url) => OPENTELEMETRY_MODULE.test(url))).toEqual([]);
    const logged = facade.lines.find((line) => line.msg === 'graphql operation');
    expect(logged).toBeDefined();
    expect(logged).not.toHaveProperty('traceId');
  });
});
