/**
 * Cost transparency: `X-GraphQL-Cost: true` puts `extensions.cost` on an HTTP answer (its estimated
 * cost, the one `QUERY_MAX_COST` limits, and the upstream calls it made, as the emulator counted
 * them), nothing without it; the same figures land in the metrics per operation; a browser page of
 * an allowed origin may send the header.
 */
import { describe, expect, test } from 'vitest';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';

const ALLOWED_ORIGIN = 'https://app.example.com';
/** docs/security.md's example under "Where the limits come from": it costs 731. */
const DOCUMENTED =
  '{ customers(first: 10) { nodes { id accounts(first: 10) { nodes { id fees { breakdown { developer { fixed bips } } } } } } } }';
const NAMED_WITH_VARIABLES =
  'query CustomerFees($first: Int!) { customers(first: $first) { nodes { id accounts(first: $first) { nodes { id fees { breakdown { developer { fixed bips } } } } } } } }';

interface Answer {
  status: number;
  body: { data?: unknown; errors?: unknown[]; extensions?: Record<string, unknown> };
}

async function post(
  stack: Stack,
  body: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<Answer> {
  const answer = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(await bearer('operator')), ...headers },
    body: JSON.stringify(body),
  });
  return { status: answer.status, body: (await answer.json()) as Answer['body'] };
}

/** The value of the metrics line that starts with `name{` and carries every label of `labels`. */
async function metric(
  stack: Stack,
  name: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const text = await (await fetch(stack.metricsUrl)).text();
  const line = text
    .split('\n')
    .find(
      (candidate) =>
        candidate.startsWith(`${name}{`) &&
        Object.entries(labels).every(([label, value]) => candidate.includes(`${label}="${value}"`)),
    );
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('extensions.cost and the cost metrics', () => {
  const stack = useStack({ env: { CORS_ORIGINS: ALLOWED_ORIGIN } });

  test('asked for: the documented estimate (731) and exactly the upstream calls the emulator saw', async () => {
    await stack.resetUpstreamCalls();
    const answer = await post(stack, { query: DOCUMENTED }, { 'X-GraphQL-Cost': 'true' });
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    const seen = (await stack.upstreamCalls()).total;
    expect(seen).toBeGreaterThan(1);
    expect(answer.body.extensions).toEqual({ cost: { estimated: 731, maximum: 5000, upstreamCalls: seen } });
  });

  test('not asked for (or asked with another value): no extensions at all', async () => {
    const variants: Record<string, string>[] = [
      {},
      { 'X-GraphQL-Cost': 'false' },
      { 'X-GraphQL-Cost': 'yes' },
    ];
    for (const headers of variants) {
      const answer = await post(stack, { query: DOCUMENTED }, headers);
      expect(answer.status).toBe(200);
      expect(answer.body).not.toHaveProperty('extensions');
    }
  });

  test('the estimate counts variables as the door does, and the metrics hold the same figures', async () => {
    const labels = { operation_name: 'CustomerFees', operation_type: 'query' };
    await stack.resetUpstreamCalls();
    const answer = await post(
      stack,
      { query: NAMED_WITH_VARIABLES, variables: { first: 10 } },
      { 'x-graphql-cost': 'TRUE' },
    );
    const seen = (await stack.upstreamCalls()).total;
    expect(answer.body.extensions).toEqual({ cost: { estimated: 731, maximum: 5000, upstreamCalls: seen } });
    expect(await metric(stack, 'graphql_operation_estimated_cost_sum', labels)).toBe(731);
    expect(await metric(stack, 'graphql_operation_estimated_cost_count', labels)).toBe(1);
    expect(await metric(stack, 'graphql_operation_upstream_calls_per_operation_sum', labels)).toBe(seen);
    expect(await metric(stack, 'graphql_operation_upstream_calls_per_operation_count', labels)).toBe(1);
    expect(await metric(stack, 'graphql_operation_upstream_calls_total', labels)).toBe(seen);
    // 731 falls in the bucket of 1000 and not in that of 500.
    expect(await metric(stack, 'graphql_operation_estimated_cost_bucket', { ...labels, le: '500' })).toBe(0);
    expect(await metric(stack, 'graphql_operation_estimated_cost_bucket', { ...labels, le: '1000' })).toBe(1);

    // Smaller pages, a smaller estimate, measured whether or not the caller asked for it.
    await post(stack, { query: NAMED_WITH_VARIABLES, variables: { first: 2 } }, {});
    expect(await metric(stack, 'graphql_operation_estimated_cost_count', labels)).toBe(2);
    const sum = await metric(stack, 'graphql_operation_estimated_cost_sum', labels);
    expect(sum).toBeGreaterThan(731);
    expect(sum).toBeLessThan(2 * 731);
  });

  test('an operation over QUERY_MAX_COST is refused before it runs: its error names the cost, nothing upstream', async () => {
    await stack.resetUpstreamCalls();
    const answer = await post(
      stack,
      { query: NAMED_WITH_VARIABLES, variables: { first: 100 } },
      { 'X-GraphQL-Cost': 'true', accept: 'application/graphql-response+json' },
    );
    expect(answer.status).toBe(400);
    // The refusal names the same measure on its error, asked for or not; the answer has no cost.
    expect(answer.body.errors).toEqual([
      expect.objectContaining({
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED', cost: 70_301, maxCost: 5000 },
      }),
    ]);
    expect(answer.body).not.toHaveProperty('extensions');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a page of an allowed origin may send the header (CORS preflight)', async () => {
    const preflight = await fetch(stack.graphqlUrl, {
      method: 'OPTIONS',
      headers: {
        origin: ALLOWED_ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, x-graphql-cost',
      },
    });
    expect(preflight.status).toBe(204);
    const allowed = (preflight.headers.get('access-control-allow-headers') ?? '').split(/,\s*/);
    expect(allowed).toContain('x-graphql-cost');
  });
});
