/**
 * One upstream read per event per group of subscribers that would read alike. Every subscriber
 * that hears an event reads its resource now (and whatever its selection nests under it); a
 * thousand subscribers would make a thousand identical GETs. Subscribers whose reads are the same
 * requests under the same rules, that is the same upstream key, the same authorization scope and
 * the same operation (document, operation name, variables), share one context per event instead:
 * one set of loaders, so one read of each resource, and one execution (`execute-live-event.ts`).
 *
 * Correctness comes first: the group is what decides what a read may return (the key and the
 * scope checked in `src/upstream/access.ts`), never less, so a subscriber only ever sees what a
 * read of its own would have returned. The operation is part of it because a context also holds
 * one operation's limits (its upstream call and retry budgets): shared with another document, whose
 * reads are not this one's, it could be spent before this one's reads are made.
 */
import { createHash } from 'node:crypto';
import type { Caller } from '../../auth/caller.ts';
import type { GraphContext } from '../../graph/context.ts';

/**
 * How long after an event's first read a later subscriber of the same group still shares it. A
 * subscriber that falls further behind reads afresh, as one alone would; the window stays well
 * inside the operation timeout, so a shared context never outlives its deadline.
 */
export const SHARED_READ_WINDOW_MS = 5_000;

/** The contexts events are read with, shared within a group of subscribers that read alike. */
export interface SharedEventReads {
  /**
   * The context of `eventId` for subscribers of `group`: the one already made for the group within
   * the window, else a new one from `create`.
   */
  contextFor(eventId: string, group: string, create: () => GraphContext): GraphContext;
  /** Contexts held now (each lives at most the window). */
  readonly size: number;
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

/** Holds each shared context for {@link SHARED_READ_WINDOW_MS}; `now` is for tests. */
export function createSharedEventReads(
  options: { windowMs?: number; now?: () => number } = {},
): SharedEventReads {
  const windowMs = options.windowMs ?? SHARED_READ_WINDOW_MS;
  const now = options.now ?? Date.now;
  // In creation order, so the expired ones are always at the front.
  const contexts = new Map<string, { context: GraphContext; createdAt: number }>();

  const evictExpired = (at: number) => {
    for (const [key, entry] of contexts) {
      if (at - entry.createdAt < windowMs) break;
      contexts.delete(key);
    }
  };

  return {
    get size() {
      evictExpired(now());
      return contexts.size;
    },
    contextFor(eventId, group, create) {
      const at = now();
      evictExpired(at);
      const key = JSON.stringify([eventId, group]);
      const held = contexts.get(key);
      if (held !== undefined) return held.context;
      const context = create();
      contexts.set(key, { context, createdAt: at });
      return context;
    },
  };
}
