/**
 * Tells the app's lifecycle (lifecycle.ts) when Apollo Server takes a GraphQL request over HTTP and
 * when its response is ready. Nothing is measured or built for a request nobody listens to.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import type { LifecycleEmitter, OperationOutcome } from './lifecycle.ts';

/** What the plugin reads from the request context (absent when the context was never built). */
export interface LifecycleContext {
  readonly upstream?: { readonly requestId: string };
}

/** Builds the lifecycle plugin. */
export function createLifecyclePlugin<TContext extends LifecycleContext>(
  lifecycle: LifecycleEmitter,
): ApolloServerPlugin<TContext> {
  return {
    async requestDidStart({ request, contextValue }) {
      const started = performance.now();
      if (lifecycle.observed('operationStarted')) {
        lifecycle.emit('operationStarted', {
          requestId: contextValue.upstream?.requestId ?? '',
          operationName: request.operationName ?? null,
        });
      }
      return {
        async willSendResponse({ operationName, contextValue: context, response }) {
          if (!lifecycle.observed('operationCompleted')) return;
          const result = response.body.kind === 'single' ? response.body.singleResult : undefined;
          const errors = result?.errors ?? [];
          const outcome: OperationOutcome =
            errors.length === 0
              ? 'success'
              : result?.data !== undefined && result.data !== null
                ? 'partial'
                : 'failure';
          lifecycle.emit('operationCompleted', {
            requestId: context.upstream?.requestId ?? '',
            operationName: operationName ?? null,
            status: response.http.status ?? 200,
            outcome,
            errorCodes: errors.map((error) => {
              const code = error.extensions?.code;
              return typeof code === 'string' ? code : 'INTERNAL_SERVER_ERROR';
            }),
            durationMs: Math.round(performance.now() - started),
          });
        },
      };
    },
  };
}
