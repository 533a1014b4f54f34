/**
 * A batch the door admitted (a POST of a JSON array, as Apollo Client's `BatchHttpLink` sends it),
 * run by Apollo Server one operation at a time through the same hooks as a single request, and
 * answered as one JSON array in the batch's order, each element its operation's own answer.
 *
 * Each operation has a context of its own (its call budget, its cost, its record, its deadline,
 * as if sent alone), and the operations of a batch share one set of upstream reads (a
 * `SharedReadCache`, as one event's subscribers do): a record several of them read is read once,
 * each still charged one call of its own budget. A mutation runs alone, in its place: the
 * operations before it have answered, and those after it read afresh, so a query sent after a
 * mutation sees what it wrote. The queries between two mutations run together.
 *
 * An operation the door refused before its document was read (its operation budget, its trusted
 * document, an element that names no operation) is answered with the refusal table's body; one
 * refused for its document is handed to Apollo, which words it as for a single request. The batch
 * is answered `200` with `application/json` whatever its operations' own statuses: an array has
 * one status, and a client reads each operation's errors in its own element.
 */
import type { ApolloServer, BaseContext, HeaderMap, HTTPGraphQLRequest } from '@apollo/server';
import { OperationTypeNode } from 'graphql';
import type { Request, Response } from 'express';
import type { Connection } from '../edge/door/door.ts';
import type { BatchAdmission, OperationAdmission } from '../edge/door/requests.ts';
import { httpAnswerOf, isRefusal } from '../edge/refusal.ts';
import type { SharedReadCache } from '../upstream/client.ts';

/** What running one operation of a batch needs besides the operation. */
export interface BatchParts<TContext extends BaseContext> {
  server: ApolloServer<TContext>;
  /** The request's headers, as Apollo reads them (every operation of a batch sends the same). */
  headers: HeaderMap;
  /** Builds one operation's context: its own, with the batch's shared reads. */
  context: (connection: Connection, readCache: SharedReadCache) => Promise<TContext>;
  /** Hands the door's admission of one operation to Apollo's hooks. */
  admit: (request: HTTPGraphQLRequest, admission: OperationAdmission) => void;
}

/** Runs `batch` and writes its answer: one JSON array, in order. */
export async function executeBatch<TContext extends BaseContext>(
  parts: BatchParts<TContext>,
  req: Request,
  res: Response,
  batch: BatchAdmission,
): Promise<void> {
  const elements = req.body as unknown[];
  const answers: string[] = [];
  let reads: SharedReadCache = new Map();
  let together: Promise<void>[] = [];
  for (const [index, admission] of batch.operations.entries()) {
    const answered = answeredByTheDoor(admission);
    if (answered !== undefined) {
      answers[index] = answered;
      continue;
    }
    const run = (shared: SharedReadCache) =>
      runOne(parts, batch.connection, elements[index], admission, shared).then((answer) => {
        answers[index] = answer;
      });
    if (!writes(admission)) {
      together.push(run(reads));
      continue;
    }
    // A mutation alone, in its place: what was sent before it first, what comes after reads afresh.
    await Promise.all(together);
    together = [];
    await run(new Map());
    reads = new Map();
  }
  await Promise.all(together);
  const body = `[${answers.join(',')}]`;
  res.status(200);
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

/** One operation of the batch, run by Apollo with a context of its own: its answer's JSON. */
async function runOne<TContext extends BaseContext>(
  parts: BatchParts<TContext>,
  connection: Connection,
  element: unknown,
  admission: OperationAdmission,
  reads: SharedReadCache,
): Promise<string> {
  const request: HTTPGraphQLRequest = { method: 'POST', headers: parts.headers, search: '', body: element };
  parts.admit(request, admission);
  const answer = await parts.server.executeHTTPGraphQLRequest({
    httpGraphQLRequest: request,
    context: () => parts.context(connection, reads),
  });
  if (answer.body.kind === 'complete') return answer.body.string;
  // Incremental delivery is one response per operation: it has no place in an array.
  await answer.body.asyncIterator.return?.();
  return JSON.stringify({
    errors: [
      {
        message: '@defer and @stream are not served in a batch: send the operation on its own.',
        extensions: { code: 'BAD_REQUEST' },
      },
    ],
  });
}

/**
 * The answer of an operation the door refused before its document was read (the refusal table's
 * body), or undefined when Apollo answers it: an admitted operation, or a document refused.
 */
function answeredByTheDoor({ operation, query }: OperationAdmission): string | undefined {
  if (operation === undefined || !isRefusal(operation)) return undefined;
  const ofTheDocument =
    query !== undefined &&
    (operation.step === 'parse' || operation.step === 'validate' || operation.step === 'operation-checks');
  return ofTheDocument ? undefined : httpAnswerOf(operation).body;
}

/** Whether the operation was admitted as a mutation (a write the operations after it must see). */
function writes({ operation }: OperationAdmission): boolean {
  return (
    operation !== undefined &&
    !isRefusal(operation) &&
    operation.operation.operation === OperationTypeNode.MUTATION
  );
}
