/**
 * Which fields a selection asks of one object type, worked out the way graphql-js will execute it:
 * fields merged by response key, inline fragments and named fragments whose type condition applies
 * to the type, `@skip` and `@include` evaluated with the operation's variables, and each field's
 * arguments coerced exactly as its resolver will receive them. The look-ahead (`look-ahead.ts`)
 * reads a field's selection this way before the record the fields hang off has arrived.
 */
import {
  getArgumentValues,
  getDirectiveValues,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  isAbstractType,
  Kind,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLObjectType,
  type GraphQLSchema,
  type NamedTypeNode,
  type SelectionNode,
  type SelectionSetNode,
} from 'graphql';

/** What a selection is read against: the parts of a resolver's `info` that give it meaning. */
export interface SelectionScope {
  readonly schema: GraphQLSchema;
  readonly fragments: Readonly<Record<string, FragmentDefinitionNode>>;
  readonly variableValues: Readonly<Record<string, unknown>>;
}

/** One field a selection asks for, under one response key. */
export interface SelectedField {
  /** The field's name in the schema, not its alias. */
  readonly name: string;
  /** Its arguments, coerced and defaulted as its resolver receives them. */
  readonly args: Record<string, unknown>;
  /** Every node asking for it under this response key: their sub-selections merge, as in execution. */
  readonly nodes: readonly FieldNode[];
}

/**
 * The fields that the sub-selections of `fieldNodes` ask of `type`, keeping only those `wanted`
 * accepts (arguments are coerced for those alone). A field whose arguments cannot be coerced is
 * left out: its own resolver will meet the same problem and report it.
 */
export function selectedFields(
  scope: SelectionScope,
  fieldNodes: readonly FieldNode[],
  type: GraphQLObjectType,
  wanted: (fieldName: string) => boolean,
): SelectedField[] {
  const byResponseKey = new Map<string, FieldNode[]>();
  const visitedFragments = new Set<string>();
  for (const node of fieldNodes) {
    if (node.selectionSet) collect(scope, node.selectionSet, type, byResponseKey, visitedFragments);
  }
  const fields: SelectedField[] = [];
  const definitions = type.getFields();
  for (const nodes of byResponseKey.values()) {
    const first = nodes[0]!;
    const name = first.name.value;
    const definition = definitions[name];
    if (!definition || !wanted(name)) continue;
    try {
      fields.push({ name, args: getArgumentValues(definition, first, scope.variableValues), nodes });
    } catch {
      // Left to the field's resolver, which reports it.
    }
  }
  return fields;
}

/** Adds the fields of `selectionSet` that apply to `type` to `byResponseKey`, as graphql-js collects them. */
function collect(
  scope: SelectionScope,
  selectionSet: SelectionSetNode,
  type: GraphQLObjectType,
  byResponseKey: Map<string, FieldNode[]>,
  visitedFragments: Set<string>,
): void {
  for (const selection of selectionSet.selections) {
    if (!isIncluded(scope, selection)) continue;
    switch (selection.kind) {
      case Kind.FIELD: {
        const responseKey = selection.alias?.value ?? selection.name.value;
        const nodes = byResponseKey.get(responseKey);
        if (nodes) nodes.push(selection);
        else byResponseKey.set(responseKey, [selection]);
        break;
      }
      case Kind.INLINE_FRAGMENT:
        if (appliesTo(scope, selection.typeCondition, type)) {
          collect(scope, selection.selectionSet, type, byResponseKey, visitedFragments);
        }
        break;
      case Kind.FRAGMENT_SPREAD: {
        const name = selection.name.value;
        if (visitedFragments.has(name)) break;
        visitedFragments.add(name);
        const fragment = scope.fragments[name];
        if (fragment && appliesTo(scope, fragment.typeCondition, type)) {
          collect(scope, fragment.selectionSet, type, byResponseKey, visitedFragments);
        }
        break;
      }
    }
  }
}

/** `@skip(if: true)` and `@include(if: false)` leave a selection out. */
function isIncluded(scope: SelectionScope, selection: SelectionNode): boolean {
  if (!selection.directives?.length) return true;
  const skip = getDirectiveValues(GraphQLSkipDirective, selection, scope.variableValues);
  if (skip?.if === true) return false;
  const include = getDirectiveValues(GraphQLIncludeDirective, selection, scope.variableValues);
  return include?.if !== false;
}

/** Whether a fragment with this type condition applies to an object of `type`. */
function appliesTo(
  scope: SelectionScope,
  condition: NamedTypeNode | undefined,
  type: GraphQLObjectType,
): boolean {
  if (!condition) return true;
  const conditionType = scope.schema.getType(condition.name.value);
  if (conditionType === type) return true;
  return (
    conditionType !== undefined &&
    isAbstractType(conditionType) &&
    scope.schema.isSubType(conditionType, type)
  );
}
