/**
 * Contracts: the schema one audience is served, filtered from the whole SDL by Federation 2's
 * `@tag` directives, as GraphOS and Cosmo contracts filter theirs. A contract names tags to exclude
 * (anything carrying one is gone: a type, a field, an argument, an enum value, an input field) and,
 * optionally, tags to include (then a field of an object or interface type stays only when it or its
 * type carries one). What is left is made whole again: a field whose type is gone goes too, an
 * argument or input field whose type is gone goes (its field, or its input type, when it was
 * required), a type left without fields, values or members goes, and so does every type no root
 * field and no entity reaches any more. The result is an ordinary subgraph SDL: the facade builds a
 * schema from it for the callers of that contract (`audiences.ts`), `npm run supergraph -- --contract`
 * composes it, and `npm run schema:check` judges each contract's changes on its own.
 *
 * The contracts are listed in `schema/contracts.json`, beside the SDL they filter, and reviewed
 * with it (docs/schema-conventions.md, "Contracts per audience").
 *
 * Longer than 400 lines: the filtering and the making whole again are two passes over the same
 * eight kinds of definition, each kind's case beside its twin, read and changed together.
 */
import { readFileSync } from 'node:fs';
import {
  Kind,
  type ConstDirectiveNode,
  type DefinitionNode,
  type DocumentNode,
  type FieldDefinitionNode,
  type InputValueDefinitionNode,
  type NamedTypeNode,
  type TypeNode,
} from 'graphql';

/** One contract of `schema/contracts.json`. */
export interface Contract {
  /** What a token's contract claim names (`AUTH_CONTRACT_CLAIM`), e.g. `partner`. */
  readonly name: string;
  /** Who it is for, in a sentence. */
  readonly description: string;
  /** Tags whose elements are removed; exclusion wins over inclusion. */
  readonly exclude: readonly string[];
  /** When not empty: a field of an object or interface type stays only when it or its type carries one. */
  readonly include: readonly string[];
}

/** Where the contracts are listed. */
export const CONTRACTS_FILE = new URL('../../schema/contracts.json', import.meta.url);

/** A contract's name: what a token claim carries and a command line names. */
const CONTRACT_NAME = /^[a-z][a-z0-9-]{0,62}$/;
/** A tag's name, as Federation's `@tag(name:)` allows it. */
const TAG_NAME = /^[A-Za-z_][A-Za-z0-9_\-/]{0,127}$/;

/** Reads and checks `schema/contracts.json`: `{ "contracts": [{ "name", "description", "exclude"?, "include"? }] }`. */
export function readContracts(file: URL | string = CONTRACTS_FILE): Contract[] {
  const where = typeof file === 'string' ? file : file.pathname;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`${where} cannot be read as JSON: ${(error as Error).message}`);
  }
  const listed = (value as { contracts?: unknown } | null)?.contracts;
  if (!Array.isArray(listed)) throw new Error(`${where} must hold { "contracts": [...] }`);
  const names = new Set<string>();
  return listed.map((entry: unknown, index) => {
    const { name, description, exclude = [], include = [] } = (entry ?? {}) as Record<string, unknown>;
    const at = `${where} contracts[${index}]`;
    if (typeof name !== 'string' || !CONTRACT_NAME.test(name)) {
      throw new Error(`${at}: "name" must be lower-case letters, digits and dashes, starting with a letter`);
    }
    if (names.has(name)) throw new Error(`${at}: the contract ${name} is listed twice`);
    names.add(name);
    if (typeof description !== 'string' || description.trim() === '') {
      throw new Error(`${at}: "description" must say who the contract is for`);
    }
    return {
      name,
      description,
      exclude: tagList(exclude, `${at}.exclude`),
      include: tagList(include, `${at}.include`),
    };
  });
}

