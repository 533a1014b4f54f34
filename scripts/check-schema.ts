/**
 * The schema change check (`npm run schema:check`, part of `npm run check`): compares the SDL in
 * `schema/graph/` with the last released schema, `schema/released.graphql`, using
 * @graphql-inspector/core's `diff()`, and judges each breaking change (a removed field, a changed
 * type, a new required argument...) by the operations clients ship: the trusted-documents manifests
 * listed in `schema/client-manifests.json` (see `client-operations.ts`). A breaking change is
 * - in use when an operation of a manifest reads what it changes: the check fails unless it is
 *   acknowledged, and names the operations;
 * - unused when none does: reported, not fatal (nothing a listed client sends breaks).
 * Every operation is also validated against the new schema: one that no longer validates fails the
 * check unless an acknowledged breaking change names it. With no manifest configured, every
 * breaking change counts as in use.
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
import { CriticalityLevel, diff, type Change } from '@graphql-inspector/core';
import { buildSchema, type DocumentNode } from 'graphql';
import { loadTypeDefs } from '../src/graph/schema.ts';
import {
  displayPath,
  indexUsage,
  invalidOperations,
  loadClientOperations,
  nameOperations,
  operationsAffectedBy,
  readClientManifests,
  type ClientOperation,
  type InvalidOperation,
} from './client-operations.ts';

const ROOT = resolve(import.meta.dirname, '..');
export const RELEASED_SCHEMA = resolve(ROOT, 'schema/released.graphql');
export const ACKNOWLEDGED_BREAKING_CHANGES = resolve(ROOT, 'schema/acknowledged-breaking-changes.json');
export const CLIENT_MANIFESTS = resolve(ROOT, 'schema/client-manifests.json');

/** One acknowledged breaking change: graphql-inspector's change type and path, and why it is accepted. */
export interface AcknowledgedChange {
  type: string;
  path: string;
  reason: string;
}

/** A change and the client operations it reaches (`'unknown'`: a kind the usage index cannot judge). */
export interface ClassifiedChange {
  change: Change;
  operations: ClientOperation[] | 'unknown';
}

export interface SchemaCheckResult {
  /** Breaking changes an operation uses (or of unknown reach), not acknowledged: the check fails. */
  unacknowledged: ClassifiedChange[];
  /** Breaking changes listed as acknowledged, used or not. */
  acknowledged: ClassifiedChange[];
  /** Breaking changes no operation of any manifest uses, not acknowledged: reported only. */
  unusedBreaking: ClassifiedChange[];
  /** Dangerous and safe changes. */
  other: ClassifiedChange[];
  /** Acknowledgements that match no change any more (stale entries to remove). */
  staleAcknowledgements: AcknowledgedChange[];
  /** Operations that do not validate against the new schema. */
  invalid: InvalidOperation[];
  /** Those of {@link invalid} no acknowledged breaking change names: the check fails. */
  unexplainedInvalid: InvalidOperation[];
}

/** The subgraph SDL of `typeDefs` as released: built with buildSubgraphSchema, then printed. */
export function printReleasableSdl(typeDefs: DocumentNode = loadTypeDefs()): string {
  return `${printSubgraphSchema(buildSubgraphSchema([{ typeDefs }]))}\n`;
}

/**
 * Compares `currentSdl` with `releasedSdl` (both from {@link printReleasableSdl}) and sorts the
 * changes by the `operations` clients ship; `operations` undefined (no manifest configured): every
 * breaking change counts as in use.
 */
