/**
 * Subscriptions over Apollo's multipart HTTP protocol at Hive Gateway, as Apollo Client's `HttpLink`
 * (and Apollo Kotlin, Apollo iOS) subscribe with no other link: a `POST` whose `Accept` lists
 * `multipart/mixed;subscriptionSpec=1.0`. Hive Gateway 2.15.1 (GraphQL Yoga 5) serves `multipart/mixed`
 * for `@defer` only, in the incremental-delivery framing: to a subscription asked that way it answers
 * 406 Not Acceptable. Loaded by gateway.config.ts beside it; like it, it imports nothing but Node's
 * own modules (types aside).
 *
 * The framing is the facade's own (src/edge/multipart.ts), Apollo's protocol: boundary `graphql`,
 * every part `application/json`; `{}` at once and again to a stream quiet for 5 s (heartbeats,
 * which clients skip); `{"payload": <result>}` per result; `{"payload": null, "errors": [...]}` for an
 * error that ends the subscription (a result with errors and no data: the facade's expired token,
 * an overflow), then the closing delimiter, which also ends a subscription that completes.
 *
 * A subscription asked with a mere `multipart/mixed` (no `subscriptionSpec`) is refused 406 with a
 * message naming what each transport needs, as the facade refuses it: such a client reads another
 * framing, which a stream of Apollo's would break silently.
 */
import type { GatewayPlugin } from '@graphql-hive/gateway-runtime';

const BOUNDARY = 'graphql';
/** Apollo Router's heartbeat interval, which Apollo's clients are written against. */
const HEARTBEAT_MS = 5_000;

/** What a client that asked for a framing the gateway does not serve to subscriptions is told. */
export const MULTIPART_REFUSAL =
  "Subscriptions over HTTP are served with Accept: multipart/mixed;subscriptionSpec=1.0 (Apollo's multipart protocol, as Apollo Client's HttpLink asks) or Accept: text/event-stream (GraphQL over server-sent events); or subscribe over a WebSocket at this path (graphql-transport-ws).";

type Result = { data?: unknown; errors?: unknown[]; extensions?: unknown };

/** Whether `accept` lists Apollo's multipart subscriptions (`multipart/mixed` with `subscriptionSpec=1.0`). */
export function acceptsApolloMultipart(accept: string | null): boolean {
  return (accept ?? '').split(',').some((range) => {
    const [type, ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    return (
      type === 'multipart/mixed' &&
      parameters.some((parameter) => parameter.replaceAll('"', '') === 'subscriptionspec=1.0')
    );
  });
}

/** Whether `accept` lists `multipart/mixed` at all. */
function acceptsMultipart(accept: string | null): boolean {
  return (accept ?? '')
    .split(',')
    .some((range) => range.split(';')[0]!.trim().toLowerCase() === 'multipart/mixed');
}

/** Apollo's multipart subscriptions, and a clear refusal of another multipart framing, as a gateway plugin. */
export function useApolloMultipartSubscriptions(): GatewayPlugin {
  const subscriptions = new WeakSet<Request>();
  const refused = new WeakSet<Request>();
  return {
    onSubscribe({ args, setResultAndStopExecution }) {
      const request = (args.contextValue as { request?: Request }).request;
      if (request === undefined) return;
      subscriptions.add(request);
      const accept = request.headers.get('accept');
      // Refused before the facade is asked: nothing is subscribed for a stream nobody can read.
      if (!acceptsApolloMultipart(accept) && acceptsMultipart(accept) && !acceptsEventStream(accept)) {
        refused.add(request);
        setResultAndStopExecution({ errors: [] });
      }
    },
    onResultProcess(payload) {
      const { request, result } = payload;
      if (refused.has(request)) payload.setResultProcessor(refusal, 'application/json');
      else if (
        subscriptions.has(request) &&
        isAsyncIterable(result) &&
        acceptsApolloMultipart(request.headers.get('accept'))
      ) {
        payload.setResultProcessor(apolloMultipart, 'multipart/mixed');
      }
    },
  };
}

/** Whether `accept` lists server-sent events, which the gateway serves subscriptions over itself. */
function acceptsEventStream(accept: string | null): boolean {
  return (accept ?? '')
    .split(',')
    .some((range) => range.split(';')[0]!.trim().toLowerCase() === 'text/event-stream');
}

/** One part, then the boundary that closes it: a client hands a part on once it sees the next boundary. */
const part = (json: string): string => `\r\ncontent-type: application/json\r\n\r\n${json}\r\n--${BOUNDARY}`;

/** A result with errors and no data ends the subscription: what the protocol calls a transport error. */
function endsTheSubscription(result: Result): boolean {
  return (result.data === undefined || result.data === null) && (result.errors?.length ?? 0) > 0;
}

function apolloMultipart(
  result: unknown,
  fetchAPI: { ReadableStream: typeof ReadableStream; Response: typeof Response },
) {
  const iterator = (result as AsyncIterable<Result>)[Symbol.asyncIterator]();
  const encoder = new TextEncoder();
  let heartbeat: NodeJS.Timeout | undefined;
  let closed = false;
  const finish = (controller: ReadableStreamDefaultController<Uint8Array>, last: string): void => {
    closed = true;
    clearInterval(heartbeat);
    controller.enqueue(encoder.encode(`${last}--\r\n`));
    controller.close();
  };
  const stream = new fetchAPI.ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(`\r\n--${BOUNDARY}${part('{}')}`));
      heartbeat = setInterval(() => {
        if (!closed) controller.enqueue(encoder.encode(part('{}')));
      }, HEARTBEAT_MS);
    },
    async pull(controller) {
      const next = await iterator.next();
      if (closed) return;
      if (next.done === true) {
        finish(controller, '');
        return;
      }
      const { data, errors, extensions } = next.value;
      if (endsTheSubscription(next.value)) {
        finish(controller, part(JSON.stringify({ payload: null, errors })));
        await iterator.return?.();
        return;
      }
      controller.enqueue(encoder.encode(part(JSON.stringify({ payload: { data, errors, extensions } }))));
    },
    async cancel() {
      closed = true;
      clearInterval(heartbeat);
      await iterator.return?.();
    },
  });
  return new fetchAPI.Response(stream, {
    status: 200,
    headers: {
      'content-type': `multipart/mixed;boundary="${BOUNDARY}";subscriptionSpec="1.0"`,
      'cache-control': 'no-cache',
    },
  });
}

function refusal(_result: unknown, fetchAPI: { Response: typeof Response }) {
  return new fetchAPI.Response(
    JSON.stringify({ errors: [{ message: MULTIPART_REFUSAL, extensions: { code: 'NOT_ACCEPTABLE' } }] }),
    { status: 406, headers: { 'content-type': 'application/json; charset=utf-8' } },
  );
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}
