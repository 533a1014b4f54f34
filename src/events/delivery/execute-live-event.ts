/**
 * Runs a subscription operation once per delivery, each with the context its resource was read
 * with, in place of graphql-js's `subscribe` (which graphql-ws would otherwise call). Subscribers
 * that share an event's context (`shared-event-reads.ts`: the same group and the same operation)
 * share its execution too, kept by the shared reads: one result, sent to each of them.
 */
import { createSourceEventStream, execute, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { LiveGraphContext } from './live-context.ts';
import type { LiveDelivery } from './live-stream.ts';
import { pullThrough } from './push-pull-queue.ts';

/**
 * graphql-js's `subscribe`, except that each event runs with its own context: the one its
 * {@link LiveDelivery} was read with (fresh loaders, the subscriber's credentials). graphql-js would
 * run every event with the operation's single context, so loaders would cache across events and
 * a nested field would show stale data.
 */
export async function subscribeWithEventContexts(
  args: ExecutionArgs,
): Promise<AsyncGenerator<ExecutionResult> | AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
  const source = await createSourceEventStream(args);
  if (!isAsyncIterable(source)) return source;

  // Each delivery executes when it is pulled; stopping the stream stops the source at once.
  return pullThrough(source[Symbol.asyncIterator](), (delivery): Promise<ExecutionResult> => {
    const run = () =>
      Promise.resolve(
        execute({
          ...args,
          rootValue: delivery,
          contextValue: isChange(delivery) ? delivery.context : args.contextValue,
        }),
      );
    if (!isChange(delivery)) return run();
    const live = (args.contextValue as Partial<LiveGraphContext> | undefined)?.live;
    // A replayed change runs alone: its context is the subscriber's own, shared by all its replays.
    const shared = () =>
      delivery.eventId === undefined || live === undefined
        ? run()
        : live.sharedExecution(delivery.context, run);
    // With tracing on, the execution (nested reads included) is the end of the delivery's span.
    return delivery.traced?.finish(shared) ?? shared();
  });
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

function isChange(value: unknown): value is Extract<LiveDelivery, { kind: 'change' }> {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'change';
}
