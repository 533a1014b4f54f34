/**
 * GraphQL over HTTP: a client that accepts only `application/json` gets 200 for a document the
 * server could not parse, validate or bind variables to, with the errors in the body (the spec's
 * SHOULD; such a client cannot tell a 400 from a broken proxy). A client that accepts
 * `application/graphql-response+json` keeps the 4xx that media type requires.
 */
import type { RequestHooks, RequestHooksOf } from './request-hooks.ts';

/** Errors about the request's document or variables, raised before execution. */
const REQUEST_ERROR_CODES = new Set(['GRAPHQL_PARSE_FAILED', 'GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT']);

const GRAPHQL_RESPONSE_JSON = 'application/graphql-response+json';

const JSON_STATUS: RequestHooks<object> = {
  willSendResponse({ request, response }) {
    if (response.http.status !== 400 || response.body.kind !== 'single') return;
    const accept = request.http?.headers.get('accept') ?? '';
    if (accept.toLowerCase().includes(GRAPHQL_RESPONSE_JSON)) return;
    const errors = response.body.singleResult.errors ?? [];
    const beforeExecution =
      errors.length > 0 &&
      response.body.singleResult.data === undefined &&
      errors.every((error) => REQUEST_ERROR_CODES.has(String(error.extensions?.code)));
    if (!beforeExecution) return;
    response.http.status = 200;
    // Chosen here so the answer's media type is the one the 200 is right for.
    response.http.headers.set('content-type', 'application/json; charset=utf-8');
  },
};

/** The hooks (for `createRequestHooksPlugin`). */
export const jsonStatusHooks: RequestHooksOf<object> = () => JSON_STATUS;
