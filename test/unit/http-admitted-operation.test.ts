/**
 * Apollo Server runs only what the door admitted for the very request it reads: the admitted
 * document is handed over (Apollo parses nothing), another text, operation name or variables than
 * the admitted ones, or a request the door found no operation in, runs nothing, and a document the
 * door refused at its operation checks is refused once Apollo resolved it, with the table's status.
 * Through Apollo Server itself the answers are asserted over HTTP (edge-door, edge-admission-order).
 */
import type { GraphQLRequestContext, HTTPGraphQLRequest } from '@apollo/server';
import { HeaderMap } from '@apollo/server';
import { buildSchema, GraphQLError, parse } from 'graphql';
import { describe, expect, test } from 'vitest';
import type { AdmittedOperation, StepRefusal } from '../../src/edge/door/door.ts';
import type { RequestAdmission } from '../../src/edge/door/requests.ts';
import { refuse } from '../../src/edge/refusal.ts';
import type { GraphContext } from '../../src/graph/context.ts';
import { createAdmittedOperations } from '../../src/http/admitted-operation.ts';
import { createCallBudget } from '../../src/upstream/call-budget.ts';

const QUERY = 'query Mine($id: ID!) { customer(id: $id) { id } }';
const DOCUMENT = parse(QUERY);
const SCHEMA = buildSchema('type Query { customer(id: ID!): Customer } type Customer { id: ID! }');

function admitted(variables: Record<string, unknown>): AdmittedOperation {
  return {
    query: QUERY,
    document: DOCUMENT,
    operation: DOCUMENT.definitions[0] as AdmittedOperation['operation'],
    operationName: 'Mine',
    variables,
    measure: { cost: 3 } as AdmittedOperation['measure'],
    callLimit: 2,
    schema: SCHEMA,
  };
}

function admission(operation: RequestAdmission['operation']): RequestAdmission {
  return {
    connection: { caller: undefined, apiKey: undefined, address: '127.0.0.1' },
    operation,
    query: QUERY,
    listed: false,
    schema: SCHEMA,
  };
}

/** Apollo's request context as its hooks see it, for one HTTP request. */
function requestContextOf(
  http: HTTPGraphQLRequest,
  request: { operationName?: string; variables?: Record<string, unknown> },
  source = QUERY,
) {
  const contextValue = {
    upstream: { callBudget: createCallBudget(100) },
    cost: { estimated: undefined },
  } as unknown as GraphContext;
  return {
    request: { ...request, http },
    source,
    queryHash: 'h',
    contextValue,
  } as unknown as GraphQLRequestContext<GraphContext> & {
    source: string;
    queryHash: string;
  };
}

function newRequest(): HTTPGraphQLRequest {
  return { method: 'POST', headers: new HeaderMap(), search: '', body: {} };
}

describe('what Apollo runs over HTTP', () => {
  test('the admitted document, with its call budget and cost once the operation is resolved', () => {
    const operations = createAdmittedOperations();
    const http = newRequest();
    const variables = { id: 'cus_acme' };
    operations.admit(http, admission(admitted(variables)));
    const context = requestContextOf(http, { operationName: 'Mine', variables });
    const hooks = operations.hooks(context)!;
    hooks.didResolveSource!(context);
    expect(context.document).toBe(DOCUMENT);
    hooks.didResolveOperation!(context as never);
    expect(context.contextValue.upstream.callBudget.limit).toBe(2);
    expect(context.contextValue.cost.estimated).toBe(3);
  });

  test.each([
    [
      'another text',
      { operationName: 'Mine', variables: { id: 'cus_acme' } },
      '{ customer(id: "cus_globex") { id } }',
    ],
    ['other variables', { operationName: 'Mine', variables: { id: 'cus_globex' } }, QUERY],
    ['another operation name', { operationName: 'Theirs', variables: { id: 'cus_acme' } }, QUERY],
  ])('nothing when Apollo read %s than the door admitted', (_what, request, source) => {
    const operations = createAdmittedOperations();
    const http = newRequest();
    operations.admit(http, admission(admitted({ id: 'cus_acme' })));
    const context = requestContextOf(http, request, source);
    expect(() => operations.hooks(context)!.didResolveSource!(context)).toThrow(/door admitted/);
    expect(context.document).toBeUndefined();
  });

  test('nothing in a request the door found no operation in, or never saw', () => {
    const operations = createAdmittedOperations();
    const named = newRequest();
    operations.admit(named, admission(undefined));
    for (const http of [named, newRequest()]) {
      const context = requestContextOf(http, {});
      expect(() => operations.hooks(context)!.didResolveSource!(context)).toThrow(/admitted none/);
    }
  });

  test('a document refused by the operation checks is refused with the table’s status once resolved', () => {
    const operations = createAdmittedOperations();
    const http = newRequest();
    const refusal: StepRefusal = {
      ...refuse('wrong-transport', 'Subscriptions go elsewhere.'),
      step: 'operation-checks',
      document: DOCUMENT,
    };
    operations.admit(http, admission(refusal));
    const context = requestContextOf(http, { operationName: 'Mine' });
    const hooks = operations.hooks(context)!;
    hooks.didResolveSource!(context);
    expect(context.document).toBe(DOCUMENT);
    let thrown: unknown;
    try {
      hooks.didResolveOperation!(context as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GraphQLError);
    expect((thrown as GraphQLError).extensions).toEqual({ code: 'BAD_REQUEST', http: { status: 400 } });
    expect(context.contextValue.cost.estimated).toBeUndefined();
  });
});
