/**
 * Marks every GraphQL response `Cache-Control: no-store`, as Apollo's cache-control plugin does
 * for a schema without `@cacheControl` hints, without that plugin's per-field hook: a
 * `willResolveField` anywhere makes Apollo wrap and instrument every resolver of the schema.
 */
import type { RequestHooks, RequestHooksOf } from './request-hooks.ts';

const NO_STORE: RequestHooks<object> = {
  willSendResponse({ response }) {
    // A header set on purpose (by a resolver or a plugin) is left alone.
    if (!response.http.headers.has('cache-control')) response.http.headers.set('cache-control', 'no-store');
  },
};

/**
 * The hooks (for `createRequestHooksPlugin`); install them together with
 * `ApolloServerPluginCacheControlDisabled()`.
 */
export const noStoreHooks: RequestHooksOf<object> = () => NO_STORE;
