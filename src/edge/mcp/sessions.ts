/**
 * The MCP sessions one replica holds: each bound to the caller that opened it (its owner: the
 * subject, client and environment of the token or key that sent `initialize`), so another caller
 * presenting its id is answered as if it did not exist (404), whatever its own token. Bounded: at
 * most `MCP_MAX_SESSIONS` on the replica (a new one past it is refused), at most
 * `MCP_MAX_SESSIONS_PER_CALLER` per owner (its least recently used one ends), and one with no
 * request and no open stream for `MCP_SESSION_IDLE_MS` ends.
 *
 * A session is the SDK's server and Streamable HTTP transport, and what the session watches for
 * the client (its resource subscriptions); ending it closes all three, and its id then answers 404,
 * which MCP clients read as "start a new session".
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Caller } from '../../auth/caller.ts';
import type { Logger } from '../../logger.ts';
import type { McpConfig } from './config.ts';

/** A resource a session watches for its client, until stopped. */
export interface SessionWatch {
  stop(): void;
}

/** One MCP session. */
export interface McpSession {
  readonly id: string;
  /** Who opened it ({@link ownerOf}); only that caller's requests reach it. */
  readonly owner: string;
  readonly server: McpServer;
  readonly transport: StreamableHTTPServerTransport;
  /** Resource subscriptions by URI. */
  readonly watches: Map<string, SessionWatch>;
  /** Whether it still serves (false once ended). */
  isOpen(): boolean;
  /** A request reached it (its idle time starts again). */
  touch(): void;
  /** When a request last reached it, or its last stream closed (ms since the epoch). */
  lastSeenAt(): number;
  /** Streams open on it now. */
  openStreams(): number;
  /** A stream (the GET one) opened on it; the returned function says it closed. */
  streamOpened(): () => void;
  /** Ends it: its watches stop, its transport and server close. Idempotent. */
  close(reason: string): Promise<void>;
}

/** The sessions of one replica. */
export interface McpSessions {
  /** The session `id` names, if `owner` opened it; undefined otherwise (unknown, ended, or someone else's). */
  find(id: string, owner: string): McpSession | undefined;
  /** Whether one more session may open now. */
  hasRoom(): boolean;
  /**
   * Registers a session whose `initialize` succeeded; the owner's least recently used session ends
   * when it holds too many.
   */
  add(session: McpSession): void;
  /** Forgets a session that ended. */
  remove(id: string): void;
  /** Every open session (to tell each that the tool list changed). */
  all(): Iterable<McpSession>;
  size(): number;
  /** Ends every session (shutdown) and stops the idle sweep. */
  closeAll(): Promise<void>;
}

/**
 * Who owns a session opened by `caller`: how it proved who it is, its subject and client, and the
 * environment its token names. A new token of the same subject and client reaches the session (a
 * token refreshed while it lasts); another caller's never does.
 */
export function ownerOf(caller: Caller): string {
  return JSON.stringify([caller.via, caller.subject, caller.clientId ?? null, caller.environment ?? null]);
}

/** How often idle sessions are looked for, at most. */
const MAX_SWEEP_INTERVAL_MS = 60_000;

export function createMcpSessions(
  config: Pick<McpConfig, 'maxSessions' | 'maxSessionsPerCaller' | 'sessionIdleMs'>,
  logger: Logger,
): McpSessions {
  const sessions = new Map<string, McpSession>();
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const session of sessions.values()) {
        if (session.openStreams() === 0 && now - session.lastSeenAt() >= config.sessionIdleMs) {
          void session.close('idle');
        }
      }
    },
    Math.max(1_000, Math.min(MAX_SWEEP_INTERVAL_MS, Math.floor(config.sessionIdleMs / 4))),
  );
  sweep.unref();
  return {
    find(id, owner) {
      const found = sessions.get(id);
      return found?.owner === owner && found.isOpen() ? found : undefined;
    },
    hasRoom: () => sessions.size < config.maxSessions,
    add(session) {
      sessions.set(session.id, session);
      const owned = [...sessions.values()].filter((other) => other.owner === session.owner);
      if (owned.length <= config.maxSessionsPerCaller) return;
      owned.sort((a, b) => a.lastSeenAt() - b.lastSeenAt());
      for (const oldest of owned.slice(0, owned.length - config.maxSessionsPerCaller)) {
        logger.info('ended an MCP session: its caller opened more than it may hold', {
          sessions: config.maxSessionsPerCaller,
        });
        void oldest.close('too-many-sessions');
      }
    },
    remove: (id) => void sessions.delete(id),
    all: () => [...sessions.values()],
    size: () => sessions.size,
    async closeAll() {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((session) => session.close('shutdown')));
    },
  };
}

/**
 * Builds a session around the SDK's `server` and `transport` (connected by the caller), owned by
 * `owner`; `onClosed` is told once it ended.
 */
export function createMcpSession(
  id: string,
  owner: string,
  server: McpServer,
  transport: StreamableHTTPServerTransport,
  onClosed: (session: McpSession, reason: string) => void,
): McpSession {
  const watches = new Map<string, SessionWatch>();
  let open = true;
  let lastSeenAt = Date.now();
  let streams = 0;
  const session: McpSession = {
    id,
    owner,
    server,
    transport,
    watches,
    isOpen: () => open,
    touch() {
      lastSeenAt = Date.now();
    },
    lastSeenAt: () => lastSeenAt,
    openStreams: () => streams,
    streamOpened() {
      streams += 1;
      let closed = false;
      return () => {
        if (closed) return;
        closed = true;
        streams -= 1;
        lastSeenAt = Date.now();
      };
    },
    async close(reason) {
      if (!open) return;
      open = false;
      for (const watch of watches.values()) watch.stop();
      watches.clear();
      onClosed(session, reason);
      // The transport's close ends its streams; the server's, its pending requests.
      await transport.close().catch(() => undefined);
      await server.close().catch(() => undefined);
    },
  };
  return session;
}
