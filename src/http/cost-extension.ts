/**
 * `X-GraphQL-Cost: true` on a request answers it with `extensions.cost`: the door's estimate of the
 * operation it admitted, the ceiling (`QUERY_MAX_COST`) and the upstream calls it made. Asked for,
 * and only for an operation the door admitted: an answer the door refused carries no figures.
 */
import type { GraphContext } from '../graph/context.ts';
import type { RequestHooksOf } from './request-hooks.ts';

/**
 * The request header that asks for `extensions.cost` on the answer (`X-GraphQL-Cost: true`). Any
 * other value, or none, leaves the answer as it is.
 */
const COST_HEADER = 'x-graphql-cost';

/** `extensions.cost` of an answer whose request sent {@link COST_HEADER}. */
interface OperationCostExtension {
  /** The operation's estimated cost with its variables: the measure `QUERY_MAX_COST` limits. */
  estimated: number;
  /** `QUERY_MAX_COST`: an operation estimated above it is refused before it runs. */
  maximum: number;
  /**
   * Requests the operation sent to the upstream, retries included; an answer of the response cache
   * is no call (the call budget spends one for it all the same).
   */
  upstreamCalls: number;
}

/** The hooks (for `createRequestHooksPlugin`); `maxCost` is `QUERY_MAX_COST`. */
export function costExtensionHooks(maxCost: number): RequestHooksOf<GraphContext> {
  return () => ({
    willSendResponse({ request, response, contextValue }) {
      const estimated = contextValue.cost.estimated;
      if (!wantsCost(request.http?.headers.get(COST_HEADER)) || estimated === undefined) return;
      if (response.body.kind !== 'single') return;
      const cost: OperationCostExtension = {
        estimated,
        maximum: maxCost,
        upstreamCalls: contextValue.upstream.callBudget.sent,
      };
      const result = response.body.singleResult;
      result.extensions = { ...result.extensions, cost };
    },
  });
}

function wantsCost(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}
