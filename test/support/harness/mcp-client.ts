/**
 * The official MCP SDK's own client against a facade's `/mcp`, over Streamable HTTP with a bearer
 * token, as an agent's host connects: the notifications it hears are collected, and it is closed
 * with the test (`close()`).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

export interface McpTestClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  /** The session the server gave. */
  readonly sessionId: string | undefined;
  /** `notifications/tools/list_changed` heard so far. */
  readonly toolListChanges: () => number;
  /** URIs of `notifications/resources/updated` heard so far, in order. */
  readonly resourceUpdates: () => readonly string[];
  close(): Promise<void>;
}

/** Connects the SDK's client to `${facadeUrl}/mcp` with `token` (none: no Authorization header). */
export async function connectMcp(
  facadeUrl: string,
  token: string | undefined,
  options: { sessionId?: string; headers?: Record<string, string> } = {},
): Promise<McpTestClient> {
  const transport = new StreamableHTTPClientTransport(new URL(`${facadeUrl}/mcp`), {
    requestInit: {
      headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...options.headers },
    },
    // A test that ends a stream on purpose should see it end, not the client reconnect for long.
    reconnectionOptions: {
      initialReconnectionDelay: 100,
      maxReconnectionDelay: 500,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 2,
    },
    ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
  });
  const client = new Client({ name: 'facade-tests', version: '1.0.0' }, { capabilities: {} });
  let toolListChanges = 0;
  const updates: string[] = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    toolListChanges += 1;
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    updates.push(notification.params.uri);
  });
  // A client given a session id resumes it: it sends no `initialize`.
  await client.connect(transport);
  return {
    client,
    transport,
    get sessionId() {
      return transport.sessionId;
    },
    toolListChanges: () => toolListChanges,
    resourceUpdates: () => updates,
    close: () => client.close().catch(() => undefined),
  };
}

/** One answer of {@link mcpRequest}: its status, headers and JSON body (or text when not JSON). */
export interface McpRawAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
}

/** The protocol version the SDK's server and client speak. */
export const MCP_PROTOCOL_VERSION = '2025-11-25';

/**
 * One raw HTTP request to `/mcp` with real fetch, for what the SDK's client would not send (another
 * caller's session id, a hostile Origin, a body too big): JSON-RPC `message` as the body of a POST.
 */
export async function mcpRequest(
  facadeUrl: string,
  message: unknown,
  headers: Record<string, string> = {},
  method: 'POST' | 'GET' | 'DELETE' = 'POST',
): Promise<McpRawAnswer> {
  const response = await fetch(`${facadeUrl}/mcp`, {
    method,
    headers: {
      accept: 'application/json, text/event-stream',
      ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(method === 'POST' ? { body: typeof message === 'string' ? message : JSON.stringify(message) } : {}),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: kept as text.
  }
  return { status: response.status, headers: response.headers, body };
}

/** An `initialize` request as a client named `name` sends it. */
export function initializeMessage(name: string): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name, version: '1' } },
  };
}

/**
 * A session opened with raw requests (`initialize`, then `notifications/initialized`) and no GET
 * stream: what each later request does at the door is then that request's alone. Answers the
 * headers every later request of the session sends.
 */
export async function openRawSession(facadeUrl: string, token: string): Promise<Record<string, string>> {
  const authorization = `Bearer ${token}`;
  const opened = await mcpRequest(facadeUrl, initializeMessage('raw'), { authorization });
  const sessionId = opened.headers.get('mcp-session-id');
  if (opened.status !== 200 || sessionId === null) {
    throw new Error(`initialize answered ${opened.status}: ${JSON.stringify(opened.body)}`);
  }
  const headers = {
    authorization,
    'mcp-session-id': sessionId,
    'mcp-protocol-version': MCP_PROTOCOL_VERSION,
  };
  await mcpRequest(facadeUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return headers;
}
