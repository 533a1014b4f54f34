/**
 * What an anonymous request may ask: a gateway composing the supergraph reads `_service { sdl }`
 * without a token, and with `INTROSPECTION=public` anyone may introspect. Everything else needs a
 * caller. Decided before Apollo parses or validates anything, so an anonymous request reaches
 * neither the upstream nor a validation message that describes the schema.
 */
import { Kind, OperationTypeNode, parse, type DocumentNode, type SelectionSetNode } from 'graphql';
import { withinAnonymousServiceLimits } from './anonymous-service-limits.ts';

/** Tokens an anonymous document may have: `_service { sdl }` and introspection queries fit. */
const MAX_ANONYMOUS_TOKENS = 2_000;

const SERVICE_FIELDS = new Set(['_service', '__typename']);
const INTROSPECTION_FIELDS = new Set(['__schema', '__type', '__typename']);

/**
 * True when `query` only reads the subgraph's SDL (`_service`), or, with `allowIntrospection`,
 * only introspects. A document that does not parse is not anonymous-safe.
 */
export function isAnonymousDocument(query: unknown, allowIntrospection: boolean): boolean {
  if (typeof query !== 'string' || query.length > 100_000) return false;
  let document: DocumentNode;
  try {
    document = parse(query, { noLocation: true, maxTokens: MAX_ANONYMOUS_TOKENS });
  } catch {
    return false;
  }
  if (!withinAnonymousServiceLimits(document)) return false;
  const allowed = allowIntrospection ? new Set([...SERVICE_FIELDS, ...INTROSPECTION_FIELDS]) : SERVICE_FIELDS;
  return document.definitions.every((definition) => {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) return allowIntrospection;
    return (
      definition.kind === Kind.OPERATION_DEFINITION &&
      definition.operation === OperationTypeNode.QUERY &&
      rootFieldsWithin(definition.selectionSet, allowed, allowIntrospection)
    );
  });
}

/** Root selections are only `allowed` fields (fragments only when introspecting, where tools use them). */
function rootFieldsWithin(
  selections: SelectionSetNode,
  allowed: Set<string>,
  fragmentsAllowed: boolean,
): boolean {
  return selections.selections.every((selection) => {
    if (selection.kind === Kind.FIELD) return allowed.has(selection.name.value);
    if (selection.kind === Kind.INLINE_FRAGMENT) {
      return fragmentsAllowed && rootFieldsWithin(selection.selectionSet, allowed, fragmentsAllowed);
    }
    return false;
  });
}
