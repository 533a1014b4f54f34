import { createSourceEventStream, execute, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { LiveDelivery } from './live-stream.ts';

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
  const iterator = source[Symbol.asyncIterator]();

  const run = (delivery: unknown): Promise<ExecutionResult> =>
    Promise.resolve(
      execute({
        ...args,
        rootValue: delivery,
        contextValue: isChange(delivery) ? delivery.context : args.contextValue,
      }),
    );

  // Written out rather than as an async generator: a generator's return() waits for a pending
  // next(), which would keep a stopped subscription listening until its next event.
  const results: AsyncIterableIterator<ExecutionResult> = {
    async next() {
      const next = await iterator.next();
      if (next.done) return { value: undefined, done: true };
      return { value: await run(next.value), done: false };
    },
    async return() {
      await iterator.return?.();
      return { value: undefined, done: true };
    },
    async throw(error?: unknown) {
      await iterator.return?.();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return results;
    },
  };
  return results;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

function isChange(value: unknown): value is Extract<LiveDelivery, { kind: 'change' }> {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'change';
}
