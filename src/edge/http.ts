/**
 * The HTTP adapter of the door: `/graphql` over HTTP, translated to the door and back, as a live
 * transport's adapter does. It reads the request (`http-request.ts`: the operation as Apollo Server
 * reads it), makes one call into the door, which takes every step of the admission order (who is
 * calling, the rule for anonymous callers, the operation budget with its RateLimit fields on the
 * answer, trusted documents, parse, validation, the operation checks), and hands what the door
 * admitted to its executor, Apollo Server (`src/http/`). A refusal of the request is answered from
 * the refusal table here; a refusal of its document goes to the executor, which answers it as
 * GraphQL over HTTP answers a document it refuses (and records it), running nothing. None reaches
 * the upstream. A batch (a POST of a JSON array, as Apollo Client's `BatchHttpLink` sends it) is
 * one call too: its size is checked first, then the door connects once and admits each operation
 * on its own, and the executor runs the batch.
 */
import type { Credentials } from '../auth/authenticate.ts';
import { OperationTypeNode } from 'graphql';
import type { Request, RequestHandler, Response } from 'express';
import { rateLimitHeaders, type QuotaState } from './client-budgets.ts';
import type { TransportRules } from './door/door.ts';
import type { TransportDoor } from './door/audiences.ts';
import type { BatchAdmission, RequestAdmission } from './door/requests.ts';
import { readHttpRequest, withListedQuery } from './http-request.ts';
import { howToReachAny, type HowToConnect } from './live.ts';
import { httpAnswerOf, isRefusal, refuse, type Refusal } from './refusal.ts';

/**
 * HTTP serves queries and mutations; a subscription is told where each live transport is, as each
 * says it: the refusal names every one of `live`, and a new one by construction. A query marked
 * `@live` is refused the same way rather than answered once: a client wired the usual way (Apollo
 * Client's `split` sending subscriptions alone to its WebSocket link) would otherwise show a first
 * answer and wait for updates that never come, with no error to say why.
 */
function httpTransportRules(live: readonly HowToConnect[]): TransportRules {
  const elsewhere = howToReachAny(live);
  return {
    name: 'http',
    serves: new Set([OperationTypeNode.QUERY, OperationTypeNode.MUTATION]),
    elsewhere: `Subscriptions are not served by POST /graphql with Accept: application/json: ${elsewhere}.`,
    liveQueryElsewhere:
      'This query is marked @live, and over HTTP it would be answered once and never updated. ' +
      `For an answer at every change, send it over a live transport: ${elsewhere}. ` +
      "With Apollo Client, the link's split sends queries marked @live to GraphQLWsLink, as it sends subscriptions. " +
      'For a single answer, send it without @live, or with @live(if: false).',
  };
}

/**
 * What executes an HTTP request the door let in and writes its answer: the operation admitted, the
 * door's refusal of its document, or no operation at all (a page, or a request its executor
 * refuses as it reads it). It runs no operation but the one admitted.
 */
export type HttpExecutor = (
  req: Request,
  res: Response,
  admission: RequestAdmission | BatchAdmission,
) => Promise<void>;

export interface HttpTransportOptions {
  door: TransportDoor;
  execute: HttpExecutor;
  /** The client's address (`TRUST_PROXY` applied). */
  addressOf(req: Request): string;
  /** Serve the landing page to an anonymous browser (it holds no data; Sandbox then asks for a token). */
  landingPage: boolean;
  /** The text the executor's cache of automatic persisted queries holds for a hash. */
  persistedQuery: (sha256Hash: string) => Promise<string | undefined>;
  /** How a client reaches each live transport, named to one that sends a subscription. */
  live: readonly HowToConnect[];
  /** `HTTP_BATCH_MAX_OPERATIONS`: operations one batched request may hold (0: batches are refused). */
  batchMaxOperations: number;
}

/** The handler of `/graphql` over HTTP: mount after CORS and the JSON body parser. */
export function httpTransport(options: HttpTransportOptions): RequestHandler {
  const { door } = options;
  const rules = httpTransportRules(options.live);
  return async (req, res, next) => {
    try {
      // A batch's size first, before a single element is read (a lookup each, for a persisted query).
      const body: unknown = req.body;
      const tooLarge =
        req.method === 'POST' && Array.isArray(body)
          ? batchTooLarge(body.length, options.batchMaxOperations)
          : undefined;
      if (tooLarge !== undefined) {
        sendRefusal(res, tooLarge);
        return;
      }
      const { batch, ...ask } = await readHttpRequest(req, options.landingPage, options.persistedQuery);
      const asked = {
        credentials: requestCredentials(req),
        address: options.addressOf(req),
        // The budget's state goes on the answer whatever comes of the operation (RateLimit fields).
        onQuota: (quota: QuotaState) => res.set(rateLimitHeaders(quota)),
      };
      const admission =
        batch === undefined
          ? await door.admitRequest({ ...asked, ...ask }, rules)
          : await door.admitBatch({ ...asked, operations: batch }, rules);
      if (isRefusal(admission)) {
        sendRefusal(res, admission);
        return;
      }
      const operations = 'operations' in admission ? admission.operations : [admission];
      operations.forEach(({ listed, query }, index) => {
        if (listed && query !== undefined)
          withListedQuery(req, query, batch === undefined ? undefined : index);
      });
      await options.execute(req, res, admission);
    } catch (error) {
      next(error);
    }
  };
}

/**
 * Why a batch of `size` operations is refused whole, before anyone is asked who sent it (so a
 * batch of ten thousand costs a count): larger than `max`, or batches are off (`max` 0), or empty.
 */
function batchTooLarge(size: number, max: number): Refusal | undefined {
  if (max === 0) {
    return refuse('batch-too-large', 'Batched operations are off: send one operation per request.');
  }
  if (size === 0) return refuse('parse-failed', 'The batch holds no operation: send at least one.');
  if (size <= max) return undefined;
  return refuse(
    'batch-too-large',
    `A batch may hold at most ${max} operations; this one holds ${size}: send it in smaller batches.`,
    { extensions: { maxOperations: max } },
  );
}

/** Answers `res` with the refusal table's status, headers and body. */
export function sendRefusal(res: Response, refusal: Refusal): void {
  const answer = httpAnswerOf(refusal);
  res.status(answer.status).set(answer.headers).send(answer.body);
}

/** The credentials an HTTP request carries: its `Authorization` and `X-API-Key` headers. */
export function requestCredentials(req: Request): Credentials {
  return { authorization: req.get('authorization'), apiKey: req.get('x-api-key') };
}
