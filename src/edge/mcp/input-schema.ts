/**
 * An MCP tool's input JSON Schema (draft 2020-12, the dialect MCP names), derived from its
 * operation's variable definitions: one property per variable, required when non-null without a
 * default; enums as their value names; input objects under `$defs` (recursive ones by reference),
 * closed to other properties; the custom scalars as the strings they are documented to be
 * (`DateTime` an RFC 3339 `date-time`, `Decimal` its pattern), each with its description from the
 * schema. A variable's description is the one of the argument or input field it is passed to, so
 * an agent reads what the schema says of it. The schema informs; the door still checks every
 * value (its operation checks coerce the variables as GraphQL does).
 */
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  Kind,
  astFromValue,
  typeFromAST,
  TypeInfo,
  valueFromASTUntyped,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLEnumType,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { DECIMAL_PATTERN, MAX_DECIMAL_LENGTH } from '../../graph/scalars.ts';

/** A JSON Schema, as plain data. */
export type JsonSchema = Record<string, unknown>;

/** The input schema of one tool: an object of its operation's variables. */
export interface ToolInputSchema extends JsonSchema {
  readonly type: 'object';
  readonly properties: Record<string, JsonSchema>;
  readonly required?: string[];
  readonly additionalProperties: false;
  readonly $defs?: Record<string, JsonSchema>;
}

/** GraphQL's `Int`: a signed 32-bit integer. */
const INT_RANGE = { minimum: -2_147_483_648, maximum: 2_147_483_647 } as const;

/** Each scalar as JSON carries it; a custom scalar not listed here is described, not typed. */
const SCALAR_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  String: { type: 'string' },
  ID: { type: 'string' },
  Boolean: { type: 'boolean' },
  Int: { type: 'integer', ...INT_RANGE },
  Float: { type: 'number' },
  DateTime: { type: 'string', format: 'date-time' },
  Decimal: { type: 'string', pattern: DECIMAL_PATTERN, maxLength: MAX_DECIMAL_LENGTH },
};

/** The input schema of `operation` (of `document`) against `schema`. */
export function inputSchemaOf(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): ToolInputSchema {
  const defs: Record<string, JsonSchema> = {};
  const described = variableDescriptions(schema, document);
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    const type = typeFromAST(schema, definition.type) as GraphQLInputType | undefined;
    // A variable of a type the schema lacks fails validation; the catalogue drops such documents.
    if (type === undefined) continue;
    const property: JsonSchema = { ...typeSchema(schema, type, defs) };
    const description = described.get(name);
    if (description !== undefined) property['description'] = description;
    if (definition.defaultValue !== undefined)
      property['default'] = valueFromASTUntyped(definition.defaultValue);
    else if (isNonNullType(type)) required.push(name);
    properties[name] = property;
  }
  return {
    type: 'object',
    properties,
    ...(required.length === 0 ? {} : { required }),
    additionalProperties: false,
    ...(Object.keys(defs).length === 0 ? {} : { $defs: defs }),
  };
}

/** `type` as JSON Schema; input objects are added to `defs` and referred to. */
function typeSchema(
  schema: GraphQLSchema,
  type: GraphQLInputType,
  defs: Record<string, JsonSchema>,
): JsonSchema {
  if (isNonNullType(type)) return nonNullSchema(schema, type.ofType, defs);
  return orNull(nonNullSchema(schema, type, defs));
}

/** A type no longer wrapped in non-null, as JSON Schema. */
function nonNullSchema(
  schema: GraphQLSchema,
  type: GraphQLInputType,
  defs: Record<string, JsonSchema>,
): JsonSchema {
  if (isListType(type)) return { type: 'array', items: typeSchema(schema, type.ofType, defs) };
  if (isEnumType(type)) return enumSchema(type);
  if (isInputObjectType(type)) {
    if (!(type.name in defs)) {
      // Set before its fields are read: a type that refers to itself finds its own entry.
      defs[type.name] = {};
      defs[type.name] = inputObjectSchema(schema, type, defs);
    }
    return { $ref: `#/$defs/${type.name}` };
  }
  if (isScalarType(type)) {
    const known = SCALAR_SCHEMAS[type.name] ?? {};
    const description = schema.getType(type.name)?.description ?? undefined;
    const builtIn = ['String', 'ID', 'Boolean', 'Int', 'Float'].includes(type.name);
    return description === undefined || builtIn ? { ...known } : { ...known, description };
  }
  return {};
}

function enumSchema(type: GraphQLEnumType): JsonSchema {
  const values = type.getValues();
  const explained = values.filter((value) => value.description);
  const lines = explained.map((value) => `${value.name}: ${value.description ?? ''}`);
  const description = [type.description, ...lines].filter((line) => line).join('\n');
  return {
    type: 'string',
    enum: values.map((value) => value.name),
    ...(description === '' ? {} : { description }),
  };
}

function inputObjectSchema(
  schema: GraphQLSchema,
  type: GraphQLInputObjectType,
  defs: Record<string, JsonSchema>,
): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const field of Object.values(type.getFields())) {
    const property: JsonSchema = { ...typeSchema(schema, field.type, defs) };
    if (field.description) property['description'] = field.description;
    if (field.deprecationReason) property['deprecated'] = true;
    const fallback =
      field.defaultValue === undefined ? undefined : astFromValue(field.defaultValue, field.type);
    if (fallback !== null && fallback !== undefined) property['default'] = valueFromASTUntyped(fallback);
    else if (isNonNullType(field.type)) required.push(field.name);
    properties[field.name] = property;
  }
  return {
    type: 'object',
    ...(type.description ? { description: type.description } : {}),
    properties,
    ...(required.length === 0 ? {} : { required }),
    additionalProperties: false,
    // `@oneOf`: exactly one of its fields is given.
    ...(type.isOneOf ? { minProperties: 1, maxProperties: 1 } : {}),
  };
}

/** `schema` that also admits null (a nullable GraphQL type). */
function orNull(schema: JsonSchema): JsonSchema {
  const { type } = schema;
  if (typeof type === 'string') {
    const nullable: JsonSchema = { ...schema, type: [type, 'null'] };
    if (Array.isArray(schema['enum'])) nullable['enum'] = [...(schema['enum'] as unknown[]), null];
    return nullable;
  }
  // A reference (an input object) may be null too; a schema without a type admits null already.
  return '$ref' in schema ? { anyOf: [schema, { type: 'null' }] } : schema;
}

/**
 * Each variable's description: the one of the first argument or input field it is passed to in
 * `document` (its fragments included).
 */
function variableDescriptions(schema: GraphQLSchema, document: DocumentNode): Map<string, string> {
  const found = new Map<string, string>();
  const typeInfo = new TypeInfo(schema);
  const note = (name: string, description: string | null | undefined) => {
    if (description && !found.has(name)) found.set(name, description);
  };
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      [Kind.ARGUMENT](argument) {
        if (argument.value.kind === Kind.VARIABLE)
          note(argument.value.name.value, typeInfo.getArgument()?.description);
      },
      [Kind.OBJECT_FIELD](field) {
        if (field.value.kind !== Kind.VARIABLE) return;
        const parent = typeInfo.getParentInputType();
        const owner = parent === null || parent === undefined ? undefined : getNamedType(parent);
        if (isInputObjectType(owner))
          note(field.value.name.value, owner.getFields()[field.name.value]?.description);
      },
    }),
  );
  return found;
}
