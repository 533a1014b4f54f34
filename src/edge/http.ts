/**
 * The HTTP adapter of the door: `/graphql` over HTTP, translated to the door and back, as a live
 * transport's adapter does. It reads the request (`http-request.ts`: the operation as Apollo Server
 * reads it), makes one call into the door, which takes every step of the admission order (who is
 * calling, the rule for anonymous callers, the operation budget with its RateLimit fields on the
 * answer, trusted documents, parse, validation, the operation checks), and hands what the door
 * admitted to its executor, Apollo Server (`src/http/`). A refusal of the request is answered from
 * the refusal table here; a refusal of its document goes to the executor, which answers it as
 * GraphQL over HTTP answers a document it refuses (and records it), running nothing. None reaches
 * the upstream.
 */
import { OperationTypeNode } from 'graphql';
import type { Request, RequestHandler, Response } from 'express';
import { rateLimitHeaders } from './client-budgets.ts';
import type { RequestAdmission, TransportDoor, TransportRules } from './door/door.ts';
import { readHttpRequest, withListedQuery } from './http-request.ts';
import { howToReachAny, type HowToConnect } from './live.ts';
import { httpAnswerOf, isRefusal, type Refusal } from './refusal.ts';

/**
 * HTTP serves queries and mutations; a subscription is told where each live transport is, as each
 * says it: the refusal names every one of `live`, and a new one by construction.
 */
function httpTransportRules(live: readonly HowToConnect[]): TransportRules {
  return {
    name: 'http',
    serves: new Set([OperationTypeNode.QUERY, OperationTypeNode.MUTATION]),
    elsewhere: `Subscriptions are not served by POST /graphql with Accept: application/json: ${howToReachAny(live)}.`,
  };
}

/**
 * What executes an HTTP request the door let in and writes its answer: the operation admitted, the
 * door's refusal of its document, or no operation at all (a page, or a request its executor
 * refuses as it reads it). It runs no operation but the one admitted.
 */
export type HttpExecutor = (req: Request, res: Response, admission: RequestAdmission) => Promise<void>;

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
}

/** The handler of `/graphql` over HTTP: mount after CORS and the JSON body parser. */
export function httpTransport(options: HttpTransportOptions): RequestHandler {
  const { door } = options;
  const rules = httpTransportRules(options.live);
  return async (req, res, next) => {
    try {
      const admission = await door.admitRequest(
        {
          credentials: { authorization: req.get('authorization'), apiKey: req.get('x-api-key') },
          address: options.addressOf(req),
          ...(await readHttpRequest(req, options.landingPage, options.persistedQuery)),
          // The budget's state goes on the answer whatever comes of the operation (RateLimit fields).
          onQuota: (quota) => res.set(rateLimitHeaders(quota)),
        },
        rules,
      );
      if (isRefusal(admission)) {
        sendRefusal(res, admission);
        return;
      }
      if (admission.listed && admission.query !== undefined) withListedQuery(req, admission.query);
      await options.execute(req, res, admission);
    } catch (error) {
      next(error);
    }
  };
}

/** Answers `res` with the refusal table's status, headers and body. */
export function sendRefusal(res: Response, refusal: Refusal): void {
  const answer = httpAnswerOf(refusal);
  res.status(answer.status).set(answer.headers).send(answer.body);
}
