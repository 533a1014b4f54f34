/**
 * `Query._entities` hardened: every representation is answered on its own.
 *
 * @apollo/subgraph's resolver maps all representations in one pass and throws for the first unknown
 * `__typename`. Loads already started for earlier representations are then never awaited, and when
 * one of them fails the process sees an unhandled rejection, which ends a Node server. A
 * representation without its key fields would also reach the upstream with an empty path segment.
 * Here each bad representation becomes a `BAD_USER_INPUT` error at its own index, with no upstream
 * call, and the others resolve as usual.
 */
import {
  getNamedType,
  GraphQLError,
  isObjectType,
  Kind,
  type GraphQLFieldResolver,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import { IdArgumentError } from '../errors/id-argument.ts';
import { UnsafeIdError } from '../upstream/errors.ts';
import { isPlainId } from '../upstream/rest-path.ts';

/** Replaces the `_entities` resolver of `schema` (built by `buildSubgraphSchema`) in place. */
export function guardEntities(schema: GraphQLSchema): GraphQLSchema {
  const field = schema.getQueryType()?.getFields()._entities;
  const resolveEntities = field?.resolve;
  if (!field || !resolveEntities) return schema;
  const guarded: GraphQLFieldResolver<unknown, unknown, { representations: unknown[] }> = (
    source,
    args,
    context,
    info,
  ) =>
    args.representations.map((representation, index) => {
      const problem = checkRepresentation(representation, info.schema);
      if (problem) return new GraphQLError(problem, { extensions: { code: 'BAD_USER_INPUT' } });
      const unsafeId = findUnsafeKeyId(representation as Record<string, unknown>, index, info.schema);
      if (unsafeId) return unsafeId;
      const [entity] = resolveEntities(
        source,
        { representations: [representation] },
        context,
        info,
      ) as unknown[];
      return entity;
    });
  field.resolve = guarded as typeof field.resolve;
  copyFrozenReferences(schema);
  return schema;
}

type ResolveReference = (reference: unknown, context: unknown, info: unknown) => unknown;

/**
 * @apollo/subgraph marks what `__resolveReference` returns with its `__typename`
 * (`Object.defineProperty`), but a record the response cache holds is frozen and shared between
 * operations (src/upstream/response-cache.ts): such a record is handed over as a shallow copy, the
 * copy marked, the cached one untouched. Any other value is handed over as before.
 */
function copyFrozenReferences(schema: GraphQLSchema): void {
  for (const type of Object.values(schema.getTypeMap())) {
    const subgraph = (type.extensions as { apollo?: { subgraph?: { resolveReference?: ResolveReference } } })
      .apollo?.subgraph;
    const resolveReference = subgraph?.resolveReference;
    if (subgraph === undefined || resolveReference === undefined) continue;
    subgraph.resolveReference = (reference, context, info) => {
      const resolved = resolveReference(reference, context, info);
      return resolved instanceof Promise ? resolved.then(ownCopyIfFrozen) : ownCopyIfFrozen(resolved);
    };
  }
}

function ownCopyIfFrozen(value: unknown): unknown {
  return typeof value === 'object' && value !== null && Object.isFrozen(value) ? { ...value } : value;
}

/** Why `representation` cannot be resolved here, or undefined when it can. */
function checkRepresentation(representation: unknown, schema: GraphQLSchema): string | undefined {
  if (typeof representation !== 'object' || representation === null) {
    return 'A representation must be an object with a `__typename` and the fields of one of its keys.';
  }
  const fields = representation as Record<string, unknown>;
  const typename = fields.__typename;
  const type = typeof typename === 'string' ? schema.getType(typename) : undefined;
  if (!type || !isObjectType(type)) {
    return `${JSON.stringify(typename)} is not an entity type of this subgraph.`;
  }
  const keys = keyFieldSets(type);
  if (keys.length === 0) return `${type.name} is not an entity type of this subgraph.`;
  const complete = keys.some((key) => key.every((name) => isKeyValue(fields[name])));
  if (complete) return undefined;
  const expected = keys.map((key) => key.map((name) => `\`${name}\``).join(' and ')).join(', or ');
  return `A representation of ${type.name} needs ${expected}, each a non-empty string.`;
}

/**
 * The first `ID` field of a representation that is not a plain id (`rest-path.ts`), refused at its
 * input path (`representations.<index>.<field>`) before anything is read for it.
 */
function findUnsafeKeyId(
  representation: Record<string, unknown>,
  index: number,
  schema: GraphQLSchema,
): IdArgumentError | undefined {
  const type = schema.getType(representation.__typename as string);
  if (!type || !isObjectType(type)) return undefined;
  const fields = type.getFields();
  for (const [name, value] of Object.entries(representation)) {
    const field = fields[name];
    if (typeof value !== 'string' || !field || getNamedType(field.type).name !== 'ID') continue;
    if (!isPlainId(value))
      return new IdArgumentError(['representations', index, name], new UnsafeIdError(value));
  }
  return undefined;
}

/** C0 controls, DEL and C1 controls: no id holds one, and ids become URL path segments. */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001F\u007F-\u009F]/;

/** A non-empty id of well-formed Unicode (no lone surrogate) without control characters. */
function isKeyValue(value: unknown): boolean {
  return (
    typeof value === 'string' && value.length > 0 && value.isWellFormed() && !CONTROL_CHARACTER.test(value)
  );
}

/** The field names of each `@key(fields: "...")` of `type`; this schema's keys are flat field lists. */
function keyFieldSets(type: GraphQLObjectType): string[][] {
  const nodes = [type.astNode, ...type.extensionASTNodes];
  const keys: string[][] = [];
  for (const node of nodes) {
    for (const directive of node?.directives ?? []) {
      if (directive.name.value !== 'key') continue;
      const argument = directive.arguments?.find((arg) => arg.name.value === 'fields');
      if (argument?.value.kind === Kind.STRING) keys.push(argument.value.value.split(/\s+/).filter(Boolean));
    }
  }
  return keys;
}
