/**
 * One upstream read per event per group of subscribers that would read alike. Every subscriber
 * that hears an event reads its resource now (and whatever its selection nests under it); a
 * thousand subscribers would make a thousand identical GETs. Subscribers whose reads are the same
 * requests under the same rules, that is the same upstream key and the same authorization scope,
 * share the event's GET answers instead (a `SharedReadCache`: each operation still charged its own
 * budget for what it uses), and those that also sent the same operation (document, operation name,
 * variables) share one context and one execution (`execute-live-event.ts`).
 *
 * Correctness comes first: the group is what decides what a read may return (the key and the
 * scope checked in `src/upstream/access.ts`), never less, so a subscriber only ever sees what a
 * read of its own would have returned. A context is not shared across operations because it holds
 * one operation's limits (its upstream call and retry budgets), which another document's reads
 * could otherwise spend.
 */
import { createHash } from 'node:crypto';
import type { DocumentNode, ExecutionArgs } from 'graphql';
import type { Caller } from '../../auth/caller.ts';
import type { GraphContext } from '../../graph/context.ts';
import type { SharedReadCache } from '../../upstream/client.ts';

/**
 * How long after an event's first read a later subscriber of the same group still shares it. A
 * subscriber that falls further behind reads afresh, as one alone would; the window stays well
 * inside the operation timeout, so a shared context never outlives its deadline.
 */
const SHARED_READ_WINDOW_MS = 5_000;

/** The contexts events are read with, shared within a group of subscribers that read alike. */
export interface SharedEventReads {
  /**
   * The context of `eventId` for subscribers of `group`: the one already made for the group within
   * the window, else a new one from `create`.
   */
  contextFor(eventId: string, group: string, create: () => GraphContext): GraphContext;
  /**
   * The GET answers of `eventId` shared by every operation of `readGroup` (the key and scope alone):
   * operations that differ read each resource once between them, each charged to its own budget.
   */
  readCacheFor(eventId: string, readGroup: string): SharedReadCache;
  /**
   * The execution made with the shared `context` (one event's, for one operation of one group), or
   * `run()` kept as that execution for the next subscriber: such subscribers share one result.
   */
  executionWith<T>(context: GraphContext, run: () => Promise<T>): Promise<T>;
  /**
   * The outcome of `eventId` for the subscribers of `group` (the group of a shared context), the
   * one already made within the window, else a new one from `create`.
   */
  outcomeFor<T>(eventId: string, group: string, create: () => T): T;
  /** Contexts and read caches held now (each lives at most the window, events or none). */
  held(): { contexts: number; readCaches: number };
}

/**
 * The group of a subscriber: its upstream key (a digest, so no key sits in a map that a heap dump
 * could show) and its authorization scope, which together decide every upstream answer it gets.
 * The caller's subject is deliberately not part of it: two callers with the same roles and
 * customers make the same reads and may see the same answers.
 */
export function readGroupOf(caller: Pick<Caller, 'operator' | 'scope'>, apiKey: string | undefined): string {
  const key = apiKey === undefined ? 'facade-key' : createHash('sha256').update(apiKey).digest('base64url');
  const customers = caller.scope.kind === 'all' ? '*' : [...caller.scope.customerIds].sort();
  // As JSON, so no customer id (a token claim) can make two scopes read as one.
  return JSON.stringify([key, caller.operator ? 'operator' : 'scoped', customers]);
}

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
    // Variables that cannot be written as JSON (not from a transport's JSON message): run alone.
    return undefined;
  }
}

/** Holds each shared context and read cache for {@link SHARED_READ_WINDOW_MS}; `now` is for tests. */
export function createSharedEventReads(
  options: { windowMs?: number; now?: () => number } = {},
): SharedEventReads {
  const contexts = createWindowedMemo<GraphContext>(options);
  const readCaches = createWindowedMemo<SharedReadCache>(options);
  // By event, then by group: a fan-out asks once per subscriber, so no key is built per ask.
  const outcomes = createWindowedMemo<Map<string, unknown>>(options);
  // Kept as long as its context is: a context lives at most the window in `contexts`, then only as
  // long as an execution still holds it.
  const executions = new WeakMap<GraphContext, Promise<unknown>>();
  return {
    executionWith<T>(context: GraphContext, run: () => Promise<T>): Promise<T> {
      let execution = executions.get(context) as Promise<T> | undefined;
      if (execution === undefined) {
        execution = run();
        executions.set(context, execution);
      }
      return execution;
    },
    held: () => ({ contexts: contexts.held(), readCaches: readCaches.held() }),
    outcomeFor<T>(eventId: string, group: string, create: () => T): T {
      const byGroup = outcomes.get(eventId, () => new Map<string, unknown>());
      let outcome = byGroup.get(group) as T | undefined;
      if (outcome === undefined) {
        outcome = create();
        byGroup.set(group, outcome);
      }
      return outcome;
    },
    contextFor: (eventId, group, create) => contexts.get(JSON.stringify([eventId, group]), create),
    readCacheFor: (eventId, readGroup) =>
      readCaches.get(JSON.stringify([eventId, readGroup]), () => new Map()),
  };
}

/**
 * Values by key, each kept for the window after it was made, then made anew. Expired values are let
 * go on a timer as well as on the next use: the last event before a quiet spell holds a context
 * per group, whose loaders hold every subscriber's pending load of that event (thousands of
 * promises and closures after a storm), and nothing else would ever drop them.
 */
function createWindowedMemo<T>(options: { windowMs?: number; now?: () => number }) {
  const windowMs = options.windowMs ?? SHARED_READ_WINDOW_MS;
  const now = options.now ?? Date.now;
  // In creation order, so the expired ones are always at the front.
  const entries = new Map<string, { value: T; createdAt: number }>();
  let sweep: NodeJS.Timeout | undefined;
  const evictExpired = (at: number) => {
    for (const [key, entry] of entries) {
      if (at - entry.createdAt < windowMs) break;
      entries.delete(key);
    }
  };
  /** Arms the sweep for when the oldest entry expires; unref'd, so it never keeps the process up. */
  const armSweep = (at: number) => {
    if (sweep !== undefined) return;
    const oldest = entries.values().next();
    if (oldest.done === true) return;
    sweep = setTimeout(
      () => {
        sweep = undefined;
        const swept = now();
        evictExpired(swept);
        armSweep(swept);
      },
      Math.max(0, oldest.value.createdAt + windowMs - at),
    );
    sweep.unref();
  };
  return {
    held: (): number => entries.size,
    get(key: string, create: () => T): T {
      const at = now();
      evictExpired(at);
      const held = entries.get(key);
      if (held !== undefined) return held.value;
      const value = create();
      entries.set(key, { value, createdAt: at });
      armSweep(at);
      return value;
    },
  };
}
