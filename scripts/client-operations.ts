/**
 * The operations clients ship, for the schema check (`scripts/check-schema.ts`): read from the
 * trusted-documents manifests listed in `schema/client-manifests.json` (the same files, read by the
 * same reader, that the door's `TRUSTED_DOCUMENTS` admits), then
 * - indexed by the schema coordinates each operation reads against the released schema, with
 *   graphql-js's TypeInfo visitor: fields (`Type.field`), arguments it passes (`Type.field.arg`),
 *   the named types it touches (fragment conditions, field results, variables and input objects,
 *   all their input fields) and directives (`@name`);
 * - validated against the new schema with graphql-js's `validate` (every specified rule).
 *
 * A breaking change is in use when an operation reads what it changes ({@link operationsAffectedBy}).
 */
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import {
  getNamedType,
  isAbstractType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isRequiredArgument,
  parse,
  separateOperations,
  TypeInfo,
  typeFromAST,
  validate,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLNamedType,
  type GraphQLSchema,
  Kind,
  OperationTypeNode,
} from 'graphql';
import type { Change } from '@graphql-inspector/core';
import { loadTrustedDocumentEntries } from '../src/edge/trusted-documents.ts';
import type { UsedOperation } from '../src/observability/usage-store.ts';
import { indexRecorded } from './recorded-usage.ts';

/** One manifest the check reads: a name for the client and the file's path. */
export interface ClientManifest {
  name: string;
  path: string;
  /** The contract its client is served (schema/contracts.json); absent: the whole schema. */
  contract?: string;
}

/** `schema/client-manifests.json`: `{ "manifests": [{ "name", "path" }] }`, paths relative to the file. */
export function readClientManifests(configPath: string): ClientManifest[] {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(configPath, 'utf8'));
  } catch (error) {
    throw new Error(`${configPath} cannot be read as JSON: ${(error as Error).message}`);
  }
  const manifests = (value as { manifests?: unknown } | null)?.manifests;
  if (!Array.isArray(manifests)) {
    throw new Error(`${configPath} must hold { "manifests": [{ "name": string, "path": string }] }`);
  }
  const names = new Set<string>();
  return manifests.map((entry: unknown, index) => {
    const { name, path, contract } = (entry ?? {}) as Record<string, unknown>;
    if (typeof name !== 'string' || name === '' || typeof path !== 'string' || path === '') {
      throw new Error(`${configPath} manifests[${index}] must be { "name": string, "path": string }`);
    }
    if (contract !== undefined && typeof contract !== 'string') {
      throw new Error(`${configPath} manifests[${index}].contract must name a contract`);
    }
    if (names.has(name)) throw new Error(`${configPath} names the manifest ${JSON.stringify(name)} twice`);
    names.add(name);
    return {
      name,
      path: resolve(dirname(configPath), path),
      ...(contract === undefined ? {} : { contract }),
    };
  });
}

/** One operation of a manifest. */
export interface ClientOperation {
  /** The manifest's name in the configuration. */
  client: string;
  /** The operation's name; an anonymous one is named by its id in the manifest. */
  name: string;
  kind: OperationTypeNode;
  /** The operation and the fragments it spreads; undefined when the body does not parse. */
  document: DocumentNode | undefined;
  /** Why the body does not parse. */
  parseError?: string;
  /** The contract its client is served; absent: the whole schema. */
  contract?: string;
  /** An operation a client sent, as the facade recorded it (no document: what it used instead). */
  recorded?: UsedOperation;
}

/** Every operation of every manifest; a manifest that cannot be read is an error, not an empty list. */
export async function loadClientOperations(manifests: readonly ClientManifest[]): Promise<ClientOperation[]> {
  const operations: ClientOperation[] = [];
  for (const manifest of manifests) {
    for (const [id, body] of await loadTrustedDocumentEntries(manifest.path)) {
      let document: DocumentNode;
      try {
        document = parse(body);
      } catch (error) {
        operations.push({
          client: manifest.name,
          name: id,
          kind: OperationTypeNode.QUERY,
          document: undefined,
          parseError: (error as Error).message,
          ...(manifest.contract === undefined ? {} : { contract: manifest.contract }),
        });
        continue;
      }
      for (const [name, separated] of Object.entries(separateOperations(document))) {
        const definition = separated.definitions.find((node) => node.kind === Kind.OPERATION_DEFINITION);
        operations.push({
          client: manifest.name,
          name: name === '' ? id : name,
          kind: definition?.operation ?? OperationTypeNode.QUERY,
          document: separated,
          ...(manifest.contract === undefined ? {} : { contract: manifest.contract }),
        });
      }
    }
  }
  return operations;
}

