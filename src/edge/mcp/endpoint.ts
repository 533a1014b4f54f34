/**
 * The MCP adapter of the door: `/mcp` over MCP's Streamable HTTP transport (the official SDK's,
 * one session per client), translated to the door and back as every other transport is. Each HTTP
 * request makes one call into the door before the SDK reads it:
 *
 * - a tool call of an operation tool: `door.admitRequest` with the tool's listed document by id and
 *   the call's arguments as variables (every step of a request: who, the operation budget with its
 *   RateLimit fields, trusted documents, parse, validation, the operation checks);
 * - a resource read: `door.admitRequest` with the resource's document;
 * - a resource subscription: `door.connect` as a live connection, then `live.admit` per
 *   subscription (`resource-watch.ts`);
 * - anything else (the handshake, lists, notifications, the GET stream, DELETE):
 *   `door.admitRequest` naming no operation (who, and the operation budget).
 *
 * Before the door, the `Origin` (MCP asks servers to check it against DNS rebinding; the Host
 * allow-list ran first): no `Origin`, the facade's own, or one of `CORS_ORIGINS`. A refusal of the
 * request is answered from the refusal table (status, `Retry-After`, RateLimit fields), a 401 with
 * `WWW-Authenticate` pointing at the protected-resource metadata (`metadata.ts`), in JSON-RPC's
 * error shape. After the door, the session: `initialize` opens one owned by the caller; any other
 * request must name one the same caller opened, or is answered 404 as if it did not exist. The
 * GET stream is cut when the token that opened it expires (the client opens it again with a
 * current one); each POST is checked with its own token.
 */
import { requestCredentials } from '../http.ts';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import express, {
  type ErrorRequestHandler,
  type Request,
  type RequestHandler,
  type Response,
  type Router,
} from 'express';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '../../logger.ts';
import { rateLimitHeaders } from '../client-budgets.ts';
import type { Door } from '../door/audiences.ts';
import type { RequestToAdmit } from '../door/requests.ts';
import { httpAnswerOf, isRefusal, refuse, type Refusal } from '../refusal.ts';
import type { ReloadableTrustedDocuments } from '../trusted-documents.ts';
import type { McpConfig } from './config.ts';
import { createProtectedResource, PROTECTED_RESOURCE_PATHS, type ProtectedResource } from './metadata.ts';
import { readMessage } from './read-message.ts';
import { MCP_PATH, MCP_REQUEST_RULES } from './rules.ts';
import type { OperationRunnerParts } from './run-operation.ts';
import { createSchemaTools, SCHEMA_TOOL_NAMES } from './schema-tools.ts';
import { createSessionServer, type McpCall, type SessionServerParts } from './session-server.ts';
import { createMcpSession, createMcpSessions, ownerOf, type McpSession } from './sessions.ts';
import { createToolCatalogue, createToolVisibility, type ToolCatalogue } from './tools.ts';
import type { ResourceWatchParts } from './resource-watch.ts';

/** What the endpoint is built from. */
export interface McpEndpointOptions {
  readonly config: McpConfig;
  /** `AUTH_ISSUER`, named by the protected-resource metadata; undefined without tokens. */
  readonly issuer: string | undefined;
  /** `TRUST_PROXY`. */
  readonly trustProxy: number;
  /** `INTROSPECTION=off`: the schema tools are for operators and schema readers only. */
  readonly introspectionOff: boolean;
  readonly door: Door;
  /** `TRUSTED_DOCUMENTS`: the operation tools are made from it (none without one). */
  readonly manifest: ReloadableTrustedDocuments | undefined;
  readonly runner: OperationRunnerParts;
  readonly watch: Omit<ResourceWatchParts, 'logger' | 'formatError'>;
  /** CORS for browser clients (`CORS_ORIGINS`), with MCP's headers allowed and exposed. */
  readonly cors: RequestHandler;
  /** The client's address (`TRUST_PROXY` applied). */
  addressOf(request: IncomingMessage): string;
  readonly logger: Logger;
}

/** The endpoint, mounted by `createApp`. */
export interface McpEndpoint {
  /** `/mcp` and the protected-resource metadata: mount after request ids, before the fallbacks. */
  readonly routes: Router;
  /** Sessions open on this replica. */
  sessions(): number;
  /** Ends every session (shutdown). */
  close(): Promise<void>;
}

/** What a request without a caller is told (the door refuses them before this; kept as a guard). */
const ANONYMOUS = refuse('unauthenticated', 'Authentication required: send "Authorization: Bearer <token>".');

/** Largest body taken, as `/graphql`'s: an operation's variables never need more. */
const MAX_BODY = '64kb';
/** Longest a timer may wait in Node. */
const MAX_TIMER_MS = 2_147_483_647;

