/**
 * Where field usage is kept, a day at a time, and read back for the schema check: in Redis when the
 * facade has one (a hash per UTC day, `<prefix>usage:<day>`, which every replica adds to and which
 * expires `USAGE_DAYS` after its last write), in this process's memory otherwise (the same days,
 * the oldest dropped beyond `USAGE_DAYS`). A day holds at most `USAGE_MAX_OPERATIONS` operations
 * over every replica, each with at most `MAX_COORDINATES_PER_OPERATION` coordinates: an operation
 * beyond is only counted, as dropped.
 *
 * A day's hash holds, per operation (its key a digest of its identity): `d:<key>` its identity as
 * JSON (client, version, contract, operation name, digest of the document, type), `c:<key>` its
 * coordinates one per line, `n:<key>` its count; `#` how many operations it holds and `dropped` the
 * operations counted beyond the bound. No value of any operation is ever written.
 *
 * What {@link UsageReader.read} answers is also what `GET /usage` serves on the metrics port, so an
 * operator can hand it to CI as a file (`npm run schema:check -- --usage <days> --usage-file`).
 */
import type { Redis } from 'ioredis';
import type { UsageIdentity } from './field-usage.ts';
import { dayOf, MAX_COORDINATES_PER_OPERATION, type UsageDelta, type UsageWriter } from './usage-recorder.ts';

/** The format's name and version, written in every export. */
export const USAGE_FORMAT = 'platform-graphql-facade/field-usage@1';

/** One operation as read over a window of days. */
export interface UsedOperation extends UsageIdentity {
  /** How many times it ran in the window. */
  readonly count: number;
  readonly firstDay: string;
  readonly lastDay: string;
  /** Every schema coordinate it used, sorted. */
  readonly coordinates: readonly string[];
}

/** The usage of a window of days: what `GET /usage` serves and the schema check reads. */
export interface UsageReport {
  readonly format: typeof USAGE_FORMAT;
  /** The days read, oldest first (UTC). */
  readonly from: string;
  readonly to: string;
  readonly operations: readonly UsedOperation[];
  /** Operations counted beyond `USAGE_MAX_OPERATIONS` in the window: their coordinates are unknown. */
  readonly dropped: number;
}

export interface UsageReader {
  /** The usage of the last `days` days up to `at` (ms since the epoch), today included. */
  read(days: number, at: number): Promise<UsageReport>;
}

export interface UsageStore extends UsageWriter, UsageReader {
  close(): Promise<void>;
}

/** What one day holds of one operation, in either store. */
interface HeldOperation {
  identity: UsageIdentity;
  coordinates: Set<string>;
  count: number;
}

const DAY_MS = 86_400_000;

/** The UTC days of a window of `days` ending on the day of `at`, oldest first. */
function windowOf(days: number, at: number): string[] {
  return Array.from({ length: days }, (_, index) => dayOf(at - (days - 1 - index) * DAY_MS));
}

/** A window's report from each day's operations (oldest day first). */
function reportOf(
  days: readonly string[],
  held: readonly (Map<string, HeldOperation> | undefined)[],
  dropped: number,
): UsageReport {
  const merged = new Map<string, UsedOperation & { coordinates: string[] }>();
  held.forEach((operations, index) => {
    const day = days[index]!;
    for (const [key, operation] of operations ?? []) {
      const known = merged.get(key);
      const coordinates = new Set([...(known?.coordinates ?? []), ...operation.coordinates]);
      merged.set(key, {
        ...operation.identity,
        count: (known?.count ?? 0) + operation.count,
        firstDay: known?.firstDay ?? day,
        lastDay: day,
        coordinates: [...coordinates].sort(),
      });
    }
  });
  const operations = [...merged.values()].sort(
    (a, b) =>
      (a.contract ?? '').localeCompare(b.contract ?? '') ||
      (a.client ?? '').localeCompare(b.client ?? '') ||
      (a.operation ?? '').localeCompare(b.operation ?? '') ||
      a.hash.localeCompare(b.hash),
  );
  return { format: USAGE_FORMAT, from: days[0]!, to: days[days.length - 1]!, operations, dropped };
}

/** Usage kept in this process's memory: the store of a facade without Redis. */
export function createMemoryUsageStore(options: { days: number; maxOperations: number }): UsageStore {
  const byDay = new Map<string, { operations: Map<string, HeldOperation>; dropped: number }>();
  return {
    async write(day, deltas, dropped) {
      let held = byDay.get(day);
      if (held === undefined) {
        held = { operations: new Map(), dropped: 0 };
        byDay.set(day, held);
        // The oldest days leave first: at most `days` are held.
        for (const name of [...byDay.keys()].sort().slice(0, Math.max(0, byDay.size - options.days))) {
          byDay.delete(name);
        }
      }
      held.dropped += dropped;
      const missing: string[] = [];
      for (const delta of deltas) {
        const known = held.operations.get(delta.key);
        if (known === undefined && delta.identity === undefined) missing.push(delta.key);
        else if (known === undefined && held.operations.size >= options.maxOperations)
          held.dropped += delta.count;
        else addTo(held.operations, delta, known);
      }
      return { missing };
    },
    async read(days, at) {
      const window = windowOf(days, at);
      const held = window.map((day) => byDay.get(day));
      return reportOf(
        window,
        held.map((day) => day?.operations),
        held.reduce((sum, day) => sum + (day?.dropped ?? 0), 0),
      );
    },
    close: () => Promise.resolve(),
  };
}

