/**
 * What one POST to the MCP endpoint asks of the door, read from its JSON-RPC message before the SDK
 * sees it (the HTTP adapter reads a GraphQL request the same way, `http-request.ts`): a call of an
 * operation tool is that tool's listed document with the call's arguments as its variables; a
 * resource read, the resource's document; a subscription, a live connection; anything else (the
 * handshake, lists, the schema tools, notifications) no operation at all.
 */
import type { OperationRequest } from '../door/door.ts';
import { parseResourceUri, type McpResourceRef } from './resources.ts';
import type { OperationTool, ToolCatalogue } from './tools.ts';

/** What a message asks of the door. */
export type MessagePlan =
  /** No operation: the request spends its budget, and its handler answers it. */
  | { readonly kind: 'plain'; readonly initialize: boolean }
  /** An operation tool's call; `problem` when its arguments cannot be its variables. */
  | {
      readonly kind: 'tool';
      readonly tool: OperationTool;
      readonly request: OperationRequest | undefined;
      readonly problem?: string;
    }
  | { readonly kind: 'read'; readonly ref: McpResourceRef; readonly request: OperationRequest }
  | { readonly kind: 'subscribe'; readonly ref: McpResourceRef }
  /** Not one JSON-RPC message (a batch, or not an object). */
  | { readonly kind: 'invalid'; readonly message: string };

/** Reads the body of a POST (already parsed as JSON). */
export function readMessage(body: unknown, catalogue: ToolCatalogue): MessagePlan {
  if (Array.isArray(body)) {
    return { kind: 'invalid', message: 'Send one JSON-RPC message per request: batches are not taken.' };
  }
  if (!isRecord(body)) return { kind: 'invalid', message: 'The body must be one JSON-RPC message.' };
  const params = isRecord(body['params']) ? body['params'] : {};
  switch (body['method']) {
    case 'tools/call':
      return toolCall(params, catalogue);
    case 'resources/read':
    case 'resources/subscribe': {
      const ref = typeof params['uri'] === 'string' ? parseResourceUri(params['uri']) : undefined;
      if (ref === undefined) return { kind: 'plain', initialize: false };
      if (body['method'] === 'resources/subscribe') return { kind: 'subscribe', ref };
      return { kind: 'read', ref, request: resourceRequest(ref) };
    }
    default:
      return { kind: 'plain', initialize: body['method'] === 'initialize' };
  }
}

/** The door's request for `ref`: its document by id (and text, for a facade without a manifest). */
function resourceRequest(ref: McpResourceRef): OperationRequest {
  return {
    documentId: ref.kind.documentId,
    query: ref.kind.document,
    operationName: ref.kind.operationName,
    variables: { customerId: ref.customerId },
  };
}

function toolCall(params: Record<string, unknown>, catalogue: ToolCatalogue): MessagePlan {
  const tool = typeof params['name'] === 'string' ? catalogue.find(params['name']) : undefined;
  if (tool === undefined) return { kind: 'plain', initialize: false };
  const args = params['arguments'] ?? {};
  if (!isRecord(args))
    return { kind: 'tool', tool, request: undefined, problem: '`arguments` must be an object.' };
  // Unknown arguments would be dropped without a word by GraphQL: a misspelt one is refused instead.
  const declared = Object.keys(tool.definition.inputSchema.properties);
  const unknown = Object.keys(args).filter((name) => !declared.includes(name));
  if (unknown.length > 0) {
    const listed = declared.length === 0 ? 'none' : declared.join(', ');
    return {
      kind: 'tool',
      tool,
      request: undefined,
      problem: `Unknown argument${unknown.length > 1 ? 's' : ''} ${unknown.map((name) => JSON.stringify(name.slice(0, 64))).join(', ')}: this tool takes ${listed}.`,
    };
  }
  return {
    kind: 'tool',
    tool,
    request: {
      documentId: tool.documentId,
      query: tool.body,
      operationName: tool.operationName,
      variables: args,
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
