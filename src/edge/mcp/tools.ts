/**
 * The MCP endpoint's operation tools: one per named query and mutation of the trusted-documents
 * manifest (`TRUSTED_DOCUMENTS`, the list HTTP enforces), made again whenever the manifest is
 * reloaded (SIGHUP). Subscriptions are left to resources; with no manifest there are no operation
 * tools, and no tool ever runs a document of the caller's own.
 *
 * A tool is named after its operation (a name listed twice gets the first 8 hex digits of its
 * body's SHA-256, so both stay callable and neither silently wins); its description is the
 * operation's documentation comment (the `#` lines right above it in the listed body), or, for a
 * manifest written without comments, the schema's descriptions of the fields it selects at its
 * root; its input schema comes from its variable definitions (`input-schema.ts`). A listed
 * document the schema no longer validates is left out, with one warning, rather than offered and
 * refused at every call.
 */
import { createHash } from 'node:crypto';
import {
  Kind,
  OperationTypeNode,
  parse,
  TokenKind,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type Token,
} from 'graphql';
import type { Logger } from '../../logger.ts';
import { rootFieldNames } from '../../observability/audit-trail.ts';
import type { ReloadableTrustedDocuments } from '../trusted-documents.ts';
import { inputSchemaOf, type ToolInputSchema } from './input-schema.ts';

/** A tool as `tools/list` shows it. */
export interface ToolDefinition {
  readonly name: string;
  readonly title?: string;
  readonly description: string;
  readonly inputSchema: ToolInputSchema;
  readonly annotations?: {
    readonly title?: string;
    readonly readOnlyHint?: boolean;
    readonly destructiveHint?: boolean;
    readonly idempotentHint?: boolean;
    readonly openWorldHint?: boolean;
  };
}

/** A tool that runs one listed operation. */
export interface OperationTool {
  readonly definition: ToolDefinition;
  /** The manifest's id of the document, which the door resolves to its body. */
  readonly documentId: string;
  readonly body: string;
  readonly operationName: string;
  readonly operationType: OperationTypeNode.QUERY | OperationTypeNode.MUTATION;
}

/** The operation tools of the current manifest. */
export interface ToolCatalogue {
  list(): readonly OperationTool[];
  find(name: string): OperationTool | undefined;
  /** Calls `listener` once the tools were made again from a reloaded manifest. */
  onChange(listener: () => void): () => void;
}

/** Longest tool name MCP clients are asked to accept. */
const MAX_TOOL_NAME = 64;
/** Longest description kept: a tool list is read by a model on every turn. */
const MAX_DESCRIPTION = 2_000;