/** Which operations read each schema coordinate (as the released schema names it). */
export interface UsageIndex {
  fields: Map<string, Set<ClientOperation>>;
  arguments: Map<string, Set<ClientOperation>>;
  types: Map<string, Set<ClientOperation>>;
  directives: Map<string, Set<ClientOperation>>;
  /** Input fields (`Input.field`) sent, known for recorded operations only. */
  inputFields: Map<string, Set<ClientOperation>>;
  /** The operations whose input fields are known exactly (recorded ones): an input field they never sent is not theirs. */
  precise: Set<ClientOperation>;
  /** Every operation indexed, by kind (a changed root type touches all of one kind). */
  byKind: Map<string, Set<ClientOperation>>;
}

function record(map: Map<string, Set<ClientOperation>>, key: string, operation: ClientOperation) {
  let users = map.get(key);
  if (users === undefined) map.set(key, (users = new Set()));
  users.add(operation);
}

/**
 * Indexes what `operations` read in `schema` (the released one: the schema the clients were built
 * against). A field read on an interface or union counts for every implementation that has it, and
 * an input object for all its input fields (a variable's value is not known here).
 */
export function indexUsage(schema: GraphQLSchema, operations: readonly ClientOperation[]): UsageIndex {
  const usage: UsageIndex = {
    fields: new Map(),
    arguments: new Map(),
    types: new Map(),
    directives: new Map(),
    inputFields: new Map(),
    precise: new Set(),
    byKind: new Map(),
  };
  for (const operation of operations) {
    record(usage.byKind, operation.kind, operation);
    if (operation.recorded !== undefined)
      indexRecorded(usage, schema, operation, operation.recorded.coordinates);
    if (operation.document === undefined) continue;
    const recordType = (type: GraphQLNamedType | null | undefined) => {
      if (type == null || usage.types.get(type.name)?.has(operation)) return;
      record(usage.types, type.name, operation);
      if (isInputObjectType(type)) {
        for (const field of Object.values(type.getFields())) recordType(getNamedType(field.type));
      }
    };
    const typeInfo = new TypeInfo(schema);
    visit(
      operation.document,
      visitWithTypeInfo(typeInfo, {
        Field() {
          const parent = typeInfo.getParentType();
          const field = typeInfo.getFieldDef();
          if (parent == null || field == null) return;
          recordType(parent);
          recordType(getNamedType(field.type));
          record(usage.fields, `${parent.name}.${field.name}`, operation);
          if (isAbstractType(parent)) {
            for (const possible of schema.getPossibleTypes(parent)) {
              if (field.name in possible.getFields()) {
                record(usage.fields, `${possible.name}.${field.name}`, operation);
              }
            }
          }
        },
        Argument() {
          const argument = typeInfo.getArgument();
          if (argument == null) return;
          recordType(getNamedType(argument.type));
          const directive = typeInfo.getDirective();
          const parent = typeInfo.getParentType();
          const field = typeInfo.getFieldDef();
          if (directive != null) record(usage.arguments, `@${directive.name}.${argument.name}`, operation);
          else if (parent != null && field != null) {
            record(usage.arguments, `${parent.name}.${field.name}.${argument.name}`, operation);
          }
        },
        Directive(node) {
          record(usage.directives, `@${node.name.value}`, operation);
        },
        InlineFragment(node) {
          if (node.typeCondition !== undefined) recordType(schema.getType(node.typeCondition.name.value));
        },
        FragmentDefinition(node) {
          recordType(schema.getType(node.typeCondition.name.value));
        },
        VariableDefinition(node) {
          recordType(getNamedType(typeFromAST(schema, node.type)));
        },
      }),
    );
  }
  return usage;
}

/**
 * The operations a change reaches, judged by what it changes:
 * - a type (removed, kind changed, enum value, union member, input field, interface): every
 *   operation touching the type. An enum counts whether sent or received: a client's generated
 *   types and its code name the values;
 * - an output field: every operation selecting it; an added required argument: every operation
 *   selecting the field; an argument removed or retyped: the operations passing it, and, when it
 *   becomes required, every operation selecting the field; a changed default: the operations
 *   selecting the field without passing the argument;
 * - a directive: the operations using it; a root type: every operation of that kind.
 * A change of another kind is `'unknown'`: the check counts such a breaking change as in use.
 */
