/**
 * What every resolver receives: the operation's upstream context and its loaders. Built once per
 * GraphQL operation (and once per subscription event, so each event reads fresh data).
 */
import type { Caller } from '../auth/caller.ts';
import { createLoaderStats, type LoaderStats } from '../loaders/fan-out-loader.ts';
import { createLoaders, type Loaders } from '../loaders/index.ts';
import type { UpstreamContext } from '../upstream/context.ts';

export interface GraphContext {
  /** Who is asking; undefined for an anonymous request (only `_service` or public introspection). */
  readonly caller: Caller | undefined;
  /** Credentials, request id and retry budget of this operation; mutations call the upstream with it. */
  readonly upstream: UpstreamContext;
  /** Reads, deduplicated and cached for this operation only. */
  readonly loaders: Loaders;
  /** What the loaders were asked and what they read upstream (metrics). */
  readonly loaderStats: LoaderStats;
  /** The door's measure of the operation, once admitted (`extensions.cost` and metrics). */
  readonly cost: OperationCost;
}

/** The door's estimate of one operation's cost; undefined until the door has admitted it. */
export interface OperationCost {
  /** The `QUERY_MAX_COST` measure of the operation with its variables. */
  estimated: number | undefined;
}

/**
 * Builds the context of one operation over `upstream`, with fresh loaders. The caller's scope is
 * already in `upstream` (checked there on every request); `caller` is here for the few resolvers
 * that choose what to read from it (the customers a scoped caller may list).
 */
export function createGraphContext(upstream: UpstreamContext, caller: Caller | undefined): GraphContext {
  const loaderStats = createLoaderStats();
  return {
    caller,
    upstream,
    loaders: createLoaders(upstream, loaderStats),
    loaderStats,
    cost: { estimated: undefined },
  };
}
