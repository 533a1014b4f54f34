/**
 * Field usage counted per UTC day and handed to its store (`usage-store.ts`: Redis, shared by every
 * replica, when the facade has one; this process's memory otherwise) every `USAGE_FLUSH_SECONDS` and
 * at shutdown. The operation recorder (`operation-record.ts`) hands it every executed operation of
 * every transport; what an operation used is worked out once per document (`field-usage.ts`).
 *
 * Bounded: a day holds at most `USAGE_MAX_OPERATIONS` distinct operations (client, its version, the
 * contract, the document) here and in the store; an operation beyond is counted as dropped. One
 * caller (one token: its subject, under its client) adds at most `USAGE_MAX_OPERATIONS_PER_CALLER` of them
 * a day on a replica: the name and version a client gives itself are its own to choose, so without
 * that bound one token could fill the day with names of its making and leave a real client's
 * operations uncounted. A flush that fails (Redis away) keeps its counts for the next one.
 */
import { createHash } from 'node:crypto';
import type { Caller } from '../auth/caller.ts';
import type { Logger } from '../logger.ts';
import {
  addValueCoordinates,
  shapeOf,
  type OperationShape,
  type OperationUsage,
  type UsageIdentity,
} from './field-usage.ts';

/** `USAGE_*`: whether field usage is recorded, how long it is kept, and its bounds. */
export interface UsageConfig {
  /** `USAGE_ENABLED`. */
  readonly enabled: boolean;
  /** `USAGE_DAYS`: how many days of usage the store keeps, and the longest window a check reads. */
  readonly days: number;
  /** `USAGE_MAX_OPERATIONS`: distinct operations one day holds, over every replica. */
  readonly maxOperations: number;
  /** `USAGE_MAX_OPERATIONS_PER_CALLER`: distinct operations one caller adds to a day, on one replica. */
  readonly maxOperationsPerCaller: number;
  /** `USAGE_FLUSH_SECONDS`: how often counts leave for the store. */
  readonly flushSeconds: number;
}

/** Coordinates one operation may hold (a document is bounded by `QUERY_MAX_TOKENS` anyway). */
export const MAX_COORDINATES_PER_OPERATION = 2_000;

/** What one flush hands the store for one operation of one day. */
export interface UsageDelta {
  /** The operation's key in the store: a digest of its identity, the same on every replica. */
  readonly key: string;
  readonly count: number;
  /** Given when the store may not hold the operation yet. */
  readonly identity?: UsageIdentity;
  /** Coordinates to add: every one with the identity, else those seen since the last flush. */
  readonly coordinates: readonly string[];
}

/** Where the days' usage is kept. */
export interface UsageWriter {
  /**
   * Adds `operations` and `dropped` to `day`; answers the keys of operations given without their
   * identity that the store does not hold (lost with a Redis that failed over): sent again whole.
   */
  write(day: string, operations: readonly UsageDelta[], dropped: number): Promise<{ missing: string[] }>;
}

export interface UsageRecorder {
  /** Counts one executed operation. Never throws. */
  record(usage: OperationUsage): void;
  /** Hands what was counted since the last flush to the store. */
  flush(): Promise<void>;
  /** Stops the timer and flushes once more. */
  close(): Promise<void>;
}

interface Entry {
  readonly key: string;
  readonly identity: UsageIdentity;
  readonly coordinates: ReadonlySet<string>;
  /** Input fields and enum values seen in variables' values, in the order they were first seen. */
  dynamic: Set<string> | undefined;
  count: number;
  /** The store holds its identity, and the first `sent` of `dynamic`. */
  described: boolean;
  sent: number;
}

interface Day {
  readonly entries: Map<string, Entry>;
  /** Per caller, how many of `entries` it added. */
  readonly addedBy: Map<string, number>;
  dropped: number;
}

/** What a client may call itself here: printable ASCII, at most 64 characters; anything else is left out. */
const CLIENT_LABEL = /^[\x20-\x7e]{1,64}$/;

function clientLabel(value: string | undefined): string | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  return CLIENT_LABEL.test(trimmed) ? trimmed : null;
}

/** The UTC day of `at` (ms since the epoch), `YYYY-MM-DD`. */
export function dayOf(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}

