/**
 * The Host allow-list: a request (or WebSocket upgrade) whose `Host` is not a name this facade is
 * reached by is refused before anything else runs. A DNS-rebinding page (a hostile name made to
 * resolve to the facade's address) reaches the facade from inside the victim's network with its own
 * name in `Host`; refusing unknown names keeps it from graphql-ws, `_service` and the metrics port.
 *
 * Allowed by default: IP literals (a browser that sends one resolved no name, so nothing was
 * rebound), `localhost` and `*.localhost`, the listen address when it is a name, and the host of
 * `WEBHOOK_PUBLIC_URL` (the upstream posts there). `ALLOWED_HOSTS`
 * adds names: exact (`api.example.com`), a domain and its subdomains (`.example.com`), or `*` for
 * any (behind a proxy that checks Host itself).
 */
import type { IncomingMessage, Server } from 'node:http';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import type { RequestHandler } from 'express';

export interface HostAllowListOptions {
  /** The address the server listens on (`HOST`). */
  listenHost: string;
  /** `ALLOWED_HOSTS`: exact names, `.domain` suffixes, or `*`. */
  allowedHosts: readonly string[];
  /** URLs the facade is configured to be reached at (`WEBHOOK_PUBLIC_URL`): their host names are allowed. */
  publicUrls?: readonly (string | undefined)[];
}

export interface HostAllowList {
  /** Whether a request with this `Host` header is served. */
  allows(hostHeader: string | undefined): boolean;
  /** Refuses a request whose Host is not allowed with 421; mount it first. */
  readonly middleware: RequestHandler;
  /**
   * Makes every `upgrade` listener `server` has now run only for allowed hosts: others are answered
   * 421 and closed before graphql-ws (or anything else) sees them. Call once the listeners are attached.
   */
  guardUpgrades(server: Server): void;
}

const REFUSAL_BODY = JSON.stringify({
  errors: [{ message: 'This host name is not served here.', extensions: { code: 'HOST_NOT_ALLOWED' } }],
});

export function createHostAllowList(options: HostAllowListOptions): HostAllowList {
  const exact = new Set<string>();
  const suffixes: string[] = [];
  let any = false;
  for (const entry of options.allowedHosts.map(normaliseName)) {
    if (entry === '*') any = true;
    else if (entry.startsWith('.')) suffixes.push(entry);
    else if (entry !== '') exact.add(entry);
  }
  for (const url of options.publicUrls ?? []) {
    if (url !== undefined && URL.canParse(url)) exact.add(normaliseName(new URL(url).hostname));
  }
  const listen = normaliseName(options.listenHost);
  if (listen !== '' && isIP(listen) === 0) exact.add(listen);

  const allows = (hostHeader: string | undefined): boolean => {
    if (hostHeader === undefined) return false;
    const name = hostNameOf(hostHeader);
    if (name === undefined) return false;
    if (any || isIP(name) !== 0) return true;
    if (name === 'localhost' || name.endsWith('.localhost')) return true;
    if (exact.has(name)) return true;
    return suffixes.some((suffix) => name.endsWith(suffix) || name === suffix.slice(1));
  };

  return {
    allows,
    middleware: (req, res, next) => {
      if (allows(req.headers.host)) {
        next();
        return;
      }
      res.status(421).type('application/json').setHeader('Connection', 'close');
      res.end(REFUSAL_BODY);
    },
    guardUpgrades(server) {
      const listeners = server.listeners('upgrade') as ((
        req: IncomingMessage,
        socket: Duplex,
        head: Buffer,
      ) => void)[];
      server.removeAllListeners('upgrade');
      server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        if (!allows(req.headers.host)) {
          socket.end(
            'HTTP/1.1 421 Misdirected Request\r\nConnection: close\r\nContent-Type: application/json\r\n' +
              `Content-Length: ${Buffer.byteLength(REFUSAL_BODY)}\r\n\r\n${REFUSAL_BODY}`,
          );
          return;
        }
        for (const listener of listeners) listener.call(server, req, socket, head);
      });
    },
  };
}

/** Lower case, without a trailing dot or brackets. */
function normaliseName(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/\.$/, '')
    .replace(/^\[(.*)\]$/, '$1');
}

/** The name part of a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`); undefined when malformed. */
function hostNameOf(header: string): string | undefined {
  const value = header.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(value);
  if (bracketed !== null) return bracketed[1];
  const plain = /^([a-z0-9.-]+)(?::\d{1,5})?$/.exec(value);
  if (plain === null) return undefined;
  return plain[1]!.replace(/\.$/, '');
}
