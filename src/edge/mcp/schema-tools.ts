/**
 * The MCP endpoint's two read-only schema tools, for an agent that writes or checks an operation
 * (to propose it for the manifest, say): `search_schema` finds types, fields, arguments and enum
 * values by words of their names and descriptions; `validate_document` parses and validates a
 * document with the door's own options (token limit, query limits, cost measure), runs nothing, and
 * says whether the manifest lists it.
 *
 * Who gets them: the callers who may read the schema anyway. With introspection on (the default,
 * or `public`) that is every caller; with `INTROSPECTION=off`, operators and schema readers only
 * (the roles that may read `_service`). So they disclose nothing a caller could not introspect,
 * and neither runs a document: no tool executes GraphQL that is not listed. Each reads the schema
 * the caller is served (its contract's): what a contract hides is not found, and a document naming
 * it does not validate, exactly as if it did not exist.
 */
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  Kind,
  type GraphQLField,
  type GraphQLInputField,
  type GraphQLNamedType,
  type GraphQLSchema,
} from 'graphql';
import type { Caller } from '../../auth/caller.ts';
import { mayReadServiceSdl } from '../../graph/service-sdl-access.ts';
import { createDocumentStepsOfSchemas } from '../door/documents.ts';
import type { ExecutorDoor } from '../door/audiences.ts';
import { isRefusal } from '../refusal.ts';
import type { ToolDefinition } from './tools.ts';

/** The schema tools' names (the operation tools leave them free). */
export const SCHEMA_TOOL_NAMES = ['search_schema', 'validate_document'] as const;
type SchemaToolName = (typeof SCHEMA_TOOL_NAMES)[number];

/** Most matches `search_schema` answers. */
const MAX_MATCHES = 50;

const DEFINITIONS: Readonly<Record<SchemaToolName, ToolDefinition>> = {
  search_schema: {
    name: 'search_schema',
    title: 'Search the schema',
    description:
      'Finds types, fields, arguments and enum values of the GraphQL schema whose names or ' +
      'descriptions hold the given words (all of them), best matches first, each with its type ' +
      'and description. Reads the schema only.',
    inputSchema: {
      type: 'object',
      properties: {
        query: {
          type: 'string',
          minLength: 1,
          maxLength: 200,
          description: 'Words to look for, e.g. "account balance".',
        },
        limit: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_MATCHES,
          default: 20,
          description: 'Most matches to answer.',
        },
      },
      required: ['query'],
      additionalProperties: false,
    },
    annotations: {
      title: 'Search the schema',
      readOnlyHint: true,
      idempotentHint: true,
      openWorldHint: false,
    },
  },
  validate_document: {
    name: 'validate_document',
    title: 'Validate a GraphQL document',
    description:
      'Parses and validates a GraphQL document against the schema with the limits the facade ' +
      'enforces (tokens, depth, aliases, cost), without running it, and says whether the ' +
      'trusted-documents manifest lists it. Only listed operations run, each as a tool of its own.',
    inputSchema: {
      type: 'object',
      properties: {
        document: { type: 'string', minLength: 1, maxLength: 32_768, description: 'The GraphQL document.' },
      },
      required: ['document'],
      additionalProperties: false,
    },
    annotations: {
      title: 'Validate a document',
      readOnlyHint: true,
      idempotentHint: true,
      openWorldHint: false,
    },
  },
};

/** The schema tools of one app. */
export interface SchemaTools {
  /** The tools `caller` is offered. */
  definitionsFor(caller: Caller): ToolDefinition[];
  /** Whether `name` is a schema tool `caller` may call. */
  offers(caller: Caller, name: string): name is SchemaToolName;
  /**
   * Runs `name` with `args` against the schema `caller` is served: its structured answer (its
   * `error` when the arguments are wrong).
   */
  run(name: SchemaToolName, args: Readonly<Record<string, unknown>>, caller: Caller): Record<string, unknown>;
}

