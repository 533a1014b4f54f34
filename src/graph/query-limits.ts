/**
 * The limits that refuse a document before any resolver runs and before any upstream call: what no
 * real screen reaches, but a small hostile document can ask for. The graph has cycles (Customer →
 * accounts → Account → customer → ...) and fragments can spread each other, so without these a
 * document of a few hundred bytes can ask for an answer, or a validation, that grows exponentially.
 *
 * Two layers: GraphQL Armor's rules (aliases with `__schema`/`__type` counted, directives), and the
 * facade's depth and connection-aware cost, the one cost measure, which counts each field once per
 * item its lists can hold: the SDL's `@listSize` (a connection's `first`, else its assumed size, the
 * same model a router in front reads) and each `_entities` representation. Every measure here is
 * linear in the document: a fragment is measured once, whatever the number of its spreads.
 * Limits, defaults and errors are documented in docs/security.md ("Abuse limits").
 */
import { ApolloArmor } from '@escape.tech/graphql-armor';
import {
  GraphQLError,
  getNamedType,
  isInterfaceType,
  isObjectType,
  Kind,
  OperationTypeNode,
  TypeMetaFieldDef,
  type ASTVisitor,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
  type ValueNode,
} from 'graphql';
import { IncrementalDeliveryAtTheGatewayRule } from './incremental-delivery.ts';
import { IdLiteralRule } from './input-strings.ts';
import { MAX_PAGE_SIZE } from './pagination.ts';

export interface QueryLimits {
  /**
   * Deepest field nesting (`QUERY_MAX_DEPTH`): hops through the graph, so Relay's `nodes`, `edges`
   * and `node` wrappers are not counted; `__schema` is not counted, `__type` is.
   */
  maxDepth: number;
  /** Most aliases in one operation (`QUERY_MAX_ALIASES`), introspection aliases included. */
  maxAliases: number;
  /** Most directives in one operation (`QUERY_MAX_DIRECTIVES`). */
  maxDirectives: number;
  /** Most lexical tokens in one document (`QUERY_MAX_TOKENS`), enforced by the parser itself. */
  maxTokens: number;
  /** Largest connection-aware cost (`QUERY_MAX_COST`), see {@link measureOperation}. */
  maxCost: number;
}

/** What one operation would make the facade do. */
export interface OperationMeasure {
  /** Estimated field resolutions: each field once per item its enclosing pages may hold. */
  cost: number;
  /** Deepest nesting of fields, Relay's `nodes`/`edges`/`node` wrappers and `__schema` not counted. */
  depth: number;
}

/**
 * The validation rules of every limit (and the refusal of control characters in ID literals, and of
 * `@defer`/`@stream`, which the gateway serves), for HTTP and every live transport alike. Each
 * refusal is a validation error (`GRAPHQL_VALIDATION_FAILED`) whose message names the limit and the
 * measure.
 */
export function createQueryLimitsRules(limits: QueryLimits): ValidationRule[] {
  // Armor's rules throw by default, which would make `validate` itself throw; reported instead,
  // they join graphql-js's own errors in one answer. Its messages say "Syntax Error", which they
  // are not: the document parsed.
  const report = {
    propagateOnRejection: false,
    onReject: [
      (context: ValidationContext | null, error: GraphQLError) =>
        context?.reportError(
          new GraphQLError(error.message.replace(/^Syntax Error: /, ''), {
            extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
          }),
        ),
    ],
  };
  const armor = new ApolloArmor({
    // Apollo's `parseOptions.maxTokens` enforces the token limit inside the parser (a 400); Armor's
    // would throw from a plugin hook, which Apollo answers with a 500.
    maxTokens: { enabled: false },
    // Suggestions name fields that introspection shows anyway; the messages stay graphql-js's.
    blockFieldSuggestion: { enabled: false },
    // Armor counts every level of the response, Relay's `nodes` wrappers included, so a list of
    // customers with each account's fees is 8 deep to it; the facade's own measure counts hops
    // through the graph, with the same default as Armor's (6).
    maxDepth: { enabled: false },
    maxAliases: { n: limits.maxAliases, allowList: [], ...report },
    maxDirectives: { n: limits.maxDirectives, ...report },
    // One cost measure, set by QUERY_MAX_COST: Armor's fixed model ignores `first`, so it refused
    // small paged queries the facade's measure accepts and accepted larger unpaged ones.
    costLimit: { enabled: false },
  });
  return [
    IncrementalDeliveryAtTheGatewayRule,
    createConnectionLimitsRule(limits),
    ...armor.protect().validationRules,
    IdLiteralRule,
  ];
}

/**
 * The facade's depth and cost limits as a validation rule. Validation cannot see variables, so a
 * `first` or `representations` given by a variable counts at its smallest here;
 * {@link checkOperationCost} measures again with the variables once they are known.
 */
