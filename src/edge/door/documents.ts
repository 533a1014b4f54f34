/**
 * The door's `parse` and `validate` steps, the same for every transport: the parser stops at the
 * token limit (`QUERY_MAX_TOKENS`), and validation runs graphql's own rules with the query limits
 * (depth, aliases, directives, the one cost measure), and refuses introspection when it is off.
 * Valid documents are kept by their text, so thousands of subscribers of the same few documents
 * parse and validate each once (and share each event's execution, `execute-live-event.ts`).
 */
import {
  GraphQLError,
  NoSchemaIntrospectionCustomRule,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import { selectsService } from '../../graph/service-sdl-access.ts';
import { refuse, type Refusal } from '../refusal.ts';

export interface DocumentStepsOptions {
  schema: GraphQLSchema;
  /** Validation rules beyond graphql's own (the query limits). */
  validationRules: readonly ValidationRule[];
  /** `QUERY_MAX_TOKENS`. */
  maxTokens: number;
  /**
   * `INTROSPECTION=off`: introspection is refused, and validation errors lose their "Did you mean
   * …" suggestions, which describe the schema, as Apollo Server's `hideSchemaDetailsFromClientErrors`
   * drops them.
   */
  hideSchemaDetails?: boolean;
}

/** A parsed document, and whether it is one found valid before (`validate` then has nothing to do). */
export interface ParsedDocument {
  readonly document: DocumentNode;
  readonly valid: boolean;
}

/** The two steps over one schema. */
export interface DocumentSteps {
  /** Parses `query` (`parse-failed` when it does not), or finds it among the valid documents kept. */
  parse(query: string): ParsedDocument | Refusal;
  /** Validates a parsed document (`validation-failed`); a valid one is kept under its text. */
  validate(query: string, parsed: ParsedDocument): Refusal | undefined;
}

/**
 * The steps of each schema served, each built the first time a caller of that schema asks: a
 * document found valid for one contract's callers is never taken as valid for another's.
 */
export function createDocumentStepsOfSchemas(
  options: Omit<DocumentStepsOptions, 'schema'>,
): (schema: GraphQLSchema) => DocumentSteps {
  const bySchema = new Map<GraphQLSchema, DocumentSteps>();
  return (schema) => {
    let steps = bySchema.get(schema);
    if (steps === undefined) {
      steps = createDocumentSteps({ ...options, schema });
      bySchema.set(schema, steps);
    }
    return steps;
  };
}

/** Builds the steps of one schema. */
export function createDocumentSteps(options: DocumentStepsOptions): DocumentSteps {
  const rules = [...specifiedRules, ...options.validationRules];
  const validDocuments = createDocumentMemo();
  const hidden = options.hideSchemaDetails === true;
  return {
    parse(query) {
      const known = validDocuments.get(query);
      if (known !== undefined) return { document: known, valid: true };
      try {
        return { document: parse(query, { maxTokens: options.maxTokens }), valid: false };
      } catch (error) {
        const message =
          error instanceof RangeError
            ? 'Syntax Error: The document is nested too deeply to be parsed.'
            : error instanceof GraphQLError
              ? error.message
              : 'Syntax Error: The document could not be parsed.';
        return refuse('parse-failed', message);
      }
    },
    validate(query, { document, valid }) {
      if (!valid) {
        const found = validate(options.schema, document, rules);
        const invalid = hidden ? found.map(withoutSuggestions) : found;
        if (invalid.length > 0) {
          return refuse('validation-failed', invalid[0]?.message ?? 'The document is not valid.', {
            errors: invalid,
          });
        }
        validDocuments.remember(query, document);
      }
      // Introspection refused as Apollo Server refuses it over HTTP, whoever asks.
      const introspection = hidden ? schemaReachOf(document, options.schema).introspection : undefined;
      return introspection === undefined ? undefined : refuse('validation-failed', introspection);
    },
  };
}

/** What a document reaches of the hidden schema: the same for every caller who sends it. */
interface SchemaReach {
  /** The introspection refusal's message, when the document introspects. */
  readonly introspection: string | undefined;
  /** Whether it selects `_service` (the SDL). */
  readonly service: boolean;
}

/** Per parsed document (the steps share one per kept text), so a subscribe validates it once. */
const schemaReaches = new WeakMap<DocumentNode, SchemaReach>();

/** What `document` reaches of the schema that `INTROSPECTION=off` hides. */
export function schemaReachOf(document: DocumentNode, schema: GraphQLSchema): SchemaReach {
  let reach = schemaReaches.get(document);
  if (reach === undefined) {
    const [introspects] = validate(schema, document, [NoSchemaIntrospectionCustomRule]);
    reach = { introspection: introspects?.message, service: selectsService(document) };
    schemaReaches.set(document, reach);
  }
  return reach;
}

/** Apollo Server's pattern for the suggestion graphql-js appends to a validation message. */
const SUGGESTION = / Did you mean(.+)?/;

function withoutSuggestions(error: GraphQLError): GraphQLError {
  if (!SUGGESTION.test(error.message)) return error;
  return new GraphQLError(error.message.replace(SUGGESTION, ''), {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: error.extensions,
  });
}

/** Documents kept: enough for every subscription an app ships, bounded against a stream of new ones. */
const MAX_KEPT_DOCUMENTS = 128;
/** Longer texts are parsed each time rather than kept. */
const MAX_KEPT_DOCUMENT_LENGTH = 16 * 1024;

/**
 * Valid documents by their text. Every subscriber of the same text runs the same document object,
 * which is also what lets them share each event's execution (`execute-live-event.ts`).
 */
function createDocumentMemo() {
  const documents = new Map<string, DocumentNode>();
  return {
    get(text: string): DocumentNode | undefined {
      const document = documents.get(text);
      if (document !== undefined) {
        // Most recently used last, so the oldest unused one is dropped first.
        documents.delete(text);
        documents.set(text, document);
      }
      return document;
    },
    remember(text: string, document: DocumentNode): void {
      if (text.length > MAX_KEPT_DOCUMENT_LENGTH) return;
      documents.set(text, document);
      if (documents.size > MAX_KEPT_DOCUMENTS) {
        const oldest = documents.keys().next().value;
        if (oldest !== undefined) documents.delete(oldest);
      }
    },
  };
}
