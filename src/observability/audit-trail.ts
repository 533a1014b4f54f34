/**
 * The audit trail: one JSON line per effectful upstream call (every method but GET), on a stream of
 * its own (`"log":"audit"`), written whatever LOG_LEVEL says. It answers "who moved this money,
 * when, through which request" alone: who (the actor), what (the GraphQL mutation, the upstream
 * route and the ids in its path and answer), the idempotency key, the upstream's correlation id,
 * the outcome and whether the upstream replayed an earlier answer.
 *
 * Never in a line: the request body (it holds personal data: names, addresses, tax ids), a header,
 * an API key or a secret. Ids come from the path the facade built and the `id` of the answer.
 */
import { createHash } from 'node:crypto';
import type { ApolloServerPlugin } from '@apollo/server';
import {
  Kind,
  OperationTypeNode,
  type DocumentNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import type { Logger } from '../logger.ts';
import type { UpstreamCallReport, UpstreamObserver } from '../upstream/client.ts';
import {
  UpstreamCallLimitError,
  UpstreamProblemError,
  UpstreamUnavailableError,
} from '../upstream/errors.ts';
import { createRouteMatcher, type RouteMatcher } from '../upstream/route-template.ts';

/** Who asked for a write. */
export interface AuditActor {
  /** `key:<id>` of the upstream key the write was sent with (see {@link apiKeyId}). */
  subject: string;
  /** `facade` when the facade's configured key was used, null for a caller's own `X-API-Key`. */
  client: string | null;
  /** The upstream environment the caller is bound to, when the facade holds a key per environment. */
  environment?: string;
}

/** The GraphQL operation a write belongs to. */
export interface AuditOperation {
  /** The operation's name, or null for an anonymous one. */
  name: string | null;
  /** The root fields of the mutation (`["sandboxTopUp"]`), aliases resolved to field names. */
  fields: string[];
  /** The MCP tool that ran it, when it came through `/mcp`. */
  tool?: string;
}

/** One audit line's fields (besides `level`, `time`, `msg` and `log`). */
export interface AuditEntry {
  actor: AuditActor;
  /**
   * The facade's own id of the request, which no caller chooses. The id sent upstream (and in the
   * operation's log line) is the caller's when it gave one of a safe form: that one is here as
   * `callerRequestId`, and the upstream's echo of it as `correlationId`.
   */
  requestId: string;
  /** The caller's own `X-Request-Id` (of a safe form), else null: kept apart from the facade's. */
  callerRequestId: string | null;
  /** Null for writes the facade makes on its own (webhook registration at start). */
  operation: AuditOperation | null;
  upstream: { method: string; route: string; status: number | null };
  /** Ids from the path (`{ accountId: 'acc_…' }`) and the answer's `id` as `resultId`. */
  resources: Record<string, string>;
  idempotencyKey: string | null;
  /** The upstream's correlation id (its `X-Request-Id` answer, or the problem's `correlationId`). */
  correlationId: string | null;
  /** `ok`, the upstream problem code (`validation_error`), or why no answer came (`connection_failed`). */
  outcome: string;
  /** The upstream answered with the stored result of an earlier request with the same key. */
  replayed: boolean;
  /** Attempts made (retries reuse the idempotency key). */
  attempts: number;
  /** The trace the write belongs to, when tracing is on. */
  traceId?: string;
}

export interface AuditTrailOptions {
  /** Where lines go; the app passes a logger of its own (`log: "audit"`). */
  logger: Logger;
  /** The current trace id, when tracing is on. */
  traceId?: () => string | undefined;
}

export interface AuditTrail {
  /** Plug into `createUpstreamClient({ observer })`: writes one line per finished write. */
  readonly upstreamObserver: UpstreamObserver;
  /** Records which mutation each operation's upstream calls belong to. */
  readonly plugin: ApolloServerPlugin<AuditableContext>;
  /**
   * Records that the upstream calls made with `upstream` (an operation's upstream context) belong
   * to `operation`, for an executor other than Apollo Server's (the MCP endpoint names its `tool`).
   * Only a mutation is recorded: reads leave no audit line.
   */
  noteOperation(
    upstream: object,
    operation: OperationDefinitionNode,
    document: DocumentNode,
    tool?: string,
  ): void;
}

/** What the plugin reads from the request context. */
export interface AuditableContext {
  readonly upstream?: object;
}

/**
 * The id of an upstream API key as the audit trail shows it: `key:` and the first 16 hex digits of
 * its SHA-256. Stable for a key, useless to call the upstream with, and the same in every replica.
 */
export function apiKeyId(apiKey: string): string {
  return `key:${createHash('sha256').update(apiKey).digest('hex').slice(0, 16)}`;
}

/**
 * Who a write is attributed to: the authenticated caller (its token's subject and client) when the
 * operation has one; otherwise the upstream key it was sent with (the facade's own work, such as
 * registering its webhook endpoint, or `AUTH_MODE=none`).
 */
function auditActor(call: {
  credentials: { readonly apiKey: string; readonly configured?: boolean };
  actor?: AuditActor | undefined;
}): AuditActor {
  if (call.actor !== undefined) {
    const { subject, client, environment } = call.actor;
    return { subject, client, ...(environment === undefined ? {} : { environment }) };
  }
  return {
    subject: apiKeyId(call.credentials.apiKey),
    // The facade's configured key, whichever key it holds since a rotation: the facade's own client.
    client: call.credentials.configured === true ? 'facade' : null,
  };
}

/** Builds the audit trail. */
export function createAuditTrail(options: AuditTrailOptions): AuditTrail {
  const routeOf: RouteMatcher = createRouteMatcher();
  // Keyed by the operation's upstream context, which every upstream call of it carries.
  const operations = new WeakMap<object, AuditOperation>();

  function record(report: UpstreamCallReport): void {
    const { call, request, response, error } = report;
    if (request.method === 'GET') return;
    const { template, params } = routeOf(request.path);
    const resultId = idOf(response?.body);
    const entry: AuditEntry = {
      actor: auditActor(call),
      requestId: call.facadeRequestId ?? call.requestId,
      callerRequestId: call.callerRequestId ?? null,
      operation: operations.get(call) ?? null,
      upstream: { method: request.method, route: template, status: response?.status ?? statusOf(error) },
      resources: resultId === undefined ? params : { ...params, resultId },
      idempotencyKey: request.callerIdempotencyKey ?? request.idempotencyKey ?? null,
      correlationId: response?.correlationId ?? correlationIdOf(error),
      outcome: response !== undefined ? 'ok' : outcomeOf(error),
      replayed: response?.replayed ?? false,
      attempts: report.attempts,
    };
    const traceId = options.traceId?.();
    if (traceId !== undefined) entry.traceId = traceId;
    options.logger.info('upstream write', { ...entry });
  }

  const noteOperation: AuditTrail['noteOperation'] = (upstream, operation, document, tool) => {
    if (operation.operation !== OperationTypeNode.MUTATION) return;
    operations.set(upstream, {
      name: operation.name?.value ?? null,
      fields: rootFieldNames(operation, document),
      ...(tool === undefined ? {} : { tool }),
    });
  };

  return {
    upstreamObserver: { call: record },
    plugin: {
      async requestDidStart() {
        return {
          async didResolveOperation({ operation, document, contextValue }) {
            if (operation === undefined || contextValue.upstream === undefined) return;
            noteOperation(contextValue.upstream, operation, document);
          },
        };
      },
    },
    noteOperation,
  };
}

/** The field names selected at the root of `operation`, through fragments, in order, once each. */
export function rootFieldNames(operation: OperationDefinitionNode, document: DocumentNode): string[] {
  const names = new Set<string>();
  const visit = (selectionSet: SelectionSetNode, seen: Set<string>): void => {
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) names.add(selection.name.value);
      else if (selection.kind === Kind.INLINE_FRAGMENT) visit(selection.selectionSet, seen);
      else if (!seen.has(selection.name.value)) {
        seen.add(selection.name.value);
        const fragment = document.definitions.find(
          (definition) =>
            definition.kind === Kind.FRAGMENT_DEFINITION && definition.name.value === selection.name.value,
        );
        if (fragment?.kind === Kind.FRAGMENT_DEFINITION) visit(fragment.selectionSet, seen);
      }
    }
  };
  visit(operation.selectionSet, new Set());
  return [...names];
}

function idOf(body: unknown): string | undefined {
  const data = (body as { data?: unknown } | undefined)?.data;
  const id = (data as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' ? id : undefined;
}

function statusOf(error: unknown): number | null {
  return error instanceof UpstreamProblemError ? error.status : null;
}

function correlationIdOf(error: unknown): string | null {
  if (!(error instanceof UpstreamProblemError)) return null;
  const id = (error.problem as { correlationId?: unknown }).correlationId;
  return typeof id === 'string' ? id : null;
}

function outcomeOf(error: unknown): string {
  if (error instanceof UpstreamProblemError) return error.code;
  if (error instanceof UpstreamUnavailableError) return error.reason;
  if (error instanceof UpstreamCallLimitError) return 'too_many_upstream_calls';
  return 'unexpected_error';
}
