/**
 * Runs a subscription operation once per delivery, each with the context its resource was read
 * with, in place of graphql-js's `subscribe` (which graphql-ws would otherwise call).
 */
import { createSourceEventStream, execute, type ExecutionArgs, type ExecutionResult } from 'graphql';
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
    const run = async () =>
      execute({
        ...args,
        rootValue: delivery,
        contextValue: isChange(delivery) ? delivery.context : args.contextValue,
      });
    // With tracing on, the execution (nested reads included) is the end of the delivery's span.
    return (isChange(delivery) ? delivery.traced?.finish(run) : undefined) ?? run();
  });
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

function isChange(value: unknown): value is Extract<LiveDelivery, { kind: 'change' }> {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'change';
}
