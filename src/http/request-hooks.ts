/**
 * The facade's own hooks into Apollo Server's request pipeline, run as one plugin. Apollo calls
 * every plugin's listener at every stage of every request (`Promise.all` over the listeners, and
 * `responseForOperation` one listener after the other), so each plugin adds its promises per stage
 * whether it has a hook there or not. The facade's parts (the door's admitted operation, `no-store`,
 * `extensions.cost`, the JSON status, the operation record, the answer cache) keep their hooks
 * apart, in their own files, as plain functions that wait on nothing; this plugin gives Apollo one
 * listener that calls them in line, in the order they are listed, with the outcome Apollo's own
 * `Promise.all` gave: every part runs, and the first part that throws decides the error.
 */
import type {
  ApolloServerPlugin,
  GraphQLRequestContext,
  GraphQLRequestContextDidEncounterErrors,
  GraphQLRequestContextDidResolveOperation,
  GraphQLRequestContextDidResolveSource,
  GraphQLRequestContextParsingDidStart,
  GraphQLRequestContextResponseForOperation,
  GraphQLRequestContextValidationDidStart,
  GraphQLRequestContextWillSendResponse,
  GraphQLRequestListener,
  GraphQLResponse,
} from '@apollo/server';

/** One part's hooks for one request; none returns a promise. */
export interface RequestHooks<TContext extends object> {
  /** The text to run is known (a persisted query's included); throw to run nothing. */
  didResolveSource?(requestContext: GraphQLRequestContextDidResolveSource<TContext>): void;
  parsingDidStart?(requestContext: GraphQLRequestContextParsingDidStart<TContext>): void;
  validationDidStart?(requestContext: GraphQLRequestContextValidationDidStart<TContext>): void;
  /** Throw to refuse the operation (as a plugin's `didResolveOperation` may). */
  didResolveOperation?(requestContext: GraphQLRequestContextDidResolveOperation<TContext>): void;
  /** The answer instead of executing, or null to execute; the first part that answers decides. */
  responseForOperation?(
    requestContext: GraphQLRequestContextResponseForOperation<TContext>,
  ): GraphQLResponse | null;
  didEncounterErrors?(requestContext: GraphQLRequestContextDidEncounterErrors<TContext>): void;
  willSendResponse?(requestContext: GraphQLRequestContextWillSendResponse<TContext>): void;
}

/** A part: its hooks for a request that starts (undefined: none for this one). */
export type RequestHooksOf<TContext extends object> = (
  requestContext: GraphQLRequestContext<TContext>,
) => RequestHooks<TContext> | undefined;

/** One Apollo plugin running `parts`' hooks, in that order, for every request. */
export function createRequestHooksPlugin<TContext extends object>(
  parts: readonly RequestHooksOf<TContext>[],
): ApolloServerPlugin<TContext> {
  return {
    // Apollo awaits what this returns: a plain listener is resolved as a promise would be.
    async requestDidStart(requestContext) {
      const hooks: RequestHooks<TContext>[] = [];
      for (const part of parts) {
        const each = part(requestContext);
        if (each !== undefined) hooks.push(each);
      }
      return listenerOf(hooks);
    },
  };
}

function listenerOf<TContext extends object>(
  hooks: readonly RequestHooks<TContext>[],
): GraphQLRequestListener<TContext> {
  return {
    async didResolveSource(requestContext) {
      runEach(hooks, (each) => each.didResolveSource?.(requestContext));
    },
    async parsingDidStart(requestContext) {
      runEach(hooks, (each) => each.parsingDidStart?.(requestContext));
    },
    async validationDidStart(requestContext) {
      runEach(hooks, (each) => each.validationDidStart?.(requestContext));
    },
    async didResolveOperation(requestContext) {
      runEach(hooks, (each) => each.didResolveOperation?.(requestContext));
    },
    async responseForOperation(requestContext) {
      for (const each of hooks) {
        const response = each.responseForOperation?.(requestContext);
        if (response !== undefined && response !== null) return response;
      }
      return null;
    },
    async didEncounterErrors(requestContext) {
      runEach(hooks, (each) => each.didEncounterErrors?.(requestContext));
    },
    async willSendResponse(requestContext) {
      runEach(hooks, (each) => each.willSendResponse?.(requestContext));
    },
  };
}

/** Calls `hook` of every part, even past one that throws; then throws the first error, if any. */
function runEach<TContext extends object>(
  hooks: readonly RequestHooks<TContext>[],
  hook: (each: RequestHooks<TContext>) => void,
): void {
  let failed = false;
  let failure: unknown;
  for (const each of hooks) {
    try {
      hook(each);
    } catch (error) {
      if (!failed) {
        failed = true;
        failure = error;
      }
    }
  }
  if (failed) throw failure;
}
