/**
 * Who may open a WebSocket to the facade. Browsers do not apply CORS to WebSockets: any page may open
 * one to any host, and the browser sends the page's origin in `Origin`. Checking it at the HTTP
 * upgrade, before graphql-ws says a word, keeps a foreign page from using a visitor's network
 * position or ambient credentials (cross-site WebSocket hijacking). A refusal is an HTTP answer to
 * the upgrade (403 `origin-not-allowed` in the refusal table), in GraphQL's error shape. See
 * docs/security.md.
 */
import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { VerifyClientCallbackAsync } from 'ws';
import { httpAnswerOf, refuse, type Refusal } from './refusal.ts';

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
  return isAllowedOrigin(request.headers.origin, request.headers.host, allowedOrigins);
}

/** {@link isAllowedWebSocketOrigin} from the two headers it reads (`Origin`, `Host`). */
function isAllowedOrigin(
  origin: string | undefined,
  host: string | undefined,
  allowedOrigins: readonly string[],
): boolean {
  if (origin === undefined) return true;
  const parsed = parseOrigin(origin);
  if (parsed === undefined) return false;
  if (allowedOrigins.includes(parsed.httpOrigin)) return true;
  return isSameHost(parsed, host);
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

/** The refusal of a page whose origin may not connect (403 at the upgrade). */
export const ORIGIN_NOT_ALLOWED: Refusal = Object.freeze(
  refuse('origin-not-allowed', 'This origin may not open a WebSocket to the API.'),
);

/** {@link isAllowedOrigin} as the door answers it: undefined, or {@link ORIGIN_NOT_ALLOWED}. */
export function checkOrigin(
  origin: string | undefined,
  host: string | undefined,
  allowedOrigins: readonly string[],
): Refusal | undefined {
  return isAllowedOrigin(origin, host, allowedOrigins) ? undefined : ORIGIN_NOT_ALLOWED;
}

/**
 * The `verifyClient` option of `new WebSocketServer(...)`: an upgrade `check` refuses is answered
 * with the refusal table's status, headers and body before it completes, so graphql-ws never sees
 * the connection.
 */
export function verifyClientOf(
  check: (origin: string | undefined, host: string | undefined) => Refusal | undefined,
): VerifyClientCallbackAsync {
  return (info, done) => {
    const refusal = check(info.req.headers.origin, info.req.headers.host);
    if (refusal === undefined) {
      done(true);
      return;
    }
    const answer = httpAnswerOf(refusal);
    // `ws` writes its own `Content-Type: text/html` unless given the name spelt as it spells it.
    const headers = Object.fromEntries(
      Object.entries(answer.headers).map(([name, value]) => [
        name.replace(/(^|-)[a-z]/g, (c) => c.toUpperCase()),
        value,
      ]),
    );
    done(false, answer.status, answer.body, headers);
  };
}

/**
 * Answers an upgrade on `socket` with `refusal` as a plain HTTP response (the refusal table's
 * status, headers and body) and closes it, for an upgrade refused before any WebSocket exists.
 */
export function refuseUpgrade(socket: Duplex, refusal: Refusal): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const answer = httpAnswerOf(refusal);
  const headers: Record<string, string | number> = {
    Connection: 'close',
    ...answer.headers,
    'Content-Length': Buffer.byteLength(answer.body),
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${String(value)}`)
    .join('\r\n');
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}\r\n${head}\r\n\r\n${answer.body}`,
  );
}