function tagList(value: unknown, at: string): string[] {
  if (!Array.isArray(value) || !value.every((tag) => typeof tag === 'string' && TAG_NAME.test(tag))) {
    throw new Error(`${at} must be a list of tag names`);
  }
  return [...new Set(value as string[])];
}

/** Whether `contract` filters nothing: its schema is the whole one. */
export function isWholeSchema(contract: Pick<Contract, 'exclude' | 'include'>): boolean {
  return contract.exclude.length === 0 && contract.include.length === 0;
}

/** The tags every `@tag` of `document` names, to tell whether a schema carries a contract's tags at all. */
export function tagsIn(document: DocumentNode): Set<string> {
  const found = new Set<string>();
  const visitNode = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const each of node) visitNode(each);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    const directive = node as Partial<ConstDirectiveNode>;
    if (directive.kind === Kind.DIRECTIVE) {
      const tag = tagOf(directive as ConstDirectiveNode);
      if (tag !== undefined) found.add(tag);
      return;
    }
    for (const [key, child] of Object.entries(node)) if (key !== 'loc') visitNode(child);
  };
  visitNode(document.definitions);
  return found;
}

/** The name `directive` tags with, when it is Federation's `@tag` (imported or namespaced). */
function tagOf(directive: ConstDirectiveNode): string | undefined {
  const name = directive.name.value;
  if (name !== 'tag' && name !== 'federation__tag') return undefined;
  const argument = directive.arguments?.find((each) => each.name.value === 'name');
  return argument?.value.kind === Kind.STRING ? argument.value.value : undefined;
}

function tagsOfNode(node: { readonly directives?: readonly ConstDirectiveNode[] | undefined }): string[] {
  return (node.directives ?? []).flatMap((directive) => tagOf(directive) ?? []);
}

/** A type definition or extension: the nodes a contract filters. */
type TypeNodeOf = Extract<DefinitionNode, { readonly name: { readonly value: string } }> & {
  readonly kind: (typeof TYPE_KINDS)[number];
};

const TYPE_KINDS = [
  Kind.OBJECT_TYPE_DEFINITION,
  Kind.OBJECT_TYPE_EXTENSION,
  Kind.INTERFACE_TYPE_DEFINITION,
  Kind.INTERFACE_TYPE_EXTENSION,
  Kind.INPUT_OBJECT_TYPE_DEFINITION,
  Kind.INPUT_OBJECT_TYPE_EXTENSION,
  Kind.ENUM_TYPE_DEFINITION,
  Kind.ENUM_TYPE_EXTENSION,
  Kind.UNION_TYPE_DEFINITION,
  Kind.UNION_TYPE_EXTENSION,
  Kind.SCALAR_TYPE_DEFINITION,
  Kind.SCALAR_TYPE_EXTENSION,
] as const;

function isTypeNode(definition: DefinitionNode): definition is TypeNodeOf {
  return (TYPE_KINDS as readonly string[]).includes(definition.kind);
}

const BUILT_IN_SCALARS = new Set(['String', 'Int', 'Float', 'Boolean', 'ID']);
const ROOT_TYPES = ['Query', 'Mutation', 'Subscription'];

/** The named type under lists and non-null. */
function namedOf(type: TypeNode): string {
  return type.kind === Kind.NAMED_TYPE ? type.name.value : namedOf(type.type);
}

/** An argument or input field a caller must give: non-null without a default. */
function isRequired(value: InputValueDefinitionNode): boolean {
  return value.type.kind === Kind.NON_NULL_TYPE && value.defaultValue === undefined;
}

/**
 * `document` (the SDL of `schema/graph/`, or any subgraph's) as `contract`'s audience sees it. The
 * schema definition, directive definitions and every node not filtered keep their locations, so a
 * schema built from the result still points at the files.
 */