export function createSchemaTools(options: {
  /** The schema `caller` is served (its contract's); undefined for a contract not served. */
  schemaOf: (caller: Caller) => GraphQLSchema | undefined;
  door: ExecutorDoor;
  /** `INTROSPECTION=off`: the tools are for operators and schema readers only. */
  introspectionOff: boolean;
  /** Whether the manifest lists `document` byte for byte. */
  isListed(document: string): boolean;
}): SchemaTools {
  // Each served schema's document steps (the door's, per schema) and searchable entries, made the
  // first time it is asked for.
  const documentsOf = createDocumentStepsOfSchemas({
    validationRules: options.door.validationRules,
    maxTokens: options.door.parseOptions.maxTokens,
  });
  const entriesBySchema = new WeakMap<GraphQLSchema, readonly SchemaEntry[]>();
  const entriesOf = (schema: GraphQLSchema): readonly SchemaEntry[] => {
    let entries = entriesBySchema.get(schema);
    if (entries === undefined) {
      entries = schemaEntries(schema);
      entriesBySchema.set(schema, entries);
    }
    return entries;
  };
  const mayUse = (caller: Caller) =>
    (!options.introspectionOff || mayReadServiceSdl(caller)) && options.schemaOf(caller) !== undefined;
  return {
    definitionsFor: (caller) => (mayUse(caller) ? SCHEMA_TOOL_NAMES.map((name) => DEFINITIONS[name]) : []),
    offers: (caller, name): name is SchemaToolName =>
      mayUse(caller) && (SCHEMA_TOOL_NAMES as readonly string[]).includes(name),
    run(name, args, caller) {
      const schema = options.schemaOf(caller);
      if (schema === undefined) return { error: 'This token names a contract this service does not serve.' };
      if (name === 'search_schema') {
        const query = args['query'];
        const limit = args['limit'] ?? 20;
        if (typeof query !== 'string' || query.trim() === '' || query.length > 200) {
          return { error: '`query` must be a string of 1 to 200 characters.' };
        }
        if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_MATCHES) {
          return { error: `\`limit\` must be an integer from 1 to ${MAX_MATCHES}.` };
        }
        return { matches: search(entriesOf(schema), query, limit) };
      }
      const document = args['document'];
      if (typeof document !== 'string' || document === '' || document.length > 32_768) {
        return { error: '`document` must be a string of 1 to 32768 characters.' };
      }
      const documents = documentsOf(schema);
      const parsed = documents.parse(document);
      const refusal = isRefusal(parsed) ? parsed : documents.validate(document, parsed);
      const listed = options.isListed(document);
      if (refusal === undefined) return { valid: true, listed };
      const errors = (refusal.errors ?? []).map((error) => ({
        message: error.message,
        ...(error.locations === undefined ? {} : { locations: error.locations }),
      }));
      return { valid: false, listed, errors: errors.length > 0 ? errors : [{ message: refusal.message }] };
    },
  };
}

/** One thing of the schema `search_schema` can find. */
interface SchemaEntry {
  /** `Type`, `Type.field`, `Type.field(argument:)`, `Enum.VALUE`. */
  readonly coordinate: string;
  readonly kind: string;
  /** Its type, for a field or an argument. */
  readonly type?: string;
  readonly description?: string;
  /** Lower-case name and description, searched. */
  readonly name: string;
  readonly text: string;
}

/** Every type of `schema` but introspection's and federation's own, with its members. */
function schemaEntries(schema: GraphQLSchema): SchemaEntry[] {
  const entries: SchemaEntry[] = [];
  const add = (coordinate: string, kind: string, description: string | null | undefined, type?: string) => {
    entries.push({
      coordinate,
      kind,
      ...(type === undefined ? {} : { type }),
      ...(description ? { description } : {}),
      name: coordinate.toLowerCase(),
      text: (description ?? '').toLowerCase(),
    });
  };
  for (const type of Object.values(schema.getTypeMap())) {
    if (isHidden(type)) continue;
    add(type.name, kindOf(type), type.description);
    if (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type)) {
      for (const field of Object.values<GraphQLField<unknown, unknown> | GraphQLInputField>(
        type.getFields(),
      )) {
        if (field.name.startsWith('_')) continue;
        add(`${type.name}.${field.name}`, 'field', field.description, String(field.type));
        for (const argument of 'args' in field ? field.args : []) {
          add(
            `${type.name}.${field.name}(${argument.name}:)`,
            'argument',
            argument.description,
            String(argument.type),
          );
        }
      }
    } else if (isEnumType(type)) {
      for (const value of type.getValues())
        add(`${type.name}.${value.name}`, 'enum value', value.description);
    }
  }
  return entries;
}

/** Introspection's types, federation's, and `link`'s: not what an agent queries. */
function isHidden(type: GraphQLNamedType): boolean {
  return (
    type.name.startsWith('__') ||
    type.name.startsWith('_') ||
    type.name.startsWith('link__') ||
    type.name.startsWith('federation__')
  );
}

function kindOf(type: GraphQLNamedType): string {
  const named = getNamedType(type);
  if (isObjectType(named)) return 'object type';
  if (isInterfaceType(named)) return 'interface';
  if (isInputObjectType(named)) return 'input type';
  if (isEnumType(named)) return 'enum';
  return named.astNode?.kind === Kind.UNION_TYPE_DEFINITION ? 'union' : 'scalar';
}

/** The entries holding every word of `query`, a name match before a description match. */
function search(entries: readonly SchemaEntry[], query: string, limit: number) {
  const words = query
    .toLowerCase()
    .split(/\s+/)
    .filter((word) => word !== '');
  const scored = entries.flatMap((entry) => {
    let score = 0;
    for (const word of words) {
      if (entry.name.includes(word)) score += 3;
      else if (entry.text.includes(word)) score += 1;
      else return [];
    }
    // Shorter coordinates first at equal scores: a type before its members.
    return [{ entry, score }];
  });
  scored.sort((a, b) => b.score - a.score || a.entry.coordinate.length - b.entry.coordinate.length);
  return scored.slice(0, limit).map(({ entry }) => ({
    coordinate: entry.coordinate,
    kind: entry.kind,
    ...(entry.type === undefined ? {} : { type: entry.type }),
    ...(entry.description === undefined ? {} : { description: entry.description }),
  }));
}
