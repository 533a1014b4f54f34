/**
 * Look-ahead: the reads a selection will make from a record's key start together with the read of
 * the record itself, instead of after it.
 *
 * A resolver that knows a record's key (an id among its arguments, a federation representation,
 * the customer id a parent record names) would otherwise read the record, wait for it, and only
 * then let the selected child fields start their own reads, although some of them need nothing but
 * that key: a customer's lists need only the customer id. That is one round trip more than a
 * client calling the REST API directly would make. `readRecord` reads the record and, in the same
 * tick, starts every read the selection below it can make from the key alone (fragments,
 * `@skip`/`@include` and arguments resolved as execution will resolve them), following the
 * {@link RECORD_READS} table; a child that is itself a record read by key (an account's customer)
 * is looked ahead in turn.
 *
 * The child fields' resolvers read through the very same table entries, so they ask the same
 * loaders with the same keys and find the reads already started: nothing is read twice. When the
 * record turns out to be missing (or forbidden), it still answers null with its error; the reads
 * started ahead are then wasted, and their failures stay in the loaders, never in the response.
 */
import type DataLoader from 'dataloader';
import { isObjectType, type FieldNode, type GraphQLResolveInfo } from 'graphql';
import type {
  Loaders,
  RecordKeyOf,
  RecordKeyOfShape,
  ScopedKey,
  ScopedPageKey,
  TaskSubmissionsPageKey,
  TopLevelKey,
} from '../loaders/index.ts';
import type { KeyShape } from '../record-entry.ts';
import {
  perListField,
  perRecordType,
  RECORD_TYPES,
  RECORDS,
  type CustomerRecordTypeName,
  type ListedOf,
  type RecordOf,
  type RecordTypeName,
} from '../records.ts';
import type { Page, TaskSubmission } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import { toPageParams, type ConnectionArgs } from './pagination.ts';
import { selectedFields, type SelectedField, type SelectionScope } from './selection.ts';

export type { RecordTypeName } from '../records.ts';

/**
 * One loader read made from a key and a field's arguments: by the resolver that needs it
 * (`load`), or ahead of that resolver (`start`). Both ask the same loader with the same key.
 */
export interface KeyedRead<K, A, V> {
  /** The resolver's read; joins a read started ahead of it. */
  load(key: K, args: A, loaders: Loaders): Promise<V>;
  /**
   * Starts the read for a resolver that has not run yet. Its failure never surfaces here: it is
   * kept in the loader for that resolver, which meets it exactly as if it had made the read itself
   * (the loaders otherwise forget failures so that a later load retries, and a read started ahead
   * would then be made twice).
   */
  start(key: K, args: A, loaders: Loaders): void;
}

function keyedRead<K, A, LK, V>(
  loaderOf: (loaders: Loaders) => DataLoader<LK, V, string>,
  loaderKey: (key: K, args: A) => LK,
): KeyedRead<K, A, V> {
  return {
    load: (key, args, loaders) => loaderOf(loaders).load(loaderKey(key, args)),
    start(key, args, loaders) {
      const loader = loaderOf(loaders);
      const started = loaderKey(key, args);
      loader.load(started).catch((error: unknown) => {
        loader.prime(started, error instanceof Error ? error : new Error(String(error)));
      });
    },
  };
}

/** A child field whose value is read from its parent's key and its own arguments alone. */
interface ChildRead<PK> {
  kind: 'read';
  /** Starts the read with the field's arguments, as its resolver will receive them. */
  start(key: PK, args: SelectedField['args'], loaders: Loaders): void;
}

/** A child field whose value is another record read by a key its parent's key holds. */
type ChildRecord<PK> = {
  [T in RecordTypeName]: { kind: 'record'; type: T; key: (parent: PK) => RecordKeyOf<T> };
}[RecordTypeName];