export function contractTypeDefs(
  document: DocumentNode,
  contract: Pick<Contract, 'exclude' | 'include'>,
): DocumentNode {
  if (isWholeSchema(contract)) return document;
  const exclude = new Set(contract.exclude);
  const include = new Set(contract.include);
  const excluded = (tags: readonly string[]) => tags.some((tag) => exclude.has(tag));
  const included = (tags: readonly string[]) => tags.some((tag) => include.has(tag));
  const typeTags = new Map<string, string[]>();
  for (const definition of document.definitions) {
    if (!isTypeNode(definition)) continue;
    const name = definition.name.value;
    typeTags.set(name, [...(typeTags.get(name) ?? []), ...tagsOfNode(definition)]);
  }
  const tagged = document.definitions.flatMap((definition): DefinitionNode[] => {
    if (!isTypeNode(definition)) return [definition];
    const ownTags = typeTags.get(definition.name.value) ?? [];
    if (excluded(ownTags)) return [];
    const keepField = (field: FieldDefinitionNode) => {
      const tags = tagsOfNode(field);
      return !excluded(tags) && (include.size === 0 || included(tags) || included(ownTags));
    };
    return [withoutTagged(definition, keepField, (node) => !excluded(tagsOfNode(node)))];
  });
  return pruneUnreachable(completeTypes(tagged));
}

/** `definition` without the fields `keepField` refuses and the arguments, values and input fields `keep` refuses. */
function withoutTagged(
  definition: TypeNodeOf,
  keepField: (field: FieldDefinitionNode) => boolean,
  keep: (node: { readonly directives?: readonly ConstDirectiveNode[] | undefined }) => boolean,
): TypeNodeOf {
  switch (definition.kind) {
    case Kind.OBJECT_TYPE_DEFINITION:
    case Kind.OBJECT_TYPE_EXTENSION:
    case Kind.INTERFACE_TYPE_DEFINITION:
    case Kind.INTERFACE_TYPE_EXTENSION: {
      const fields = (definition.fields ?? [])
        .filter(keepField)
        .map((field) => ({ ...field, arguments: (field.arguments ?? []).filter(keep) }));
      return { ...definition, fields };
    }
    case Kind.INPUT_OBJECT_TYPE_DEFINITION:
    case Kind.INPUT_OBJECT_TYPE_EXTENSION:
      return { ...definition, fields: (definition.fields ?? []).filter(keep) };
    case Kind.ENUM_TYPE_DEFINITION:
    case Kind.ENUM_TYPE_EXTENSION:
      return { ...definition, values: (definition.values ?? []).filter(keep) };
    default:
      return definition;
  }
}

/**
 * Removes, until nothing changes, what refers to a type that is gone: fields of that type, optional
 * arguments and input fields of it (the field or input type that required one), union members and
 * interfaces; then every type left with no field, value or member.
 */
function completeTypes(definitions: readonly DefinitionNode[]): DefinitionNode[] {
  let current = [...definitions];
  for (;;) {
    const defined = new Set(BUILT_IN_SCALARS);
    for (const definition of current) {
      if (isTypeNode(definition) && !definition.kind.endsWith('Extension'))
        defined.add(definition.name.value);
    }
    const has = (type: TypeNode) => defined.has(namedOf(type));
    const brokenInputs = new Set<string>();
    let next = current.map((definition) => {
      if (!isTypeNode(definition)) return definition;
      return completeType(definition, has, () => brokenInputs.add(definition.name.value));
    });
    next = next.filter((definition) => !(isTypeNode(definition) && brokenInputs.has(definition.name.value)));
    next = withoutEmptyTypes(next);
    if (sameDefinitions(current, next)) return next;
    current = next;
  }
}

