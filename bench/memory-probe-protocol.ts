/**
 * The messages between the fan-out benchmark and `memory-probe.ts` inside a facade, and the
 * benchmark's side of the exchange.
 */
import type { ChildProcess } from 'node:child_process';
import type { HeapInfo, HeapSpaceInfo } from 'node:v8';

export type GarbageCollection = 'none' | 'full' | 'memory-reducing';

export interface MemoryProbeRequest {
  memoryProbe: 'usage';
  id: number;
  /**
   * Collect garbage first (only when the facade runs with `--expose-gc`): `full` is an ordinary
   * full GC; `memory-reducing` is V8's last-resort one, which also gives the pages the heap no longer
   * uses back to the system (an ordinary GC keeps them for reuse).
   */
  collectGarbage: GarbageCollection;
  /** Also write a heap snapshot to this path (after the collection), for a closer look. */
  heapSnapshotPath?: string;
}

export interface MemoryProbeReply {
  memoryProbe: 'usage';
  id: number;
  /** Whether a garbage collection ran before the reading. */
  collected: boolean;
  usage: NodeJS.MemoryUsage;
  /** `v8.getHeapStatistics()`: committed, physical and malloced sizes. */
  heap: HeapInfo;
  /** `v8.getHeapSpaceStatistics()`: size, used and physical size of each space. */
  spaces: HeapSpaceInfo[];
}

let nextRequestId = 0;

/**
 * Asks the probe in `child` for its memory usage; undefined when the child has no probe (no IPC
 * channel) or does not answer within `timeoutMs`.
 */
export async function askMemoryUsage(
  child: ChildProcess,
  collectGarbage: GarbageCollection,
  timeoutMs = 10_000,
  heapSnapshotPath?: string,
): Promise<MemoryProbeReply | undefined> {
  // Without an IPC channel the child is never `connected`.
  if (!child.connected) return undefined;
  nextRequestId += 1;
  const id = nextRequestId;
  return new Promise((resolve) => {
    const onMessage = (message: unknown): void => {
      const reply = message as Partial<MemoryProbeReply>;
      if (reply.memoryProbe !== 'usage' || reply.id !== id) return;
      finish(reply as MemoryProbeReply);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    function finish(reply: MemoryProbeReply | undefined): void {
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(reply);
    }
    child.on('message', onMessage);
    const request: MemoryProbeRequest = {
      memoryProbe: 'usage',
      id,
      collectGarbage,
      ...(heapSnapshotPath === undefined ? {} : { heapSnapshotPath }),
    };
    child.send(request);
  });
}
