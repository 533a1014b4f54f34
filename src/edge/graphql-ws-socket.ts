/**
 * What the graphql-ws adapter (`graphql-ws.ts`) does to a socket and reads from one, apart from
 * the protocol: a close answered by a refusal, the cut of a socket whose client ignores the close
 * frame or stops reading, the credentials a connection presents, and the drain at shutdown.
 */
import type { IncomingMessage } from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Credentials } from '../auth/authenticate.ts';
import { GATEWAY_AUTHORIZATION_HEADER } from '../auth/gateway-credential.ts';
import type { LiveConnections } from './live-connections.ts';
import { closeOf, refuse, type Refusal } from './refusal.ts';

/** How long a client has to answer the server's close frame before its socket is cut. */
const CLOSE_GRACE_MS = 2_000;

/** Closes `socket` as the refusal table says (the reason names the wait, if any). */
export function closeWith(socket: WebSocket, refusal: Refusal): void {
  const { code, reason } = closeOf(refusal);
  socket.close(code, reason);
}

/** Holds `socket` to the cuts of every socket: a close grace, and the stalled-write deadline. */
export function cutWhenGone(socket: WebSocket, stalledWriteTimeoutMs: number): void {
  cutAfterCloseGrace(socket);
  cutWhenStalled(socket, stalledWriteTimeoutMs);
}

/**
 * Stops taking connections; once the open ones' subscriptions completed (the events runtime ends
 * every subscriber's queue) or `timeoutMs` passed, closes them with 1001, then cuts those whose
 * clients do not answer the close, and waits for graphql-ws to let go of them.
 */
export async function drainSockets(
  wsServer: WebSocketServer,
  dispose: () => unknown,
  connections: LiveConnections,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  wsServer.close();
  await connections.emptied(deadline - Date.now());
  // graphql-ws sends `complete` right after its onComplete hook; let those writes go out first.
  await nextTurn();
  for (const client of wsServer.clients) closeWith(client, refuse('shutting-down', 'Shutting down.'));
  // Rejects only when the server had closed already (no socket was open): nothing to wait for.
  const disposed = Promise.resolve(dispose()).catch(() => undefined);
  const timeout = new AbortController();
  const timedOut = sleep(Math.max(0, deadline - Date.now()), undefined, { signal: timeout.signal });
  await Promise.race([disposed, timedOut.catch(() => undefined)]);
  timeout.abort();
  for (const client of wsServer.clients) client.terminate();
  await disposed;
}

/**
 * Whoever closes a socket (graphql-ws or this adapter), `ws` would keep it CLOSING for 30 s while a
 * client ignores the close frame; it is cut after {@link CLOSE_GRACE_MS} instead.
 */
function cutAfterCloseGrace(socket: WebSocket): void {
  const close = socket.close.bind(socket);
  socket.close = (code?: number, reason?: string | Buffer) => {
    close(code, reason);
    const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
    cut.unref();
    socket.once('close', () => clearTimeout(cut));
  };
}

/**
 * What became of a prepared frame: `taken` (its socket had nothing waiting when this turn's writes
 * began: it goes out with them as the turn ends, nothing to wait for), `waiting` (written behind a
 * backlog: its callback says when the socket took it) or `refused` (not written: send it through
 * `ws`).
 */
export type FrameWrite = 'taken' | 'waiting' | 'refused';

/** Writes a prepared frame on a socket held to the stalled-write deadline; see {@link sendFrame}. */
const frameWriters = new WeakMap<
  WebSocket,
  (frame: Buffer, callback: (error?: Error | null) => void) => FrameWrite
>();

/**
 * Writes `frame`, a whole WebSocket frame already made (header and payload, unmasked as a server
 * sends it), straight to `socket`'s connection, held to the same stalled-write deadline as
 * `socket.send`: one buffer, one write, where `send` would make a header and a second write for
 * each message. False when the frame cannot be written so (no such socket, an extension such as
 * compression negotiated, `ws` holding writes of its own back): the caller then uses `send`, and the
 * order of the messages is kept either way.
 */
export function sendFrame(
  socket: WebSocket,
  frame: Buffer,
  callback: (error?: Error | null) => void,
): FrameWrite {
  return frameWriters.get(socket)?.(frame, callback) ?? 'refused';
}

/** What `ws` keeps of a socket, read only to know whether a prepared frame may go straight out. */
interface WebSocketInternals {
  _socket?: {
    write(data: Buffer, callback: (error?: Error | null) => void): boolean;
    cork(): void;
    uncork(): void;
    readonly writableLength: number;
    readonly writableHighWaterMark: number;
  } | null;
  _sender?: { _state?: number; _bufferedBytes?: number } | null;
  _extensions?: Record<string, unknown>;
}

