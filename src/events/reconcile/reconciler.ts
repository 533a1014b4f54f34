/**
 * The recovery of changes whose webhook never arrived (the upstream gives up after about two
 * minutes of retries): every interval, one replica reads the upstream's updated-since lists of the
 * customers that have live subscribers, compares them with what the event log holds, and appends
 * a synthesised event for each change the log has not seen. See docs/events.md, "Missed webhooks".
 */
import type { Logger } from '../../logger.ts';
import { PLATFORM_SCOPE } from '../../upstream/access.ts';
import { listAccounts } from '../../upstream/accounts.ts';
import { readAllPages } from '../../upstream/all-pages.ts';
import { listCapabilities } from '../../upstream/capabilities.ts';
import type { UpstreamClient } from '../../upstream/client.ts';
import { createUpstreamContext, type UpstreamContext } from '../../upstream/context.ts';
import type { UpstreamKey } from '../../upstream/credentials.ts';
import { getCustomer } from '../../upstream/customers.ts';
import type { KeyEnvironments } from '../../upstream/key-environments.ts';
import { listTransfers } from '../../upstream/money-movement.ts';
import { listRelatedParties } from '../../upstream/related-parties.ts';
import { listRules } from '../../upstream/rules.ts';
import type { ListedRecord, Page, PageParams } from '../../upstream/types.ts';
import { impliedEventType } from '../../graph/resource-feeds.ts';
import type { EventDeduplicator } from '../fan-out/event-dedup.ts';
import type { EventLog } from '../log/event-log.ts';
import type { PlatformEnvironment, PlatformEvent } from '../receiving/platform-event.ts';
import type { ReconcileState } from './reconcile-state.ts';

/** The lists read per customer, by the upstream's `resourceType` of their records. */
const LISTS: Record<
  string,
  (up: UpstreamContext, customerId: string, page: PageParams) => Promise<Page<ListedRecord>>
> = {
  account: listAccounts,
  capability: listCapabilities,
  related_party: listRelatedParties,
  transfer: listTransfers,
  rule: listRules,
};

/** Pages of 100 read per list and run at most: a customer with more changes is read next time. */
const MAX_PAGES = 10;
const PAGE_SIZE = 100;

/**
 * How much earlier than the window the log is read to learn what it has seen: an event is appended
 * after its change, by up to the upstream's retries plus clock differences.
 */
const SEEN_LOOKBACK_MS = 10 * 60 * 1000;

/** Options of {@link createReconciler}. */
export interface ReconcilerOptions {
  log: EventLog;
  dedup: EventDeduplicator;
  state: ReconcileState;
  upstreamClient: UpstreamClient;
  /** The facade's own key: the reconciler reads with it, so it reconciles that key's environment. */
  apiKey: UpstreamKey;
  keyEnvironments: KeyEnvironments;
  intervalSeconds: number;
  graceSeconds: number;
  logger: Logger;
  /** Told how many events each run appended (metrics). */
  onReconciled?: (count: number) => void;
  /** The clock; tests move it. */
  now?: () => number;
}

/** The reconciler of one process. */
export interface Reconciler {
  /** Runs every interval from now on. */
  start(): void;
  /** One run now (the interval's work): how many events it appended, undefined when it did not run. */
  runOnce(): Promise<number | undefined>;
  /** Stops the timer and waits for a run in progress. */
  stop(): Promise<void>;
}

