/**
 * `/metrics` after known traffic: exact counter movements for a dashboard query (upstream calls by
 * route template, the operation, its loaders), webhook deliveries by outcome, and the bounds that
 * keep ids and invented names out of labels.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateWebhookSecret, signWebhook } from '../../emulator/webhooks/signature.ts';
import { loadConfig } from '../../src/config.ts';
import { createOperationLabels } from '../../src/observability/operation-labels.ts';
import { createRouteMatcher } from '../../src/upstream/route-template.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { startStack, useStack } from '../support/harness/stack.ts';
import { deltas, scrape, valueOf } from '../support/metrics.ts';

const SECRET = generateWebhookSecret();
const stack = useStack({ env: { WEBHOOK_SECRETS: SECRET, METRICS_MAX_OPERATION_NAMES: '4' } });
const metricsUrl = () => stack.metricsUrl;

const DASHBOARD = /* GraphQL */ `
  query Dashboard($id: ID!) {
    customer(id: $id) {
      id
      displayName
      accounts(first: 2) {
        nodes {
          id
          balances {
            currency
            available
          }
          fees {
            breakdown {
              developer {
                fixed
              }
            }
          }
        }
      }
      relatedParties(first: 2) {
        nodes {
          displayName
        }
      }
      capabilities(first: 1) {
        nodes {
          method
          status
        }
      }
    }
  }
`;

