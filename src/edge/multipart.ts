/**
 * Subscriptions over Apollo's multipart HTTP protocol as a live transport of the door, at
 * `/graphql`: a POST (or a GET with the document in the URL) whose `Accept` lists
 * `multipart/mixed;subscriptionSpec=1.0` is answered with one `multipart/mixed` response whose
 * parts are the subscription's results, as Apollo Client's `HttpLink`, Apollo Kotlin and Apollo iOS
 * ask for it with no other link, and as Apollo Router and Hive serve it. The door, the
 * backpressure and the stalled-write cut are those of every streamed transport
 * (`streamed-response.ts`); this file is the framing and the `Accept` that chooses it.
 *
 * The framing, as Apollo's protocol has it (boundary `graphql`, every part `application/json`):
 * - `{}` is a heartbeat, sent at once and again to a stream quiet for {@link HEARTBEAT_MS} (Apollo
 *   Router's interval); clients skip it.
 * - `{"payload": <result>}` is one result. One made from an event carries the event's cursor in
 *   `payload.extensions.cursor`, whatever the document selects: subscribing again with it as
 *   `after` (or as a `Last-Event-ID` header, as over SSE) resumes from the event log.
 * - `{"payload": null, "errors": [...]}` ends the subscription with errors the protocol calls
 *   transport errors: the queue's overflow (`SUBSCRIPTION_OVERFLOW`), the token expired
 *   (`UNAUTHENTICATED`), the cursor left the log. Then the closing delimiter.
 * A refusal before the stream starts is not a part: the door's are the refusal table's status and
 * JSON body (as over SSE), and a subscription refused as it starts (another customer, a cursor
 * refused) is answered `200` with its `errors` as `application/json`, as a query's would be.
 */
import { liveTransportRules, type LiveTransport } from './live.ts';
import { streamedLiveTransport, type FormattedResult, type StreamFraming } from './streamed-response.ts';

/** The multipart protocol serves subscriptions; a query or mutation is refused with `wrong-transport`. */
const MULTIPART_TRANSPORT = liveTransportRules(
  'multipart',
  'Queries and mutations are served over HTTP (POST /graphql with Accept: application/json); Accept: multipart/mixed;subscriptionSpec=1.0 asks for subscriptions only, and queries marked @live.',
  {
    protocol: "Apollo's multipart protocol",
    does: 'POST the subscription',
    // The path it shares with HTTP's queries and graphql-ws: the `Accept` header chooses.
    path: '/graphql',
    accept: 'multipart/mixed;subscriptionSpec=1.0',
    note: "Apollo Client's HttpLink does",
    wire: 'http-stream',
  },
);

/** Apollo Router's heartbeat interval, which Apollo's clients are written against. */
const HEARTBEAT_MS = 5_000;

const BOUNDARY = 'graphql';

/** One part, then the boundary that closes it: a client hands a part on once it sees the next boundary. */
const part = (json: string): string => `\r\ncontent-type: application/json\r\n\r\n${json}\r\n--${BOUNDARY}`;

const HEARTBEAT = part('{}');

const MULTIPART_FRAMING: StreamFraming = {
  headers: {
    'content-type': `multipart/mixed;boundary="${BOUNDARY}";subscriptionSpec="1.0"`,
    'cache-control': 'no-cache',
    'content-encoding': 'none',
    connection: 'keep-alive',
  },
  // The first boundary and a heartbeat: the client sees the subscription listening.
  opening: `\r\n--${BOUNDARY}${HEARTBEAT}`,
  heartbeat: HEARTBEAT,
  heartbeatMs: HEARTBEAT_MS,
  result(result, cursor) {
    if (cursor === undefined && endsTheSubscription(result)) {
      return part(JSON.stringify({ payload: null, errors: result.errors }));
    }
    const payload =
      cursor === undefined ? result : { ...result, extensions: { ...result.extensions, cursor } };
    return part(JSON.stringify({ payload }));
  },
  // The closing delimiter: the boundary already written, then `--`.
  end: '--\r\n',
  answerUnstarted(res, result) {
    res.status(200).type('application/json').send(JSON.stringify(result));
  },
};

/**
 * A result made from no event that carries errors is the notice that ends the subscription (an
 * overflow, an expired token or cursor): nothing follows it.
 */
function endsTheSubscription(result: FormattedResult): boolean {
  return (result.errors?.length ?? 0) > 0 && result.data == null;
}

/**
 * Whether `accept` lists `multipart/mixed` with `subscriptionSpec=1.0` (quoted or not): what
 * Apollo's clients send for a subscription (Apollo Client: `multipart/mixed;boundary=graphql;
 * subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9`).
 */
export function acceptsMultipartSubscriptions(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((piece) => piece.trim().toLowerCase());
    return (
      type === 'multipart/mixed' &&
      params.some((param) => param.replace(/\s/g, '').replace(/"/g, '') === 'subscriptionspec=1.0')
    );
  });
}

/** Apollo's multipart HTTP subscriptions as a live transport. */
export const MULTIPART_SUBSCRIPTIONS: LiveTransport = streamedLiveTransport({
  rules: MULTIPART_TRANSPORT,
  framing: MULTIPART_FRAMING,
  mount(routes, serve) {
    routes.use(MULTIPART_TRANSPORT.connects.path, (req, res, next) => {
      const chosen =
        req.path === '/' &&
        (req.method === 'POST' || req.method === 'GET') &&
        acceptsMultipartSubscriptions(req.get('accept'));
      if (chosen) serve(req, res, next);
      else next();
    });
  },
});
