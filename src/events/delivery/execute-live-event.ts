/**
 * Runs a subscription operation once per delivery, each with the context its resource was read
 * with, in place of graphql-js's `subscribe` (which graphql-ws would otherwise call). Subscribers
 * that share an event's context (`shared-event-reads.ts`) and sent the same document with the same
 * variables share its execution too: one result, sent to each of them.
 */
import { createHash } from 'node:crypto';
import {
  createSourceEventStream,
  execute,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
} from 'graphql';
import type { GraphContext } from '../../graph/context.ts';
import type { LiveDelivery } from './live-stream.ts';
import { pullThrough } from './push-pull-queue.ts';

/** The executions made with each shared event context, by event and operation (document, name, variables). */
const executionsByContext = new WeakMap<GraphContext, Map<string, Promise<ExecutionResult>>>();

/**
 * A number per document object: the subscribe guard hands identical texts the same parsed
 * document, so equal numbers mean equal operations.
 */
const documentNumbers = new WeakMap<DocumentNode, number>();
let lastDocumentNumber = 0;

/**
 * What makes two subscriptions' executions of one event interchangeable, given the same context:
 * the document object, the operation name and the variables, as a short digest. Undefined when the
 * variables cannot be written as JSON: such an operation shares nothing.
 */
export function operationKeyOf(
  args: Pick<ExecutionArgs, 'document' | 'operationName' | 'variableValues'>,
): string | undefined {
  let number = documentNumbers.get(args.document);
  if (number === undefined) {
    number = lastDocumentNumber += 1;
    documentNumbers.set(args.document, number);
  }
  try {
    const key = `${number}\n${args.operationName ?? ''}\n${JSON.stringify(args.variableValues ?? {})}`;
    // A digest: the variables may be as large as a message, and the key is kept per event.
    return createHash('sha256').update(key).digest('base64url');
  } catch {
    // Variables that cannot be written as JSON (not from a graphql-ws message): run alone.
    return undefined;
  }
}

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
  const operationKey = operationKeyOf(args);

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
    const shared = () => sharedExecution(delivery, operationKey, run);
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

/**
 * The execution of a change: another subscriber's, when it ran the same operation on the same
 * event with the same shared context; else `run()`, kept for the next. The payload of a change
 * depends only on the event, the operation and what the context reads.
 */
function sharedExecution(
  delivery: Extract<LiveDelivery, { kind: 'change' }>,
  operationKey: string | undefined,
  run: () => Promise<ExecutionResult>,
): Promise<ExecutionResult> {
  if (operationKey === undefined || delivery.eventId === undefined) return run();
  let executions = executionsByContext.get(delivery.context);
  if (executions === undefined) {
    executions = new Map();
    executionsByContext.set(delivery.context, executions);
  }
  const key = `${delivery.eventId}\n${operationKey}`;
  let result = executions.get(key);
  if (result === undefined) {
    result = run();
    executions.set(key, result);
  }
  return result;
}
