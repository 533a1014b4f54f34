/**
 * `@defer` and `@stream` sent to this service's own endpoint: refused with an error that says
 * where they are served. The facade runs graphql 16, which has no incremental delivery; the
 * gateway in front of it serves both (Hive Gateway with `deferStream`, deploy/gateway.config.ts),
 * answering a deferred fragment with a follow-up entity fetch to this subgraph (docs/defer.md).
 * graphql-js alone would only say `Unknown directive "@defer"`, which reads as a typo.
 */
import { GraphQLError, visit, type ASTVisitor, type DirectiveNode, type ValidationRule } from 'graphql';

/** The incremental-delivery directives a client may send, as the gateway serves them. */
const SERVED_AT_THE_GATEWAY = ['defer', 'stream'] as const;

/** What a caller of this endpoint is told for `@<directive>`. */
export function servedAtTheGatewayMessage(directive: string): string {
  return (
    `@${directive} is served by the gateway in front of this service, not by its own endpoint, ` +
    `which answers every operation in one response: send the operation to the gateway, or leave ` +
    `@${directive} out (docs/defer.md).`
  );
}

/**
 * Reports each incremental-delivery directive the schema does not define, once per name, at the
 * document's start: before graphql-js's own `Unknown directive` errors, so this is the first error
 * (the one a live transport's refusal quotes). The document is searched only when its text names
 * one of them.
 */
export const IncrementalDeliveryAtTheGatewayRule: ValidationRule = (context): ASTVisitor => ({
  Document(document) {
    const text = document.loc?.source.body;
    if (text !== undefined && !SERVED_AT_THE_GATEWAY.some((name) => text.includes(`@${name}`))) return;
    const schema = context.getSchema();
    const first = new Map<string, DirectiveNode>();
    visit(document, {
      Directive(node) {
        const name = node.name.value;
        const served = (SERVED_AT_THE_GATEWAY as readonly string[]).includes(name);
        if (served && !first.has(name) && schema.getDirective(name) === undefined) first.set(name, node);
      },
    });
    for (const [name, node] of first) {
      context.reportError(new GraphQLError(servedAtTheGatewayMessage(name), { nodes: node }));
    }
  },
});