export async function checkSchemaChanges(
  releasedSdl: string,
  currentSdl: string,
  acknowledgedChanges: readonly AcknowledgedChange[],
  operations?: readonly ClientOperation[],
): Promise<SchemaCheckResult> {
  // Both sides are printed subgraph SDL, which declares the federation directives and fields
  // itself: graphql's own buildSchema reads it (buildSubgraphSchema would add `_entities` twice).
  const releasedSchema = buildSchema(releasedSdl);
  const currentSchema = buildSchema(currentSdl);
  const changes = await diff(releasedSchema, currentSchema);
  // What the clients read is indexed against the released schema: the one they were built against.
  const usage = operations === undefined ? undefined : indexUsage(releasedSchema, operations);
  const result: SchemaCheckResult = {
    unacknowledged: [],
    acknowledged: [],
    unusedBreaking: [],
    other: [],
    staleAcknowledgements: [],
    invalid: operations === undefined ? [] : invalidOperations(currentSchema, operations),
    unexplainedInvalid: [],
  };
  const used = new Set<AcknowledgedChange>();
  for (const change of changes) {
    const affected = usage === undefined ? 'unknown' : operationsAffectedBy(change, usage, currentSchema);
    const classified: ClassifiedChange = {
      change,
      operations: affected === 'unknown' ? affected : [...affected],
    };
    if (change.criticality.level !== CriticalityLevel.Breaking) {
      result.other.push(classified);
      continue;
    }
    const match = acknowledgedChanges.find(
      (entry) => entry.type === change.type && entry.path === change.path,
    );
    if (match !== undefined) {
      used.add(match);
      result.acknowledged.push(classified);
    } else if (classified.operations !== 'unknown' && classified.operations.length === 0) {
      result.unusedBreaking.push(classified);
    } else {
      result.unacknowledged.push(classified);
    }
  }
  result.staleAcknowledgements = acknowledgedChanges.filter((entry) => !used.has(entry));
  // An operation broken by an acknowledged change is accepted with it; one broken by an
  // unacknowledged change fails with that change; one no breaking change names fails on its own.
  const named = new Set(
    [...result.acknowledged, ...result.unacknowledged].flatMap(({ operations: reached }) =>
      reached === 'unknown' ? [] : reached,
    ),
  );
  result.unexplainedInvalid = result.invalid.filter(({ operation }) => !named.has(operation));
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

function describe({ change, operations }: ClassifiedChange): string {
  const line = `  [${String(change.type)}] ${change.path ?? ''}: ${change.message}`;
  if (operations === 'unknown') {
    return change.criticality.level === CriticalityLevel.Breaking
      ? `${line}\n      used by: not judged from the manifests, so counted as in use`
      : line;
  }
  // A safe change reaches no client: only breaking and dangerous ones name who reads them.
  if (operations.length === 0 || change.criticality.level === CriticalityLevel.NonBreaking) return line;
  return `${line}\n      used by ${nameOperations(operations)}`;
}

function describeInvalid({ operation, errors }: InvalidOperation): string {
  return errors.map((error) => `  ${operation.client}: ${operation.name}: ${error}`).join('\n');
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      release: { type: 'boolean', default: false },
      released: { type: 'string', default: RELEASED_SCHEMA },
      acknowledged: { type: 'string', default: ACKNOWLEDGED_BREAKING_CHANGES },
      manifests: { type: 'string', default: CLIENT_MANIFESTS },
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
  let operations: ClientOperation[] | undefined;
  try {
    const manifests = readClientManifests(values.manifests);
    operations = manifests.length === 0 ? undefined : await loadClientOperations(manifests);
    console.log(
      manifests.length === 0
        ? `No client manifest listed in ${displayPath(values.manifests)}: every breaking change counts as in use.`
        : `Client operations (${displayPath(values.manifests)}): ` +
            manifests
              .map(({ name, path }) => {
                const count = (operations ?? []).filter((operation) => operation.client === name).length;
                return `${name} (${displayPath(path)}) ${count}`;
              })
              .join(', '),
    );
  } catch (error) {
    console.error(`The client manifests cannot be read: ${(error as Error).message}`);
    return 2;
  }
  const result = await checkSchemaChanges(
    readFileSync(values.released, 'utf8'),
    current,
    readAcknowledgedChanges(values.acknowledged),
    operations,
  );
  if (result.other.length > 0) {
    console.log(
      `Safe and dangerous changes since the released schema:\n${result.other.map(describe).join('\n')}`,
    );
  }
  if (result.unusedBreaking.length > 0) {
    console.log(
      'Breaking changes no operation of the client manifests uses (reported; no acknowledgement needed):\n' +
        result.unusedBreaking.map(describe).join('\n'),
    );
  }
  if (result.acknowledged.length > 0) {
    console.log(`Acknowledged breaking changes:\n${result.acknowledged.map(describe).join('\n')}`);
  }
  for (const entry of result.staleAcknowledgements) {
    console.warn(`An acknowledgement matches no change (remove it): [${entry.type}] ${entry.path}`);
  }
  const explained = result.invalid.filter((invalid) => !result.unexplainedInvalid.includes(invalid));
  if (explained.length > 0) {
    console.log(
      `Client operations that no longer validate, broken by a change above:\n${explained.map(describeInvalid).join('\n')}`,
    );
  }
  let failed = false;
  if (result.unacknowledged.length > 0) {
    failed = true;
    console.error(
      `Breaking changes for operations clients ship, since the released schema (schema/released.graphql):\n` +
        `${result.unacknowledged.map(describe).join('\n')}\n` +
        'Keep the schema compatible, or acknowledge each change in schema/acknowledged-breaking-changes.json ' +
        '({ "type", "path", "reason" }), or release the schema on purpose with `npm run schema:release`.',
    );
  }
  if (result.unexplainedInvalid.length > 0) {
    failed = true;
    console.error(
      `Client operations that do not validate against the schema, and no breaking change explains:\n` +
        `${result.unexplainedInvalid.map(describeInvalid).join('\n')}\n` +
        'Regenerate the manifest from operations that validate, or bring back what they read.',
    );
  }
  if (failed) return 1;
  console.log('No unacknowledged breaking change for the operations clients ship.');
  return 0;
}

if (import.meta.main) process.exitCode = await main();