function addTo(
  operations: Map<string, HeldOperation>,
  delta: UsageDelta,
  known: HeldOperation | undefined,
): void {
  const operation = known ?? { identity: delta.identity!, coordinates: new Set<string>(), count: 0 };
  operation.count += delta.count;
  for (const coordinate of delta.coordinates) {
    if (operation.coordinates.size >= MAX_COORDINATES_PER_OPERATION) break;
    operation.coordinates.add(coordinate);
  }
  operations.set(delta.key, operation);
}

/**
 * Adds one flush to a day's hash, in one step for every replica: an operation the day does not
 * hold yet is added only with its identity and while the day holds fewer than the bound (else it is
 * counted as dropped); its coordinates are merged, at most the bound of them. Answers the keys of
 * operations sent without an identity that the day does not hold.
 *
 * KEYS[1]: the day's hash. ARGV: the most operations, the most coordinates per operation, the
 * seconds to keep the day, the operations dropped by the replica; then per operation its key, its
 * count, its identity ('' when the replica believes the day holds it) and its new coordinates, one
 * per line.
 */
const WRITE_SCRIPT = `
local day = KEYS[1]
local maxOperations = tonumber(ARGV[1])
local maxCoordinates = tonumber(ARGV[2])
local held = tonumber(redis.call('HGET', day, '#') or '0')
local missing = {}
if tonumber(ARGV[4]) > 0 then redis.call('HINCRBY', day, 'dropped', ARGV[4]) end
for i = 5, #ARGV, 4 do
  local key, count, identity, added = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  local known = redis.call('HEXISTS', day, 'd:' .. key) == 1
  if not known and identity == '' then
    missing[#missing + 1] = key
  elseif not known and held >= maxOperations then
    redis.call('HINCRBY', day, 'dropped', count)
  else
    if not known then
      redis.call('HSET', day, 'd:' .. key, identity)
      held = held + 1
      redis.call('HSET', day, '#', held)
    end
    if added ~= '' then
      local coordinates = {}
      local list = {}
      for coordinate in string.gmatch(redis.call('HGET', day, 'c:' .. key) or '', '[^\\n]+') do
        coordinates[coordinate] = true
        list[#list + 1] = coordinate
      end
      for coordinate in string.gmatch(added, '[^\\n]+') do
        if not coordinates[coordinate] and #list < maxCoordinates then
          coordinates[coordinate] = true
          list[#list + 1] = coordinate
        end
      end
      redis.call('HSET', day, 'c:' .. key, table.concat(list, '\\n'))
    end
    if count > 0 then redis.call('HINCRBY', day, 'n:' .. key, count) end
  end
end
redis.call('EXPIRE', day, ARGV[3])
return missing
`;

/** Usage kept in Redis under `prefix`: every replica's, read back whole by any of them. */
export function createRedisUsageStore(options: {
  redis: Redis;
  prefix: string;
  days: number;
  maxOperations: number;
  /** Whether closing the store closes the connection (it is the store's own). */
  ownsConnection?: boolean;
}): UsageStore {
  const { redis } = options;
  const keyOf = (day: string) => `${options.prefix}usage:${day}`;
  // A day is kept its window after its last write, and one day more for the clocks of the replicas.
  const keepSeconds = (options.days + 1) * 86_400;
  return {
    async write(day, deltas, dropped) {
      const args = [options.maxOperations, MAX_COORDINATES_PER_OPERATION, keepSeconds, dropped].map(String);
      for (const delta of deltas) {
        const identity = delta.identity === undefined ? '' : JSON.stringify(delta.identity);
        args.push(delta.key, String(delta.count), identity, delta.coordinates.join('\n'));
      }
      const missing = (await redis.eval(WRITE_SCRIPT, 1, keyOf(day), ...args)) as string[];
      return { missing };
    },
    async read(days, at) {
      const window = windowOf(days, at);
      const pipeline = redis.pipeline();
      for (const day of window) pipeline.hgetall(keyOf(day));
      const answers = (await pipeline.exec()) ?? [];
      let dropped = 0;
      const held = answers.map(([error, fields]) => {
        if (error !== null) throw error;
        const hash = fields as Record<string, string>;
        dropped += Number(hash['dropped'] ?? 0);
        return operationsOfHash(hash);
      });
      return reportOf(window, held, dropped);
    },
    async close() {
      if (options.ownsConnection === true) redis.disconnect();
    },
  };
}

/** The operations one day's hash holds; a field that does not read as written is left out. */
function operationsOfHash(hash: Record<string, string>): Map<string, HeldOperation> {
  const operations = new Map<string, HeldOperation>();
  for (const [field, value] of Object.entries(hash)) {
    if (!field.startsWith('d:')) continue;
    const key = field.slice(2);
    let identity: UsageIdentity;
    try {
      identity = JSON.parse(value) as UsageIdentity;
    } catch {
      continue;
    }
    const coordinates = new Set((hash[`c:${key}`] ?? '').split('\n').filter((line) => line !== ''));
    operations.set(key, { identity, coordinates, count: Number(hash[`n:${key}`] ?? 0) });
  }
  return operations;
}