/**
 * A socket that takes no write for `stalledMs` while one waits has stopped reading: it is cut, so
 * it holds neither its socket nor its subscription slots while its queue's overflow notice could
 * never reach it anyway. graphql-ws waits for each write's callback (the socket took it) before it
 * pulls the next result; the deadline runs from the oldest write still waiting, and starts again
 * whenever the socket takes one. A write the kernel took whole at once waits for nothing and arms
 * nothing: one timer per socket, armed only while something stays buffered, not one per message.
 */
function cutWhenStalled(socket: WebSocket, stalledMs: number): void {
  const send = socket.send.bind(socket) as (
    data: unknown,
    options: object,
    callback?: (error?: Error | null) => void,
  ) => void;
  let waiting = 0;
  let stalled: NodeJS.Timeout | undefined;
  const stop = (): void => {
    clearTimeout(stalled);
    stalled = undefined;
  };
  // `on`: `close` comes once, and `once` would hold a wrapper more for the socket's life.
  socket.on('close', stop);
  const tracked =
    (callback?: (error?: Error | null) => void) =>
    (error?: Error | null): void => {
      waiting -= 1;
      if (waiting > 0 && socket.bufferedAmount > 0) stalled?.refresh();
      else stop();
      callback?.(error);
    };
  const armIfBuffered = (): void => {
    // A socket no longer open answers the write with an error at once: nothing to wait for.
    if (socket.readyState === socket.OPEN && socket.bufferedAmount > 0) {
      stalled ??= setTimeout(() => socket.terminate(), stalledMs);
    }
  };
  type Callback = (error?: Error | null) => void;
  socket.send = ((data: unknown, options?: object | Callback, callback?: Callback) => {
    waiting += 1;
    if (typeof options === 'function') send(data, {}, tracked(options as Callback));
    else send(data, options ?? {}, tracked(callback));
    armIfBuffered();
  }) as WebSocket['send'];
  const internals = socket as unknown as WebSocketInternals;
  // The frames of one turn go out in one write: one event's results to a connection's several
  // subscriptions are written back to back in one slice of the delivery, and a write each would
  // cost a system call each (and on the receiving side a wake-up each). The socket is corked at the
  // turn's first frame and uncorked as the turn ends; whether the socket was keeping up is read at
  // that first frame, so a backlog still makes the turn's writes wait for their callbacks.
  let backlogAtCork: number | undefined;
  const uncork = (): void => {
    backlogAtCork = undefined;
    internals._socket?.uncork();
    armIfBuffered();
  };
  frameWriters.set(socket, (frame, callback) => {
    const connection = internals._socket;
    const sender = internals._sender;
    const idle = sender?._state === 0 && sender._bufferedBytes === 0;
    const plain = internals._extensions !== undefined && Object.keys(internals._extensions).length === 0;
    if (
      connection === undefined ||
      connection === null ||
      !idle ||
      !plain ||
      socket.readyState !== socket.OPEN
    ) {
      return 'refused';
    }
    if (backlogAtCork === undefined) {
      backlogAtCork = connection.writableLength;
      connection.cork();
      process.nextTick(uncork);
    }
    waiting += 1;
    connection.write(frame, tracked(callback));
    // Nothing waited before the turn, and the turn's frames stay within the socket's own measure.
    const keepingUp = backlogAtCork === 0 && connection.writableLength <= connection.writableHighWaterMark;
    return keepingUp ? 'taken' : 'waiting';
  });
}

/**
 * What a connection presents: `Authorization` (or `authorization`) in the `connection_init`
 * payload, else the upgrade request's header; a caller's own key the same way (`X-API-Key`,
 * `x-api-key` or `apiKey`), and a gateway's own token (`X-Gateway-Authorization`). A value that is
 * not a string counts as a wrong credential, never as none.
 */
export function credentialsOf(
  params: Record<string, unknown> | undefined,
  request: IncomingMessage,
): Credentials {
  return {
    authorization: paramOf(params, ['Authorization', 'authorization']) ?? headerOf(request, 'authorization'),
    apiKey: paramOf(params, ['X-API-Key', 'x-api-key', 'apiKey']) ?? headerOf(request, 'x-api-key'),
    gatewayAuthorization:
      paramOf(params, ['X-Gateway-Authorization', 'x-gateway-authorization']) ??
      headerOf(request, GATEWAY_AUTHORIZATION_HEADER),
  };
}

function paramOf(params: Record<string, unknown> | undefined, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = params?.[name];
    if (typeof value === 'string') return value;
    if (value !== undefined && value !== null) return 'invalid';
  }
  return undefined;
}

function headerOf(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
