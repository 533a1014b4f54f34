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
import { buildSchema, parse, print, type DocumentNode, type GraphQLSchema } from 'graphql';
import {
  contractTypeDefs,
  isWholeSchema,
  readContracts,
  tagsIn,
  type Contract,
} from '../src/graph/contracts.ts';
import { loadTypeDefs } from '../src/graph/schema.ts';
import type { UsageReport } from '../src/observability/usage-store.ts';
import { readRecordedUsage, recordedOperations, unusedFields, type UsageSource } from './recorded-usage.ts';
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
  /** The contract whose schema the change is of (schema/contracts.json); absent: the whole schema's. */
  contract?: string;
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

/** Where an operation can carry a directive; a directive with none of them only annotates the schema. */
const EXECUTABLE_LOCATIONS: ReadonlySet<string> = new Set([
  'QUERY',
  'MUTATION',
  'SUBSCRIPTION',
  'FIELD',
  'FRAGMENT_DEFINITION',
  'FRAGMENT_SPREAD',
  'INLINE_FRAGMENT',
  'VARIABLE_DEFINITION',
]);

/**
 * Whether `change` is to the definition of a directive no operation can carry (federation's `@tag`,
 * `@key`...: type-system locations only, in the released schema): no client can send it, so no
 * change to it can break one, however graphql-inspector rates it. Such a directive is renamed when
 * it is first imported by `@link` (`@federation__tag` becomes `@tag`).
 */
