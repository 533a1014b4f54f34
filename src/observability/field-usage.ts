/**
 * Which schema coordinates each executed operation used, on every transport, for the schema check
 * against real usage (`npm run schema:check -- --usage <days>`, docs/operations.md "Schema
 * changes"): its fields (`Type.field`), the arguments it passed (`Type.field(arg:)`), the types it
 * touched, the enum values and input fields it sent (in the document, and in its variables' values),
 * and its directives (`@name`, `@name(arg:)`).
 *
 * Cheap on the query path: what a document uses is worked out once per parsed document (the door
 * hands every request of the same text the same document) and kept beside it; each operation then
 * costs a map lookup and a counter, plus, only for an operation whose variables are of input-object
 * or enum types, a walk over those values collecting names the schema already holds. Nothing of a
 * value is kept: no variable's value, no id, no subject; only the token's client id, the client's
 * own name and version (Apollo's `apollographql-client-name` and `-version` headers), the contract
 * it is served, the operation's name and a digest of its document.
 *
 * Counts are kept per UTC day and handed to the store (`usage-store.ts`) at every flush; a day holds
 * at most `USAGE_MAX_OPERATIONS` distinct operations (client, version, contract, document), beyond
 * which operations are counted as dropped, never kept.
 */
import { createHash } from 'node:crypto';
import {
  getNamedType,
  getNullableType,
  isEnumType,
  isInputObjectType,
  isListType,
  Kind,
  TypeInfo,
  typeFromAST,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLEnumType,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import type { Caller } from '../auth/caller.ts';

/** The header a client names itself in (Apollo Client's `name`, GraphOS's and Hive's client name). */
export const CLIENT_NAME_HEADER = 'apollographql-client-name';
/** The header a client gives its version in. */
export const CLIENT_VERSION_HEADER = 'apollographql-client-version';

/** What a client calls itself, when it says. */
export interface ClientLabel {
  readonly name?: string | undefined;
  readonly version?: string | undefined;
}

/** What a request's headers say the client calls itself (undefined when they say nothing). */
export function clientLabelOf(header: (name: string) => string | undefined): ClientLabel | undefined {
  const name = header(CLIENT_NAME_HEADER);
  const version = header(CLIENT_VERSION_HEADER);
  return name === undefined && version === undefined ? undefined : { name, version };
}

/** Who sent an operation, as the record names it: nothing that identifies a person or a customer. */
export interface UsageIdentity {
  /** The contract the caller is served (src/graph/audiences.ts); null for the whole schema by default. */
  readonly contract: string | null;
  /** The token's `client_id` (or `azp`); null without one (anonymous, a caller's own key). */
  readonly client: string | null;
  /** What the client calls itself (`apollographql-client-name`), when it says. */
  readonly clientName: string | null;
  readonly clientVersion: string | null;
  /** The operation's name; null for an anonymous one. */
  readonly operation: string | null;
  /** A digest of the document and the operation's name: tells apart two documents of one name. */
  readonly hash: string;
  readonly type: 'query' | 'mutation' | 'subscription';
}

/** One executed operation, as a transport hands it to the operation recorder. */
export interface OperationUsage {
  /** The schema it was validated against and executed with (its caller's contract's). */
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  readonly operationName: string | null | undefined;
  readonly variables: Readonly<Record<string, unknown>> | null | undefined;
  readonly caller: Caller | undefined;
  /** What the client calls itself, when it says (headers, or a protocol's own client info). */
  readonly clientName?: string | undefined;
  readonly clientVersion?: string | undefined;
}

/** What the document of an operation uses, worked out once per parsed document. */
export interface OperationShape {
  readonly name: string | null;
  readonly type: UsageIdentity['type'];
  readonly hash: string;
  readonly coordinates: ReadonlySet<string>;
  /** Variables whose values name input fields or enum values (input objects, enums, lists of them). */
  readonly variables: readonly { readonly name: string; readonly type: GraphQLInputType }[];
}

/** Shapes per document, then per operation name (`''` for the only operation). */
const shapes = new WeakMap<DocumentNode, Map<string, OperationShape | null>>();

/** The shape of `operationName` in `document` against `schema`; null when the document holds no such operation. */
export function shapeOf(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
): OperationShape | null {
  let byName = shapes.get(document);
  if (byName === undefined) {
    byName = new Map();
    shapes.set(document, byName);
  }
  const key = operationName ?? '';
  let shape = byName.get(key);
  if (shape === undefined) {
    shape = buildShape(schema, document, operationName);
    byName.set(key, shape);
  }
  return shape;
}

function buildShape(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
): OperationShape | null {
  const operations = document.definitions.filter(
    (definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION,
  );
  const operation =
    operationName === null || operationName === undefined
      ? operations.length === 1
        ? operations[0]
        : undefined
      : operations.find((candidate) => candidate.name?.value === operationName);
  if (operation === undefined) return null;
  const coordinates = new Set<string>();
  const variables: { name: string; type: GraphQLInputType }[] = [];
  const typeInfo = new TypeInfo(schema);
  visit(
    { kind: Kind.DOCUMENT, definitions: [operation, ...fragmentsOf(document, operation)] },
    visitWithTypeInfo(typeInfo, usageVisitor(schema, typeInfo, coordinates, variables)),
  );
  const text = document.loc?.source.body ?? '';
  return {
    name: operation.name?.value ?? null,
    type: operation.operation,
    hash: createHash('sha256')
      .update(`${text}\n${operation.name?.value ?? ''}`)
      .digest('hex')
      .slice(0, 16),
    coordinates,
    variables,
  };
}

/** The visitor recording what a document uses into `coordinates`, and its variables worth a walk. */
function usageVisitor(
  schema: GraphQLSchema,
  typeInfo: TypeInfo,
  coordinates: Set<string>,
  variables: { name: string; type: GraphQLInputType }[],
): Parameters<typeof visitWithTypeInfo>[1] {
  // Given a name, not a type: eslint's rule comparing class instances recurses without end on GraphQL's.
  const addType = (name: string | undefined) => {
    if (name !== undefined && !name.startsWith('__')) coordinates.add(name);
  };
  return {
    Field(node) {
      const parent = typeInfo.getParentType();
      const field = typeInfo.getFieldDef();
      // Meta fields (`__typename`, introspection) are no coordinate of the schema.
      if (parent == null || field == null || node.name.value.startsWith('__')) return;
      coordinates.add(parent.name);
      coordinates.add(`${parent.name}.${field.name}`);
      addType(getNamedType(field.type).name);
    },
    Argument(node) {
      const argument = typeInfo.getArgument();
      if (argument == null) return;
      addType(getNamedType(argument.type).name);
      const directive = typeInfo.getDirective();
      const parent = typeInfo.getParentType();
      const field = typeInfo.getFieldDef();
      if (directive != null) coordinates.add(`@${directive.name}(${node.name.value}:)`);
      else if (parent != null && field != null)
        coordinates.add(`${parent.name}.${field.name}(${node.name.value}:)`);
    },
    ObjectField(node) {
      const parent = typeInfo.getParentInputType();
      const named = parent == null ? undefined : getNamedType(parent);
      if (named !== undefined && isInputObjectType(named))
        coordinates.add(`${named.name}.${node.name.value}`);
      const input = typeInfo.getInputType();
      if (input != null) addType(getNamedType(input).name);
    },
    EnumValue(node) {
      const type = typeInfo.getInputType();
      const named = type == null ? undefined : getNamedType(type);
      if (named !== undefined && isEnumType(named)) coordinates.add(`${named.name}.${node.value}`);
    },
    Directive(node) {
      coordinates.add(`@${node.name.value}`);
    },
    InlineFragment(node) {
      if (node.typeCondition !== undefined) addType(schema.getType(node.typeCondition.name.value)?.name);
    },
    FragmentDefinition(node) {
      addType(schema.getType(node.typeCondition.name.value)?.name);
    },
    VariableDefinition(node) {
      const type = typeFromAST(schema, node.type) as GraphQLInputType | undefined;
      if (type === undefined) return;
      const named = getNamedType(type);
      addType(named.name);
      if (isInputObjectType(named) || isEnumType(named))
        variables.push({ name: node.variable.name.value, type });
    },
  };
}

/** The fragments `operation` spreads, directly or through other fragments. */
function fragmentsOf(document: DocumentNode, operation: OperationDefinitionNode): FragmentDefinitionNode[] {
  const byName = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) byName.set(definition.name.value, definition);
  }
  const found = new Map<string, FragmentDefinitionNode>();
  const pending: (OperationDefinitionNode | FragmentDefinitionNode)[] = [operation];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    visit(next, {
      FragmentSpread(node) {
        const fragment = byName.get(node.name.value);
        if (fragment === undefined || found.has(node.name.value)) return;
        found.set(node.name.value, fragment);
        pending.push(fragment);
      },
    });
  }
  return [...found.values()];
}