/** Builds the catalogue of `manifest` (none without one), made again on each of its reloads. */
export function createToolCatalogue(options: {
  schema: GraphQLSchema;
  manifest: ReloadableTrustedDocuments | undefined;
  /** Names the catalogue must leave to other tools (the schema tools). */
  reserved: readonly string[];
  logger: Logger;
}): ToolCatalogue {
  const { manifest, logger } = options;
  const listeners = new Set<() => void>();
  const make = () =>
    manifest === undefined
      ? []
      : operationTools(options.schema, manifest.entries(), options.reserved, logger);
  let tools = make();
  let byName = new Map(tools.map((tool) => [tool.definition.name, tool]));
  manifest?.onReload(() => {
    tools = make();
    byName = new Map(tools.map((tool) => [tool.definition.name, tool]));
    logger.info('MCP tools made again from the reloaded manifest', { tools: tools.length });
    for (const listener of listeners) listener();
  });
  return {
    list: () => tools,
    find: (name) => byName.get(name),
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}

/** One candidate tool, before names are made unique. */
interface Candidate {
  readonly documentId: string;
  readonly body: string;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode & { readonly name: { readonly value: string } };
}

function operationTools(
  schema: GraphQLSchema,
  entries: Iterable<readonly [string, string]>,
  reserved: readonly string[],
  logger: Logger,
): OperationTool[] {
  const candidates: Candidate[] = [];
  for (const [documentId, body] of entries) {
    const document = parsedValid(schema, documentId, body, logger);
    if (document === undefined) continue;
    for (const definition of document.definitions) {
      if (definition.kind !== Kind.OPERATION_DEFINITION || definition.name === undefined) continue;
      if (definition.operation === OperationTypeNode.SUBSCRIPTION) continue;
      candidates.push({ documentId, body, document, operation: { ...definition, name: definition.name } });
    }
  }
  const counts = new Map<string, number>();
  for (const { operation } of candidates)
    counts.set(operation.name.value, (counts.get(operation.name.value) ?? 0) + 1);
  return candidates.map((candidate) => {
    const own = candidate.operation.name.value;
    const shared = (counts.get(own) ?? 0) > 1 || reserved.includes(own);
    const name = toolName(own, shared ? sha256Hex(candidate.body).slice(0, 8) : undefined);
    if (shared)
      logger.warn('an operation name is listed twice: its tools carry a part of their body’s hash', {
        operationName: own,
        tool: name,
      });
    return toolOf(schema, candidate, name);
  });
}

/** The listed body parsed and valid against `schema`, or undefined (warned about). */
function parsedValid(
  schema: GraphQLSchema,
  documentId: string,
  body: string,
  logger: Logger,
): DocumentNode | undefined {
  let document: DocumentNode;
  try {
    document = parse(body);
  } catch (error) {
    logger.warn('a listed document does not parse: no MCP tool for it', { documentId, error: String(error) });
    return undefined;
  }
  const [invalid] = validate(schema, document);
  if (invalid === undefined) return document;
  logger.warn('a listed document is not valid against the schema: no MCP tool for it', {
    documentId,
    problem: invalid.message,
  });
  return undefined;
}

function toolName(operationName: string, suffix: string | undefined): string {
  const tail = suffix === undefined ? '' : `_${suffix}`;
  return `${operationName.slice(0, MAX_TOOL_NAME - tail.length)}${tail}`;
}

function toolOf(schema: GraphQLSchema, candidate: Candidate, name: string): OperationTool {
  const { operation } = candidate;
  const operationName = operation.name.value;
  const query = operation.operation === OperationTypeNode.QUERY;
  const description =
    documentationComment(operation) ?? describedBySchema(schema, candidate.document, operation, query);
  return {
    documentId: candidate.documentId,
    body: candidate.body,
    operationName,
    operationType: query ? OperationTypeNode.QUERY : OperationTypeNode.MUTATION,
    definition: {
      name,
      title: operationName,
      description: description.slice(0, MAX_DESCRIPTION),
      inputSchema: inputSchemaOf(schema, candidate.document, operation),
      annotations: {
        title: operationName,
        readOnlyHint: query,
        // A mutation may move money: a client should ask before it runs one.
        destructiveHint: !query,
        idempotentHint: query,
        openWorldHint: false,
      },
    },
  };
}

/** The `#` comment lines right above `operation` in its body (no blank line between), joined. */
function documentationComment(operation: OperationDefinitionNode): string | undefined {
  const lines: string[] = [];
  let above: Token | null | undefined = operation.loc?.startToken.prev;
  let line = operation.loc?.startToken.line ?? 0;
  while (above?.kind === TokenKind.COMMENT && above.line === line - 1) {
    lines.unshift(above.value.trim());
    line = above.line;
    above = above.prev;
  }
  const text = lines.join(' ').trim();
  return text === '' ? undefined : text;
}

/** What the schema says of the fields `operation` selects at its root. */
function describedBySchema(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  query: boolean,
): string {
  const root = query ? schema.getQueryType() : schema.getMutationType();
  const selected = rootFieldNames(operation, document).filter((field) => !field.startsWith('__'));
  const fields = selected.map((field) => {
    const description = root?.getFields()[field]?.description;
    return description ? `\`${field}\`: ${description}` : `\`${field}\``;
  });
  const kind = query ? 'query (it reads, and changes nothing)' : 'mutation (it changes the platform)';
  return `The trusted ${kind} \`${operation.name?.value ?? ''}\`. ${fields.join(' ')}`.trim();
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Whether a tool is one `schema` has: its document validates against it. A contract's schema
 * (`src/graph/audiences.ts`) leaves out the tools whose operations read what it hides, so they are
 * neither listed to its callers nor callable by them, exactly as if they did not exist. Kept per
 * schema and tool: a manifest's reload makes new tool objects, and the old ones are let go.
 */
export function createToolVisibility(): (tool: OperationTool, schema: GraphQLSchema) => boolean {
  const bySchema = new WeakMap<GraphQLSchema, WeakMap<OperationTool, boolean>>();
  return (tool, schema) => {
    let verdicts = bySchema.get(schema);
    if (verdicts === undefined) {
      verdicts = new WeakMap();
      bySchema.set(schema, verdicts);
    }
    let visible = verdicts.get(tool);
    if (visible === undefined) {
      visible = validate(schema, parse(tool.body)).length === 0;
      verdicts.set(tool, visible);
    }
    return visible;
  };
}
