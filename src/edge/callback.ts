/**
 * Subscriptions over Apollo's HTTP callback protocol (1.0) as a live transport of the door, at
 * `/graphql`: a gateway (Apollo Router, or Hive Gateway with `@graphql-mesh/transport-http-callback`)
 * POSTs the subscription with `Accept: application/json;callbackSpec=1.0` and
 * `extensions.subscription` (`callbackUrl`, `subscriptionId`, `verifier`, `heartbeatIntervalMs`),
 * and instead of holding a connection per subscription it is sent each result at its callback URL.
 * The request is the door's connect and admission (its `Authorization` or `X-API-Key`), exactly as
 * a graphql-ws `subscribe`; a refusal is the refusal table's HTTP answer, and a subscription
 * refused as it starts (another customer, a cursor refused) is answered `200` with its `errors`,
 * as a query's would be: in either case nothing is sent to the callback URL.
 *
 * Once it listens: a `check` to the callback URL, which must answer 2xx, before the POST is
 * answered `200` with `{"data": null}`; then, one at a time and in order, a `next` per result
 * (one made from an event carries the event's cursor in `payload.extensions.cursor`, as over
 * multipart), a `check` as a heartbeat whenever nothing was sent for half the gateway's
 * `heartbeatIntervalMs` (Hive Gateway ends a subscription that is quiet for one whole interval;
 * `0` sends none), and a `complete` when it ends (with the errors of a notice that ends it: an
 * overflow, the token's expiry, a cursor that left the log). A message the gateway answers 404 (or
 * any other 4xx, or a redirect) ends the subscription at once with nothing more sent; one it does
 * not take within its deadline (half the heartbeat interval, at most
 * `LIVE_STALLED_WRITE_TIMEOUT_MS`) ends it too, so a gateway that restarted or went away holds
 * nothing here for longer than one heartbeat interval. Only callback URLs under a prefix of
 * `SUBSCRIPTION_CALLBACK_ALLOWED_URLS` are ever called (`callback-urls.ts`); the requests
 * themselves are `callback-sender.ts`'s.
 */
import type { Request, Response } from 'express';
import type { ExecutionResult } from 'graphql';
import type { CallbackMessage, CallbackSender, CallbackTarget, Delivery } from './callback-sender.ts';
import { createCallbackSender } from './callback-sender.ts';
import { allowedCallbackUrl } from './callback-urls.ts';
import type { OperationRequest } from './door/door.ts';
import { requestCredentials, sendRefusal } from './http.ts';
import { liveTransportRules, type LiveTransport, type LiveTransportParts } from './live.ts';
import type { LiveOperation } from './live-connections.ts';
import { isRefusal, refuse, type Refusal } from './refusal.ts';
import { formattedResult, type FormattedResult } from './live-results.ts';
import { operationRequestOf } from './streamed-response.ts';
import { NOT_YET, settleWithin } from '../settle-within.ts';

/** The callback protocol serves subscriptions; a query or mutation is refused with `wrong-transport`. */
const CALLBACK_TRANSPORT = liveTransportRules(
  'callback',
  'Queries and mutations are served over HTTP (POST /graphql with Accept: application/json); Accept: application/json;callbackSpec=1.0 asks for subscriptions only, and queries marked @live.',
  {
    protocol: "Apollo's HTTP callback protocol",
    does: 'POST the subscription',
    // The path it shares with HTTP's queries: the `Accept` header and `extensions.subscription` choose.
    path: '/graphql',
    accept: 'application/json;callbackSpec=1.0',
    note: 'and `extensions.subscription`, as a gateway does',
    wire: 'http-callback',
  },
);

/** The protocol's header, on the answer to the subscription and on every message. */
const PROTOCOL_HEADER = { 'subscription-protocol': 'callback/1.0' } as const;

/** The longest subscription id and verifier taken (a gateway's are UUIDs). */
const MAX_ID_LENGTH = 256;

