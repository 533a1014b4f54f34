/**
 * Resolvers of `node.graphql`: the `Node` interface and `node(id:)` / `nodes(ids:)`, so a client
 * (Relay) can refetch any record by one id. Upstream ids are unique by prefix, but a customer's
 * records are read under their customer (`/v3/customers/{customerId}/accounts/{id}`), so a record's
 * node id carries its customer: `<customerId>/<id>` (ids never contain `/`). Records read without a
 * customer (customers, institutions, webhook endpoints) have their own id as node id. Every read goes
 * through the operation's loaders and the upstream access check, so a scoped caller's `node` of
 * another customer's record answers NOT_FOUND without an upstream call.
 */
import { GraphQLError } from 'graphql';
import { IdArgumentError } from '../errors/id-argument.ts';
import type { InputPath } from '../errors/input-path.ts';
import type { Resolvers } from '../generated/graphql.ts';
import { UnsafeIdError } from '../upstream/errors.ts';
import { isPlainId } from '../upstream/rest-path.ts';
import type { Loaders, RecordKeyOf } from '../loaders/index.ts';
import {
  CUSTOMER_RECORD_TYPES,
  perRecordType,
  RECORDS,
  TOP_LEVEL_RECORD_TYPES,
  type RecordTypeName,
} from '../records.ts';
import { RECORD_READS } from './look-ahead.ts';

/** The record types of the catalogue by the prefix of their ids. */
const PREFIXES = <T extends RecordTypeName>(types: readonly T[]): Readonly<Record<string, T>> =>
  Object.fromEntries(types.map((type) => [RECORDS[type].idPrefix, type]));
const TOP_LEVEL_PREFIXES = PREFIXES(TOP_LEVEL_RECORD_TYPES);
const CUSTOMER_SCOPED_PREFIXES = PREFIXES(CUSTOMER_RECORD_TYPES);

const SEPARATOR = '/';

function prefixOf(id: string): string {
  const underscore = id.indexOf('_');
  return underscore < 0 ? '' : id.slice(0, underscore + 1);
}

/** What a node id names: the record type and the key its loader reads. */
type NodeTarget = { [T in RecordTypeName]: { type: T; key: RecordKeyOf<T> } }[RecordTypeName];

/**
 * Parses the node id given at `inputPath`: an {@link IdArgumentError} for a part that is no plain
 * id, a BAD_USER_INPUT naming the accepted forms when it names no readable record.
 */
function parseNodeId(nodeId: string, inputPath: InputPath): NodeTarget {
  const parts = nodeId.split(SEPARATOR);
  const unsafe = parts.length <= 2 ? parts.find((part) => !isPlainId(part)) : undefined;
  if (unsafe !== undefined) throw new IdArgumentError(inputPath, new UnsafeIdError(unsafe));
  if (parts.length === 1) {
    const type = TOP_LEVEL_PREFIXES[prefixOf(nodeId)];
    if (type) return { type, key: { id: nodeId } };
  }
  if (parts.length === 2) {
    const [customerId, id] = parts as [string, string];
    const type = CUSTOMER_SCOPED_PREFIXES[prefixOf(id)];
    if (prefixOf(customerId) === 'cus_' && customerId.length > 4 && type)
      return { type, key: { customerId, id } };
  }
  throw new GraphQLError(
    `${JSON.stringify(nodeId)} is not a node id: a customer's, an institution's or a webhook endpoint's own id, or "<customerId>/<id>" for a customer's record.`,
    { extensions: { code: 'BAD_USER_INPUT', argumentName: inputPath.join('.'), inputPath } },
  );
}

/** The node id of a record of `type`. */
function nodeIdOf(record: { id: string; customerId?: string }): string {
  return record.customerId === undefined || TOP_LEVEL_PREFIXES[prefixOf(record.id)]
    ? record.id
    : `${record.customerId}${SEPARATOR}${record.id}`;
}

/** Reads the record a node id names, tagged with its type for `Node.__resolveType`. */
async function readNode(
  nodeId: string,
  inputPath: InputPath,
  loaders: Loaders,
): Promise<Record<string, unknown>> {
  const target = parseNodeId(nodeId, inputPath);
  const record = await readTarget(target, loaders);
  // Customer-scoped records carry their customer (entity keys need it too).
  const { key } = target;
  const node = 'customerId' in key ? { customerId: key.customerId, ...record } : { ...record };
  NODE_TYPES.set(node, target.type);
  return node;
}

function readTarget<T extends RecordTypeName>(
  { type, key }: { type: T; key: RecordKeyOf<T> },
  loaders: Loaders,
) {
  return RECORD_READS[type].read.load(key, undefined, loaders);
}

/** The type `readNode` read each node as; outside the node, so no GraphQL field can show it. */
const NODE_TYPES = new WeakMap<object, RecordTypeName>();

const nodeId = { nodeId: (record: { id: string; customerId?: string }) => nodeIdOf(record) };

/**
 * The most ids one `nodes` call reads: each is one upstream read at most, and the operation's cost
 * (which caps its upstream calls) counts `nodes` at the `@listSize(assumedSize: 25)` of the SDL.
 */
const MAX_NODE_IDS = 25;

export const nodeResolvers: Resolvers = {
  Node: {
    __resolveType: (record) => NODE_TYPES.get(record) ?? null,
  },
  Query: {
    node: (_parent, { id }, { loaders }) => readNode(id, ['id'], loaders) as never,
    nodes: (_parent, { ids }, { loaders }) => {
      if (ids.length > MAX_NODE_IDS) {
        throw new GraphQLError(`"ids" holds ${ids.length} ids; at most ${MAX_NODE_IDS} are read at once.`, {
          extensions: { code: 'BAD_USER_INPUT', argumentName: 'ids', maximum: MAX_NODE_IDS },
        });
      }
      // Each id fails alone: a missing or forbidden record is null with its error at its index.
      return ids.map((id, index) => readNode(id, ['ids', index], loaders)) as never;
    },
  },
  ...perRecordType<Record<RecordTypeName, typeof nodeId>>(() => nodeId),
};