export function createMcpEndpoint(options: McpEndpointOptions): McpEndpoint {
  const { door, logger } = options;
  const catalogue = createToolCatalogue({
    schema: options.runner.schema,
    manifest: options.manifest,
    reserved: SCHEMA_TOOL_NAMES,
    logger,
  });
  const toolInSchema = createToolVisibility();
  const parts: SessionServerParts = {
    catalogue,
    toolIsServedTo: (tool, caller) => {
      const schema = options.runner.schemaOf(caller);
      return schema !== undefined && toolInSchema(tool, schema);
    },
    schemaTools: createSchemaTools({
      schemaOf: options.runner.schemaOf,
      door,
      introspectionOff: options.introspectionOff,
      isListed: (document) => options.manifest?.isTrustedBody(document) === true,
    }),
    runner: options.runner,
    watch: { ...options.watch, formatError: options.runner.formatError, logger },
  };
  const sessions = createMcpSessions(options.config, logger);
  const stopListening = catalogue.onChange(() => {
    for (const session of sessions.all()) session.server.sendToolListChanged();
  });
  const resource = createProtectedResource({
    issuer: options.issuer,
    resourceUrl: options.config.resourceUrl,
    trustProxy: options.trustProxy,
  });

  const answerRefusal = (req: Request, res: Response, refusal: Refusal): void =>
    answerRefusalOf(resource, req, res, refusal);
  const admission: CallAdmission = {
    door,
    catalogue,
    addressOf: (request) => options.addressOf(request),
    answerRefusal,
  };
  const admit = (req: Request, res: Response): Promise<McpCall | undefined> => admitCall(admission, req, res);

  /** Opens a session for `initialize`, owned by the caller. */
  const open = async (req: Request, res: Response, call: McpCall): Promise<void> => {
    if (!sessions.hasRoom()) {
      res
        .status(503)
        .set('retry-after', '30')
        .json(jsonRpcError(-32000, 'Too many MCP sessions on this server; try again shortly.'));
      return;
    }
    const id = randomUUID();
    // The transport's callbacks and the server's handlers run once the session below exists.
    const holder: { session?: McpSession } = {};
    const current = (): McpSession => {
      if (holder.session === undefined) throw new Error('a session used before it was made');
      return holder.session;
    };
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      enableJsonResponse: true,
      onsessioninitialized: () => sessions.add(current()),
      onsessionclosed: () => void current().close('deleted'),
    });
    const server = createSessionServer(parts, current);
    const session = createMcpSession(id, ownerOf(call.caller), server, transport, (closed, reason) => {
      sessions.remove(closed.id);
      logger.info('MCP session ended', { reason, sessions: sessions.size() });
    });
    holder.session = session;
    await server.connect(transport);
    await transport.handleRequest(withCall(req, call), res, req.body);
    if (transport.sessionId === undefined) await session.close('not-initialized');
  };

  /** The GET stream: cut when the token that opened it expires. */
  const stream = (res: Response, session: McpSession, call: McpCall): void => {
    const closed = session.streamOpened();
    const expiresAt = door.expiresAt(call.connection);
    const timer =
      expiresAt === undefined
        ? undefined
        : setTimeout(
            () => session.transport.closeStandaloneSSEStream(),
            Math.min(MAX_TIMER_MS, Math.max(0, expiresAt - Date.now())),
          );
    res.on('close', () => {
      clearTimeout(timer);
      closed();
    });
  };

  const handle: RequestHandler = async (req, res, next) => {
    try {
      // Against DNS rebinding, as MCP asks: a browser page of another origin is refused.
      const origin = door.checkOrigin(req.get('origin'), req.get('host'));
      if (origin !== undefined) {
        answerRefusal(req, res, origin);
        return;
      }
      const call = await admit(req, res);
      if (call === undefined) return;
      const sessionId = req.get('mcp-session-id');
      if (sessionId === undefined) {
        const plan = req.method === 'POST' ? readMessage(req.body, catalogue) : undefined;
        if (plan?.kind === 'plain' && plan.initialize) {
          await open(req, res, call);
          return;
        }
        res
          .status(400)
          .json(jsonRpcError(-32000, 'Bad Request: send the Mcp-Session-Id header of your session.'));
        return;
      }
      const session = sessions.find(sessionId, ownerOf(call.caller));
      // Unknown, ended, or another caller's: the same answer, so a session id tells nobody anything.
      if (session === undefined) {
        res.status(404).json(jsonRpcError(-32001, 'Session not found'));
        return;
      }
      session.touch();
      if (req.method === 'GET') stream(res, session, call);
      await session.transport.handleRequest(withCall(req, call), res, req.body);
    } catch (error) {
      next(error);
    }
  };

  const routes = express.Router();
  for (const path of PROTECTED_RESOURCE_PATHS) routes.get(path, resource.handler);
  routes.use(MCP_PATH, options.cors);
  routes.post(MCP_PATH, express.json({ limit: MAX_BODY }), handle);
  routes.get(MCP_PATH, handle);
  routes.delete(MCP_PATH, handle);
  routes.all(MCP_PATH, (_req, res) => {
    res.status(405).set('allow', 'GET, POST, DELETE').json(jsonRpcError(-32000, 'Method not allowed.'));
  });
  routes.use(MCP_PATH, answerUnreadBody);
  return {
    routes,
    sessions: () => sessions.size(),
    async close() {
      stopListening();
      await sessions.closeAll();
    },
  };
}