function completeType(
  definition: TypeNodeOf,
  has: (type: TypeNode) => boolean,
  broken: () => void,
): TypeNodeOf {
  switch (definition.kind) {
    case Kind.OBJECT_TYPE_DEFINITION:
    case Kind.OBJECT_TYPE_EXTENSION:
    case Kind.INTERFACE_TYPE_DEFINITION:
    case Kind.INTERFACE_TYPE_EXTENSION: {
      const fields = (definition.fields ?? [])
        .filter(
          (field) =>
            has(field.type) && (field.arguments ?? []).every((arg) => has(arg.type) || !isRequired(arg)),
        )
        .map((field) => {
          const args = field.arguments ?? [];
          const kept = args.filter((arg) => has(arg.type));
          return kept.length === args.length ? field : { ...field, arguments: kept };
        });
      const interfaces = (definition.interfaces ?? []).filter((named: NamedTypeNode) => has(named));
      return sameNodes(fields, definition.fields) && sameNodes(interfaces, definition.interfaces)
        ? definition
        : { ...definition, fields, interfaces };
    }
    case Kind.INPUT_OBJECT_TYPE_DEFINITION:
    case Kind.INPUT_OBJECT_TYPE_EXTENSION: {
      const fields = definition.fields ?? [];
      if (fields.some((field) => !has(field.type) && isRequired(field))) broken();
      const kept = fields.filter((field) => has(field.type));
      return kept.length === fields.length ? definition : { ...definition, fields: kept };
    }
    case Kind.UNION_TYPE_DEFINITION:
    case Kind.UNION_TYPE_EXTENSION: {
      const types = (definition.types ?? []).filter((named) => has(named));
      return sameNodes(types, definition.types) ? definition : { ...definition, types };
    }
    default:
      return definition;
  }
}

/** Whether `kept` holds exactly the nodes of `before`: nothing removed, nothing rebuilt. */
function sameNodes(kept: readonly unknown[], before: readonly unknown[] | undefined): boolean {
  const nodes = before ?? [];
  return kept.length === nodes.length && kept.every((node, index) => node === nodes[index]);
}

function sameDefinitions(a: readonly DefinitionNode[], b: readonly DefinitionNode[]): boolean {
  return a.length === b.length && a.every((definition, index) => definition === b[index]);
}

/** The members a type node holds: fields, values or union members (a scalar holds itself). */
function membersOf(definition: TypeNodeOf): number {
  switch (definition.kind) {
    case Kind.ENUM_TYPE_DEFINITION:
    case Kind.ENUM_TYPE_EXTENSION:
      return definition.values?.length ?? 0;
    case Kind.UNION_TYPE_DEFINITION:
    case Kind.UNION_TYPE_EXTENSION:
      return definition.types?.length ?? 0;
    case Kind.SCALAR_TYPE_DEFINITION:
    case Kind.SCALAR_TYPE_EXTENSION:
      return 1;
    default:
      return definition.fields?.length ?? 0;
  }
}

/** Every node of a type whose nodes together hold no member, and extensions of types not defined. */
function withoutEmptyTypes(definitions: readonly DefinitionNode[]): DefinitionNode[] {
  const members = new Map<string, number>();
  for (const definition of definitions) {
    if (!isTypeNode(definition)) continue;
    const name = definition.name.value;
    members.set(name, (members.get(name) ?? 0) + membersOf(definition));
  }
  return definitions.filter((definition) => {
    if (!isTypeNode(definition)) return true;
    if ((members.get(definition.name.value) ?? 0) === 0) return false;
    // An extension left with nothing of its own would print as `extend type X`, which does not parse.
    return (
      !definition.kind.endsWith('Extension') ||
      membersOf(definition) > 0 ||
      (definition.directives ?? []).length > 0 ||
      ('interfaces' in definition && (definition.interfaces ?? []).length > 0)
    );
  });
}

/**
 * Removes the types nothing reaches any more: from the root types, the entities (`@key`: a gateway
 * reaches them through `_entities`) and the directive definitions' arguments, following fields,
 * arguments, input fields, union members, interfaces and every implementation of a reached interface.
 */
