/**
 * What is computed once instead of per operation keeps the answers it replaced: a held answer is
 * one frozen value shared by every hit, an operation's cost is measured once per parsed document
 * only when no variable changes it, a path's judgement is remembered without the caller's scope,
 * and a log line is written with the same bytes.
 */
import { parse, type OperationDefinitionNode } from 'graphql';
import { describe, expect, test } from 'vitest';
import { checkOperationCost } from '../../src/graph/query-limits.ts';
import { createSchema } from '../../src/graph/schema.ts';
import { createLogger } from '../../src/logger.ts';
import { authorizeUpstreamRequest, type UpstreamScope } from '../../src/upstream/access.ts';
import { partitionOfKey } from '../../src/upstream/credentials.ts';
import { UpstreamAccessDeniedError, UpstreamProblemError } from '../../src/upstream/errors.ts';
import { createResponseCache, freezeAnswerBody, type CacheRead } from '../../src/upstream/response-cache.ts';
import { createRouteMatcher } from '../../src/upstream/route-template.ts';

const read = (path: string): CacheRead => ({
  partition: partitionOfKey('sk_sandbox_test'),
  path,
  query: '',
  readThrough: false,
});

describe('a held answer kept parsed', () => {
  test('every hit gets the same frozen value, which no reader can change', async () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const text = '{"data":{"id":"acc_1","balances":[{"currency":"USD","available":"10.00"}]}}';
    let loads = 0;
    const load = async () => {
      loads += 1;
      return { status: 200, text, body: freezeAnswerBody(JSON.parse(text) as unknown) };
    };
    const first = await cache.read(read('/v3/customers/c/accounts/acc_1'), load);
    const second = await cache.read(read('/v3/customers/c/accounts/acc_1'), load);

    expect(loads).toBe(1);
    expect(second.body).toBe(first.body);
    expect(second.body).toEqual(JSON.parse(text));
    // The text is not held beside the parsed value.
    expect(second.text).toBe('');
    const body = second.body as { data: { balances: { available: string }[] } };
    expect(() => {
      body.data.balances[0]!.available = '1000000.00';
    }).toThrow(TypeError);
    expect(body.data.balances[0]!.available).toBe('10.00');
  });

  test('counts a parsed answer at twice its text, so fewer fit under the same cap', async () => {
    const text = JSON.stringify({ data: 'x'.repeat(700) });
    const asText = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const parsed = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    await asText.read(read('/v3/customers/a'), async () => ({ status: 200, text }));
    await parsed.read(read('/v3/customers/a'), async () => ({
      status: 200,
      text,
      body: freezeAnswerBody(JSON.parse(text) as unknown),
    }));
    expect(parsed.stats().bytes - asText.stats().bytes).toBe(text.length);
  });
});

describe('the cost measured once per document', () => {
  const schema = createSchema();

  test('a measure no variable changes is the same for every request of the parsed document', () => {
    const document = parse('query ($id: ID!) { customer(id: $id) { id accounts { nodes { id } } } }');
    const operation = document.definitions[0] as OperationDefinitionNode;
    const first = checkOperationCost(schema, document, operation, { id: 'a' }, 1000);
    const again = checkOperationCost(schema, document, operation, { id: 'b' }, 1000);
    expect(again.measure).toBe(first.measure);
    // Another parse of the same text is measured for itself, to the same figures.
    const copy = parse('query ($id: ID!) { customer(id: $id) { id accounts { nodes { id } } } }');
    const other = checkOperationCost(schema, copy, copy.definitions[0] as OperationDefinitionNode, {}, 1000);
    expect(other.measure).not.toBe(first.measure);
    expect(other.measure).toEqual(first.measure);
  });

  test('a measure a variable changes is taken with each request’s variables', () => {
    const document = parse('query ($n: Int) { customers(first: $n) { nodes { id displayName } } }');
    const reparsed = document.definitions[0] as OperationDefinitionNode;
    expect(checkOperationCost(schema, document, reparsed, { n: 10 }, 1000).measure.cost).toBe(1 + 10 * 3);
    expect(checkOperationCost(schema, document, reparsed, { n: 2 }, 1000).measure.cost).toBe(1 + 2 * 3);
    const over = checkOperationCost(schema, document, reparsed, { n: 100 }, 100);
    expect(over.measure.cost).toBe(1 + 100 * 3);
    expect(over.error?.extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});

describe('a path judged once, the caller every time', () => {
  const options = { requestId: 'req_1', problemDocsUrl: 'https://docs.example' };
  const scoped = (customerIds: string[]): UpstreamScope => ({
    authenticated: true,
    operator: false,
    customers: { kind: 'customers', customerIds: new Set(customerIds) },
  });

  test('the same path is allowed for its customer and refused, as a missing customer, for another', () => {
    const request = { method: 'GET' as const, path: '/v3/customers/cus_a/accounts' };
    for (let round = 0; round < 3; round += 1) {
      expect(() => authorizeUpstreamRequest(scoped(['cus_a']), request, options)).not.toThrow();
      expect(() => authorizeUpstreamRequest(scoped(['cus_b']), request, options)).toThrow(
        UpstreamProblemError,
      );
    }
  });

  test('an unsafe path stays refused however often it is sent', () => {
    const request = { method: 'GET' as const, path: '/v3/customers/cus_a/..%2Fcus_b/accounts' };
    for (let round = 0; round < 3; round += 1) {
      expect(() => authorizeUpstreamRequest(scoped(['cus_a']), request, options)).toThrow(
        UpstreamAccessDeniedError,
      );
    }
  });

  test("a route's match is shared and frozen: a caller cannot change the next one's", () => {
    const routeOf = createRouteMatcher(['/v3/customers/{customerId}/accounts']);
    const first = routeOf('/v3/customers/cus_a/accounts');
    expect(first).toEqual({
      template: '/v3/customers/{customerId}/accounts',
      params: { customerId: 'cus_a' },
    });
    expect(routeOf('/v3/customers/cus_a/accounts')).toBe(first);
    expect(Object.isFrozen(first.params)).toBe(true);
    expect(routeOf('/v3/other')).toEqual({ template: 'other', params: {} });
  });
});

describe('the log line', () => {
  test('writes the same bytes: plain values without the replacer, errors with it, keys redacted', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', write: (line) => lines.push(line), redact: ['sk_secret'] });
    logger.info('graphql operation', { operationName: 'Dashboard', errorCodes: ['A', 'B'], durationMs: 3 });
    logger.info('failed', { error: new Error('with sk_secret inside') });
    logger.info('nested', { items: [{ key: 'sk_secret' }] });

    const [plain, failed, nested] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(plain).toMatchObject({ msg: 'graphql operation', errorCodes: ['A', 'B'], durationMs: 3 });
    expect(failed!.error).toMatchObject({ name: 'Error', message: 'with [redacted] inside' });
    expect(nested!.items).toEqual([{ key: '[redacted]' }]);
    expect(lines.join('\n')).not.toContain('sk_secret');
  });
});
