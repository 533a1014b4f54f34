/**
 * Refuses variables whose strings no upstream field can hold: a lone UTF-16 surrogate (JSON can
 * carry one, Unicode text cannot, and it breaks the URL an ID is put into) in any `String` or
 * `ID`, and a control character in an `ID` (ids are path segments). Without this check such a value
 * reaches the upstream layer and fails there as an internal error; with it the caller is told which
 * variable is wrong, before any upstream call. An empty `ID` (in a variable or a literal of the
 * document) is refused the same way: it would put an empty path segment in the upstream URL
 * (`GET /v3/customers/`), which names another resource or none.
 */
import {
  GraphQLError,
  getNamedType,
  getNullableType,
  isInputObjectType,
  isListType,
  isScalarType,
  typeFromAST,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLSchema,
  type ASTVisitor,
  type OperationDefinitionNode,
  type StringValueNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** C0 controls, DEL and C1 controls. */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001F\u007F-\u009F]/;

/**
 * The error for the first malformed string among `variables` (as the client sent them), or
 * undefined. Its code is `BAD_USER_INPUT` and its message names the variable and the input path.
 */
export function findMalformedVariable(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | undefined,
): GraphQLError | undefined {
  if (!variables) return undefined;
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    const type = typeFromAST(schema, definition.type) as GraphQLInputType | undefined;
    if (!type || !(name in variables)) continue;
    const problem = findProblem(type, variables[name], `$${name}`, 0);
    if (problem) {
      return new GraphQLError(`Variable "${problem.path}" ${problem.what}.`, {
        nodes: definition,
        extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
      });
    }
  }
  return undefined;
}

/**
 * The error for the first empty `ID` literal of `document` (`customer(id: "")`), or undefined.
 * Its code is `BAD_USER_INPUT`, as for an empty `ID` variable: no id is empty.
 */
export function findEmptyIdLiteral(schema: GraphQLSchema, document: DocumentNode): GraphQLError | undefined {
  let found = emptyIdLiterals.get(document);
  if (found === undefined) {
    found = scanForEmptyIdLiteral(schema, document);
    emptyIdLiterals.set(document, found);
  }
  if (found === null) return undefined;
  return new GraphQLError(found.message, {
    nodes: found.node,
    extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
  });
}

/**
 * What the scan found in each document, `null` for nothing. The answer depends on the document
 * alone (literals, not variables), and Apollo Server hands a cached query text the same document
 * object: the walk is made once per document, not per request.
 */
const emptyIdLiterals = new WeakMap<DocumentNode, { message: string; node: StringValueNode } | null>();

function scanForEmptyIdLiteral(
  schema: GraphQLSchema,
  document: DocumentNode,
): { message: string; node: StringValueNode } | null {
  const typeInfo = new TypeInfo(schema);
  let found: { message: string; node: StringValueNode } | null = null;
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      StringValue(node) {
        const type = typeInfo.getInputType();
        if (found || !type || getNamedType(type).name !== 'ID' || node.value !== '') return;
        const argument = typeInfo.getArgument();
        found = {
          message: `An ID${argument ? ` in argument "${argument.name}"` : ''} is empty; no id is empty.`,
          node,
        };
      },
    }),
  );
  return found;
}

/** A validation rule refusing an `ID` literal of the document that holds a control character. */
export const IdLiteralRule: ValidationRule = (context: ValidationContext): ASTVisitor => ({
  StringValue(node) {
    const type = context.getInputType();
    if (!type || getNamedType(type).name !== 'ID' || !CONTROL_CHARACTER.test(node.value)) return;
    context.reportError(
      new GraphQLError('An ID argument holds a control character, which no id contains.', { nodes: node }),
    );
  },
});

interface Problem {
  path: string;
  what: string;
}

/** Input values nest no deeper than the schema's input types; this bound only stops a hostile list. */
const MAX_NESTING = 32;

function findProblem(
  type: GraphQLInputType,
  value: unknown,
  path: string,
  depth: number,
): Problem | undefined {
  if (value === null || value === undefined || depth > MAX_NESTING) return undefined;
  const nullable = getNullableType(type);
  if (isListType(nullable)) {
    const items = Array.isArray(value) ? value : [value];
    for (const [index, item] of items.entries()) {
      const problem = findProblem(nullable.ofType, item, `${path}[${index}]`, depth + 1);
      if (problem) return problem;
    }
    return undefined;
  }
  if (isInputObjectType(nullable)) {
    if (typeof value !== 'object') return undefined;
    const fields = nullable.getFields();
    for (const [name, field] of Object.entries(fields)) {
      const problem = findProblem(
        field.type,
        (value as Record<string, unknown>)[name],
        `${path}.${name}`,
        depth + 1,
      );
      if (problem) return problem;
    }
    return undefined;
  }
  if (!isScalarType(nullable) || typeof value !== 'string') return undefined;
  if (nullable.name !== 'ID' && nullable.name !== 'String') return undefined;
  if (LONE_SURROGATE.test(value))
    return { path, what: 'holds a lone UTF-16 surrogate; strings must be well-formed Unicode' };
  if (nullable.name === 'ID' && value === '') return { path, what: 'is an empty ID; no id is empty' };
  if (nullable.name === 'ID' && CONTROL_CHARACTER.test(value))
    return { path, what: 'holds a control character, which no id contains' };
  return undefined;
}
