/**
 * What the reconciliation of missed webhooks shares between replicas: which customers have live
 * subscribers (on any replica), one reconciler at a time (a lock that expires on its own), and how
 * far the last run reconciled. In memory for a single replica; in Redis for several.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { PlatformEnvironment } from '../../platform-environment.ts';

/** The state of the reconciliation, as the reconciler and the subscribers see it. */
export interface ReconcileState {
  /**
   * Records that a subscriber of this replica follows `customerId` in `environment`, until the
   * returned function is called. Synchronous and cheap: it runs as a subscription starts.
   */
  watch(environment: PlatformEnvironment, customerId: string): () => void;
  /** The customers that have live subscribers on any replica. */
  watched(environment: PlatformEnvironment): Promise<string[]>;
  /**
   * Takes the reconciliation of `environment` for `ttlMs` (so a replica that dies holding it
   * delays the next run, and never stops them); undefined when another replica holds it.
   */
  acquire(environment: PlatformEnvironment, ttlMs: number): Promise<(() => Promise<void>) | undefined>;
  /** Where the last complete run stopped: changes up to this time (ms) were reconciled. */
  reconciledUntil(environment: PlatformEnvironment): Promise<number | undefined>;
  setReconciledUntil(environment: PlatformEnvironment, until: number): Promise<void>;
  /** Publishes this replica's watched customers again (they expire if a replica dies). */
  refresh(ttlMs: number): Promise<void>;
  /**
   * The customers whose reconciliation is behind the environment's window (a read failed, or the
   * run's bound was reached before them), each with the time (ms) their own window starts.
   */
  behind(environment: PlatformEnvironment): Promise<Map<string, number>>;
  /** Records where `customerId`'s own window starts; undefined: it has caught up. */
  setBehind(environment: PlatformEnvironment, customerId: string, from: number | undefined): Promise<void>;
}

/** Counts of the customers this replica's subscribers follow, per environment. */
function createLocalWatches() {
  const counts = new Map<PlatformEnvironment, Map<string, number>>();
  return {
    watch(environment: PlatformEnvironment, customerId: string, onFirst?: () => void): () => void {
      let customers = counts.get(environment);
      if (customers === undefined) {
        customers = new Map();
        counts.set(environment, customers);
      }
      const before = customers.get(customerId) ?? 0;
      customers.set(customerId, before + 1);
      if (before === 0) onFirst?.();
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const now = (customers.get(customerId) ?? 1) - 1;
        if (now === 0) customers.delete(customerId);
        else customers.set(customerId, now);
      };
    },
    local: (environment: PlatformEnvironment): string[] => [...(counts.get(environment)?.keys() ?? [])],
    has: (environment: PlatformEnvironment, customerId: string): boolean =>
      counts.get(environment)?.has(customerId) ?? false,
    environments: (): PlatformEnvironment[] => [...counts.keys()],
  };
}

/** The state of a single replica: nothing to share. */
export function createMemoryReconcileState(): ReconcileState {
  const local = createLocalWatches();
  const until = new Map<PlatformEnvironment, number>();
  const held = new Set<PlatformEnvironment>();
  const behind = new Map<PlatformEnvironment, Map<string, number>>();
  return {
    watch: (environment, customerId) => local.watch(environment, customerId),
    watched: async (environment) => local.local(environment),
    async acquire(environment) {
      if (held.has(environment)) return undefined;
      held.add(environment);
      return async () => {
        held.delete(environment);
      };
    },
    reconciledUntil: async (environment) => until.get(environment),
    async setReconciledUntil(environment, at) {
      until.set(environment, at);
    },
    // Nothing to publish: this replica's watches are all there is.
    refresh: () => Promise.resolve(),
    behind: async (environment) => new Map(behind.get(environment)),
    async setBehind(environment, customerId, from) {
      let customers = behind.get(environment);
      if (customers === undefined) {
        customers = new Map();
        behind.set(environment, customers);
      }
      if (from === undefined) customers.delete(customerId);
      else customers.set(customerId, from);
    },
  };
}

/** Deletes the lock only if it is still this holder's (it may have expired and been taken). */
const RELEASE_IF_OWNED = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/** A watched set's member: one replica's watch of one customer (as JSON, so no id can split it). */
function watchMember(customerId: string, replica: string): string {
  return JSON.stringify([customerId, replica]);
}