/** How a record of one type is read, and which of its fields can be read from its key alone. */
interface RecordReads<T extends RecordTypeName> {
  read: KeyedRead<RecordKeyOf<T>, unknown, RecordOf<T>>;
  children: Readonly<Record<string, ChildRead<RecordKeyOf<T>> | ChildRecord<RecordKeyOf<T>>>>;
}

/** A record type's read, by one of its loaders. */
function recordRead<K, V>(loaderOf: (loaders: Loaders) => DataLoader<K, V, string>) {
  return keyedRead<K, unknown, K, V>(loaderOf, (key) => key);
}

/** A customer's list, one page of it: the customer id and the connection's arguments. */
function customerList<V>(loaderOf: (loaders: Loaders) => DataLoader<ScopedPageKey, Page<V>, string>) {
  return keyedRead<TopLevelKey, ConnectionArgs, ScopedPageKey, Page<V>>(loaderOf, (customer, args) => ({
    customerId: customer.id,
    ...toPageParams(args),
  }));
}

/** A customer's list of one customer record type, one page of it, read from the customer's id alone. */
type CustomerList<T extends CustomerRecordTypeName> = KeyedRead<
  TopLevelKey,
  ConnectionArgs,
  Page<ListedOf<T>>
>;

function customerListOf<T extends CustomerRecordTypeName>(type: T): CustomerList<T> {
  return customerList((loaders) => loaders.list[type]);
}

/**
 * The lists of a customer, read from its id alone: one per customer record type of the catalogue,
 * by its field on `Customer`. `Customer`'s field resolvers read through these very entries, so a
 * list started ahead is the one its resolver asks for.
 */
export const CUSTOMER_LISTS =
  perListField<{ readonly [T in CustomerRecordTypeName]: CustomerList<T> }>(customerListOf);

/** A task's submissions, one page of them, read from the task's key alone. */
export const TASK_SUBMISSIONS = keyedRead<
  ScopedKey,
  ConnectionArgs,
  TaskSubmissionsPageKey,
  Page<TaskSubmission>
>(
  (loaders) => loaders.taskSubmissions,
  (task, args) => ({ customerId: task.customerId, taskId: task.id, ...toPageParams(args) }),
);

/** The customer a customer-scoped record belongs to: its key holds the customer id. */
const OWNING_CUSTOMER = {
  kind: 'record',
  type: 'Customer',
  key: (record: ScopedKey): TopLevelKey => ({ id: record.customerId }),
} as const;

function asChild<PK, A, V>(read: KeyedRead<PK, A, V>): ChildRead<PK> {
  // The arguments are coerced by the schema that types the resolver's `A`.
  return { kind: 'read', start: (key, args, loaders) => read.start(key, args as A, loaders) };
}

/** The child fields every record of a key shape has: a customer's record, its customer. */
const CHILDREN_OF_SHAPE: {
  [S in KeyShape]: Readonly<Record<string, ChildRecord<RecordKeyOfShape<S>>>>;
} = { 'top-level': {}, customer: { customer: OWNING_CUSTOMER } };

function childrenOfShape<S extends KeyShape>(
  shape: S,
): Readonly<Record<string, ChildRecord<RecordKeyOfShape<S>>>> {
  return CHILDREN_OF_SHAPE[shape];
}

/** The child fields of a record type beyond its owning customer, where it has any. */
const MORE_CHILDREN: {
  readonly [T in RecordTypeName]?: Readonly<Record<string, ChildRead<RecordKeyOf<T>>>>;
} = {
  Customer: Object.fromEntries(
    Object.entries(CUSTOMER_LISTS).map(([field, read]) => [
      field,
      asChild<TopLevelKey, ConnectionArgs, Page<unknown>>(read),
    ]),
  ),
  Task: { submissions: asChild(TASK_SUBMISSIONS) },
};

/** How records of `type` are read, and the children that can start from their key alone. */
function recordReadsOf<T extends RecordTypeName>(type: T): RecordReads<T> {
  return {
    read: recordRead((loaders) => loaders.item[type]),
    children: { ...childrenOfShape(RECORDS[type].key), ...MORE_CHILDREN[type] },
  };
}