function pruneUnreachable(definitions: readonly DefinitionNode[]): DocumentNode {
  const nodesOf = new Map<string, TypeNodeOf[]>();
  const implementations = new Map<string, Set<string>>();
  const start: string[] = [...ROOT_TYPES];
  for (const definition of definitions) {
    if (definition.kind === Kind.DIRECTIVE_DEFINITION) {
      start.push(...(definition.arguments ?? []).map((arg) => namedOf(arg.type)));
    }
    if (!isTypeNode(definition)) continue;
    const name = definition.name.value;
    nodesOf.set(name, [...(nodesOf.get(name) ?? []), definition]);
    if ((definition.directives ?? []).some((directive) => directive.name.value === 'key')) start.push(name);
    if ('interfaces' in definition) {
      for (const named of definition.interfaces ?? []) {
        const set = implementations.get(named.name.value) ?? new Set<string>();
        set.add(name);
        implementations.set(named.name.value, set);
      }
    }
  }
  const reached = new Set<string>();
  const queue = start.filter((name) => nodesOf.has(name));
  while (queue.length > 0) {
    const name = queue.pop()!;
    if (reached.has(name)) continue;
    reached.add(name);
    for (const node of nodesOf.get(name) ?? []) queue.push(...referencesOf(node));
    queue.push(...(implementations.get(name) ?? []));
  }
  return {
    kind: Kind.DOCUMENT,
    definitions: definitions.filter(
      (definition) => !isTypeNode(definition) || reached.has(definition.name.value),
    ),
  };
}

/** The named types one type node refers to. */
function referencesOf(definition: TypeNodeOf): string[] {
  switch (definition.kind) {
    case Kind.OBJECT_TYPE_DEFINITION:
    case Kind.OBJECT_TYPE_EXTENSION:
    case Kind.INTERFACE_TYPE_DEFINITION:
    case Kind.INTERFACE_TYPE_EXTENSION:
      return [
        ...(definition.interfaces ?? []).map((named) => named.name.value),
        ...(definition.fields ?? []).flatMap((field) => [
          namedOf(field.type),
          ...(field.arguments ?? []).map((arg) => namedOf(arg.type)),
        ]),
      ];
    case Kind.INPUT_OBJECT_TYPE_DEFINITION:
    case Kind.INPUT_OBJECT_TYPE_EXTENSION:
      return (definition.fields ?? []).map((field) => namedOf(field.type));
    case Kind.UNION_TYPE_DEFINITION:
    case Kind.UNION_TYPE_EXTENSION:
      return (definition.types ?? []).map((named) => named.name.value);
    default:
      return [];
  }
}

/** The contracts a deployment serves, and the one a token that names none is served. */
export interface ContractsConfig {
  /** `schema/contracts.json`. */
  readonly contracts: readonly Contract[];
  /**
   * `CONTRACT_DEFAULT`: the contract of a caller whose token names none (an anonymous request, a
   * caller's own key, `AUTH_MODE=none` too); unset, such a caller is served the whole schema.
   */
  readonly defaultContract: string | undefined;
}

/** Reads `schema/contracts.json` and `CONTRACT_DEFAULT`, reporting a problem of either through `report`. */
export function readContractsConfig(
  env: Readonly<Record<string, string | undefined>>,
  report: (name: string, problem: string) => void,
  file: URL | string = CONTRACTS_FILE,
): ContractsConfig {
  let contracts: Contract[] = [];
  try {
    contracts = readContracts(file);
  } catch (error) {
    report('schema/contracts.json', (error as Error).message);
  }
  const given = env['CONTRACT_DEFAULT']?.trim();
  const defaultContract = given === undefined || given === '' ? undefined : given;
  if (defaultContract !== undefined && !contracts.some((contract) => contract.name === defaultContract)) {
    report(
      'CONTRACT_DEFAULT',
      `names no contract of schema/contracts.json (${contracts.map((contract) => contract.name).join(', ') || 'none'})`,
    );
  }
  return { contracts, defaultContract };
}
