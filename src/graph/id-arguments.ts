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
  type GraphQLResolveInfo,
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
  const checked: Record<string, unknown> = {};
  for (const [typeName, typeResolvers] of Object.entries(resolvers as Record<string, unknown>)) {
    if (typeof typeResolvers !== 'object' || typeResolvers === null || isScalar(typeResolvers)) {
      checked[typeName] = typeResolvers;
      continue;
    }
    const fields: Record<string, unknown> = {};
    for (const [fieldName, resolver] of Object.entries(typeResolvers)) {
      fields[fieldName] = fieldName.startsWith('__') ? resolver : checkedResolver(resolver);
    }
    checked[typeName] = fields;
  }
  return checked;
}

function isScalar(value: object): boolean {
  return 'serialize' in value && 'parseValue' in value;
}

type FieldResolver = GraphQLFieldResolver<unknown, unknown, Record<string, unknown>>;

function checkedResolver(resolver: unknown): unknown {
  if (typeof resolver === 'function') return checkArgumentsFirst(resolver as FieldResolver);
  if (typeof resolver === 'object' && resolver !== null) {
    // A subscription field: `{ subscribe, resolve }`.
    const parts = resolver as Record<string, unknown>;
    return Object.fromEntries(
      Object.entries(parts).map(([key, part]) => [
        key,
        typeof part === 'function' && (key === 'subscribe' || key === 'resolve')
          ? checkArgumentsFirst(part as FieldResolver)
          : part,
      ]),
    );
  }
  return resolver;
}

function checkArgumentsFirst(resolve: FieldResolver): FieldResolver {
  return (source, args, context, info) => {
    const refused = findUnsafeIdArgument(args, info);
    if (refused) throw refused;
    return resolve(source, args, context, info);
  };
}

/** The first argument `ID` of the field `info` names that is not a plain id, as its refusal. */
function findUnsafeIdArgument(
  args: Readonly<Record<string, unknown>>,
  info: Pick<GraphQLResolveInfo, 'parentType' | 'fieldName'>,
): IdArgumentError | undefined {
  const field = info.parentType.getFields()[info.fieldName];
  if (!field || !takesIds(field, `${info.parentType.name}.${info.fieldName}`)) return undefined;
  for (const argument of field.args) {
    const refused = findUnsafeId(args[argument.name], argument.type, [argument.name]);
    if (refused) return refused;
  }
  return undefined;
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
    for (const [index, item] of items.entries()) {
      const refused = findUnsafeId(item, type.ofType, [...path, index]);
      if (refused) return refused;
    }
    return undefined;
  }
  if (isInputObjectType(type)) {
    const fields = value as Record<string, unknown>;
    for (const field of Object.values(type.getFields())) {
      const refused = findUnsafeId(fields[field.name], field.type, [...path, field.name]);
      if (refused) return refused;
    }
    return undefined;
  }
  if (type.name === 'ID' && typeof value === 'string' && !isPlainId(value)) {
    return new IdArgumentError(path, new UnsafeIdError(value));
  }
  return undefined;
}