/**
 * Per record type of the catalogue: its read, and the child fields that can start from its key
 * alone (a customer record's customer, a customer's lists, a task's submissions). Only fields whose
 * resolver always makes that read when the record exists belong here (an account's `fees` does
 * not: the record usually carries them), so for records that are found looking ahead adds no call.
 */
export const RECORD_READS = perRecordType<{ readonly [T in RecordTypeName]: RecordReads<T> }>(recordReadsOf);

/**
 * Reads the record of `type` with `key` for the field being resolved (`info`), and starts at the
 * same time the reads its selected child fields can make from `key` alone. Returns the record's
 * read; a missing record rejects as it always did.
 */
export function readRecord<T extends RecordTypeName>(
  type: T,
  key: RecordKeyOf<T>,
  context: GraphContext,
  info: GraphQLResolveInfo,
): Promise<RecordOf<T>> {
  const record = RECORD_READS[type].read.load(key, undefined, context.loaders);
  startChildReads(type, key, info.fieldNodes, info, context.loaders);
  return record;
}

/** Types with at least one child to look ahead for: the others need no look at the selection. */
const TYPES_WITH_CHILDREN = new Set(
  RECORD_TYPES.filter((type) => Object.keys(RECORD_READS[type].children).length > 0),
);

/** Starts the look-ahead reads below a record of `type` with `key`, selected by `fieldNodes`. */
function startChildReads<T extends RecordTypeName>(
  type: T,
  key: RecordKeyOf<T>,
  fieldNodes: readonly FieldNode[],
  scope: SelectionScope,
  loaders: Loaders,
): void {
  if (!TYPES_WITH_CHILDREN.has(type)) return;
  const { children } = RECORD_READS[type];
  for (const field of plannedFields(scope, fieldNodes, type, children)) {
    const child = children[field.name]!;
    try {
      if (child.kind === 'read') child.start(key, field.args, loaders);
      else startChildRecord(child, key, field.nodes, scope, loaders);
    } catch {
      // Bad arguments (a `first` out of range): the child's resolver reports them when it runs.
    }
  }
}

/** Starts the read of a child that is a record of its own, and the reads below it. */
function startChildRecord<PK, T extends RecordTypeName>(
  child: { type: T; key: (parent: PK) => RecordKeyOf<T> },
  parentKey: PK,
  fieldNodes: readonly FieldNode[],
  scope: SelectionScope,
  loaders: Loaders,
): void {
  const key = child.key(parentKey);
  RECORD_READS[child.type].read.start(key, undefined, loaders);
  startChildReads(child.type, key, fieldNodes, scope, loaders);
}

/**
 * The selected fields of `type` that the table can start, by selection. Worked out once per field
 * nodes and operation, so a record read for each item of a list walks its selection once:
 * graphql-js hands the same field-nodes array to every item of a list, and the operation's
 * variables object tells one operation from another.
 */
interface Plan {
  variableValues: object;
  byType: Map<RecordTypeName, SelectedField[]>;
}
const plans = new WeakMap<readonly FieldNode[], Plan>();

function plannedFields(
  scope: SelectionScope,
  fieldNodes: readonly FieldNode[],
  type: RecordTypeName,
  children: Readonly<Record<string, unknown>>,
): SelectedField[] {
  let plan = plans.get(fieldNodes);
  if (plan?.variableValues !== scope.variableValues) {
    plan = { variableValues: scope.variableValues, byType: new Map() };
    plans.set(fieldNodes, plan);
  }
  let fields = plan.byType.get(type);
  if (!fields) {
    const objectType = scope.schema.getType(type);
    fields = isObjectType(objectType)
      ? selectedFields(scope, fieldNodes, objectType, (name) => Object.hasOwn(children, name))
      : [];
    plan.byType.set(type, fields);
  }
  return fields;
}