function createConnectionLimitsRule(limits: Pick<QueryLimits, 'maxDepth' | 'maxCost'>): ValidationRule {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(operation) {
      const fragments = new Map<string, FragmentDefinitionNode>();
      for (const definition of context.getDocument().definitions) {
        if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
      }
      const measure = measureOperation(context.getSchema(), fragments, operation, undefined);
      if (measure.depth > limits.maxDepth) {
        context.reportError(
          new GraphQLError(
            `The operation is nested ${measure.depth} fields deep; the maximum is ${limits.maxDepth}.`,
            {
              nodes: operation,
              extensions: {
                code: 'GRAPHQL_VALIDATION_FAILED',
                depth: measure.depth,
                maxDepth: limits.maxDepth,
              },
            },
          ),
        );
      }
      const error = costError(measure, limits.maxCost, operation);
      if (error) context.reportError(error);
      // Nothing below needs visiting: the measure walked the whole operation.
      return false;
    },
  });
}

/**
 * Measures `operationName` of `document` with its variables and answers the error to send when it
 * costs more than `maxCost` (the operation's measure otherwise).
 */
export function checkOperationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | undefined,
  maxCost: number,
): { measure: OperationMeasure; error?: GraphQLError } {
  const known = measuresWithoutVariables.get(operation);
  let measure = known?.schema === schema ? known.measure : undefined;
  if (measure === undefined) {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    }
    const reads = { variables: false };
    measure = measureOperation(schema, fragments, operation, variables ?? {}, reads);
    if (!reads.variables) measuresWithoutVariables.set(operation, { schema, measure });
  }
  return { measure, error: costError(measure, maxCost, operation) };
}

/**
 * The measure of each operation whose cost no variable changes (no `first: $n`, no
 * `representations: $r`), kept per parsed operation: Apollo keeps one parsed document per document
 * text, so a repeated operation is measured once, not per request. An operation whose measure read a
 * variable is measured with each request's variables.
 */
const measuresWithoutVariables = new WeakMap<
  OperationDefinitionNode,
  { schema: GraphQLSchema; measure: OperationMeasure }
>();

function costError(
  measure: OperationMeasure,
  maxCost: number,
  operation: OperationDefinitionNode,
): GraphQLError | undefined {
  if (measure.cost <= maxCost) return undefined;
  return new GraphQLError(
    `The operation could resolve about ${measure.cost} fields; the maximum is ${maxCost}. ` +
      'Ask for smaller pages (`first`) or fewer nested lists.',
    {
      nodes: operation,
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', cost: measure.cost, maxCost, http: { status: 400 } },
    },
  );
}

/**
 * The connection-aware cost of one operation: each field costs 1 per time it is resolved, and the
 * children of a list are resolved once per item it may hold, as its `@listSize` says: the value of a
 * slicing argument (`first`, at most 100) or else the assumed size (25 for a connection, the
 * upstream's default page). `_entities` resolves its selection once per representation.
 *
 * With `variables` undefined (during validation) a value given by a variable counts at its
 * smallest (1), so only what is over the limit whatever the variables is refused there.
 *
 * Linear in the document: the cost is proportional to the multiplier it is measured under, so each
 * fragment is measured once at multiplier 1 and every spread reuses that measure. A fragment cycle
 * (reported by graphql-js's own rule) counts as nothing here instead of looping.
 */
export function measureOperation(
  schema: GraphQLSchema,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | undefined,
  /** Set to `variables: true` when a variable's value counted in the measure. */
  reads: { variables: boolean } = { variables: false },
): OperationMeasure {
  const root =
    operation.operation === OperationTypeNode.QUERY
      ? schema.getQueryType()
      : operation.operation === OperationTypeNode.MUTATION
        ? schema.getMutationType()
        : schema.getSubscriptionType();
  if (!root) return { cost: 0, depth: 0 };
  /** Fragment name → its measure at multiplier 1 (`null` while being measured: a cycle). */
  const fragmentMeasures = new Map<string, Measure | null>();

  const fragmentMeasure = (name: string, parentType: GraphQLNamedType): Measure => {
    const known = fragmentMeasures.get(name);
    if (known !== undefined) return known ?? NOTHING;
    const fragment = fragments.get(name);
    if (!fragment) return NOTHING;
    fragmentMeasures.set(name, null);
    const type = schema.getType(fragment.typeCondition.name.value) ?? parentType;
    const measure = selectionsMeasure(fragment.selectionSet, type, 1);
    fragmentMeasures.set(name, measure);
    return measure;
  };

  const selectionsMeasure = (
    selectionSet: SelectionSetNode,
    parentType: GraphQLNamedType,
    multiplier: number,
  ): Measure => {
    let cost = 0;
    let depth = 0;
    for (const selection of selectionSet.selections) {
      let inner: Measure;
      if (selection.kind === Kind.FIELD) {
        inner = fieldMeasure(selection, parentType, multiplier);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const typeName = selection.typeCondition?.name.value;
        const type = (typeName === undefined ? undefined : schema.getType(typeName)) ?? parentType;
        inner = selectionsMeasure(selection.selectionSet, type, multiplier);
      } else {
        const fragment = fragmentMeasure(selection.name.value, parentType);
        inner = { cost: multiplier * fragment.cost, depth: fragment.depth };
      }
      cost += inner.cost;
      depth = Math.max(depth, inner.depth);
    }
    return { cost, depth };
  };

  const fieldMeasure = (field: FieldNode, parentType: GraphQLNamedType, multiplier: number): Measure => {
    const name = field.name.value;
    // The whole schema's description is bounded by the schema itself (Sandbox's introspection query
    // is deeper than any client query); its aliases are limited by the alias rule.
    if (name === '__schema') return { cost: multiplier, depth: 0 };
    const definition =
      name === '__type'
        ? TypeMetaFieldDef
        : isObjectType(parentType) || isInterfaceType(parentType)
          ? parentType.getFields()[name]
          : undefined;
    if (!field.selectionSet || !definition) return { cost: multiplier, depth: 1 };
    const items = itemsPerResolution(field, definition, variables, reads);
    const inner = selectionsMeasure(field.selectionSet, getNamedType(definition.type), multiplier * items);
    return {
      cost: multiplier + inner.cost,
      depth: inner.depth + (isConnectionWrapper(parentType, name) ? 0 : 1),
    };
  };

  const measure = selectionsMeasure(operation.selectionSet, root, 1);
  return measure;
}

