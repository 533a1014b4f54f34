/**
 * The schema change check (`npm run schema:check`, part of `npm run check`): compares the SDL in
 * `schema/graph/` with the last released schema, `schema/released.graphql`, using
 * @graphql-inspector/core's `diff()`, and fails on a breaking change a client could trip over
 * (a removed field, a changed type, a new required argument...) unless it is acknowledged.
 *
 * A breaking change is acknowledged in one of two ways, both deliberate and reviewed in the diff:
 * - listed in `schema/acknowledged-breaking-changes.json` (`{ "type", "path", "reason" }`), when the
 *   break is accepted for the next release;
 * - released: `npm run schema:release` rewrites `schema/released.graphql` from the current SDL, as
 *   shipping a release does. The list is not cleared by it: its entries then match no change, and
 *   the check names them so they can be removed.
 *
 * Dangerous and safe changes are printed, never fatal.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { buildSubgraphSchema, printSubgraphSchema } from '@apollo/subgraph';
import { CriticalityLevel, diff, type Change, type TypeOfChangeType } from '@graphql-inspector/core';
import { buildSchema, type DocumentNode } from 'graphql';
import { loadTypeDefs } from '../src/graph/schema.ts';

const ROOT = resolve(import.meta.dirname, '..');
export const RELEASED_SCHEMA = resolve(ROOT, 'schema/released.graphql');
export const ACKNOWLEDGED_BREAKING_CHANGES = resolve(ROOT, 'schema/acknowledged-breaking-changes.json');

/** One acknowledged breaking change: graphql-inspector's change type and path, and why it is accepted. */
export interface AcknowledgedChange {
  type: string;
  path: string;
  reason: string;
}

export interface SchemaCheckResult {
  /** Breaking changes not acknowledged: the check fails when there is any. */
  unacknowledged: Change[];
  /** Breaking changes listed as acknowledged. */
  acknowledged: Change[];
  /** Dangerous and safe changes. */
  other: Change[];
  /** Acknowledgements that match no change any more (stale entries to remove). */
  unused: AcknowledgedChange[];
}

/** The subgraph SDL of `typeDefs` as released: built with buildSubgraphSchema, then printed. */
export function printReleasableSdl(typeDefs: DocumentNode = loadTypeDefs()): string {
  return `${printSubgraphSchema(buildSubgraphSchema([{ typeDefs }]))}\n`;
}

/** Compares `currentSdl` with `releasedSdl` (both from {@link printReleasableSdl}) and sorts the changes. */
export async function checkSchemaChanges(
  releasedSdl: string,
  currentSdl: string,
  acknowledgedChanges: readonly AcknowledgedChange[],
): Promise<SchemaCheckResult> {
  // Both sides are printed subgraph SDL, which declares the federation directives and fields
  // itself: graphql's own buildSchema reads it (buildSubgraphSchema would add `_entities` twice).
  const build = (sdl: string) => buildSchema(sdl);
  const changes = await diff(build(releasedSdl), build(currentSdl));
  const result: SchemaCheckResult = { unacknowledged: [], acknowledged: [], other: [], unused: [] };
  const used = new Set<AcknowledgedChange>();
  for (const change of changes) {
    if (change.criticality.level !== CriticalityLevel.Breaking) {
      result.other.push(change);
      continue;
    }
    const match = acknowledgedChanges.find(
      (entry) => entry.type === change.type && entry.path === change.path,
    );
    if (match === undefined) {
      result.unacknowledged.push(change);
    } else {
      used.add(match);
      result.acknowledged.push(change);
    }
  }
  result.unused = acknowledgedChanges.filter((entry) => !used.has(entry));
  return result;
}

/** Reads and checks the acknowledgement list; a malformed list is an error, not an empty one. */
export function readAcknowledgedChanges(path = ACKNOWLEDGED_BREAKING_CHANGES): AcknowledgedChange[] {
  const value = JSON.parse(readFileSync(path, 'utf8')) as unknown;
  if (!Array.isArray(value)) throw new Error(`${path} must hold a JSON array`);
  return value.map((entry: unknown, index) => {
    const { type, path: changePath, reason } = (entry ?? {}) as Record<string, unknown>;
    if (
      typeof type !== 'string' ||
      typeof changePath !== 'string' ||
      typeof reason !== 'string' ||
      reason === ''
    ) {
      throw new Error(
        `${path}[${index}] must be { "type": string, "path": string, "reason": non-empty string }`,
      );
    }
    return { type, path: changePath, reason };
  });
}

function describe(change: Change<TypeOfChangeType>): string {
  return `  [${change.type}] ${change.path ?? ''}: ${change.message}`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      release: { type: 'boolean', default: false },
      released: { type: 'string', default: RELEASED_SCHEMA },
      acknowledged: { type: 'string', default: ACKNOWLEDGED_BREAKING_CHANGES },
      'schema-dir': { type: 'string' },
    },
  });
  const schemaDir = values['schema-dir'];
  const current = printReleasableSdl(
    schemaDir === undefined ? loadTypeDefs() : loadTypeDefs(new URL(`file://${resolve(schemaDir)}/`)),
  );
  if (values.release) {
    writeFileSync(values.released, current);
    console.log(`Wrote the released schema to ${values.released}`);
    return 0;
  }
  const result = await checkSchemaChanges(
    readFileSync(values.released, 'utf8'),
    current,
    readAcknowledgedChanges(values.acknowledged),
  );
  if (result.other.length > 0) {
    console.log(`Non-breaking changes since the released schema:\n${result.other.map(describe).join('\n')}`);
  }
  if (result.acknowledged.length > 0) {
    console.log(`Acknowledged breaking changes:\n${result.acknowledged.map(describe).join('\n')}`);
  }
  for (const entry of result.unused) {
    console.warn(`An acknowledgement matches no change (remove it): [${entry.type}] ${entry.path}`);
  }
  if (result.unacknowledged.length > 0) {
    console.error(
      `Breaking changes since the released schema (schema/released.graphql):\n` +
        `${result.unacknowledged.map(describe).join('\n')}\n` +
        'Keep the schema compatible, or acknowledge each change in schema/acknowledged-breaking-changes.json ' +
        '({ "type", "path", "reason" }), or release the schema on purpose with `npm run schema:release`.',
    );
    return 1;
  }
  console.log('No unacknowledged breaking change since the released schema.');
  return 0;
}

if (import.meta.main) process.exitCode = await main();
