/**
 * What every resolver receives: the operation's upstream context and its loaders. Built once per
 * GraphQL operation (and once per subscription event, so each event reads fresh data).
 */
import { createLoaderStats, type LoaderStats } from '../loaders/fan-out-loader.ts';
import { createLoaders, type Loaders } from '../loaders/index.ts';
import type { UpstreamContext } from '../upstream/context.ts';

export interface GraphContext {
  /** Credentials, request id and retry budget of this operation; mutations call the upstream with it. */
  readonly upstream: UpstreamContext;
  /** Reads, deduplicated and cached for this operation only. */
  readonly loaders: Loaders;
  /** What the loaders were asked and what they read upstream (metrics). */
  readonly loaderStats: LoaderStats;
}

/** Builds the context of one operation over `upstream`, with fresh loaders. */
export function createGraphContext(upstream: UpstreamContext): GraphContext {
  const loaderStats = createLoaderStats();
  return { upstream, loaders: createLoaders(upstream, loaderStats), loaderStats };
}
