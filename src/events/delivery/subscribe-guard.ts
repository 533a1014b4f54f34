/**
 * graphql-ws's `onSubscribe`: the same refusals HTTP makes, before anything runs. The parser stops
 * at the token limit, the validation rules are HTTP's, the cost is measured with the variables, a
 * malformed string in a variable is refused, and one connection runs at most so many operations.
 * Every refusal is an `error` message for that operation; the connection stays open.
 */
import {
  GraphQLError,
  getOperationAST,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type ExecutionArgs,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import type { SubscribePayload } from 'graphql-ws';
import { findEmptyIdLiteral, findMalformedVariable } from '../../graph/input-strings.ts';
import { checkOperationCost } from '../../graph/query-limits.ts';

export interface SubscribeGuardOptions {
  schema: GraphQLSchema;
  /** Validation rules beyond graphql's own, HTTP's. */
  validationRules: readonly ValidationRule[];
  /** `QUERY_MAX_TOKENS`. */
  maxTokens: number;
  /** `QUERY_MAX_COST`. */
  maxCost: number;
  /** `GRAPHQL_WS_MAX_SUBSCRIPTIONS`. */
  maxSubscriptionsPerConnection: number;
}

/**
 * Builds the guard. It answers the execution arguments of an accepted operation, or the errors
 * of a refused one (codes as over HTTP, and `TOO_MANY_SUBSCRIPTIONS`).
 *
 * @param runningOnConnection operations open on the connection, this one included.
 */
export function createSubscribeGuard(
  options: SubscribeGuardOptions,
): (payload: SubscribePayload, runningOnConnection: number) => ExecutionArgs | readonly GraphQLError[] {
  const rules = [...specifiedRules, ...options.validationRules];
  const validDocuments = createDocumentMemo();
  return (payload, runningOnConnection) => {
    if (runningOnConnection > options.maxSubscriptionsPerConnection) {
      return [
        new GraphQLError(
          `This connection already runs ${options.maxSubscriptionsPerConnection} operations, the most one ` +
            'connection may run. Complete one first, or open another connection.',
          {
            extensions: {
              code: 'TOO_MANY_SUBSCRIPTIONS',
              maxSubscriptions: options.maxSubscriptionsPerConnection,
            },
          },
        ),
      ];
    }
    const known = validDocuments.get(payload.query);
    if (known !== undefined) return accept(known, payload);
    let document: DocumentNode;
    try {
      document = parse(payload.query, { maxTokens: options.maxTokens });
    } catch (error) {
      const message =
        error instanceof GraphQLError ? error.message : 'Syntax Error: The document could not be parsed.';
      const deep = error instanceof RangeError;
      return [
        new GraphQLError(deep ? 'Syntax Error: The document is nested too deeply to be parsed.' : message, {
          extensions: { code: 'GRAPHQL_PARSE_FAILED' },
        }),
      ];
    }
    const invalid = validate(options.schema, document, rules);
    if (invalid.length > 0) return invalid;
    validDocuments.remember(payload.query, document);
    return accept(document, payload);
  };

  /** What is checked per subscribe, since it depends on the variables: then the execution arguments. */
  function accept(
    document: DocumentNode,
    payload: SubscribePayload,
  ): ExecutionArgs | readonly GraphQLError[] {
    const operation = getOperationAST(document, payload.operationName);
    const variables = payload.variables ?? undefined;
    if (operation) {
      const malformed = findMalformedVariable(options.schema, operation, variables);
      if (malformed) return [malformed];
      const emptyId = findEmptyIdLiteral(options.schema, document);
      if (emptyId) return [emptyId];
      const { error } = checkOperationCost(options.schema, document, operation, variables, options.maxCost);
      if (error) return [error];
    }
    return {
      schema: options.schema,
      document,
      operationName: payload.operationName,
      variableValues: variables,
    };
  }
}

/** Documents kept: enough for every subscription an app ships, bounded against a stream of new ones. */
const MAX_KEPT_DOCUMENTS = 128;
/** Longer texts are parsed each time rather than kept. */
const MAX_KEPT_DOCUMENT_LENGTH = 16 * 1024;

/**
 * Valid documents by their text. Thousands of subscribers send the same few subscriptions: each
 * text is parsed and validated once, and every subscriber of it runs the same document object,
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
