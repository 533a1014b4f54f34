/**
 * Every `ID` a caller gives in a field's arguments is held to the plain form of upstream ids
 * (`src/upstream/rest-path.ts`) before the field's resolver runs: nested input fields and list
 * items included, in queries, mutations and subscriptions alike. `restPath` already refuses such
 * an id before it reaches a path; checking where ids enter also names the argument
 * (`extensions.inputPath`), refuses ids that go into a request body (a rule's trigger) or only
 * filter events (a subscription's `accountId`) rather than a path, and costs no upstream call.
 *
 * Node ids (`<customerId>/<id>`) are checked part by part where they are parsed (`node.ts`), and
 * `_entities` representations where they are read (`entities.ts`), each at its own list index.
 */
import {
  getNamedType,
  isInputObjectType,
  isListType,
  isNonNullType,
  type GraphQLField,
  type GraphQLFieldResolver,
  type GraphQLInputType,
} from 'graphql';
import type { Resolvers } from '../generated/graphql.ts';
import { IdArgumentError } from '../errors/id-argument.ts';
import type { InputPath } from '../errors/input-path.ts';
import { UnsafeIdError } from '../upstream/errors.ts';
import { isPlainId } from '../upstream/rest-path.ts';

/** Arguments holding node ids, which join two ids with `/`: `node.ts` checks them. */
const NODE_ID_FIELDS = new Set(['Query.node', 'Query.nodes']);

/**
 * `resolvers` with every field resolver (and subscription `subscribe`) refusing, before it runs, an
 * argument `ID` that is not a plain id: an {@link IdArgumentError} at the argument's input path.
 */
export function withIdArgumentsChecked(resolvers: Resolvers): Resolvers {
  return Object.fromEntries(
    Object.entries(resolvers as Record<string, unknown>).map(([typeName, fields]) => [
      typeName,
      // A scalar's resolver (`serialize`, `parseValue`) is no field's.
      typeof fields !== 'object' || fields === null || ('serialize' in fields && 'parseValue' in fields)
        ? fields
        : Object.fromEntries(
            Object.entries(fields).map(([field, resolver]) => [
              field,
              field.startsWith('__') ? resolver : checkedResolver(resolver),
            ]),
          ),
    ]),
  );
}

type FieldResolver = GraphQLFieldResolver<unknown, unknown, Record<string, unknown>>;

function checkedResolver(resolver: unknown): unknown {
  if (typeof resolver === 'function') return checkArgumentsFirst(resolver as FieldResolver);
  if (typeof resolver !== 'object' || resolver === null) return resolver;
  // A subscription field: `{ subscribe, resolve }`.
  return Object.fromEntries(
    Object.entries(resolver).map(([key, part]) => [
      key,
      typeof part === 'function' && (key === 'subscribe' || key === 'resolve')
        ? checkArgumentsFirst(part as FieldResolver)
        : part,
    ]),
  );
}

/** `resolve`, after the first argument `ID` of its field that is not a plain id is refused. */
function checkArgumentsFirst(resolve: FieldResolver): FieldResolver {
  return (source, args, context, info) => {
    const field = info.parentType.getFields()[info.fieldName];
    if (field && takesIds(field, `${info.parentType.name}.${info.fieldName}`)) {
      const refused = firstRefusal(field.args, (argument) =>
        findUnsafeId(args[argument.name], argument.type, [argument.name]),
      );
      if (refused) throw refused;
    }
    return resolve(source, args, context, info);
  };
}

/** Whether a field's arguments can hold an `ID` this module checks; computed once per field. */
const TAKES_IDS = new WeakMap<GraphQLField<unknown, unknown>, boolean>();

function takesIds(field: GraphQLField<unknown, unknown>, coordinate: string): boolean {
  let known = TAKES_IDS.get(field);
  if (known === undefined) {
    known = !NODE_ID_FIELDS.has(coordinate) && field.args.some((argument) => mayHoldId(argument.type));
    TAKES_IDS.set(field, known);
  }
  return known;
}

function mayHoldId(type: GraphQLInputType, seen = new Set<string>()): boolean {
  const named = getNamedType(type);
  if (named.name === 'ID') return true;
  if (!isInputObjectType(named) || seen.has(named.name)) return false;
  seen.add(named.name);
  return Object.values(named.getFields()).some((field) => mayHoldId(field.type, seen));
}

/** Walks `value` as `type` describes it; the first `ID` that is not plain, as its refusal. */
function findUnsafeId(value: unknown, type: GraphQLInputType, path: InputPath): IdArgumentError | undefined {
  if (value === null || value === undefined) return undefined;
  if (isNonNullType(type)) return findUnsafeId(value, type.ofType, path);
  if (isListType(type)) {
    // Input coercion turns a single value given for a list into a list of one.
    const items: unknown[] = Array.isArray(value) ? value : [value];
    return firstRefusal(items.entries(), ([index, item]) =>
      findUnsafeId(item, type.ofType, [...path, index]),
    );
  }
  if (isInputObjectType(type)) {
    return firstRefusal(Object.values(type.getFields()), (field) =>
      findUnsafeId((value as Record<string, unknown>)[field.name], field.type, [...path, field.name]),
    );
  }
  return type.name === 'ID' && typeof value === 'string' && !isPlainId(value)
    ? new IdArgumentError(path, new UnsafeIdError(value))
    : undefined;
}

/** The first refusal `check` finds among `items`, in their order. */
function firstRefusal<T>(items: Iterable<T>, check: (item: T) => IdArgumentError | undefined) {
  for (const item of items) {
    const refused = check(item);
    if (refused) return refused;
  }
  return undefined;
}