/** Coordinate strings per input or enum type and member, made once: a walk over values allocates none. */
const memberCoordinates = new WeakMap<GraphQLInputObjectType | GraphQLEnumType, Map<string, string>>();

function memberCoordinate(type: GraphQLInputObjectType | GraphQLEnumType, member: string): string {
  let members = memberCoordinates.get(type);
  if (members === undefined) {
    members = new Map();
    memberCoordinates.set(type, members);
  }
  let coordinate = members.get(member);
  if (coordinate === undefined) {
    coordinate = `${type.name}.${member}`;
    members.set(member, coordinate);
  }
  return coordinate;
}

/**
 * Adds to `into` the input fields and enum values `value` holds as `type` reads it, at most `room`
 * of them: names the schema holds only (the door refused any other before execution).
 */
export function addValueCoordinates(
  value: unknown,
  type: GraphQLInputType,
  into: Set<string>,
  room: number,
): void {
  if (value === null || value === undefined || into.size >= room) return;
  const nullable = getNullableType(type);
  if (isListType(nullable)) {
    const items: unknown[] = Array.isArray(value) ? value : [value];
    for (const item of items) addValueCoordinates(item, nullable.ofType, into, room);
  } else if (isEnumType(nullable)) {
    if (typeof value === 'string' && nullable.getValue(value) !== undefined) {
      into.add(memberCoordinate(nullable, value));
    }
  } else if (isInputObjectType(nullable) && typeof value === 'object') {
    const fields = nullable.getFields();
    for (const [name, given] of Object.entries(value)) {
      const field = fields[name];
      if (field === undefined) continue;
      into.add(memberCoordinate(nullable, name));
      addValueCoordinates(given, field.type, into, room);
    }
  }
}