function definesSchemaOnly(change: Change, released: GraphQLSchema): boolean {
  if (!(change.type as string).startsWith('DIRECTIVE_') || !change.path?.startsWith('@')) return false;
  const directive = released.getDirective(change.path.slice(1).split('.')[0] ?? '');
  return directive != null && !directive.locations.some((location) => EXECUTABLE_LOCATIONS.has(location));
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
    if (change.criticality.level !== CriticalityLevel.Breaking || definesSchemaOnly(change, releasedSchema)) {
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
    const { type, path: changePath, reason, contract } = (entry ?? {}) as Record<string, unknown>;
    if (
      typeof type !== 'string' ||
      typeof changePath !== 'string' ||
      typeof reason !== 'string' ||
      reason === '' ||
      (contract !== undefined && typeof contract !== 'string')
    ) {
      throw new Error(
        `${path}[${index}] must be { "type": string, "path": string, "reason": non-empty string, "contract"?: string }`,
      );
    }
    return { type, path: changePath, reason, ...(contract === undefined ? {} : { contract }) };
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

/** What the command was asked. */
interface CheckArguments {
  released: string;
  acknowledged: string;
  manifests: string;
  /** Days of recorded usage to judge by (`--usage`), and where to read it (`--usage-file`, else Redis). */
  usage: { days: number; source: UsageSource } | undefined;
}

/** The whole schema and each contract that filters it: one check each. */
interface Audience {
  /** Undefined for the whole schema. */
  readonly contract: Contract | undefined;
  /** The contract names recorded usage and manifests give for it (null: none, the whole schema). */
  readonly names: readonly (string | null)[];
}

function audiencesOf(contracts: readonly Contract[]): Audience[] {
  const whole = contracts.filter(isWholeSchema).map(({ name }) => name);
  return [
    { contract: undefined, names: [null, ...whole] },
    ...contracts
      .filter((contract) => !isWholeSchema(contract))
      .map((contract) => ({ contract, names: [contract.name] })),
  ];
}

/** `sdl` (printed subgraph SDL) as `contract`'s callers are served it. */
function sdlOf(sdl: string, contract: Contract | undefined): string {
  return contract === undefined ? sdl : `${print(contractTypeDefs(parse(sdl), contract))}\n`;
}

/**
 * Prints one audience's result under `heading` (the whole schema's with none, as it always read)
 * and answers whether it fails the check.
 */
function printResult(result: SchemaCheckResult, heading: string): boolean {
  const say = (text: string) => `${heading}${text}`;
  if (result.other.length > 0) {
    console.log(
      say(`Safe and dangerous changes since the released schema:\n${result.other.map(describe).join('\n')}`),
    );
  }
  if (result.unusedBreaking.length > 0) {
    console.log(
      say(
        'Breaking changes no operation of the client manifests uses (reported; no acknowledgement needed):\n',
      ) + result.unusedBreaking.map(describe).join('\n'),
    );
  }
  if (result.acknowledged.length > 0) {
    console.log(say(`Acknowledged breaking changes:\n${result.acknowledged.map(describe).join('\n')}`));
  }
  for (const entry of result.staleAcknowledgements) {
    console.warn(say(`An acknowledgement matches no change (remove it): [${entry.type}] ${entry.path}`));
  }
  const explained = result.invalid.filter((invalid) => !result.unexplainedInvalid.includes(invalid));
  if (explained.length > 0) {
    console.log(
      say(
        `Client operations that no longer validate, broken by a change above:\n${explained.map(describeInvalid).join('\n')}`,
      ),
    );
  }
  let failed = false;
  if (result.unacknowledged.length > 0) {
    failed = true;
    console.error(
      say(
        `Breaking changes for operations clients ship, since the released schema (schema/released.graphql):\n`,
      ) +
        `${result.unacknowledged.map(describe).join('\n')}\n` +
        'Keep the schema compatible, or acknowledge each change in schema/acknowledged-breaking-changes.json ' +
        '({ "type", "path", "reason" }), or release the schema on purpose with `npm run schema:release`.',
    );
  }
  if (result.unexplainedInvalid.length > 0) {
    failed = true;
    console.error(
      say(`Client operations that do not validate against the schema, and no breaking change explains:\n`) +
        `${result.unexplainedInvalid.map(describeInvalid).join('\n')}\n` +
        'Regenerate the manifest from operations that validate, or bring back what they read.',
    );
  }
  return failed;
}

/** The operations of the manifests and of the recorded usage; undefined where nothing says who reads what. */
async function loadOperations(
  args: CheckArguments,
): Promise<{ manifests: ClientOperation[] | undefined; usage: UsageReport | undefined } | number> {
  let manifests: ClientOperation[] | undefined;
  try {
    const listed = readClientManifests(args.manifests);
    manifests = listed.length === 0 ? undefined : await loadClientOperations(listed);
    console.log(
      listed.length === 0
        ? `No client manifest listed in ${displayPath(args.manifests)}: every breaking change counts as in use.`
        : `Client operations (${displayPath(args.manifests)}): ` +
            listed
              .map(({ name, path }) => {
                const count = (manifests ?? []).filter((operation) => operation.client === name).length;
                return `${name} (${displayPath(path)}) ${count}`;
              })
              .join(', '),
    );
  } catch (error) {
    console.error(`The client manifests cannot be read: ${(error as Error).message}`);
    return 2;
  }
  if (args.usage === undefined) return { manifests, usage: undefined };
  const { days, source } = args.usage;
  let usage: UsageReport;
  try {
    usage = await readRecordedUsage(days, source);
  } catch (error) {
    console.error(`The recorded usage cannot be read: ${(error as Error).message}`);
    return 2;
  }
  const clients = new Set(usage.operations.map((operation) => operation.client));
  console.log(
    `Recorded usage (${'file' in source ? displayPath(source.file) : 'Redis'}, ${usage.from} to ${usage.to}): ` +
      `${usage.operations.length} operations of ${clients.size} clients`,
  );
  // Fails closed: an operation left uncounted may use what a change removes, so this usage can
  // call no such change safe (and one caller could otherwise crowd a real client out on purpose).
  if (usage.dropped > 0) {
    console.error(
      `${usage.dropped} operations were counted beyond USAGE_MAX_OPERATIONS (or a caller's USAGE_MAX_OPERATIONS_PER_CALLER): ` +
        'what they used is unknown, so this usage cannot judge a change; raise the bounds, or check without --usage.',
    );
    return 2;
  }
  return { manifests, usage };
}

function parseCheckArguments(): CheckArguments & { release: boolean; schemaDir: string | undefined } {
  const { values } = parseArgs({
    options: {
      release: { type: 'boolean', default: false },
      released: { type: 'string', default: RELEASED_SCHEMA },
      acknowledged: { type: 'string', default: ACKNOWLEDGED_BREAKING_CHANGES },
      manifests: { type: 'string', default: CLIENT_MANIFESTS },
      'schema-dir': { type: 'string' },
      usage: { type: 'string' },
      'usage-file': { type: 'string' },
    },
  });
  const days = values.usage === undefined ? undefined : Number(values.usage);
  if (days !== undefined && (!Number.isInteger(days) || days < 1 || days > 90)) {
    throw new Error('--usage must be a number of days from 1 to 90');
  }
  const file = values['usage-file'];
  return {
    release: values.release,
    schemaDir: values['schema-dir'],
    released: values.released,
    acknowledged: values.acknowledged,
    manifests: values.manifests,
    usage:
      days === undefined ? undefined : { days, source: file === undefined ? { env: process.env } : { file } },
  };
}

async function main(): Promise<number> {
  let args: ReturnType<typeof parseCheckArguments>;
  try {
    args = parseCheckArguments();
  } catch (error) {
    console.error((error as Error).message);
    return 2;
  }
  const { schemaDir } = args;
  const current = printReleasableSdl(
    schemaDir === undefined ? loadTypeDefs() : loadTypeDefs(new URL(`file://${resolve(schemaDir)}/`)),
  );
  if (args.release) {
    writeFileSync(args.released, current);
    console.log(`Wrote the released schema to ${args.released}`);
    return 0;
  }
  const loaded = await loadOperations(args);
  if (typeof loaded === 'number') return loaded;
  const released = readFileSync(args.released, 'utf8');
  const acknowledged = readAcknowledgedChanges(args.acknowledged);
  let failed = false;
  // The whole schema's changes first: each contract is then judged on the changes of its own.
  const judged = new Set<string>();
  for (const audience of audiencesOf(readContracts())) {
    failed = (await checkAudience(audience, { released, current, acknowledged, loaded, judged })) || failed;
  }
  if (loaded.usage !== undefined) {
    const unused = unusedFields(buildSchema(current), loaded.usage);
    console.log(
      `Fields no recorded operation used from ${loaded.usage.from} to ${loaded.usage.to} (candidates for removal; not judged):\n` +
        unused.map((line) => `  ${line}`).join('\n'),
    );
  }
  if (failed) return 1;
  console.log('No unacknowledged breaking change for the operations clients ship.');
  return 0;
}

/**
 * Checks one audience's schema and prints it; answers whether it fails. The whole schema is judged
 * by every operation, whatever contract its client is served (a contract's schema is part of the
 * whole, so what breaks the whole breaks it too); a contract is judged by its own clients'
 * operations, on the changes that are its own (a field it newly hides), its `judged` ones left out.
 * A contract none of whose tags the released schema carries is new: it has no released version to
 * break, and only its manifests' operations are validated against it.
 */
async function checkAudience(
  audience: Audience,
  {
    released,
    current,
    acknowledged,
    loaded,
    judged,
  }: {
    released: string;
    current: string;
    acknowledged: readonly AcknowledgedChange[];
    loaded: { manifests: ClientOperation[] | undefined; usage: UsageReport | undefined };
    /** The changes of the whole schema, by type and path. */
    judged: Set<string>;
  },
): Promise<boolean> {
  const { contract } = audience;
  const tags = contract === undefined ? [] : [...contract.exclude, ...contract.include];
  const releasedTags = tagsIn(parse(released));
  const isNew = contract !== undefined && !tags.some((tag) => releasedTags.has(tag));
  const ours = (operation: { contract?: string | undefined; recorded?: { contract: string | null } }) =>
    contract === undefined ||
    audience.names.includes(operation.recorded?.contract ?? operation.contract ?? null);
  const manifests = loaded.manifests?.filter(ours);
  const recorded = loaded.usage === undefined ? [] : recordedOperations(loaded.usage).filter(ours);
  const known =
    manifests === undefined && loaded.usage === undefined ? undefined : [...(manifests ?? []), ...recorded];
  const result = await checkSchemaChanges(
    sdlOf(isNew ? current : released, contract),
    sdlOf(current, contract),
    acknowledged.filter((entry) => entry.contract === contract?.name),
    known,
  );
  const heading = contract === undefined ? '' : `Contract ${contract.name}: `;
  const keyOf = ({ change }: ClassifiedChange) => `${String(change.type)} ${change.path ?? ''}`;
  if (contract === undefined) {
    for (const list of [result.unacknowledged, result.acknowledged, result.unusedBreaking, result.other]) {
      for (const classified of list) judged.add(keyOf(classified));
    }
    return printResult(result, heading);
  }
  if (isNew)
    console.log(
      `${heading}new since the released schema, which carries none of its tags: nothing released to break.`,
    );
  const own = (list: ClassifiedChange[]) => list.filter((classified) => !judged.has(keyOf(classified)));
  return printResult(
    {
      ...result,
      unacknowledged: own(result.unacknowledged),
      acknowledged: own(result.acknowledged),
      unusedBreaking: own(result.unusedBreaking),
      other: own(result.other),
    },
    heading,
  );
}

if (import.meta.main) process.exitCode = await main();