const DAY_MS = 86_400_000;

/**
 * The recorder of one process: counts in memory per UTC day, hands the counts to `store` every
 * `USAGE_FLUSH_SECONDS` (a timer that keeps no process alive) and once more on `close`.
 */
export function createUsageRecorder(options: {
  config: UsageConfig;
  store: UsageWriter;
  /** The contract `caller` is served (src/graph/audiences.ts). */
  contractOf(caller: Caller | undefined): string | undefined;
  logger: Logger;
  now?: () => number;
}): UsageRecorder {
  const { config, store, logger } = options;
  const now = options.now ?? Date.now;
  const days = new Map<string, Day>();
  let today = { day: '', endsAt: 0 };
  let flushing: Promise<void> | undefined;
  let lastWarned = 0;

  const dayNow = (): Day => {
    const at = now();
    if (at >= today.endsAt || at < today.endsAt - DAY_MS) {
      today = { day: dayOf(at), endsAt: (Math.floor(at / DAY_MS) + 1) * DAY_MS };
    }
    let day = days.get(today.day);
    if (day === undefined) {
      day = { entries: new Map(), addedBy: new Map(), dropped: 0 };
      days.set(today.day, day);
    }
    return day;
  };

  const record = (usage: OperationUsage): void => {
    if (!config.enabled) return;
    const shape = shapeOf(usage.schema, usage.document, usage.operationName);
    if (shape === null) return;
    countIn(dayNow(), shape, usage, options.contractOf(usage.caller) ?? null, config);
  };

  const warn = (error: unknown): void => {
    if (now() - lastWarned <= 60_000) return;
    lastWarned = now();
    logger.warn('field usage could not be stored; kept for the next flush', {
      error: (error as Error).message,
    });
  };
  const flushDay = (name: string, day: Day) => writeDay(store, name, day, warn);

  const flush = (): Promise<void> => {
    flushing ??= (async () => {
      try {
        dayNow();
        for (const [name, day] of [...days]) {
          await flushDay(name, day);
          // A past day leaves memory once all of it is stored (or once it is past the window anyway).
          const settled = [...day.entries.values()].every((entry) => entry.count === 0) && day.dropped === 0;
          const expired = name < dayOf(now() - config.days * DAY_MS);
          if (name !== today.day && (settled || expired)) days.delete(name);
        }
      } finally {
        flushing = undefined;
      }
    })();
    return flushing;
  };

  const timer = config.enabled ? setInterval(() => void flush(), config.flushSeconds * 1000) : undefined;
  timer?.unref();
  return {
    record(usage) {
      try {
        record(usage);
      } catch (error) {
        // Never the operation's failure: usage is a by-product of serving it.
        logger.debug('field usage not recorded', { error: (error as Error).message });
      }
    },
    flush,
    async close() {
      clearInterval(timer);
      if (config.enabled) await flush();
    },
  };
}

/**
 * Counts one operation of `shape` in `day`, a new one only while the day holds fewer than
 * `maxOperations` and its caller added fewer than `maxOperationsPerCaller`.
 */
function countIn(
  day: Day,
  shape: OperationShape,
  usage: OperationUsage,
  contract: string | null,
  { maxOperations, maxOperationsPerCaller }: Pick<UsageConfig, 'maxOperations' | 'maxOperationsPerCaller'>,
): void {
  const client = usage.caller?.clientId ?? null;
  const clientName = clientLabel(usage.clientName);
  const clientVersion = clientLabel(usage.clientVersion);
  const lookup = `${contract ?? ''}\0${client ?? ''}\0${clientName ?? ''}\0${clientVersion ?? ''}\0${shape.hash}`;
  let entry = day.entries.get(lookup);
  if (entry === undefined) {
    const caller =
      usage.caller === undefined ? '' : `${usage.caller.clientId ?? ''}\0${usage.caller.subject}`;
    const added = day.addedBy.get(caller) ?? 0;
    if (day.entries.size >= maxOperations || added >= maxOperationsPerCaller) {
      day.dropped += 1;
      return;
    }
    day.addedBy.set(caller, added + 1);
    const identity: UsageIdentity = {
      contract,
      client,
      clientName,
      clientVersion,
      operation: shape.name,
      hash: shape.hash,
      type: shape.type,
    };
    const key = createHash('sha256').update(lookup).digest('base64url').slice(0, 22);
    entry = {
      key,
      identity,
      coordinates: shape.coordinates,
      dynamic: undefined,
      count: 0,
      described: false,
      sent: 0,
    };
    day.entries.set(lookup, entry);
  }
  entry.count += 1;
  const { variables } = usage;
  if (shape.variables.length === 0 || variables === null || variables === undefined) return;
  entry.dynamic ??= new Set();
  for (const variable of shape.variables) {
    addValueCoordinates(
      variables[variable.name],
      variable.type,
      entry.dynamic,
      MAX_COORDINATES_PER_OPERATION,
    );
  }
}

