/**
 * A query marked `@live` sent over plain HTTP is answered once, as the query it also is (a client
 * whose link falls back to HTTP still gets its data), and its answer says so: `extensions.live`
 * holds `updates: false` and where the updates are served, so a client wired the usual way
 * (Apollo Client's `split` sending subscriptions alone to a WebSocket link) learns why its live
 * query never changes instead of waiting in silence.
 */
import type { GraphContext } from '../graph/context.ts';
import { isLiveQuery } from '../live-directive.ts';
import type { RequestHooks, RequestHooksOf } from './request-hooks.ts';

/** `extensions.live` of a live query answered over plain HTTP. */
export interface LiveOverHttpExtension {
  /** Always false: nothing follows this answer. */
  updates: false;
  /** Why, and where a live query is answered again at every change. */
  message: string;
}

/**
 * The hooks (for `createRequestHooksPlugin`); `elsewhere` says how a client reaches the live
 * transports (built from their list in `src/transports.ts`, as HTTP's refusal of a subscription is).
 */
export function liveOverHttpHooks(elsewhere: string): RequestHooksOf<GraphContext> {
  const live: LiveOverHttpExtension = {
    updates: false,
    message: `This query is marked @live, but over HTTP it is answered once and never updated. For an answer at every change, send it over a live transport: ${elsewhere}.`,
  };
  const hooks: RequestHooks<GraphContext> = {
    willSendResponse({ request, response, operation, schema }) {
      if (operation === undefined || !isLiveQuery(schema, operation, request.variables)) return;
      const result =
        response.body.kind === 'single' ? response.body.singleResult : response.body.initialResult;
      result.extensions = { ...result.extensions, live };
    },
  };
  return () => hooks;
}
