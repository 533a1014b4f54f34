/**
 * The HTTP adapter of the door: `/graphql` over HTTP, translated to the door and back. Express
 * middleware connects (credentials from `Authorization` / `X-API-Key`), lets an anonymous request
 * on only for the landing page or an anonymous-safe document, spends the operation budget and
 * resolves trusted documents before Apollo Server reads the body; Apollo parses with the door's
 * token limit and validates with the door's rules (it keeps parsed documents), and the door's
 * hooks in Apollo's pipeline run the operation checks and set the call budget once the operation
 * is known. Every
 * refusal is answered from the refusal table, and none reaches the upstream.
 */
import { OperationTypeNode, GraphQLError } from 'graphql';
import type { Request, RequestHandler, Response } from 'express';
import { capCallBudget } from '../upstream/call-budget.ts';
import type { GraphContext } from '../graph/context.ts';
import type { RequestHooksOf } from '../http/request-hooks.ts';
import { UNAUTHENTICATED_MESSAGE, type Connection, type Door, type TransportRules } from './door.ts';
import { rateLimitHeaders } from './client-budgets.ts';
import { httpAnswerOf, isRefusal, REFUSALS, refuse, type Refusal } from './refusal.ts';
import type { TrustedDocumentRequest } from './trusted-documents.ts';

/** HTTP serves queries and mutations; subscriptions go over the live transports. */
const HTTP_TRANSPORT: TransportRules = {
  name: 'http',
  serves: new Set([OperationTypeNode.QUERY, OperationTypeNode.MUTATION]),
  elsewhere:
    "Subscriptions are not served by POST /graphql with Accept: application/json: connect a graphql-ws client (WebSocket) to /graphql, POST the subscription to /graphql with Accept: multipart/mixed;subscriptionSpec=1.0 (Apollo Client's HttpLink does), or to /graphql/stream with Accept: text/event-stream (Server-Sent Events).",
};

export interface HttpDoorOptions {
  door: Door;
  /** The client's address (`TRUST_PROXY` applied). */
  addressOf(req: Request): string;
  /** Serve the landing page to an anonymous browser (it holds no data; Sandbox then asks for a token). */
  landingPage: boolean;
}

/** What the rest of the request sees in `res.locals`. */
export interface DoorLocals {
  /** Who is calling; its caller undefined for an anonymous request that may go on. */
  connection: Connection;
}

/** The connection the door admitted for `res` (set by {@link httpDoor}). */
export function connectionOf(res: Response): Connection {
  const connection = (res.locals as Partial<DoorLocals>).connection;
  if (connection === undefined) throw new Error('the HTTP door did not run before the GraphQL handler');
  return connection;
}

/**
 * The door's middleware for `/graphql`: mount after the JSON body parser and before Apollo. A
 * request that passes has its {@link Connection} in `res.locals.connection`.
 */
export function httpDoor(options: HttpDoorOptions): RequestHandler {
  const { door } = options;
  /** The door's answer for one request, in the door's order; undefined when it may go on. */
  const admitRequest = async (
    req: Request,
    res: Response,
    connection: Connection,
  ): Promise<Refusal | undefined> => {
    if (
      connection.caller === undefined &&
      !isLandingPageRequest(req, options.landingPage) &&
      !isAnonymousRequest(req, door)
    ) {
      return refuse('unauthenticated', UNAUTHENTICATED_MESSAGE);
    }
    // The budget's state goes on the answer whatever comes of the operation (RateLimit fields).
    const spent = await door.spendOperation(connection, (quota) => res.set(rateLimitHeaders(quota)));
    return spent ?? trustedDocument(req, connection, door);
  };
  return async (req, res, next) => {
    try {
      const connection = await door.connect({
        credentials: { authorization: req.get('authorization'), apiKey: req.get('x-api-key') },
        address: options.addressOf(req),
        kind: 'request',
      });
      const refusal = isRefusal(connection) ? connection : await admitRequest(req, res, connection);
      if (refusal !== undefined) {
        sendRefusal(res, refusal);
        return;
      }
      if (isRefusal(connection)) return;
      (res.locals as DoorLocals).connection = connection;
      next();
    } catch (error) {
      next(error);
    }
  };
}

/**
 * The door's checks once Apollo knows the operation: the transport serves its type, input strings,
 * the cost with the variables; then the operation's call budget is cut to what its cost can need.
 */
export function doorHooks(door: Door, options: { maxCost: number }): RequestHooksOf<GraphContext> {
  return () => {
    // Apollo keeps parsed documents: a kept one skips both hooks, having taken both steps before.
    let parsed = false;
    return {
      parsingDidStart() {
        parsed = true;
        door.took('parse');
      },
      validationDidStart() {
        door.took('validate');
      },
      didResolveOperation({ document, request, contextValue }) {
        if (!parsed) {
          door.took('parse');
          door.took('validate');
        }
        const admitted = door.checkOperation(
          document,
          request.operationName,
          request.variables,
          HTTP_TRANSPORT,
        );
        if (isRefusal(admitted)) throw toApolloError(admitted);
        capCallBudget(contextValue.upstream.callBudget, admitted.callLimit);
        contextValue.cost.estimated = admitted.measure.cost;
      },
      willSendResponse({ request, response, contextValue }) {
        // Asked for, and only for an operation the door admitted: the figures of its own answer.
        const estimated = contextValue.cost.estimated;
        if (!wantsCost(request.http?.headers.get(COST_HEADER)) || estimated === undefined) return;
        if (response.body.kind !== 'single') return;
        const budget = contextValue.upstream.callBudget;
        const cost: OperationCostExtension = {
          estimated,
          maximum: options.maxCost,
          upstreamCalls: budget.sent,
        };
        const result = response.body.singleResult;
        result.extensions = { ...result.extensions, cost };
      },
    };
  };
}