/** The customer of a watched set's member. */
function customerOfMember(member: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(member);
    return Array.isArray(parsed) && typeof parsed[0] === 'string' ? parsed[0] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The state shared by every replica through Redis:
 * - `<prefix>events:watched:<environment>`: a sorted set of `[customerId, replica]` members (one per
 *   replica that follows the customer), scored by when that replica stops vouching for it
 *   (refreshed every interval); a replica removes its member when its last subscriber of the
 *   customer ends, so a customer stays watched exactly while some replica has a subscriber of it;
 * - `<prefix>events:reconcile-behind:<environment>`: a hash of the customers whose own window starts
 *   before the environment's (ms), until a run reads them;
 * - `<prefix>events:reconcile-lock:<environment>`: `SET NX PX`, released only by its holder;
 * - `<prefix>events:reconciled-until:<environment>`: the end of the last complete run (ms).
 */
export function createRedisReconcileState(options: {
  client: Redis;
  keyPrefix: string;
  /** How long a watched customer is vouched for before a refresh; the reconcile interval, a few times. */
  watchTtlMs: () => number;
}): ReconcileState {
  const { client, keyPrefix } = options;
  const key = (name: string, environment: PlatformEnvironment) => `${keyPrefix}events:${name}:${environment}`;
  const local = createLocalWatches();
  const replica = randomUUID();
  const publish = (
    environment: PlatformEnvironment,
    customers: string[],
    ttlMs: number,
  ): Promise<unknown> => {
    if (customers.length === 0) return Promise.resolve();
    const expires = Date.now() + ttlMs;
    return client.zadd(
      key('watched', environment),
      ...customers.flatMap((customer) => [expires, watchMember(customer, replica)]),
    );
  };
  return {
    watch(environment, customerId) {
      // The first subscriber of a customer on this replica makes it watched at once; a failure
      // is mended by the next refresh.
      const release = local.watch(environment, customerId, () => {
        publish(environment, [customerId], options.watchTtlMs()).catch(() => undefined);
      });
      return () => {
        release();
        // The last subscriber of the customer on this replica: this replica stops vouching for it
        // (a failure leaves the member to expire with its score).
        if (!local.has(environment, customerId)) {
          client.zrem(key('watched', environment), watchMember(customerId, replica)).catch(() => undefined);
        }
      };
    },
    async watched(environment) {
      const now = Date.now();
      await client.zremrangebyscore(key('watched', environment), '-inf', now);
      const members = await client.zrangebyscore(key('watched', environment), now, '+inf');
      const customers = new Set<string>();
      for (const member of members) {
        const customerId = customerOfMember(member);
        if (customerId !== undefined) customers.add(customerId);
      }
      return [...customers];
    },
    async behind(environment) {
      const entries = await client.hgetall(key('reconcile-behind', environment));
      const behind = new Map<string, number>();
      for (const [customerId, value] of Object.entries(entries)) {
        const from = Number(value);
        if (Number.isSafeInteger(from)) behind.set(customerId, from);
      }
      return behind;
    },
    async setBehind(environment, customerId, from) {
      if (from === undefined) await client.hdel(key('reconcile-behind', environment), customerId);
      else await client.hset(key('reconcile-behind', environment), customerId, String(from));
    },
    async acquire(environment, ttlMs) {
      const token = randomUUID();
      const lock = key('reconcile-lock', environment);
      const taken = await client.set(lock, token, 'PX', ttlMs, 'NX');
      if (taken !== 'OK') return undefined;
      return async () => {
        await client.eval(RELEASE_IF_OWNED, 1, lock, token);
      };
    },
    async reconciledUntil(environment) {
      const value = await client.get(key('reconciled-until', environment));
      const until = value === null ? Number.NaN : Number(value);
      return Number.isSafeInteger(until) ? until : undefined;
    },
    async setReconciledUntil(environment, until) {
      await client.set(key('reconciled-until', environment), String(until));
    },
    async refresh(ttlMs) {
      await Promise.all(
        local.environments().map((environment) => publish(environment, local.local(environment), ttlMs)),
      );
    },
  };
}
