/**
 * The `@live` directive as a document carries it: what makes a query a live query. Both the door
 * (`edge/door/operation-checks.ts`, which admits a live query where subscriptions go) and the event
 * pipeline (`events/delivery/`, which runs it again when an answer it read is made stale) must
 * recognise it the same way, so it sits here, below both, reading nothing but graphql-js.
 */
import {
  getDirectiveValues,
  OperationTypeNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';

/** The directive's name: GraphQL Yoga's and Hive Gateway's, so their clients' documents run as written. */
const LIVE_DIRECTIVE = 'live';

/**
 * Whether `operation` is a live query: a query carrying `@live` whose `if` is not false (with the
 * operation's `variables`). Any other operation, `@live(if: false)` included, is what it says.
 */
export function isLiveQuery(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): boolean {
  if (operation.operation !== OperationTypeNode.QUERY) return false;
  const directive = schema.getDirective(LIVE_DIRECTIVE);
  if (
    directive === null ||
    directive === undefined ||
    !operation.directives?.some((node) => node.name.value === LIVE_DIRECTIVE)
  ) {
    return false;
  }
  try {
    return getDirectiveValues(directive, operation, variables ?? {})?.['if'] !== false;
  } catch {
    // A value `if` cannot take is refused by the variables' own check before execution.
    return true;
  }
}
