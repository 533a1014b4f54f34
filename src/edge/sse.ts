/**
 * GraphQL over Server-Sent Events as a live transport of the door, at `/graphql/stream`: the
 * graphql-sse protocol's "distinct connections" mode (one subscription per request,
 * `Accept: text/event-stream`, a GET with the document in the URL or a POST with a JSON body), as
 * graphql-sse clients and `EventSource` speak it. The door, the backpressure and the stalled-write
 * cut are those of every streamed transport (`streamed-response.ts`); this file is the framing.
 * Each `next` made from an event carries the event's cursor as its SSE `id`, whatever the document
 * selects, so an `EventSource` that reconnects sends it back as `Last-Event-ID` and resumes from
 * the event log where it stopped, without the document declaring `$after`. SSE serves
 * subscriptions and live queries (`query @live`) only.
 */
import { liveTransportRules, type LiveTransport } from './live.ts';
import { streamedLiveTransport, type StreamFraming } from './streamed-response.ts';

/** SSE serves subscriptions; a query or mutation is refused with `wrong-transport`. */
const SSE_TRANSPORT = liveTransportRules(
  'sse',
  'Queries and mutations are served over HTTP (POST /graphql); GraphQL over SSE serves subscriptions only, and queries marked @live.',
  {
    protocol: 'Server-Sent Events',
    does: 'POST the subscription',
    path: '/graphql/stream',
    accept: 'text/event-stream',
    note: 'Server-Sent Events',
    wire: 'http-stream',
  },
);

/** The framing of graphql-sse's distinct connections mode. */
const SSE_FRAMING: StreamFraming = {
  // As graphql-sse sends them.
  headers: {
    connection: 'keep-alive',
    'cache-control': 'no-cache',
    'content-encoding': 'none',
    'content-type': 'text/event-stream; charset=utf-8',
  },
  // A first byte: some browsers (Firefox, Safari) wait for one before they report the stream open.
  opening: ':\n\n',
  // A comment line every so often keeps proxies from closing a quiet stream (graphql-sse's interval).
  heartbeat: ':\n\n',
  heartbeatMs: 12_000,
  result(result, cursor) {
    const id = cursor === undefined ? '' : `id: ${cursor}\n`;
    return `${id}event: next\ndata: ${JSON.stringify(result)}\n\n`;
  },
  end: 'event: complete\ndata:\n\n',
};

/** GraphQL over SSE as a live transport. */
export const SERVER_SENT_EVENTS: LiveTransport = streamedLiveTransport({
  rules: SSE_TRANSPORT,
  framing: SSE_FRAMING,
  mount(routes, serve) {
    routes.use(SSE_TRANSPORT.connects.path, (req, res, next) => {
      if (req.get('accept') === SSE_TRANSPORT.connects.accept) {
        serve(req, res, next);
        return;
      }
      res.status(406).json({
        errors: [
          {
            message:
              'GraphQL over SSE is served in distinct connections mode: send one subscription per request with "Accept: text/event-stream".',
            extensions: { code: 'BAD_REQUEST' },
          },
        ],
      });
    });
  },
});
