/**
 * Every live transport of the facade, in the order they are mounted and named to clients: a new
 * transport is one more entry here. Each says how a client reaches it (`rules.connects`), and what
 * names the live transports is built from this list or checked against it: HTTP's refusal of a
 * subscription (`edge/http.ts`), the `Subscription` type's and `@live`'s descriptions, the docs of
 * the live budgets (`test/unit/live-transports-prose.test.ts`), and the refusal table over every
 * transport (`test/integration/edge-door.test.ts`).
 */
import { HTTP_CALLBACK_SUBSCRIPTIONS } from './callback.ts';
import { GRAPHQL_WS } from './graphql-ws.ts';
import type { LiveTransport } from './live.ts';
import { MULTIPART_SUBSCRIPTIONS } from './multipart.ts';
import { SERVER_SENT_EVENTS } from './sse.ts';

/**
 * graphql-ws upgrades `/graphql`; a request to `/graphql` whose `Accept` asks for Apollo's
 * multipart subscriptions is streamed there; SSE streams `/graphql/stream`; a POST to `/graphql`
 * asking for Apollo's callback protocol is answered at its callback URL.
 */
export const LIVE_TRANSPORTS: readonly LiveTransport[] = [
  GRAPHQL_WS,
  MULTIPART_SUBSCRIPTIONS,
  SERVER_SENT_EVENTS,
  HTTP_CALLBACK_SUBSCRIPTIONS,
];