export function createReconciler(options: ReconcilerOptions): Reconciler {
  const { log, dedup, state, logger } = options;
  const now = options.now ?? Date.now;
  const intervalMs = options.intervalSeconds * 1000;
  const graceMs = options.graceSeconds * 1000;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<number | undefined> | undefined;
  let stopped = false;

  const environmentOfKey = async (): Promise<PlatformEnvironment | undefined> => {
    const probe = await options.keyEnvironments.probe(options.apiKey);
    return probe.outcome === 'ready' ? probe.discovery.environment : undefined;
  };

  /** The latest state of each resource the log holds an event of, appended since `since` (ms). */
  const seenSince = async (environment: PlatformEnvironment, since: number): Promise<Map<string, number>> => {
    const seen = new Map<string, number>();
    let after = `${since}-0`;
    for (;;) {
      const read = await log.readAfter(environment, after, 1000);
      if (read.expired) {
        // Trimmed inside the look-back: what is still held is all there is to compare with.
        if (read.oldest === undefined || after === read.oldest) return seen;
        after = read.oldest;
        continue;
      }
      if (read.events.length === 0) return seen;
      for (const { cursor, event } of read.events) {
        const key = `${event.data.resourceType}:${event.data.resourceId}`;
        const object = event.data.object as { updatedAt?: unknown } | null;
        const at = Date.parse(typeof object?.updatedAt === 'string' ? object.updatedAt : event.occurredAt);
        if (Number.isFinite(at) && at > (seen.get(key) ?? Number.NEGATIVE_INFINITY)) seen.set(key, at);
        after = cursor;
      }
    }
  };

  /** The changes of one customer in [from, until) that the log has not seen, as events. */
  const missedChanges = async (
    environment: PlatformEnvironment,
    customerId: string,
    from: number,
    until: number,
    seen: Map<string, number>,
  ): Promise<PlatformEvent[]> => {
    const up = createUpstreamContext(options.upstreamClient, {
      apiKey: options.apiKey,
      scope: PLATFORM_SCOPE,
    });
    const records: [string, ListedRecord][] = [['customer', await getCustomer(up, customerId)]];
    const updatedSince = new Date(from).toISOString();
    for (const [resourceType, list] of Object.entries(LISTS)) {
      const listed = await readAllPages((page) => list(up, customerId, page), {
        maxPages: MAX_PAGES,
        pageSize: PAGE_SIZE,
        updatedSince,
      });
      for (const record of listed) records.push([resourceType, record]);
    }
    const missed: PlatformEvent[] = [];
    for (const [resourceType, record] of records) {
      const updatedAt = Date.parse(record.updatedAt);
      if (!(updatedAt >= from && updatedAt < until)) continue;
      if ((seen.get(`${resourceType}:${record.id}`) ?? Number.NEGATIVE_INFINITY) >= updatedAt) continue;
      const type = impliedEventType(resourceType, record);
      if (type === undefined) continue;
      missed.push({
        // The same id for the same change on every replica and every run: appended once.
        id: `reconciled:${resourceType}:${record.id}:${record.updatedAt}`,
        type,
        occurredAt: record.updatedAt,
        environment,
        data: { customerId, resourceType, resourceId: record.id, object: record },
      });
    }
    return missed;
  };

  /** Appends `event` once across replicas and runs: claimed, appended, confirmed, as webhooks are. */
  const appendOnce = async (event: PlatformEvent): Promise<boolean> => {
    if ((await dedup.claim(event.id)) !== 'claimed') return false;
    try {
      await log.append(event);
    } catch (error) {
      await dedup.release(event.id).catch(() => undefined);
      throw error;
    }
    await dedup.confirm(event.id).catch(() => undefined);
    return true;
  };

  const run = async (): Promise<number | undefined> => {
    const environment = await environmentOfKey();
    if (environment === undefined) return undefined;
    // Held at most two intervals: a replica that dies mid-run delays the next run, never stops it.
    const release = await state.acquire(environment, Math.max(2 * intervalMs, 10_000));
    if (release === undefined) return undefined;
    try {
      const until = now() - graceMs;
      const from = (await state.reconciledUntil(environment)) ?? until - 2 * intervalMs;
      if (until <= from) return 0;
      const customers = await state.watched(environment);
      let appended = 0;
      let complete = true;
      if (customers.length > 0) {
        const seen = await seenSince(environment, from - SEEN_LOOKBACK_MS);
        for (const customerId of customers) {
          try {
            for (const event of await missedChanges(environment, customerId, from, until, seen)) {
              if (await appendOnce(event)) appended += 1;
            }
          } catch (error) {
            // This customer is read again next time (the window does not move past it).
            complete = false;
            logger.warn('could not reconcile a customer', {
              customerId,
              error: error instanceof Error ? error.message : String(error),
            });
          }
        }
      }
      if (complete) await state.setReconciledUntil(environment, until);
      if (appended > 0) logger.info('appended changes whose webhooks were missed', { environment, appended });
      options.onReconciled?.(appended);
      return appended;
    } finally {
      await release().catch(() => undefined);
    }
  };

  const runOnce = (): Promise<number | undefined> => {
    running ??= run()
      .catch((error: unknown) => {
        logger.warn('reconciling missed webhooks failed; trying again next interval', {
          error: error instanceof Error ? error.message : String(error),
        });
        return undefined;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };

  const tick = async (): Promise<void> => {
    await state.refresh(Math.max(3 * intervalMs, 30_000)).catch(() => undefined);
    await runOnce();
    if (!stopped) timer = setTimeout(() => void tick(), intervalMs);
  };

  return {
    start() {
      if (intervalMs <= 0 || timer !== undefined || stopped) return;
      timer = setTimeout(() => void tick(), intervalMs);
    },
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
