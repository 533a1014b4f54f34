/**
 * Runs a subscription operation once per delivery, each with the context its resource was read
 * with, in place of graphql-js's `subscribe` (which graphql-ws would otherwise call). Subscribers
 * that share an event's context (`shared-event-reads.ts`: the same group and the same operation)
 * share its execution too, kept by the shared reads: one result, sent to each of them. Each result
 * of a change carries its place in the event log beside it ({@link cursorOf}), not inside the data:
 * a transport that can resume (SSE's `id:`) sends it whatever the document selected.
 */
import {
  createSourceEventStream,
  execute,
  getOperationAST,
  type ExecutionArgs,
  type ExecutionResult,
} from 'graphql';
import { liveSessionOf, type LiveGraphContext } from './live-context.ts';
import type { LiveDelivery } from './live-stream.ts';
import { pullThrough } from './push-pull-queue.ts';
import { DIRECT, type DirectStream } from '../../direct-delivery-contract.ts';
import { DIRECT_CHANGES, hasDirectChanges } from './direct-delivery.ts';
import type { GraphContext } from '../../graph/context.ts';
import { isLiveQuery } from '../../live-directive.ts';

/** The event-log cursor of each result made from a change (a result shared by subscribers shares it). */
const cursors = new WeakMap<object, string>();

/** Where `result` sits in the event log: the cursor to resume after, or undefined (an error, a notice). */
export function cursorOf(result: object): string | undefined {
  return cursors.get(result);
}

/**
 * What every live transport executes: a `query @live` as a live query (`live-queries.ts`); any
 * other operation (a subscription) as graphql-js's `subscribe`, except that each event runs with its own context: the one its
 * {@link LiveDelivery} was read with (fresh loaders, the subscriber's credentials). graphql-js would
 * run every event with the operation's single context, so loaders would cache across events and
 * a nested field would show stale data.
 */
export async function subscribeWithEventContexts(
  args: ExecutionArgs,
): Promise<AsyncGenerator<ExecutionResult> | AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  // A live query is one more source of results on the same path: every live transport runs it.
  const operation = getOperationAST(args.document, args.operationName);
  if (
    operation !== null &&
    operation !== undefined &&
    isLiveQuery(args.schema, operation, args.variableValues)
  ) {
    return liveSessionOf(args.contextValue as GraphContext).liveQuery(args);
  }
  const source = await createSourceEventStream(args);
  if (!isAsyncIterable(source)) return source;

  // Each delivery executes when it is pulled; stopping the stream stops the source at once.
  const execution = (delivery: unknown): Promise<ExecutionResult> => {
    const run = () =>
      Promise.resolve(
        execute({
          ...args,
          rootValue: delivery,
          contextValue: isChange(delivery) ? delivery.context : args.contextValue,
        }),
      );
    if (!isChange(delivery)) return run();
    const withCursor = (result: ExecutionResult): ExecutionResult => {
      cursors.set(result, delivery.cursor);
      return result;
    };
    const live = (args.contextValue as Partial<LiveGraphContext> | undefined)?.live;
    // A replayed change runs alone: its context is the subscriber's own, shared by all its replays.
    const shared = () =>
      delivery.eventId === undefined || live === undefined
        ? run()
        : live.sharedExecution(delivery.context, run);
    // With tracing on, the execution (nested reads included) is the end of the delivery's span.
    return (delivery.traced?.finish(shared) ?? shared()).then(withCursor);
  };
  const results = pullThrough(source[Symbol.asyncIterator](), execution);
  if (!hasDirectChanges<LiveChange, LiveDelivery>(source)) return results;
  // A transport that frames shared results itself gets each of them once made (`direct-delivery.ts`).
  const direct: DirectStream<ExecutionResult> = {
    [DIRECT]: (write) => pullThrough(source[DIRECT_CHANGES](execution, write), execution),
  };
  return Object.assign(results, direct);
}

/** A live delivery of a change. */
type LiveChange = Extract<LiveDelivery, { kind: 'change' }>;

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

function isChange(value: unknown): value is LiveChange {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'change';
}
