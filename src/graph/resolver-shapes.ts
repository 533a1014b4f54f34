/**
 * Resolvers of the shapes that recur across the domain files, built from what differs between
 * them: a connection read from its parent's key, a field copied from a parent's full record, a
 * customer's record read by its key, and a link from one record of a customer to another.
 */
import type { Page } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import type { GraphQLResolveInfo } from 'graphql';
import type { Loaders, PageKey, PageLoader, RecordKeyOf } from '../loaders/index.ts';
import type { CustomerRecordTypeName as CustomerRecordType } from '../records.ts';
import { readRecord, type KeyedRead, type RecordTypeName } from './look-ahead.ts';
import { toConnection, toPageParams, type ConnectionArgs } from './pagination.ts';

/**
 * A connection field whose page is read through `read` (the look-ahead's entry for it, so a page
 * started ahead is a cache hit) from the parent and the field's arguments.
 */
export function connectionOf<P, V>(read: KeyedRead<P, ConnectionArgs, Page<V>>) {
  return async (parent: P, args: ConnectionArgs, { loaders }: GraphContext) =>
    toConnection(await read.load(parent, args, loaders), args);
}

/** A connection field per entry of `reads`, each typed by its read (so the SDL checks each). */
export function connectionsOf<R extends Record<string, KeyedRead<never, ConnectionArgs, Page<unknown>>>>(
  reads: R,
) {
  return Object.fromEntries(Object.entries(reads).map(([field, read]) => [field, connectionOf(read)])) as {
    [F in keyof R]: R[F] extends KeyedRead<infer P, ConnectionArgs, Page<infer V>>
      ? ReturnType<typeof connectionOf<P, V>>
      : never;
  };
}

/**
 * Fields copied from a parent's full record, for parents that may be a summary: `fullRecord` gives
 * the record (the parent itself, or one shared read), and `field(name)` a resolver of one field.
 */
export function fieldsOfFullRecord<P, R>(fullRecord: (parent: P, context: GraphContext) => Promise<R>) {
  return <F extends keyof R>(name: F) =>
    async (parent: P, _args: unknown, context: GraphContext): Promise<R[F]> =>
      (await fullRecord(parent, context))[name];
}

/** A top-level list (`/v3/institutions`), one page per field read, through its loader. */
export function topLevelConnection<V>(loaderOf: (loaders: Loaders) => PageLoader<PageKey, V>) {
  return async (_parent: unknown, args: ConnectionArgs, { loaders }: GraphContext) =>
    toConnection(await loaderOf(loaders).load(toPageParams(args)), args);
}

/**
 * A query field reading one record by its key arguments (`id`, and `customerId` for a customer's
 * record), through the look-ahead (its selected children are started with it).
 */
export function recordByArgs<T extends RecordTypeName>(type: T) {
  return (_parent: unknown, key: RecordKeyOf<T>, context: GraphContext, info: GraphQLResolveInfo) =>
    readRecord(type, key, context, info);
}

/** `__resolveReference` of a record: its federation key is its key (`id`, or `customerId id`). */
export function recordReference<T extends RecordTypeName>(type: T) {
  return (reference: RecordKeyOf<T>, context: GraphContext, info: GraphQLResolveInfo) =>
    readRecord(type, reference, context, info);
}

/**
 * A field linking a customer's record (or a part of one that carries its `customerId`) to another
 * record of the same customer, read through the look-ahead by the id `idOf` finds in the parent;
 * null where the parent names none.
 */
export function linkedRecord<T extends CustomerRecordType, P extends { customerId: string }>(
  type: T,
  idOf: (parent: P) => string | null | undefined,
) {
  return (parent: P, _args: unknown, context: GraphContext, info: GraphQLResolveInfo) => {
    const id = idOf(parent);
    return id == null ? null : readRecord(type, { customerId: parent.customerId, id }, context, info);
  };
}