/** The shortest heartbeat interval honoured; a gateway asking for less is refused. */
const MIN_HEARTBEAT_INTERVAL_MS = 1_000;

/** The longest: a day (a token lasts less). */
const MAX_HEARTBEAT_INTERVAL_MS = 86_400_000;

/** How long a subscription whose token expired has to send its `complete` before it is cut. */
const EXPIRY_GRACE_MS = 1_000;

/** What a gateway names in `extensions.subscription`, read and checked. */
interface CallbackSubscription {
  readonly target: CallbackTarget;
  /** 0: no heartbeats. */
  readonly heartbeatIntervalMs: number;
}

/**
 * Whether `accept` lists `application/json` with `callbackSpec=1.0` (quoted or not), as Apollo
 * Router (`application/json;callbackSpec=1.0`) and Hive Gateway (`…; charset=utf-8`) send it.
 */
export function acceptsCallbackSubscriptions(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((piece) => piece.trim().toLowerCase());
    return (
      type === 'application/json' &&
      params.some((param) => param.replace(/\s/g, '').replace(/"/g, '') === 'callbackspec=1.0')
    );
  });
}

/** Apollo's HTTP callback protocol as a live transport. */
export const HTTP_CALLBACK_SUBSCRIPTIONS: LiveTransport = {
  rules: CALLBACK_TRANSPORT,
  attach(parts) {
    const sender = createCallbackSender();
    const running = new Set<AbortController>();
    let draining = false;
    let nextOperation = 0;

    const serve = async (req: Request, res: Response): Promise<void> => {
      if (draining) {
        sendRefusal(res, refuse('shutting-down', 'The server is shutting down.'));
        return;
      }
      const connection = await parts.door.connect({
        credentials: requestCredentials(req),
        address: parts.addressOf(req),
        kind: 'live',
      });
      if (isRefusal(connection)) {
        parts.logger.info('refused a callback subscription', { refused: connection.refused });
        sendRefusal(res, connection);
        return;
      }
      const request = operationRequestOf(req);
      const subscription = isRefusal(request) ? request : callbackSubscriptionOf(request, parts);
      if (isRefusal(subscription)) {
        sendRefusal(res, subscription);
        return;
      }
      const stop = new AbortController();
      // Once the token expires the subscription ends with an UNAUTHENTICATED error, which its
      // `complete` carries; a gateway that does not take it within the grace is not waited for.
      const live = parts.connections.open(connection, () => {
        setTimeout(() => stop.abort(), EXPIRY_GRACE_MS).unref();
      });
      running.add(stop);
      // Before its operation completes: whoever hears it completed finds nothing of it open. Once.
      const end = (): void => {
        if (!running.delete(stop)) return;
        live.close();
      };
      let listening: (() => Promise<void>) | undefined;
      try {
        nextOperation += 1;
        const operation = await live.admit(
          String(nextOperation),
          request,
          () => !draining && !stop.signal.aborted,
        );
        if (isRefusal(operation)) {
          sendRefusal(res, operation);
          return;
        }
        listening = await start({ res, operation, subscription, parts, sender, stop: stop.signal, end });
      } finally {
        if (listening === undefined) end();
      }
      if (listening === undefined) return;
      // The gateway's request is answered: what follows holds neither it nor its response.
      void listening().catch((error: unknown) =>
        parts.logger.error('a callback subscription failed', { error }),
      );
    };

    parts.routes.use(CALLBACK_TRANSPORT.connects.path, (req, res, next) => {
      const chosen =
        req.path === '/' &&
        req.method === 'POST' &&
        acceptsCallbackSubscriptions(req.get('accept')) &&
        isRecord(isRecord(req.body) ? req.body['extensions'] : undefined) &&
        (req.body as { extensions: Record<string, unknown> }).extensions['subscription'] !== undefined;
      if (!chosen) {
        next();
        return;
      }
      serve(req, res).catch((error: unknown) => {
        if (!res.headersSent) next(error);
        else parts.logger.error('a callback subscription failed', { error });
      });
    });

    return {
      activeConnections: () => running.size,
      async drain(timeoutMs) {
        draining = true;
        // The events runtime has ended every queue: each subscription sends its `complete`. One
        // whose gateway does not take it in time is stopped.
        await parts.connections.emptied(timeoutMs);
        for (const stop of running) stop.abort();
        await sender.close();
        parts.logger.info('callback drained', { unfinished: parts.connections.running() });
      },
    };
  },
};