export function operationsAffectedBy(
  change: Change,
  usage: UsageIndex,
  newSchema: GraphQLSchema,
): Set<ClientOperation> | 'unknown' {
  const path = change.path ?? '';
  const [typeName = '', member, argumentName] = path.split('.');
  const users = (map: Map<string, Set<ClientOperation>>, key: string) => map.get(key) ?? new Set();
  const union = (...sets: Set<ClientOperation>[]) => new Set(sets.flatMap((set) => [...set]));
  const field = `${typeName}.${member ?? ''}`;
  switch (change.type as string) {
    case 'INPUT_FIELD_REMOVED':
    case 'INPUT_FIELD_TYPE_CHANGED': {
      // A recorded operation that never sent the input field is not reached; one of a manifest may send it.
      const senders = users(usage.inputFields, field);
      return new Set(
        [...users(usage.types, typeName)].filter(
          (operation) => !usage.precise.has(operation) || senders.has(operation),
        ),
      );
    }
    case 'TYPE_REMOVED':
    case 'TYPE_KIND_CHANGED':
    case 'ENUM_VALUE_REMOVED':
    case 'ENUM_VALUE_ADDED':
    case 'UNION_MEMBER_REMOVED':
    case 'UNION_MEMBER_ADDED':
    case 'INPUT_FIELD_ADDED':
    case 'INPUT_FIELD_DEFAULT_VALUE_CHANGED':
    case 'OBJECT_TYPE_INTERFACE_ADDED':
      return users(usage.types, typeName);
    case 'OBJECT_TYPE_INTERFACE_REMOVED':
      return union(
        users(usage.types, typeName),
        users(usage.types, (change.meta as { removedInterfaceName: string }).removedInterfaceName),
      );
    case 'FIELD_REMOVED':
    case 'FIELD_TYPE_CHANGED':
    case 'FIELD_DEPRECATION_ADDED':
    case 'FIELD_ARGUMENT_ADDED':
      return users(usage.fields, field);
    case 'FIELD_ARGUMENT_REMOVED':
      return users(usage.arguments, path);
    case 'FIELD_ARGUMENT_DEFAULT_CHANGED': {
      // The new default reaches only the operations that leave the argument out.
      const passing = users(usage.arguments, path);
      return new Set([...users(usage.fields, field)].filter((operation) => !passing.has(operation)));
    }
    case 'FIELD_ARGUMENT_TYPE_CHANGED': {
      const owner = newSchema.getType(typeName);
      const argument =
        isObjectType(owner) || isInterfaceType(owner)
          ? owner.getFields()[member ?? '']?.args.find((candidate) => candidate.name === argumentName)
          : undefined;
      return argument !== undefined && isRequiredArgument(argument)
        ? users(usage.fields, field)
        : users(usage.arguments, path);
    }
    case 'DIRECTIVE_REMOVED':
    case 'DIRECTIVE_LOCATION_REMOVED':
    case 'DIRECTIVE_ARGUMENT_ADDED':
    case 'DIRECTIVE_ARGUMENT_REMOVED':
    case 'DIRECTIVE_ARGUMENT_TYPE_CHANGED':
      return users(usage.directives, typeName);
    case 'SCHEMA_QUERY_TYPE_CHANGED':
      return users(usage.byKind, 'query');
    case 'SCHEMA_MUTATION_TYPE_CHANGED':
      return users(usage.byKind, 'mutation');
    case 'SCHEMA_SUBSCRIPTION_TYPE_CHANGED':
      return users(usage.byKind, 'subscription');
    default:
      return 'unknown';
  }
}

/** An operation that does not validate against a schema, with graphql-js's messages. */
export interface InvalidOperation {
  operation: ClientOperation;
  errors: string[];
}

/** The operations that do not parse or do not validate against `schema`. */
export function invalidOperations(
  schema: GraphQLSchema,
  operations: readonly ClientOperation[],
): InvalidOperation[] {
  return operations.flatMap((operation) => {
    // A recorded operation has no document to validate: what it used is judged by the index alone.
    if (operation.recorded !== undefined) return [];
    if (operation.document === undefined) {
      return [{ operation, errors: [`does not parse: ${operation.parseError ?? 'unknown error'}`] }];
    }
    const errors = validate(schema, operation.document);
    return errors.length === 0 ? [] : [{ operation, errors: errors.map((error) => error.message) }];
  });
}

/** `web example: Dashboard, TopUp; kubernetes base: Dashboard`: operations by client, in manifest order. */
export function nameOperations(operations: Iterable<ClientOperation>): string {
  const byClient = new Map<string, string[]>();
  for (const operation of operations) {
    const names = byClient.get(operation.client) ?? [];
    if (!names.includes(operation.name)) names.push(operation.name);
    byClient.set(operation.client, names);
  }
  return [...byClient].map(([client, names]) => `${client}: ${names.join(', ')}`).join('; ');
}

/** A path for messages: relative to the working directory when inside it. */
export function displayPath(path: string): string {
  const relativePath = relative(process.cwd(), path);
  return relativePath.startsWith('..') ? path : relativePath;
}