/**
 * The request header that asks for `extensions.cost` on the answer (`X-GraphQL-Cost: true`). Any
 * other value, or none, leaves the answer as it is.
 */
const COST_HEADER = 'x-graphql-cost';

/** `extensions.cost` of an answer whose request sent {@link COST_HEADER}. */
export interface OperationCostExtension {
  /** The operation's estimated cost with its variables: the measure `QUERY_MAX_COST` limits. */
  estimated: number;
  /** `QUERY_MAX_COST`: an operation estimated above it is refused before it runs. */
  maximum: number;
  /**
   * Requests the operation sent to the upstream, retries included; an answer of the response cache
   * is no call (the call budget spends one for it all the same).
   */
  upstreamCalls: number;
}

function wantsCost(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}

/** Answers `res` with the refusal table's status, headers and body. */
export function sendRefusal(res: Response, refusal: Refusal): void {
  const answer = httpAnswerOf(refusal);
  res.status(answer.status).set(answer.headers).send(answer.body);
}

/** A refusal thrown inside Apollo: its status from the table (Apollo removes `http` from the body). */
function toApolloError(refusal: Refusal): GraphQLError {
  const status = REFUSALS[refusal.refused].http.status;
  const error = refusal.errors?.[0];
  return new GraphQLError(error?.message ?? refusal.message, {
    ...(error === undefined
      ? {}
      : { nodes: error.nodes, path: error.path, originalError: error.originalError }),
    extensions: {
      ...error?.extensions,
      code: REFUSALS[refusal.refused].code,
      ...refusal.extensions,
      http: { status },
    },
  });
}

/**
 * Trusted documents: puts a listed id's stored body into the request (POST body or GET URL) and
 * answers the refusal of anything unlisted. A request that names no operation (Sandbox's landing
 * page, a CORS preflight) is left to Apollo.
 */
function trustedDocument(req: Request, connection: Connection, door: Door): Refusal | undefined {
  if (req.method !== 'GET' && req.method !== 'POST') return undefined;
  const fromUrl = req.method === 'GET';
  const body: unknown = req.body;
  // A batch (Apollo answers it only when batching is on) is not a listed document.
  if (!fromUrl && Array.isArray(body)) {
    const first = door.trustedQuery(connection, {});
    return isRefusal(first) ? first : undefined;
  }
  const request = fromUrl ? requestFromUrl(req.url) : isRecord(body) ? body : undefined;
  if (request === undefined || !namesAnOperation(request)) return undefined;
  const trusted = door.trustedQuery(connection, request);
  if (trusted === undefined) return undefined;
  if (isRefusal(trusted)) return trusted;
  if (fromUrl) req.url = withQueryInUrl(req.url, trusted);
  else (body as Record<string, unknown>).query = trusted;
  return undefined;
}

/**
 * A browser opening `/graphql`: Apollo answers it with the landing page, which holds no data. It
 * must name no operation as Apollo reads the URL (a `query`, or an `extensions` naming a persisted
 * query): Apollo runs a GET whose `Accept` does not prefer HTML, so a request let through here as a
 * page would otherwise run its operation without a caller.
 */
function isLandingPageRequest(req: Request, landingPage: boolean): boolean {
  if (!landingPage || req.method !== 'GET' || req.accepts(['text/html']) !== 'text/html') return false;
  const params = searchParamsOf(req.url);
  return !params.has('query') && !params.has('extensions');
}

function isAnonymousRequest(req: Request, door: Door): boolean {
  if (req.method === 'GET') {
    // Apollo refuses a repeated `query`; a persisted query's hash beside it must match it.
    const queries = searchParamsOf(req.url).getAll('query');
    return queries.length === 1 && door.mayRunAnonymously(queries[0]);
  }
  const body = req.body as unknown;
  if (!isRecord(body)) return false;
  return door.mayRunAnonymously(body['query']);
}

/**
 * The URL's parameters read the way Apollo Server reads them (`URLSearchParams`, every key), not
 * through express's `req.query`, whose parser stops after 1000 keys: a `query` placed after 1000
 * others would be invisible here and run by Apollo.
 */
function searchParamsOf(url: string): URLSearchParams {
  const start = url.indexOf('?');
  return new URLSearchParams(start === -1 ? '' : url.slice(start + 1).split('#', 1)[0]);
}

function requestFromUrl(url: string): TrustedDocumentRequest {
  const params = searchParamsOf(url);
  let extensions: unknown;
  const rawExtensions = params.get('extensions');
  if (rawExtensions !== null) {
    try {
      extensions = JSON.parse(rawExtensions);
    } catch {
      // Apollo answers malformed extensions itself; here it only means no APQ hash.
      extensions = undefined;
    }
  }
  return {
    query: params.get('query') ?? undefined,
    documentId: params.get('documentId') ?? undefined,
    id: params.get('id') ?? undefined,
    extensions,
    operationName: params.get('operationName') ?? undefined,
  };
}

function namesAnOperation(request: TrustedDocumentRequest): boolean {
  return (
    request.query !== undefined ||
    request.documentId !== undefined ||
    request.id !== undefined ||
    (isRecord(request.extensions) && request.extensions['persistedQuery'] !== undefined)
  );
}

function withQueryInUrl(url: string, query: string): string {
  const parsed = new URL(url, 'http://facade.invalid');
  parsed.searchParams.set('query', query);
  return `${parsed.pathname}${parsed.search}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
