/**
 * The recovery of changes whose webhook never arrived (the upstream gives up after about two
 * minutes of retries): every interval, one replica reads the upstream's updated-since lists of the
 * customers that have live subscribers, compares them with what the event log holds, and appends
 * a synthesised event for each change the log has not seen. See docs/events.md, "Missed webhooks".
 */
import type { Logger } from '../../logger.ts';
import { RECORD_ENTRIES, replayedKindOf } from '../../records.ts';
import { PLATFORM_SCOPE } from '../../upstream/access.ts';
import { readAllPages } from '../../upstream/all-pages.ts';
import type { UpstreamClient } from '../../upstream/client.ts';
import { createUpstreamContext, type UpstreamContext } from '../../upstream/context.ts';
import type { UpstreamKey } from '../../upstream/credentials.ts';
import { getCustomer } from '../../upstream/customers.ts';
import type { KeyEnvironments } from '../../upstream/key-environments.ts';
import type { ListedRecord, Page, PageParams } from '../../upstream/types.ts';
import type { EventDeduplicator } from '../dedup/event-dedup.ts';
import { createEventPublisher, type EventPublisher } from '../dedup/publish-once.ts';
import type { EventLog } from '../log/event-log.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { ReconcileState } from './reconcile-state.ts';

/**
 * The lists read per customer, by the upstream's `resourceType` of their records: every record type
 * of the catalogue whose list, filtered by `updatedSince`, shows its changes.
 */
const LISTS: Record<
  string,
  (up: UpstreamContext, customerId: string, page: PageParams) => Promise<Page<ListedRecord>>
> = Object.fromEntries(
  RECORD_ENTRIES.flatMap(([, entry]) =>
    entry.key === 'customer' && entry.events?.listedSince === true
      ? [[entry.resourceType, entry.reads.list]]
      : [],
  ),
);

/** Pages of 100 read per list and run at most: a customer with more changes is read next time. */
const MAX_PAGES = 10;
const PAGE_SIZE = 100;

/**
 * How much earlier than the window the log is read to learn what it has seen: an event is appended
 * after its change, by up to the upstream's retries plus clock differences.
 */
const SEEN_LOOKBACK_MS = 10 * 60 * 1000;

/**
 * Customers read per run and environment at most: the work of a run is bounded whatever the
 * number of watched customers. The rest are behind (their own window kept) and read first next run.
 */
const DEFAULT_MAX_CUSTOMERS_PER_RUN = 200;

/**
 * How far back a customer's own window may reach: a customer whose reads keep failing (one the
 * upstream no longer serves) is read again each run, but never over more than this.
 */
const MAX_BEHIND_MS = 60 * 60 * 1000;

/** Options of {@link createReconciler}. */
export interface ReconcilerOptions {
  log: EventLog;
  dedup: EventDeduplicator;
  /**
   * How a recovered change is appended once, as webhooks are (dedup/publish-once.ts). Default:
   * `dedup`'s claim, `log`'s append, `dedup`'s confirmation.
   */
  publisher?: EventPublisher;
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
  /** Told of each customer whose reads failed in a run: it is read again next run (metrics). */
  onCustomerFailed?: () => void;
  /** Customers read per run at most; default {@link DEFAULT_MAX_CUSTOMERS_PER_RUN}. */
  maxCustomersPerRun?: number;
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
  const { log, state, logger } = options;
  const publisher = options.publisher ?? createEventPublisher({ dedup: options.dedup, log, logger });
  const now = options.now ?? Date.now;
  const intervalMs = options.intervalSeconds * 1000;
  const graceMs = options.graceSeconds * 1000;
  const maxCustomersPerRun = options.maxCustomersPerRun ?? DEFAULT_MAX_CUSTOMERS_PER_RUN;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<number | undefined> | undefined;
  let stopped = false;

  const environmentOfKey = async (): Promise<PlatformEnvironment | undefined> => {
    const probe = await options.keyEnvironments.probe(options.apiKey);
    return probe.outcome === 'ready' ? probe.discovery.environment : undefined;
  };

  /**
   * Appends `event` once across replicas and runs: claimed, appended and marked seen, as webhooks
   * are. One the replicas do not hold yet is appended all the same: the next run finds it seen.
   */
  const appendOnce = async (event: PlatformEvent): Promise<boolean> => {
    if ((await publisher.claim(event.id)) !== 'claimed') return false;
    const publication = await publisher.publish(event);
    return publication.published;
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
      const watched = await state.watched(environment);
      const behind = await state.behind(environment);
      // Behind customers that nobody follows any more are forgotten.
      const following = new Set(watched);
      for (const customerId of behind.keys()) {
        if (!following.has(customerId)) {
          behind.delete(customerId);
          await state.setBehind(environment, customerId, undefined);
        }
      }
      const windowOf = (customerId: string): number =>
        Math.max(Math.min(behind.get(customerId) ?? from, from), until - MAX_BEHIND_MS);
      // The customers behind first (oldest window first), then the others, up to the run's bound.
      const ordered = [...watched].sort((a, b) => windowOf(a) - windowOf(b));
      const reading = ordered.slice(0, maxCustomersPerRun);
      let appended = 0;
      if (reading.length > 0) {
        const seen = await seenSince(log, environment, Math.min(...reading.map(windowOf)) - SEEN_LOOKBACK_MS);
        for (const customerId of reading) {
          const customerFrom = windowOf(customerId);
          try {
            for (const event of await missedChanges(
              options,
              environment,
              customerId,
              customerFrom,
              until,
              seen,
            )) {
              if (await appendOnce(event)) appended += 1;
            }
            if (behind.has(customerId)) await state.setBehind(environment, customerId, undefined);
          } catch (error) {
            // This customer alone keeps its window: read again next run, the others move on.
            options.onCustomerFailed?.();
            await state.setBehind(environment, customerId, customerFrom);
            logger.warn('could not reconcile a customer; reading it again next run', {
              customerId,
              error: error instanceof Error ? error.message : String(error),
            });
          }
        }
      }
      // Past the run's bound: kept behind with their own window, read first next run.
      for (const customerId of ordered.slice(maxCustomersPerRun)) {
        await state.setBehind(environment, customerId, windowOf(customerId));
      }
      await state.setReconciledUntil(environment, until);
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

/** The latest state of each resource the log holds an event of, appended since `since` (ms). */
async function seenSince(
  log: ReconcilerOptions['log'],
  environment: PlatformEnvironment,
  since: number,
): Promise<Map<string, number>> {
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
}

/** The changes of one customer in [from, until) that the log has not seen, as events. */
async function missedChanges(
  options: Pick<ReconcilerOptions, 'upstreamClient' | 'apiKey'>,
  environment: PlatformEnvironment,
  customerId: string,
  from: number,
  until: number,
  seen: Map<string, number>,
): Promise<PlatformEvent[]> {
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
    const type = replayedKindOf(resourceType, record);
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
}
