/**
 * Loaded into a facade by the fan-out benchmark only (`node --expose-gc --import <this file>`), so
 * the benchmark can read the facade's heap beside its RSS without any route or code of its own in
 * the facade: over the IPC channel it answers `process.memoryUsage()` and V8's heap statistics, after a garbage
 * collection when asked and when `--expose-gc` made one available. Without an IPC channel it does
 * nothing.
 */
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8';
import type { MemoryProbeReply, MemoryProbeRequest } from './memory-probe-protocol.ts';

if (process.send !== undefined && process.channel !== undefined) {
  // The channel must not keep a facade alive that is shutting down.
  process.channel.unref();
  process.on('message', (message: unknown) => {
    const request = message as Partial<MemoryProbeRequest>;
    if (request.memoryProbe !== 'usage' || typeof request.id !== 'number') return;
    const collect = (globalThis as { gc?: (options?: object) => void }).gc;
    const collected = request.collectGarbage !== 'none' && collect !== undefined;
    if (collected) {
      collect(
        request.collectGarbage === 'memory-reducing'
          ? { type: 'major', execution: 'sync', flavor: 'last-resort' }
          : { type: 'major', execution: 'sync' },
      );
    }
    if (typeof request.heapSnapshotPath === 'string') writeHeapSnapshot(request.heapSnapshotPath);
    const reply: MemoryProbeReply = {
      memoryProbe: 'usage',
      id: request.id,
      collected,
      usage: process.memoryUsage(),
      heap: getHeapStatistics(),
      spaces: getHeapSpaceStatistics(),
    };
    process.send?.(reply);
  });
}
