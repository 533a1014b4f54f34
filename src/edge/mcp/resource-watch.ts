/**
 * `resources/subscribe`: a resource kept current for one session. The caller connected as a live
 * transport's caller does (`door.connect` with `kind: 'live'`: a scope that is not empty, the
 * connection budget, the environment); its resource's `query @live` is admitted per subscription
 * by the live connections (`live.admit`: the running-operation cap, the credential still current,
 * the operation budget, trusted documents, parse, validation, the operation checks) and run by the
 * live wing's executor, the live query re-run whenever the response cache's invalidation names an
 * answer it read. Each answer after the first that differs from the last is one
 * `notifications/resources/updated`; an answer without data (an outage notice, the expiry's
 * UNAUTHENTICATED) sends nothing.
 *
 * A customer outside the caller's scope reads as an unknown one: the subscription is refused as a
 * resource not found, having cost no upstream call (the scope is checked before any is sent).
 * When the token that subscribed expires, the live side ends and so does the session
 * (`onExpired`): its id answers 404 from then on and the client starts again with a fresh token,
 * as a graphql-ws socket is closed with 4401.
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ExecutionResult, GraphQLFormattedError } from 'graphql';
import type { Logger } from '../../logger.ts';
import type { Connection } from '../door/door.ts';
import type { LiveConnections } from '../live-connections.ts';
import type { LiveExecute } from '../live.ts';
import { graphQLErrorsOf, isRefusal, REFUSALS, type Refusal } from '../refusal.ts';
import type { McpResourceRef } from './resources.ts';
import type { SessionWatch } from './sessions.ts';

/** JSON-RPC's code for a resource that is not there (MCP's `resources/read` and `subscribe`). */
const RESOURCE_NOT_FOUND = -32002;

/** What watching a resource uses. */
export interface ResourceWatchParts {
  /** The live side of the MCP endpoint's connections (its own rules: `mcp`, live queries only). */
  readonly connections: LiveConnections;
  /** The live wing's executor (`query @live` as a live query). */
  readonly execute: LiveExecute;
  /** The facade's error formatting: an error's code is given there. */
  readonly formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  readonly logger: Logger;
}

/**
 * Starts watching `ref` for `connection` (connected with `kind: 'live'`); `changed` is called for
 * each new answer, `expired` once the token expired. Throws an {@link McpError} when it cannot:
 * a refusal of the door, or a resource the caller cannot read.
 */
export async function watchResource(
  parts: ResourceWatchParts,
  connection: Connection,
  ref: McpResourceRef,
  hooks: { isOpen(): boolean; changed(): void; expired(): void },
): Promise<SessionWatch> {
  const live = parts.connections.open(connection, () => hooks.expired());
  const operation = await live.admit(
    ref.uri,
    {
      documentId: ref.kind.documentId,
      query: ref.kind.document,
      operationName: ref.kind.operationName,
      variables: { customerId: ref.customerId },
    },
    () => hooks.isOpen(),
  );
  if (isRefusal(operation)) {
    live.close();
    throw refusalError(operation);
  }
  const stop = () => {
    operation.completed();
    live.close();
  };
  const results = await parts.execute(operation.args);
  if (!(Symbol.asyncIterator in results)) {
    // Answered once: it read nothing it could follow (the scope refused every read).
    stop();
    throw answerError(formatted(parts, results), ref);
  }
  operation.started();
  const iterator = results[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done === true || !hasData(first.value)) {
    await iterator.return?.(undefined);
    stop();
    throw answerError(first.done === true ? {} : formatted(parts, first.value), ref);
  }
  void (async () => {
    try {
      for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) {
        if (hasData(next.value) && hooks.isOpen()) hooks.changed();
      }
    } catch (error) {
      parts.logger.warn('a resource watch ended on an error', { error: String(error) });
    } finally {
      stop();
    }
  })();
  return { stop: () => void iterator.return?.(undefined) };
}

/** `result`'s errors as a client reads them (their codes given by the facade's formatting). */
function formatted(parts: ResourceWatchParts, result: ExecutionResult) {
  return { errors: result.errors?.map((error) => parts.formatError(error.toJSON(), error)) };
}

/** Whether an answer holds the resource (a customer), not only errors. */
function hasData(result: ExecutionResult): boolean {
  const data = result.data as { customer?: unknown } | null | undefined;
  return data?.customer !== undefined && data.customer !== null;
}

/** An answer's errors, raw or formatted: each with its code in `extensions`. */
interface AnswerErrors {
  readonly errors?: readonly {
    readonly message: string;
    readonly extensions?: Readonly<Record<string, unknown>>;
  }[];
}

/** The JSON-RPC error of an answer without the resource: not found, or its first error. */
export function answerError(result: AnswerErrors, ref: McpResourceRef): McpError {
  const codes = (result.errors ?? []).map((error) => error.extensions?.['code']);
  if (codes.length === 0 || codes.includes('NOT_FOUND') || codes.includes('FORBIDDEN')) {
    return resourceNotFound(ref.uri);
  }
  const [first] = result.errors ?? [];
  return new McpError(ErrorCode.InternalError, first?.message ?? 'The resource could not be read.', {
    uri: ref.uri,
    code: codes[0],
  });
}

/** The JSON-RPC error of a URI that names no resource the caller may read. */
export function resourceNotFound(uri: string): McpError {
  return new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });
}

/** A refusal of the door as a JSON-RPC error: its message, its code and its wait in `data`. */
export function refusalError(refusal: Refusal): McpError {
  const [error] = graphQLErrorsOf(refusal);
  const status = REFUSALS[refusal.refused].http.status;
  const code = status >= 500 ? ErrorCode.InternalError : ErrorCode.InvalidRequest;
  return new McpError(code, error?.message ?? refusal.message, {
    code: REFUSALS[refusal.refused].code,
    ...(refusal.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: refusal.retryAfterSeconds }),
  });
}
