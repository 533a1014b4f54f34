/**
 * Marks every GraphQL response `Cache-Control: no-store`, as Apollo's cache-control plugin does
 * for a schema without `@cacheControl` hints, without that plugin's per-field hook: a
 * `willResolveField` anywhere makes Apollo wrap and instrument every resolver of the schema.
 */
import type { ApolloServerPlugin } from '@apollo/server';

/** Builds the plugin; install it together with `ApolloServerPluginCacheControlDisabled()`. */
export function createNoStorePlugin(): ApolloServerPlugin {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response }) {
          // A header set on purpose (by a resolver or a plugin) is left alone.
          if (!response.http.headers.has('cache-control'))
            response.http.headers.set('cache-control', 'no-store');
        },
      };
    },
  };
}
