/**
 * One session's MCP server (the SDK's low-level `Server`): what each request of the protocol
 * answers, from what the endpoint's adapter (`endpoint.ts`) already had the door decide for the
 * HTTP request that carried it (its {@link McpCall}, handed over as the request's auth info). No
 * handler admits anything itself: a tool call runs the operation the door admitted for that very
 * POST, a read the resource's document it admitted, a subscription goes through the live
 * connections' admission; `tools/list` and the schema tools read what the caller may see.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { Caller } from '../../auth/caller.ts';
import type { AdmittedOperation, Connection, StepRefusal } from '../door/door.ts';
import { answerError, resourceNotFound, watchResource, type ResourceWatchParts } from './resource-watch.ts';
import { MCP_RESOURCE_KINDS, resourceUriOf, type McpResourceRef } from './resources.ts';
import {
  runOperation,
  type OperationAnswer,
  type OperationRunnerParts,
  type RequestIds,
} from './run-operation.ts';
import type { SchemaTools } from './schema-tools.ts';
import type { McpSession } from './sessions.ts';
import type { OperationTool, ToolCatalogue } from './tools.ts';

/** What the door decided for one HTTP request of the endpoint, handed to the request's handler. */
export interface McpCall {
  readonly connection: Connection;
  readonly caller: Caller;
  readonly ids: RequestIds;
  /**
   * The operation tool the request calls, and the door's verdict on its operation; or why its
   * arguments could not be its variables (then the door was asked for no operation).
   */
  readonly tool?: {
    readonly tool: OperationTool;
    readonly operation?: AdmittedOperation | StepRefusal | undefined;
    readonly problem?: string | undefined;
  };
  /** The resource the request reads, and the door's verdict on its document. */
  readonly read?: { readonly ref: McpResourceRef; readonly operation: AdmittedOperation | StepRefusal };
  /** The resource the request subscribes to; `connection` is then a live one. */
  readonly subscribe?: McpResourceRef;
}

/** What every session's server is built from. */
export interface SessionServerParts {
  readonly catalogue: ToolCatalogue;
  readonly schemaTools: SchemaTools;
  /** Whether `caller`'s schema (its contract's) has `tool`: only then is it listed and called. */
  readonly toolIsServedTo: (tool: OperationTool, caller: Caller) => boolean;
  readonly runner: OperationRunnerParts;
  readonly watch: ResourceWatchParts;
}

/** How the server names itself in `initialize`. */
const SERVER_INFO = {
  name: 'platform-graphql-facade',
  title: 'Customer and Account Platform',
  version: '1.0.0',
};

/** What the server tells an agent about itself in `initialize`. */
const INSTRUCTIONS =
  'Tools run the trusted operations of the Customer and Account Platform API (its GraphQL facade) ' +
  'with your access token: you see only the customers it may act for, within its budgets. ' +
  'Resources (platform://customers/{customerId} and .../accounts) read a customer and its accounts ' +
  'with their balances; subscribe to one to be told when the platform changes it. Amounts are ' +
  'decimal strings, times RFC 3339.';

/** Most customers `resources/list` names: a scope can be long, the templates cover the rest. */
const MAX_LISTED_CUSTOMERS = 100;

/** The call the endpoint's adapter handed over with the request. */
function callOf(extra: { authInfo?: { extra?: Record<string, unknown> } }): McpCall {
  const call = extra.authInfo?.extra?.['call'] as McpCall | undefined;
  if (call === undefined) throw new McpError(ErrorCode.InternalError, 'The request was not admitted.');
  return call;
}

/**
 * Builds the server of `session`; the caller connects it to the session's transport. The SDK's
 * protocol server (`mcp.server`) answers each request with the handlers set here, not the ones
 * `McpServer` registers for tools declared with zod: these tools are made at run time from a
 * manifest, their input schemas JSON Schema already.
 */
