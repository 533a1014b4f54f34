/**
 * What a V8 heap snapshot holds, by constructor: the number of objects and their own (shallow) size
 * for each `type:name` (objects by constructor, closures by function name, strings, arrays and
 * V8's internal kinds by type alone), and the difference between two snapshots. Enough to tell
 * whether anything made per connection or per subscription is still there after they all left:
 * such a thing shows up as a constructor with about as many more objects as there were subscribers.
 */
import { readFile } from 'node:fs/promises';

export interface ConstructorTotals {
  count: number;
  selfBytes: number;
}

interface HeapSnapshotFile {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Objects and own bytes by `type:name` in the snapshot at `path`. */
export async function summarizeHeapSnapshot(path: string): Promise<Map<string, ConstructorTotals>> {
  const file = JSON.parse(await readFile(path, 'utf8')) as HeapSnapshotFile;
  const fields = file.snapshot.meta.node_fields;
  const types = file.snapshot.meta.node_types[0];
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const totals = new Map<string, ConstructorTotals>();
  for (let offset = 0; offset < file.nodes.length; offset += fields.length) {
    const type = types[file.nodes[offset + typeAt]!] ?? 'unknown';
    // Objects, closures and native objects by name; the rest (strings, arrays, code ...) by type,
    // since their names are their contents.
    const key =
      type === 'object' || type === 'closure' || type === 'native'
        ? `${type}:${file.strings[file.nodes[offset + nameAt]!] ?? ''}`
        : type;
    const entry = totals.get(key) ?? { count: 0, selfBytes: 0 };
    entry.count += 1;
    entry.selfBytes += file.nodes[offset + sizeAt]!;
    totals.set(key, entry);
  }
  return totals;
}

export interface ConstructorDifference extends ConstructorTotals {
  key: string;
}

/** `after` minus `before` by constructor, largest growth in own bytes first. */
export function compareHeapSummaries(
  before: Map<string, ConstructorTotals>,
  after: Map<string, ConstructorTotals>,
): ConstructorDifference[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys]
    .map((key) => ({
      key,
      count: (after.get(key)?.count ?? 0) - (before.get(key)?.count ?? 0),
      selfBytes: (after.get(key)?.selfBytes ?? 0) - (before.get(key)?.selfBytes ?? 0),
    }))
    .sort((a, b) => b.selfBytes - a.selfBytes);
}