/**
 * Hands `store` what `day` (named `name`) counted since its last write. Counts a write that fails
 * are kept for the next (`warn` is told); an operation the store no longer holds (lost with a Redis
 * that failed over) is sent again whole next time, with the counts of this write.
 */
async function writeDay(
  store: UsageWriter,
  name: string,
  day: Day,
  warn: (error: unknown) => void,
): Promise<void> {
  const taken = new Map<Entry, { count: number; size: number }>();
  const operations: UsageDelta[] = [];
  for (const entry of day.entries.values()) {
    const size = entry.dynamic?.size ?? 0;
    const fresh = entry.dynamic === undefined ? [] : [...entry.dynamic].slice(entry.sent);
    if (entry.described && entry.count === 0 && fresh.length === 0) continue;
    taken.set(entry, { count: entry.count, size });
    operations.push(
      entry.described
        ? {
            key: entry.key,
            count: entry.count,
            coordinates: fresh.filter((c) => !entry.coordinates.has(c)),
          }
        : {
            key: entry.key,
            count: entry.count,
            identity: entry.identity,
            coordinates: [...entry.coordinates, ...(entry.dynamic ?? [])].slice(
              0,
              MAX_COORDINATES_PER_OPERATION,
            ),
          },
    );
    entry.count = 0;
  }
  const dropped = day.dropped;
  day.dropped = 0;
  if (operations.length === 0 && dropped === 0) return;
  try {
    const { missing } = await store.write(name, operations, dropped);
    for (const [entry, { size }] of taken) {
      entry.described = true;
      entry.sent = size;
    }
    for (const entry of day.entries.values()) {
      if (missing.includes(entry.key)) {
        entry.described = false;
        entry.count += taken.get(entry)?.count ?? 0;
      }
    }
  } catch (error) {
    // Kept for the next flush: nothing counted is lost while the store is away.
    for (const [entry, { count }] of taken) entry.count += count;
    day.dropped += dropped;
    warn(error);
  }
}

/** Documented defaults of `USAGE_*`, also shown in the README's configuration table. */
export const USAGE_CONFIG_DEFAULTS = {
  USAGE_ENABLED: true,
  USAGE_DAYS: 14,
  USAGE_MAX_OPERATIONS: 1_000,
  USAGE_MAX_OPERATIONS_PER_CALLER: 100,
  USAGE_FLUSH_SECONDS: 30,
} as const;

/** Reads `USAGE_*` with `reader` (its problems reported with every other variable's). */
export function readUsageConfig(reader: {
  boolean(name: string, fallback: boolean): boolean;
  integer(name: string, fallback: number, min: number, max: number): number;
}): UsageConfig {
  const defaults = USAGE_CONFIG_DEFAULTS;
  return {
    enabled: reader.boolean('USAGE_ENABLED', defaults.USAGE_ENABLED),
    days: reader.integer('USAGE_DAYS', defaults.USAGE_DAYS, 1, 90),
    maxOperations: reader.integer('USAGE_MAX_OPERATIONS', defaults.USAGE_MAX_OPERATIONS, 1, 100_000),
    maxOperationsPerCaller: reader.integer(
      'USAGE_MAX_OPERATIONS_PER_CALLER',
      defaults.USAGE_MAX_OPERATIONS_PER_CALLER,
      1,
      100_000,
    ),
    flushSeconds: reader.integer('USAGE_FLUSH_SECONDS', defaults.USAGE_FLUSH_SECONDS, 1, 3_600),
  };
}
