/**
 * The operations clients actually sent, for the schema check (`npm run schema:check -- --usage
 * <days>`): the field usage the facade records (src/observability/field-usage.ts), read from a
 * deployment's Redis (the `REDIS_*` variables the facade reads, `REDIS_KEY_PREFIX` included) or from
 * a file an operator downloaded from `GET /usage` on the metrics port (`--usage-file`), so CI
 * needs no access to production's Redis. Each recorded operation becomes one the check judges
 * changes by, with the coordinates it used in place of a document.
 */
import { readFileSync } from 'node:fs';
import {
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  OperationTypeNode,
  type GraphQLSchema,
} from 'graphql';
import { EnvReader } from '../src/env-reader.ts';
import { createLogger } from '../src/logger.ts';
import { openRedisConnection } from '../src/redis.ts';
import { readRedisConfig } from '../src/redis-config.ts';
import { EVENTS_CONFIG_DEFAULTS } from '../src/events/config.ts';
import {
  createRedisUsageStore,
  USAGE_FORMAT,
  type UsageReport,
  type UsedOperation,
} from '../src/observability/usage-store.ts';
import type { ClientOperation, UsageIndex } from './client-operations.ts';

/** Where the recorded usage is read from. */
export type UsageSource = { file: string } | { env: Readonly<Record<string, string | undefined>> };

/** The usage of the last `days` days, from `source`; a source that cannot be read throws, saying why. */
export async function readRecordedUsage(days: number, source: UsageSource): Promise<UsageReport> {
  if ('file' in source) return readUsageFile(source.file);
  const problems: string[] = [];
  const reader = new EnvReader(source.env, (name, problem) => problems.push(`${name}: ${problem}`));
  const redis = readRedisConfig(reader, reader.trimmed('REDIS_URL'));
  if (problems.length > 0) throw new Error(problems.join('; '));
  if (redis === undefined) {
    throw new Error('no Redis to read: set REDIS_URL (or REDIS_SENTINELS), or give --usage-file');
  }
  // Its connection's errors go to stderr, beside the check's own messages.
  const logger = createLogger({ level: 'error', redact: [], write: (line) => process.stderr.write(line) });
  const connection = openRedisConnection(redis, 'schema-check', logger);
  const store = createRedisUsageStore({
    redis: connection,
    prefix: reader.trimmed('REDIS_KEY_PREFIX') ?? EVENTS_CONFIG_DEFAULTS.REDIS_KEY_PREFIX,
    days,
    maxOperations: Number.MAX_SAFE_INTEGER,
    ownsConnection: true,
  });
  try {
    return await store.read(days, Date.now());
  } finally {
    await store.close();
  }
}

/** The operation types as the usage names them, as GraphQL's enum does. */
const KINDS: Record<UsedOperation['type'], OperationTypeNode> = {
  query: OperationTypeNode.QUERY,
  mutation: OperationTypeNode.MUTATION,
  subscription: OperationTypeNode.SUBSCRIPTION,
};

/** An export of `GET /usage`, checked for its format. */
function readUsageFile(path: string): UsageReport {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`${path} cannot be read as JSON: ${(error as Error).message}`);
  }
  const report = value as Partial<UsageReport> | null;
  if (report?.format !== USAGE_FORMAT || !Array.isArray(report.operations)) {
    throw new Error(`${path} is no export of GET /usage (format ${USAGE_FORMAT})`);
  }
  for (const [index, operation] of report.operations.entries()) {
    const { hash, type, coordinates } = (operation ?? {}) as Partial<UsedOperation>;
    if (typeof hash !== 'string' || !Object.hasOwn(KINDS, type ?? '') || !Array.isArray(coordinates)) {
      throw new Error(
        `${path} operations[${index}] must hold a hash, a type (query, mutation, subscription) and coordinates`,
      );
    }
  }
  return report as UsageReport;
}

/** How the check names a recorded client: its client id, then the name and version it gave itself. */
function clientOf(operation: UsedOperation): string {
  const own = operation.clientName === null ? '' : ` ${operation.clientName}`;
  const version = operation.clientVersion === null ? '' : `@${operation.clientVersion}`;
  return `${operation.client ?? '(no client id)'}${own}${version}`;
}

/** Every recorded operation of `report`, as the check judges changes by it. */
export function recordedOperations(report: UsageReport): ClientOperation[] {
  return report.operations.map((operation) => ({
    client: clientOf(operation),
    name: operation.operation ?? `anonymous ${operation.hash.slice(0, 8)}`,
    kind: KINDS[operation.type],
    document: undefined,
    recorded: operation,
  }));
}

/** A coordinate as recorded: `Type`, `Type.member`, `Type.field(arg:)`, `@name`, `@name(arg:)`. */
const COORDINATE =
  /^(@?)([_A-Za-z][_0-9A-Za-z]*)(?:\.([_A-Za-z][_0-9A-Za-z]*))?(?:\(([_A-Za-z][_0-9A-Za-z]*):\))?$/;

/**
 * Adds what recorded `operation` used to `usage`, read against `schema` (the released one): a member
 * of an object or interface is a field (on an interface, every implementation's), of an input
 * object an input field it sent, of an enum a value it sent.
 */
export function indexRecorded(
  usage: UsageIndex,
  schema: GraphQLSchema,
  operation: ClientOperation,
  coordinates: readonly string[],
): void {
  const add = (map: Map<string, Set<ClientOperation>>, key: string) => {
    let users = map.get(key);
    if (users === undefined) map.set(key, (users = new Set()));
    users.add(operation);
  };
  usage.precise.add(operation);
  for (const coordinate of coordinates) {
    const [, directive, name = '', member, argument] = COORDINATE.exec(coordinate) ?? [];
    if (directive === '@') {
      add(
        argument === undefined ? usage.directives : usage.arguments,
        argument === undefined ? `@${name}` : `@${name}.${argument}`,
      );
      continue;
    }
    const type = schema.getType(name);
    if (member === undefined) add(usage.types, name);
    else if (argument !== undefined) add(usage.arguments, `${name}.${member}.${argument}`);
    else if (isInputObjectType(type)) add(usage.inputFields, `${name}.${member}`);
    // An enum counts whether sent or received (the type, as for a manifest's operation).
    else if (isEnumType(type)) add(usage.types, name);
    else {
      add(usage.fields, `${name}.${member}`);
      if (isInterfaceType(type)) {
        for (const possible of schema.getPossibleTypes(type)) add(usage.fields, `${possible.name}.${member}`);
      }
    }
  }
}

/**
 * The fields of `schema` no recorded operation used in the window (its own types only, not
 * federation's), as `Type: field, field`: candidates for removal, never judged.
 */
export function unusedFields(schema: GraphQLSchema, report: UsageReport): string[] {
  const used = new Set(report.operations.flatMap((operation) => operation.coordinates));
  const lines: string[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('_') || !(isObjectType(type) || isInterfaceType(type))) continue;
    // A field selected on an interface is used on every type implementing it.
    const owners = [type.name, ...type.getInterfaces().map((implemented) => implemented.name)];
    const fields = Object.keys(type.getFields()).filter(
      (field) => !field.startsWith('_') && !owners.some((owner) => used.has(`${owner}.${field}`)),
    );
    if (fields.length > 0) lines.push(`${type.name}: ${fields.join(', ')}`);
  }
  return lines;
}
