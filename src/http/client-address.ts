/**
 * The address a request came from, for rate limits and logs. `X-Forwarded-For` is written by
 * whoever sends the request, so it is only believed as far as proxies the operator declared
 * (`TRUST_PROXY`) appended to it: each trusted proxy adds the address it saw on the right, and the
 * entry `trustedHops` from the right is what the outermost trusted proxy saw. Anything further left
 * may be forged by the client and is never read.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** What {@link clientAddress} answers when the socket is already gone and no header may be used. */
export const UNKNOWN_ADDRESS = 'unknown';

/**
 * The client's address: the socket's peer when `trustedHops` is 0; otherwise the address the
 * outermost trusted proxy saw (`trustedHops` entries from the right of `X-Forwarded-For`), or the
 * socket's peer when the header has fewer entries or that entry is not an IP address.
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`) is answered as IPv4; IPv6 in lower case.
 */
export function clientAddress(req: IncomingMessage, trustedHops: number): string {
  const peer = normaliseAddress(req.socket.remoteAddress) ?? UNKNOWN_ADDRESS;
  if (trustedHops <= 0) return peer;
  const entries = forwardedFor(req.headers['x-forwarded-for']);
  // The socket's peer is the nearest proxy; it appended the first entry from the right, and so on.
  const entry = entries[entries.length - trustedHops];
  if (entry === undefined) return peer;
  return normaliseAddress(stripPort(entry)) ?? peer;
}

/** Every entry of every `X-Forwarded-For` header, in order (Node joins repeated headers with ", "). */
function forwardedFor(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  const joined = Array.isArray(header) ? header.join(',') : header;
  return joined
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

/** `[2001:db8::1]:443` → `2001:db8::1`, `192.0.2.1:8080` → `192.0.2.1`; anything else unchanged. */
function stripPort(entry: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry);
  if (bracketed !== null) return bracketed[1]!;
  const ipv4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(entry);
  if (ipv4WithPort !== null) return ipv4WithPort[1]!;
  return entry;
}

/**
 * A valid IP address in one spelling per address (IPv6 compressed and lower-cased, IPv4-mapped IPv6
 * as IPv4), so one client cannot count as several; undefined when it is not an IP address.
 */
function normaliseAddress(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  // A zone index (fe80::1%eth0) names the facade's own interface, not the client.
  const withoutZone = address.replace(/%.*$/, '');
  const family = isIP(withoutZone);
  if (family === 4) return withoutZone;
  if (family !== 6) return undefined;
  // WHATWG URL serialisation is the canonical IPv6 text form (RFC 5952), mapped IPv4 in hex.
  const canonical = new URL(`http://[${withoutZone}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical);
  if (mapped === null) return canonical;
  const [high, low] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}