describe('/metrics', () => {
  it('serves Prometheus text with Node process metrics', async () => {
    const response = await fetch(metricsUrl());
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    expect(text).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d/m);
    expect(text).toMatch(/^facade_graphql_ws_connections 0$/m);
    expect(text).toMatch(/^facade_graphql_ws_subscriptions 0$/m);
  });

  it('counts a dashboard query: one operation, four upstream calls by route template, its loads', async () => {
    const before = await scrape(metricsUrl());
    const result = await stack.query(DASHBOARD, { id: 'cus_acme' });
    expect(result.body.errors).toBeUndefined();
    const after = await scrape(metricsUrl());

    expect((await stack.upstreamCalls()).total).toBe(4);
    expect(deltas(before, after, 'facade_upstream_requests_total')).toEqual({
      '{method="GET",route="/v3/customers/{customerId}",status="200"}': 1,
      '{method="GET",route="/v3/customers/{customerId}/accounts",status="200"}': 1,
      '{method="GET",route="/v3/customers/{customerId}/related-parties",status="200"}': 1,
      '{method="GET",route="/v3/customers/{customerId}/capabilities",status="200"}': 1,
    });
    expect(
      deltas(before, after, 'facade_upstream_request_duration_seconds_count', { method: 'GET' }),
    ).toEqual({
      '{method="GET",route="/v3/customers/{customerId}",status="200"}': 1,
      '{method="GET",route="/v3/customers/{customerId}/accounts",status="200"}': 1,
      '{method="GET",route="/v3/customers/{customerId}/related-parties",status="200"}': 1,
      '{method="GET",route="/v3/customers/{customerId}/capabilities",status="200"}': 1,
    });
    expect(deltas(before, after, 'graphql_operations_total')).toEqual({
      '{operation_name="Dashboard",operation_type="query",outcome="ok",transport="http"}': 1,
    });
    expect(deltas(before, after, 'graphql_operation_duration_seconds_count')).toEqual({
      '{operation_name="Dashboard",operation_type="query",outcome="ok",transport="http"}': 1,
    });
    expect(deltas(before, after, 'graphql_operation_upstream_calls_total')).toEqual({
      '{operation_name="Dashboard",operation_type="query"}': 4,
    });
    // Four reads went upstream. The customer's three lists were started ahead, with the customer's
    // read (src/graph/look-ahead.ts): their fields then found them in the loaders.
    expect(deltas(before, after, 'graphql_dataloader_loads_total')).toEqual({
      '{operation_name="Dashboard",operation_type="query",result="miss"}': 4,
      '{operation_name="Dashboard",operation_type="query",result="hit"}': 3,
    });
  });

  it('counts loads answered by a loader as hits', async () => {
    const before = await scrape(metricsUrl());
    const result = await stack.query(`query Twice {
      a: customer(id: "cus_acme") { id }
      b: customer(id: "cus_acme") { displayName }
    }`);
    expect(result.body.errors).toBeUndefined();
    const after = await scrape(metricsUrl());
    expect(deltas(before, after, 'graphql_dataloader_loads_total')).toEqual({
      '{operation_name="Twice",operation_type="query",result="hit"}': 1,
      '{operation_name="Twice",operation_type="query",result="miss"}': 1,
    });
  });

  it('counts a failed operation as an error, and an upstream 404 by its status', async () => {
    const before = await scrape(metricsUrl());
    const result = await stack.query(`query Missing { customer(id: "cus_nobody") { id } }`);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const after = await scrape(metricsUrl());
    expect(deltas(before, after, 'graphql_operations_total')).toEqual({
      '{operation_name="Missing",operation_type="query",outcome="error",transport="http"}': 1,
    });
    expect(deltas(before, after, 'facade_upstream_requests_total')).toEqual({
      '{method="GET",route="/v3/customers/{customerId}",status="404"}': 1,
    });
  });

  it('counts retries by route and the failure that caused them', async () => {
    await stack.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'internal_error', rate: 1, times: 1 }],
    });
    const before = await scrape(metricsUrl());
    const result = await stack.query(`query Retried { customer(id: "cus_acme") { id } }`);
    expect(result.body.errors).toBeUndefined();
    const after = await scrape(metricsUrl());
    expect(deltas(before, after, 'facade_upstream_requests_total')).toEqual({
      '{method="GET",route="/v3/customers/{customerId}",status="500"}': 1,
      '{method="GET",route="/v3/customers/{customerId}",status="200"}': 1,
    });
    expect(deltas(before, after, 'facade_upstream_retries_total')).toEqual({
      '{method="GET",reason="500",route="/v3/customers/{customerId}"}': 1,
    });
    expect(deltas(before, after, 'graphql_operation_upstream_calls_total')).toEqual({
      '{operation_name="Retried",operation_type="query"}': 2,
    });
  });

  it('labels an unparsable request unknown and an anonymous one anonymous', async () => {
    const before = await scrape(metricsUrl());
    expect((await stack.query('{ customer(id: ')).status).toBe(400);
    expect((await stack.query('{ apiStatus { reachable } }')).status).toBe(200);
    const after = await scrape(metricsUrl());
    expect(deltas(before, after, 'graphql_operations_total')).toEqual({
      '{operation_name="unknown",operation_type="unknown",outcome="error",transport="http"}': 1,
      '{operation_name="anonymous",operation_type="query",outcome="ok",transport="http"}': 1,
    });
  });

  it('counts webhook deliveries by outcome: accepted, duplicate, forged, stale', async () => {
    const webhookUrl = `${stack.facadeUrl}/webhooks/platform`;
    const event = acmeAccountUpdated();
    const before = await scrape(metricsUrl());

    expect((await postSignedEvent(webhookUrl, SECRET, event)).status).toBe(200);
    expect((await postSignedEvent(webhookUrl, SECRET, event)).body).toMatchObject({ duplicate: true });
    expect(
      (await postSignedEvent(webhookUrl, generateWebhookSecret(), { ...event, id: `${event.id}_x` })).status,
    ).toBe(401);
    const body = JSON.stringify({ ...event, id: `${event.id}_old` });
    const old = Math.floor(Date.now() / 1000) - 3600;
    const stale = await fetch(webhookUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': `${event.id}_old`,
        'webhook-timestamp': String(old),
        'webhook-signature': signWebhook({ secret: SECRET, id: `${event.id}_old`, timestamp: old, body }),
      },
      body,
    });
    expect(stale.status).toBe(401);

    const after = await scrape(metricsUrl());
    expect(deltas(before, after, 'facade_webhook_deliveries_total')).toEqual({
      '{outcome="accepted"}': 1,
      '{outcome="duplicate"}': 1,
      '{outcome="forged"}': 1,
      '{outcome="stale"}': 1,
    });
  });

  it('keeps invented operation names out of labels past the bound', async () => {
    // The bound is 4 in this file, and the tests above used four names (Dashboard, Twice, Missing, Retried).
    const names = Array.from({ length: 5 }, (_, index) => `Invented${index}`);
    for (const name of names) await stack.query(`query ${name} { apiStatus { reachable } }`);
    const samples = await scrape(metricsUrl());
    const labelled = [...samples.keys()]
      .filter((key) => key.startsWith('graphql_operations_total{'))
      .map((key) => /operation_name="([^"]*)"/.exec(key)?.[1]);
    const distinct = new Set(
      labelled.filter((name) => name !== 'anonymous' && name !== 'unknown' && name !== 'other'),
    );
    expect([...distinct].sort()).toEqual(['Dashboard', 'Missing', 'Retried', 'Twice']);
    expect(
      valueOf(samples, 'graphql_operations_total', {
        operation_name: 'other',
        operation_type: 'query',
        outcome: 'ok',
        transport: 'http',
      }),
    ).toBeGreaterThanOrEqual(5);
  });

  it('exposes a rate-limit refusal counter the limiter can increment by bucket', async () => {
    const before = await scrape(metricsUrl());
    stack.app.metrics.rateLimitRefusals.inc({ bucket: 'operations' });
    const after = await scrape(metricsUrl());
    expect(deltas(before, after, 'facade_rate_limit_refusals_total')).toEqual({ '{bucket="operations"}': 1 });
  });
});

