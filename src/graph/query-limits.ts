/**
 * A validation rule that refuses documents too deep or too costly to answer, before any resolver
 * runs. Apollo Server sets no such limit, and the graph has cycles (Customer → accounts → Account →
 * customer → ...), so without one a small document can ask for a response that grows exponentially
 * with its depth and exhausts the process's memory. Limits are documented in docs/errors.md.
 */
import {
  GraphQLError,
  getNamedType,
  isObjectType,
  Kind,
  type ASTVisitor,
  type FieldNode,
  type GraphQLField,
  type GraphQLNamedType,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import { MAX_PAGE_SIZE } from './pagination.ts';

export interface QueryLimits {
  /** Deepest field nesting allowed (introspection's own fields are not counted). */
  maxDepth: number;
  /** Largest estimated number of fields to resolve (see {@link estimateCost}). */
  maxCost: number;
}

/** The page size the upstream uses when `first` is omitted. */
export const DEFAULT_PAGE_SIZE = 25;

interface Measure {
  depth: number;
  cost: number;
}

/**
 * Builds the rule. An operation over a limit fails validation (`GRAPHQL_VALIDATION_FAILED`, HTTP
 * 400) with a message naming the limit, and its measure in `extensions`.
 */
export function createQueryLimitsRule(limits: QueryLimits): ValidationRule {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(operation) {
      const root =
        operation.operation === 'query'
          ? context.getSchema().getQueryType()
          : operation.operation === 'mutation'
            ? context.getSchema().getMutationType()
            : context.getSchema().getSubscriptionType();
      if (!root) return false;
      const measure = measureSelections(context, operation.selectionSet, root, 1, new Set());
      if (measure.depth > limits.maxDepth) {
        context.reportError(
          new GraphQLError(
            `The operation is nested ${measure.depth} fields deep; the maximum is ${limits.maxDepth}.`,
            { nodes: operation, extensions: { depth: measure.depth, maxDepth: limits.maxDepth } },
          ),
        );
      } else if (measure.cost > limits.maxCost) {
        context.reportError(
          new GraphQLError(
            `The operation could resolve about ${measure.cost} fields; the maximum is ${limits.maxCost}. ` +
              'Ask for smaller pages (`first`) or fewer nested lists.',
            { nodes: operation, extensions: { cost: measure.cost, maxCost: limits.maxCost } },
          ),
        );
      }
      // Nothing below needs visiting: the measure walked the whole operation.
      return false;
    },
  });
}

/**
 * Depth and estimated cost of a selection set, where each field costs 1 per time it is resolved:
 * a connection's children are resolved once per item of its page (`first`, the default page size
 * when omitted, the maximum when given by a variable, whose value validation cannot see).
 */
function measureSelections(
  context: ValidationContext,
  selectionSet: SelectionSetNode,
  parentType: GraphQLNamedType,
  multiplier: number,
  fragmentsSeen: ReadonlySet<string>,
): Measure {
  let depth = 0;
  let cost = 0;
  for (const selection of selectionSet.selections) {
    let inner: Measure;
    if (selection.kind === Kind.FIELD) {
      inner = measureField(context, selection, parentType, multiplier, fragmentsSeen);
    } else {
      let fragmentSet: SelectionSetNode | undefined;
      let typeName: string | undefined;
      let seen = fragmentsSeen;
      if (selection.kind === Kind.INLINE_FRAGMENT) {
        fragmentSet = selection.selectionSet;
        typeName = selection.typeCondition?.name.value;
      } else {
        const name = selection.name.value;
        // Fragment cycles are reported by graphql-js's own rule; here they must only not loop.
        if (fragmentsSeen.has(name)) continue;
        const fragment = context.getFragment(name);
        fragmentSet = fragment?.selectionSet;
        typeName = fragment?.typeCondition.name.value;
        seen = new Set([...fragmentsSeen, name]);
      }
      if (!fragmentSet) continue;
      const type = (typeName && context.getSchema().getType(typeName)) || parentType;
      inner = measureSelections(context, fragmentSet, type, multiplier, seen);
    }
    depth = Math.max(depth, inner.depth);
    cost += inner.cost;
  }
  return { depth, cost };
}

function measureField(
  context: ValidationContext,
  field: FieldNode,
  parentType: GraphQLNamedType,
  multiplier: number,
  fragmentsSeen: ReadonlySet<string>,
): Measure {
  const name = field.name.value;
  // Introspection is bounded by the schema itself, and Sandbox's own query is deeper than any limit
  // a client query needs.
  if (name.startsWith('__')) return { depth: 1, cost: multiplier };
  const definition = isObjectType(parentType) ? parentType.getFields()[name] : undefined;
  if (!field.selectionSet || !definition) return { depth: 1, cost: multiplier };
  const inner = measureSelections(
    context,
    field.selectionSet,
    getNamedType(definition.type),
    multiplier * pageSize(field, definition),
    fragmentsSeen,
  );
  return { depth: inner.depth + 1, cost: multiplier + inner.cost };
}

/** How many items one resolution of `field` may return: a connection's page size, else 1. */
function pageSize(field: FieldNode, definition: GraphQLField<unknown, unknown>): number {
  const isConnection =
    getNamedType(definition.type).name.endsWith('Connection') &&
    definition.args.some((arg) => arg.name === 'first');
  if (!isConnection) return 1;
  const first = field.arguments?.find((arg) => arg.name.value === 'first')?.value;
  if (first === undefined || first.kind === Kind.NULL) return DEFAULT_PAGE_SIZE;
  if (first.kind === Kind.INT) return Math.min(Math.max(Number(first.value), 1), MAX_PAGE_SIZE);
  return MAX_PAGE_SIZE;
}
