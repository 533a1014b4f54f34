/**
 * Who may open a WebSocket to the facade. Browsers do not apply CORS to WebSockets: any page may open
 * one to any host, and the browser sends the page's origin in `Origin`. Checking it at the HTTP
 * upgrade, before graphql-ws says a word, keeps a foreign page from using a visitor's network
 * position or ambient credentials (cross-site WebSocket hijacking). A refusal is an HTTP answer to
 * the upgrade (403, or 429 from a rate limit), in GraphQL's error shape. See docs/security.md.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { VerifyClientCallbackAsync } from 'ws';

/**
 * Whether an upgrade request's `Origin` may connect:
 * - no `Origin`: allowed (servers and command-line clients send none; browsers always do);
 * - the request's own `Host` (`http`/`https`/`ws`/`wss`, default ports ignored): allowed, e.g. Apollo
 *   Sandbox served by the facade itself;
 * - on `allowedOrigins` (`CORS_ORIGINS`): allowed;
 * - anything else, `null` (sandboxed frames, `file:` pages) included: refused.
 */
export function isAllowedWebSocketOrigin(
  request: IncomingMessage,
  allowedOrigins: readonly string[],
): boolean {
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  const parsed = parseOrigin(origin);
  if (parsed === undefined) return false;
  if (allowedOrigins.includes(parsed.httpOrigin)) return true;
  return isSameHost(parsed, request.headers.host);
}

interface ParsedOrigin {
  /** The origin with ws/wss spelled http/https, as the allow-list holds it. */
  httpOrigin: string;
  protocol: 'http:' | 'https:';
  /** Host and port, the default port omitted. */
  host: string;
}

const HTTP_PROTOCOL: Record<string, 'http:' | 'https:'> = {
  'http:': 'http:',
  'https:': 'https:',
  'ws:': 'http:',
  'wss:': 'https:',
};

function parseOrigin(origin: string): ParsedOrigin | undefined {
  // An origin is a scheme and an authority, nothing more; `null` and anything with a path fail here.
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#@\s]+$/i.test(origin)) return undefined;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return undefined;
  }
  const protocol = HTTP_PROTOCOL[url.protocol];
  if (protocol === undefined) return undefined;
  // Re-parsed under the http scheme so ws://x:80 and http://x compare equal.
  const host = new URL(`${protocol}//${url.host}`).host;
  return { httpOrigin: `${protocol}//${host}`, protocol, host };
}

function isSameHost(origin: ParsedOrigin, hostHeader: string | undefined): boolean {
  if (hostHeader === undefined || hostHeader === '' || /[/?#@\s]/.test(hostHeader)) return false;
  // The scheme the page used is compared only through the default port: TLS often ends at a proxy,
  // so the facade cannot tell which scheme its own Host was reached by.
  try {
    return new URL(`${origin.protocol}//${hostHeader}`).host === origin.host;
  } catch {
    return false;
  }
}

/** Why an upgrade is refused: an HTTP status, a GraphQL error code and message, extra headers. */
export interface UpgradeRefusal {
  status: number;
  code: string;
  message: string;
  /** More `extensions` beside `code` (e.g. `retryAfterSeconds`). */
  extensions?: Readonly<Record<string, unknown>>;
  headers?: OutgoingHttpHeaders;
}

/** The refusal of an origin that may not connect. */
export const ORIGIN_NOT_ALLOWED: UpgradeRefusal = Object.freeze({
  status: 403,
  code: 'FORBIDDEN',
  message: 'This origin may not open a WebSocket to the API.',
});

/**
 * Answers an upgrade on `socket` with `refusal` as a plain HTTP response and closes it, for a
 * `WebSocketServer({ noServer: true })` whose `upgrade` handler decides before `handleUpgrade`.
 */
export function refuseUpgrade(socket: Duplex, refusal: UpgradeRefusal): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = refusalBody(refusal);
  const headers: OutgoingHttpHeaders = {
    Connection: 'close',
    ...refusalHeaders(refusal),
    'Content-Length': Buffer.byteLength(body),
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${Array.isArray(value) ? value.join(', ') : String(value)}`)
    .join('\r\n');
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}\r\n${head}\r\n\r\n${body}`);
}

export interface VerifyClientOptions {
  /** `CORS_ORIGINS`: origins besides the facade's own host that may connect. */
  allowedOrigins: readonly string[];
  /**
   * A further check once the origin passed (e.g. the `ws-connect` rate limit by client address):
   * resolve a refusal to answer it, undefined to accept. A rejection refuses with 503 (never a crash).
   */
  admit?(request: IncomingMessage): Promise<UpgradeRefusal | undefined>;
}

/**
 * The `verifyClient` option of `new WebSocketServer(...)`: refuses a disallowed origin with 403 (and
 * whatever `admit` refuses) before the upgrade completes, so graphql-ws never sees the connection.
 */
export function createVerifyClient(options: VerifyClientOptions): VerifyClientCallbackAsync {
  return (info, done) => {
    const refuse = (refusal: UpgradeRefusal): void =>
      done(false, refusal.status, refusalBody(refusal), refusalHeaders(refusal));
    if (!isAllowedWebSocketOrigin(info.req, options.allowedOrigins)) {
      refuse(ORIGIN_NOT_ALLOWED);
      return;
    }
    if (options.admit === undefined) {
      done(true);
      return;
    }
    options.admit(info.req).then(
      (refusal) => (refusal === undefined ? done(true) : refuse(refusal)),
      () => refuse({ status: 503, code: 'SERVICE_UNAVAILABLE', message: 'Try again later.' }),
    );
  };
}

function refusalBody(refusal: UpgradeRefusal): string {
  return JSON.stringify({
    errors: [{ message: refusal.message, extensions: { code: refusal.code, ...refusal.extensions } }],
  });
}

function refusalHeaders(refusal: UpgradeRefusal): OutgoingHttpHeaders {
  return { 'Content-Type': 'application/json; charset=utf-8', ...refusal.headers };
}