describe('METRICS_PORT', () => {
  it('is 9464 by default: metrics are never on the main port', () => {
    expect(
      loadConfig({ UPSTREAM_BASE_URL: 'http://upstream.test', UPSTREAM_API_KEY: 'k', AUTH_MODE: 'none' })
        .metrics.port,
    ).toBe(9464);
  });

  it('serves /metrics on a port of its own, and not on the main port', async () => {
    const own = await startStack({ env: { METRICS_PORT: '0' } });
    try {
      expect(new URL(own.metricsUrl).port).not.toBe(new URL(own.facadeUrl).port);
      await own.query('query OnItsOwnPort { apiStatus { reachable } }');
      const samples = await scrape(own.metricsUrl);
      expect(
        valueOf(samples, 'graphql_operations_total', {
          operation_name: 'OnItsOwnPort',
          operation_type: 'query',
          outcome: 'ok',
          transport: 'http',
        }),
      ).toBe(1);
      expect((await fetch(`${own.facadeUrl}/metrics`)).status).toBe(404);
    } finally {
      await own.close();
    }
  });
});

describe('operation name labels', () => {
  it("a caller's new names count as other; an operator's become labels, then for everyone", async () => {
    const own = await startStack();
    try {
      const before = await scrape(own.metricsUrl);
      await own.queryAs('acme', 'query SquattedByAcme { apiStatus { reachable } }');
      await own.query('query NamedByOperator { apiStatus { reachable } }');
      await own.queryAs('acme', 'query NamedByOperator { apiStatus { reachable } }');
      const after = await scrape(own.metricsUrl);
      expect(deltas(before, after, 'graphql_operations_total')).toEqual({
        '{operation_name="other",operation_type="query",outcome="ok",transport="http"}': 1,
        '{operation_name="NamedByOperator",operation_type="query",outcome="ok",transport="http"}': 2,
      });
    } finally {
      await own.close();
    }
  });
  it('a trusted document keeps its name as a label whoever runs it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'metrics-trusted-'));
    const listed = 'query ListedStatus { apiStatus { reachable } }';
    const manifest = join(dir, 'manifest.json');
    await writeFile(
      manifest,
      JSON.stringify({
        format: 'apollo-persisted-query-manifest',
        version: 1,
        operations: [{ id: 'listed-status-v1', name: 'ListedStatus', type: 'query', body: listed }],
      }),
    );
    const own = await startStack({ env: { TRUSTED_DOCUMENTS: manifest } });
    try {
      const before = await scrape(own.metricsUrl);
      expect((await own.queryAs('acme', listed)).status).toBe(200);
      const after = await scrape(own.metricsUrl);
      expect(deltas(before, after, 'graphql_operations_total')).toEqual({
        '{operation_name="ListedStatus",operation_type="query",outcome="ok",transport="http"}': 1,
      });
    } finally {
      await own.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('label bounds', () => {
  it('derives route templates without ids from the contract', () => {
    const routeOf = createRouteMatcher();
    expect(routeOf('/v3/customers/cus_acme/accounts/acc_1/fees')).toEqual({
      template: '/v3/customers/{customerId}/accounts/{accountId}/fees',
      params: { customerId: 'cus_acme', accountId: 'acc_1' },
    });
    expect(routeOf('/v3/sandbox/accounts/acc%2F1/topup?x=1')).toEqual({
      template: '/v3/sandbox/accounts/{accountId}/topup',
      params: { accountId: 'acc/1' },
    });
    expect(routeOf('/v3/capabilities')).toEqual({ template: '/v3/capabilities', params: {} });
    expect(routeOf('/v3/nothing/here')).toEqual({ template: 'other', params: {} });
  });

  it('labels only names first sent by an operator or a trusted document, up to the bound', () => {
    const label = createOperationLabels(2);
    const operator = { fromOperator: true, trustedDocument: false };
    const trusted = { fromOperator: false, trustedDocument: true };
    const caller = { fromOperator: false, trustedDocument: false };
    expect([
      label('Squat', caller),
      label('A', operator),
      label('A', caller),
      label('B', trusted),
      label('C', operator),
      label('Squat', caller),
      label(undefined, caller),
      label('x'.repeat(65), operator),
    ]).toEqual(['other', 'A', 'A', 'B', 'other', 'other', 'anonymous', 'other']);
  });
});
