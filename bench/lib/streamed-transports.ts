/**
 * The facade's two live transports over one streamed HTTP response, as a client asks for them: the
 * path, the `Accept` header, and what ends one message in the stream. bench/fanout-clients.ts and
 * the game day's load (bench/gameday/load.ts) read subscriptions through them.
 */
export const STREAMED_TRANSPORTS = {
  sse: { path: '/graphql/stream', accept: 'text/event-stream', separator: '\n\n' },
  multipart: {
    path: '/graphql',
    accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9',
    separator: '\r\n--graphql',
  },
} as const;
