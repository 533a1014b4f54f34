/**
 * Reading a facade's memory from outside and through its probe (`bench/memory-probe.ts`): RSS and
 * resident memory by kind of mapping from /proc, the V8 heap (used, committed, external, each space)
 * over the IPC channel, after a garbage collection when asked. `bench/fanout.ts` and
 * `bench/storm.ts` use it.
 */
import { readFile } from 'node:fs/promises';
import { askMemoryUsage, type GarbageCollection } from '../memory-probe-protocol.ts';
import type { ServiceProcess } from '../processes.ts';

/** The facade's memory at one moment: RSS from /proc and the V8 heap from the probe. */
export interface MemoryReading {
  rssBytes: number;
  heapUsedBytes?: number;
  heapTotalBytes?: number;
  externalBytes?: number;
  arrayBuffersBytes?: number;
  /** Of the heap's committed memory, what is resident (V8's `total_physical_size`). */
  heapPhysicalBytes?: number;
  /** What V8 itself has malloced (zones, tables), outside the heap. */
  mallocedBytes?: number;
  /**
   * Resident memory by kind of mapping (/proc/<pid>/smaps): glibc's main arena (`[heap]`), anonymous
   * mappings of exactly V8's page size (256 KiB: the JS heap's pages), other anonymous ones (malloc's
   * other arenas, large allocations, V8's large objects and code), and files.
   */
  mappings?: { mallocMainArena: number; v8SizedPages: number; otherAnonymous: number; files: number };
  /** Each heap space: committed size, used and resident bytes. */
  spaces?: Record<string, { size: number; used: number; physical: number }>;
}

/**
 * Reads `facade`'s memory, after `collectGarbage` (the probe collects only when the facade runs
 * with `--expose-gc`), writing a heap snapshot to `heapSnapshotPath` first when given.
 */
export async function readMemory(
  facade: ServiceProcess,
  collectGarbage: GarbageCollection,
  heapSnapshotPath?: string,
): Promise<MemoryReading> {
  // Writing a snapshot of a large heap takes a while.
  const probe = await askMemoryUsage(
    facade.child,
    collectGarbage,
    heapSnapshotPath ? 300_000 : 10_000,
    heapSnapshotPath,
  );
  const rssBytes = await facade.rssBytes();
  const mappings = await readMappings(facade.pid);
  if (probe === undefined) return { rssBytes, mappings };
  return {
    rssBytes,
    mappings,
    heapUsedBytes: probe.usage.heapUsed,
    heapTotalBytes: probe.usage.heapTotal,
    externalBytes: probe.usage.external,
    arrayBuffersBytes: probe.usage.arrayBuffers,
    heapPhysicalBytes: probe.heap.total_physical_size,
    mallocedBytes: probe.heap.malloced_memory,
    spaces: Object.fromEntries(
      probe.spaces.map((space) => [
        space.space_name,
        { size: space.space_size, used: space.space_used_size, physical: space.physical_space_size },
      ]),
    ),
  };
}

/** Resident bytes of `pid` by kind of mapping; see {@link MemoryReading.mappings}. */
async function readMappings(pid: number): Promise<NonNullable<MemoryReading['mappings']>> {
  const totals = { mallocMainArena: 0, v8SizedPages: 0, otherAnonymous: 0, files: 0 };
  let kind: keyof typeof totals | undefined;
  for (const line of (await readFile(`/proc/${pid}/smaps`, 'utf8')).split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header !== null) {
      const size = Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16);
      const path = header[3]!.trim();
      kind =
        path === '[heap]'
          ? 'mallocMainArena'
          : path === ''
            ? size === 256 * 1024
              ? 'v8SizedPages'
              : 'otherAnonymous'
            : path.startsWith('[')
              ? undefined
              : 'files';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB$/.exec(line);
    if (rss !== null && kind !== undefined) totals[kind] += Number(rss[1]) * 1024;
  }
  return totals;
}
