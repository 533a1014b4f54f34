/**
 * From a document's text to a parsed, valid document, the same for every transport: the parser
 * stops at the token limit (`QUERY_MAX_TOKENS`), and validation runs graphql's own rules with the
 * query limits (depth, aliases, directives, the one cost measure). Valid documents are kept by
 * their text, so thousands of subscribers of the same few documents parse and validate each once.
 */
import {
  GraphQLError,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import { refuse, type Refusal } from './refusal.ts';

export interface DocumentPreparerOptions {
  schema: GraphQLSchema;
  /** Validation rules beyond graphql's own (the query limits). */
  validationRules: readonly ValidationRule[];
  /** `QUERY_MAX_TOKENS`. */
  maxTokens: number;
  /**
   * `INTROSPECTION=off`: validation errors lose their "Did you mean …" suggestions, which describe
   * the schema, as Apollo Server's `hideSchemaDetailsFromClientErrors` drops them over HTTP.
   */
  hideSchemaDetails?: boolean;
  /** Told as each step of the door's order is taken (a kept document has taken both). */
  onStep?(step: 'parse' | 'validate'): void;
}

/** Parses and validates `query`: the document, or the refusal (`parse-failed`, `validation-failed`). */
export type DocumentPreparer = (query: string) => DocumentNode | Refusal;

/** Builds the preparer of one schema. */
export function createDocumentPreparer(options: DocumentPreparerOptions): DocumentPreparer {
  const rules = [...specifiedRules, ...options.validationRules];
  const validDocuments = createDocumentMemo();
  return (query) => {
    options.onStep?.('parse');
    const known = validDocuments.get(query);
    if (known !== undefined) {
      options.onStep?.('validate');
      return known;
    }
    let document: DocumentNode;
    try {
      document = parse(query, { maxTokens: options.maxTokens });
    } catch (error) {
      const message =
        error instanceof RangeError
          ? 'Syntax Error: The document is nested too deeply to be parsed.'
          : error instanceof GraphQLError
            ? error.message
            : 'Syntax Error: The document could not be parsed.';
      return refuse('parse-failed', message);
    }
    options.onStep?.('validate');
    const found = validate(options.schema, document, rules);
    const invalid = options.hideSchemaDetails === true ? found.map(withoutSuggestions) : found;
    if (invalid.length > 0) {
      return refuse('validation-failed', invalid[0]?.message ?? 'The document is not valid.', {
        errors: invalid,
      });
    }
    validDocuments.remember(query, document);
    return document;
  };
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