interface Measure {
  cost: number;
  depth: number;
}

const NOTHING: Measure = { cost: 0, depth: 0 };

/**
 * Whether `field` of `parentType` is a Relay wrapper (`nodes`, `edges` of a connection, `node` of
 * an edge): a level of the response but not a hop of the graph, so not a level of depth.
 */
function isConnectionWrapper(parentType: GraphQLNamedType, field: string): boolean {
  if (parentType.name.endsWith('Connection')) return field === 'nodes' || field === 'edges';
  return parentType.name.endsWith('Edge') && field === 'node';
}

/** How many items one resolution of `field` may return: its `@listSize`, the representations, else 1. */
function itemsPerResolution(
  field: FieldNode,
  definition: GraphQLField<unknown, unknown>,
  variables: Readonly<Record<string, unknown>> | undefined,
  reads: { variables: boolean },
): number {
  if (definition.name === '_entities') {
    const representations = argumentValue(field, 'representations', variables, reads);
    return Array.isArray(representations) ? Math.max(representations.length, 1) : 1;
  }
  const listSize = listSizeOf(definition);
  if (!listSize) return 1;
  for (const argument of listSize.slicingArguments) {
    const value = argumentValue(field, argument, variables, reads);
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isFinite(value)) return 1;
    return Math.min(Math.max(Math.trunc(value), 1), MAX_PAGE_SIZE);
  }
  return listSize.assumedSize;
}

/** What a field's `@listSize` declares (Federation's demand-control directive, also read by routers). */
interface ListSize {
  /** Items assumed when no slicing argument is given (a connection's default page size). */
  assumedSize: number;
  /** Arguments whose value is the number of items (`first`). */
  slicingArguments: readonly string[];
}

const listSizes = new WeakMap<GraphQLField<unknown, unknown>, ListSize | null>();

/** The `@listSize` of `definition` as written in the SDL, read once per field. */
function listSizeOf(definition: GraphQLField<unknown, unknown>): ListSize | undefined {
  let known = listSizes.get(definition);
  if (known === undefined) {
    const directive = definition.astNode?.directives?.find((node) => node.name.value === 'listSize');
    known = null;
    if (directive) {
      let assumedSize = 1;
      let slicingArguments: string[] = [];
      for (const argument of directive.arguments ?? []) {
        if (argument.name.value === 'assumedSize' && argument.value.kind === Kind.INT)
          assumedSize = Number(argument.value.value);
        if (argument.name.value === 'slicingArguments' && argument.value.kind === Kind.LIST)
          slicingArguments = argument.value.values.flatMap((value) =>
            value.kind === Kind.STRING ? [value.value] : [],
          );
      }
      known = { assumedSize, slicingArguments };
    }
    listSizes.set(definition, known);
  }
  return known ?? undefined;
}

/**
 * The value of argument `name` of `field`: a literal, or a variable's value when `variables` is
 * known. Undefined when absent; `NaN` when it depends on variables not known yet.
 */
function argumentValue(
  field: FieldNode,
  name: string,
  variables: Readonly<Record<string, unknown>> | undefined,
  reads: { variables: boolean },
): unknown {
  const node = field.arguments?.find((arg) => arg.name.value === name)?.value;
  if (node === undefined) return undefined;
  return literalValue(node, variables, reads);
}

function literalValue(
  node: ValueNode,
  variables: Readonly<Record<string, unknown>> | undefined,
  reads: { variables: boolean },
): unknown {
  switch (node.kind) {
    case Kind.VARIABLE:
      reads.variables = true;
      return variables === undefined ? Number.NaN : variables[node.name.value];
    case Kind.INT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values;
    default:
      return Number.NaN;
  }
}