/**
 * `extensions.subscription` of `request`, checked: a callback URL under an allowed prefix, an id
 * and a verifier, a heartbeat interval the facade honours. Refused before anything is sent.
 */
function callbackSubscriptionOf(
  request: OperationRequest,
  parts: LiveTransportParts,
): CallbackSubscription | Refusal {
  const given = isRecord(request.extensions) ? request.extensions['subscription'] : undefined;
  if (!isRecord(given)) return refuse('bad-input', '"extensions.subscription" must be an object.');
  const { callbackUrl, subscriptionId, verifier, heartbeatIntervalMs } = given;
  const url = allowedCallbackUrl(callbackUrl, parts.limits.callbackUrls);
  if (typeof url === 'string') {
    parts.logger.warn('refused a callback URL', { reason: url });
    return refuse('forbidden', `${capitalised(url)}.`);
  }
  for (const [name, value] of [
    ['subscriptionId', subscriptionId],
    ['verifier', verifier],
  ] as const) {
    if (typeof value !== 'string' || value === '' || value.length > MAX_ID_LENGTH) {
      return refuse(
        'bad-input',
        `"extensions.subscription.${name}" must be a string of 1 to ${MAX_ID_LENGTH} characters.`,
      );
    }
  }
  const interval = heartbeatIntervalMs ?? 5_000;
  if (
    typeof interval !== 'number' ||
    !Number.isInteger(interval) ||
    (interval !== 0 && (interval < MIN_HEARTBEAT_INTERVAL_MS || interval > MAX_HEARTBEAT_INTERVAL_MS))
  ) {
    return refuse(
      'bad-input',
      `"extensions.subscription.heartbeatIntervalMs" must be 0 (no heartbeats) or from ${MIN_HEARTBEAT_INTERVAL_MS} to ${MAX_HEARTBEAT_INTERVAL_MS} ms.`,
    );
  }
  return {
    target: { url, id: subscriptionId as string, verifier: verifier as string },
    heartbeatIntervalMs: interval,
  };
}

/** What one admitted callback subscription runs with. */
interface CallbackRun {
  res: Response;
  operation: LiveOperation;
  subscription: CallbackSubscription;
  parts: LiveTransportParts;
  sender: CallbackSender;
  /** Aborted when the subscription must stop at once (the drain's end, the expiry's grace). */
  stop: AbortSignal;
  /** Closes the subscription's live side; called once, just before its operation completes. */
  end: () => void;
}

/**
 * Checks the callback URL, executes the admitted operation and answers the gateway's POST; then
 * answers what sends every result, heartbeat and the end to the callback URL until the
 * subscription ends (undefined when it ended before it listened). The check comes first, as in
 * Apollo's own implementation: a gateway that does not confirm the subscription costs no upstream
 * call.
 */