export function createSessionServer(parts: SessionServerParts, session: () => McpSession): McpServer {
  const mcp = new McpServer(SERVER_INFO, {
    capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: false } },
    instructions: INSTRUCTIONS,
  });
  const { server } = mcp;

  server.setRequestHandler(ListToolsRequestSchema, (_request, extra) => {
    const { caller } = callOf(extra);
    return {
      tools: [
        ...parts.catalogue
          .list()
          .filter((tool) => parts.toolIsServedTo(tool, caller))
          .map((tool) => tool.definition),
        ...parts.schemaTools.definitionsFor(caller),
      ],
    };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const call = callOf(extra);
    const { name } = request.params;
    if (parts.schemaTools.offers(call.caller, name)) {
      const answer = parts.schemaTools.run(name, request.params.arguments ?? {}, call.caller);
      return toolResult(answer, 'error' in answer);
    }
    // A tool of an operation the caller's contract cannot run is unknown to it, as if not listed.
    if (call.tool?.tool.definition.name !== name || !parts.toolIsServedTo(call.tool.tool, call.caller)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    const { operation, problem } = call.tool;
    if (operation === undefined) {
      const message = problem ?? 'The tool’s operation was not admitted.';
      return toolResult({ errors: [{ message, extensions: { code: 'BAD_USER_INPUT' } }] }, true);
    }
    const answer = await runOperation(parts.runner, call.connection, call.ids, operation, name);
    // Any error marks the call as failed, partial data or not: an agent must not take it for a whole answer.
    return toolResult(answer, answer.errors !== undefined);
  });

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: MCP_RESOURCE_KINDS.map((kind) => ({
      uriTemplate: kind.uriTemplate,
      name: kind.name,
      title: kind.title,
      description: kind.description,
      mimeType: 'application/json',
    })),
  }));

  server.setRequestHandler(ListResourcesRequestSchema, (_request, extra) => {
    const { scope } = callOf(extra).caller;
    // An operator's scope is every customer: the templates name them.
    const customers =
      scope.kind === 'customers' ? [...scope.customerIds].sort().slice(0, MAX_LISTED_CUSTOMERS) : [];
    return {
      resources: customers.flatMap((customerId) =>
        MCP_RESOURCE_KINDS.map((kind) => ({
          uri: resourceUriOf(kind, customerId),
          name: `${kind.name}:${customerId}`,
          title: `${kind.title} (${customerId})`,
          description: kind.description,
          mimeType: 'application/json',
        })),
      ),
    };
  });

  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    const call = callOf(extra);
    const read = call.read;
    if (read?.ref.uri !== request.params.uri) throw resourceNotFound(request.params.uri);
    const answer = await runOperation(parts.runner, call.connection, call.ids, read.operation, undefined);
    const customer = (answer.data as { customer?: unknown } | null | undefined)?.customer;
    if (customer === undefined || customer === null) throw answerError(answer, read.ref);
    const text = JSON.stringify(
      answer.errors === undefined ? customer : { ...customer, errors: answer.errors },
    );
    return { contents: [{ uri: read.ref.uri, mimeType: 'application/json', text }] };
  });

  server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
    const call = callOf(extra);
    const ref = call.subscribe;
    if (ref?.uri !== request.params.uri) throw resourceNotFound(request.params.uri);
    const current = session();
    if (current.watches.has(ref.uri)) return {};
    const watch = await watchResource(parts.watch, call.connection, ref, {
      isOpen: () => current.isOpen(),
      changed: () => void server.sendResourceUpdated({ uri: ref.uri }).catch(() => undefined),
      // Nothing tells an MCP client that a subscription ended: the session ends, and its id answers 404.
      expired: () => void current.close('token-expired'),
    });
    // A second subscribe of the same resource may have finished while this one waited: one watch
    // per resource, so the other is never left running where nothing can stop it.
    if (!current.isOpen() || current.watches.has(ref.uri)) watch.stop();
    else current.watches.set(ref.uri, watch);
    return {};
  });

  server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    const current = session();
    current.watches.get(request.params.uri)?.stop();
    current.watches.delete(request.params.uri);
    return {};
  });

  return mcp;
}

/** A tool's result: the answer as structured content, and as its JSON text. */
function toolResult(answer: OperationAnswer | Record<string, unknown>, isError: boolean): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(answer) }],
    structuredContent: answer as Record<string, unknown>,
    ...(isError ? { isError: true } : {}),
  };
}