/** Answers a refusal from the table, in JSON-RPC's error shape; a 401 names the metadata. */
function answerRefusalOf(resource: ProtectedResource, req: Request, res: Response, refusal: Refusal): void {
  const answer = httpAnswerOf(refusal);
  const challenge = resource.challenge(req, answer.headers['www-authenticate']);
  // The table's GraphQL-shaped body, its first error as JSON-RPC's `error` (its code in `data`).
  const [error] = (JSON.parse(answer.body) as { errors: { message: string; extensions?: unknown }[] }).errors;
  res
    .status(answer.status)
    .set({ ...answer.headers, ...(challenge === undefined ? {} : { 'www-authenticate': challenge }) })
    .json(jsonRpcError(-32000, error?.message ?? refusal.message, error?.extensions));
}

/** What {@link admitCall} asks the door with, and answers a refusal by. */
interface CallAdmission {
  readonly door: Door;
  readonly catalogue: ToolCatalogue;
  readonly addressOf: (request: IncomingMessage) => string;
  readonly answerRefusal: (req: Request, res: Response, refusal: Refusal) => void;
}

/** The door's one call for this request: the call handed to the SDK, or undefined once answered. */
async function admitCall(
  { door, catalogue, addressOf, answerRefusal }: CallAdmission,
  req: Request,
  res: Response,
): Promise<McpCall | undefined> {
  const plan =
    req.method === 'POST' ? readMessage(req.body, catalogue) : { kind: 'plain' as const, initialize: false };
  if (plan.kind === 'invalid') {
    res.status(400).json(jsonRpcError(-32600, plan.message));
    return undefined;
  }
  const credentials = requestCredentials(req);
  const address = addressOf(req);
  const ids = {
    requestId: res.locals['requestId'] as string,
    facadeRequestId: res.locals['facadeRequestId'] as string,
    callerRequestId: res.locals['callerRequestId'] as string | undefined,
  };
  if (plan.kind === 'subscribe') {
    const connected = await door.connect({ credentials, address, kind: 'live' });
    const caller = isRefusal(connected) ? undefined : connected.caller;
    if (isRefusal(connected) || caller === undefined) {
      answerRefusal(req, res, isRefusal(connected) ? connected : ANONYMOUS);
      return undefined;
    }
    return { connection: connected, caller, ids, subscribe: plan.ref };
  }
  const ask: RequestToAdmit = {
    credentials,
    address,
    request: plan.kind === 'plain' ? undefined : plan.request,
    onQuota: (quota) => res.set(rateLimitHeaders(quota)),
  };
  const admission = await door.admitRequest(ask, MCP_REQUEST_RULES);
  const caller = isRefusal(admission) ? undefined : admission.connection.caller;
  if (isRefusal(admission) || caller === undefined) {
    answerRefusal(req, res, isRefusal(admission) ? admission : ANONYMOUS);
    return undefined;
  }
  const { connection, operation } = admission;
  const call = { connection, caller, ids };
  if (plan.kind === 'tool') return { ...call, tool: { tool: plan.tool, operation, problem: plan.problem } };
  if (plan.kind === 'read' && operation !== undefined) return { ...call, read: { ref: plan.ref, operation } };
  return call;
}

/** `req` carrying the door's decision to the SDK's handlers (as its auth info: the SDK's channel for it). */
function withCall(req: Request, call: McpCall): Request & { auth: AuthInfo } {
  const expiresAt = call.caller.expiresAt;
  // The token itself is never handed on: nothing past the door needs it.
  const auth: AuthInfo = {
    token: '',
    clientId: call.caller.clientId ?? '',
    scopes: [],
    ...(expiresAt === undefined ? {} : { expiresAt: Math.floor(expiresAt / 1000) }),
    extra: { call },
  };
  return Object.assign(req, { auth });
}

/** A body the JSON parser could not read, answered in JSON-RPC's words; anything else goes on. */
const answerUnreadBody: ErrorRequestHandler = (error: unknown, _req, res, next) => {
  const type = (error as { type?: unknown } | null)?.type;
  if (type === 'entity.too.large')
    res.status(413).json(jsonRpcError(-32600, 'The request body is too large.'));
  else if (type === 'entity.parse.failed')
    res.status(400).json(jsonRpcError(-32700, 'Parse error: the body is not JSON.'));
  else next(error);
};

/** A JSON-RPC error answer to a request whose id is not known here. */
function jsonRpcError(code: number, message: string, data?: unknown) {
  return { jsonrpc: '2.0', error: { code, message, ...(data === undefined ? {} : { data }) }, id: null };
}