async function start({
  res,
  operation,
  subscription,
  parts,
  sender,
  stop,
  end,
}: CallbackRun): Promise<(() => Promise<void>) | undefined> {
  const { target, heartbeatIntervalMs } = subscription;
  const deadlineMs = Math.min(
    parts.limits.stalledWriteTimeoutMs,
    heartbeatIntervalMs === 0 ? Infinity : heartbeatIntervalMs / 2,
  );
  const send = (message: CallbackMessage): Promise<Delivery> =>
    sender.send(target, message, deadlineMs, stop);
  let listens = false;
  try {
    const checked = await send({ action: 'check' });
    if (checked !== 'taken') {
      const why =
        checked === 'unknown' ? 'answered that it knows no such subscription' : 'did not answer in time';
      sendRefusal(
        res,
        refuse('bad-input', `The callback URL did not confirm the subscription: its check ${why}.`),
      );
      return undefined;
    }
    const result = await parts.execute(operation.args);
    if (!(Symbol.asyncIterator in result)) {
      // Refused as it started (a scope, a cursor): answered as a query's errors, nothing more sent.
      res
        .status(200)
        .set(PROTOCOL_HEADER)
        .type('application/json')
        .send(JSON.stringify(formattedResult(result, parts)));
      return undefined;
    }
    const results = result[Symbol.asyncIterator]();
    res.status(200).set(PROTOCOL_HEADER).type('application/json').send('{"data":null}');
    operation.started();
    listens = true;
    return () =>
      listen({ results, operation, send, quietMs: heartbeatIntervalMs / 2, parts, stop, end, id: target.id });
  } finally {
    if (!listens) {
      end();
      operation.completed();
    }
  }
}

/** Sends a listening subscription's results until it ends, then completes its operation. */
async function listen({
  results,
  operation,
  send,
  quietMs,
  parts,
  stop,
  end,
  id,
}: Pick<CallbackRun, 'operation' | 'parts' | 'stop' | 'end'> & {
  results: AsyncIterator<ExecutionResult>;
  send: (message: CallbackMessage) => Promise<Delivery>;
  quietMs: number;
  id: string;
}): Promise<void> {
  // Stopped from outside (the drain's end, the expiry's grace): the results end, and so does the loop.
  const stopResults = (): void => void results.return?.();
  stop.addEventListener('abort', stopResults, { once: true });
  if (stop.aborted) stopResults();
  try {
    const ended = await deliver(results, send, quietMs, parts);
    if (ended !== 'complete') {
      await results.return?.();
      parts.logger.info('a callback subscription ended at its gateway', { delivery: ended, id });
    }
  } finally {
    stop.removeEventListener('abort', stopResults);
    end();
    operation.completed();
  }
}

/**
 * Sends each result as a `next` (or, for a notice that ends the subscription, a `complete` with
 * its errors), one at a time, the next result pulled only once the previous message was taken;
 * a `check` whenever nothing was sent for `quietMs` (0: never). Answers `complete` once the
 * gateway took the end, or what became of the message it did not take.
 */
async function deliver(
  results: AsyncIterator<ExecutionResult>,
  send: (message: CallbackMessage) => Promise<Delivery>,
  quietMs: number,
  parts: LiveTransportParts,
): Promise<'complete' | Exclude<Delivery, 'taken'>> {
  let pending: Promise<IteratorResult<ExecutionResult>> | undefined;
  for (;;) {
    pending ??= results.next();
    const step = await settleWithin(pending, quietMs);
    let message: CallbackMessage;
    if (step === NOT_YET) {
      message = { action: 'check' };
    } else {
      pending = undefined;
      message =
        step.done === true
          ? { action: 'complete' }
          : messageOf(formattedResult(step.value, parts), parts.cursorOf(step.value));
    }
    const delivery = await send(message);
    if (delivery !== 'taken') return delivery;
    if (message.action === 'complete') return 'complete';
  }
}

/** The message of one result: a `next`, or the `complete` of a notice that ends the subscription. */
function messageOf(result: FormattedResult, cursor: string | undefined): CallbackMessage {
  if (cursor === undefined && (result.errors?.length ?? 0) > 0 && result.data == null) {
    return { action: 'complete', errors: result.errors };
  }
  const payload = cursor === undefined ? result : { ...result, extensions: { ...result.extensions, cursor } };
  return { action: 'next', payload };
}

function capitalised(sentence: string): string {
  return sentence.charAt(0).toUpperCase() + sentence.slice(1);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
