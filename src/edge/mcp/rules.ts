/**
 * What the MCP endpoint serves, as the door reads a transport's rules: its requests (tool calls
 * and resource reads) are queries and mutations; its resource subscriptions are live queries, which
 * the door admits as subscriptions. Both are named `mcp` in records and metrics.
 */
import { OperationTypeNode } from 'graphql';
import type { TransportRules } from '../door/door.ts';
import { MCP_TRANSPORT } from './run-operation.ts';

/** Where the endpoint is served on the facade's own port. */
export const MCP_PATH = '/mcp';

/** Tool calls and resource reads. */
export const MCP_REQUEST_RULES: TransportRules = {
  name: MCP_TRANSPORT,
  serves: new Set([OperationTypeNode.QUERY, OperationTypeNode.MUTATION]),
  elsewhere:
    'MCP tools are queries and mutations: to follow a customer’s changes, subscribe to its resource (resources/subscribe).',
};

/** Resource subscriptions: each resource's `query @live`. */
export const MCP_LIVE_RULES: TransportRules = {
  name: MCP_TRANSPORT,
  serves: new Set([OperationTypeNode.SUBSCRIPTION]),
  elsewhere: 'Only a resource’s live query is subscribed to over MCP.',
};
