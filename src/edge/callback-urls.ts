/**
 * Where the callback transport may send a request: the allow-list of callback URL prefixes
 * (`SUBSCRIPTION_CALLBACK_ALLOWED_URLS`) and the addresses no callback ever reaches. A callback
 * subscription names the URL the facade then POSTs to, so without this list any caller could make
 * the facade send requests wherever it likes inside its network (server-side request forgery):
 * the list is empty by default, and every callback transport refuses every URL until an operator
 * names the gateways' callback endpoints.
 *
 * A URL is compared as the facade will send it, never as it was written: parsed (WHATWG), its dot
 * segments resolved (`/callback/../admin` is `/admin`), its host lower-cased and its default port
 * dropped; then its origin must be a prefix's origin exactly and its path must start with the
 * prefix's path at a segment boundary (`/callback/` does not admit `/callbacks`). A URL with
 * credentials, a query or a fragment, or whose path holds anything but unreserved characters and
 * slashes (a percent-encoding, `;`, a backslash: what a router or a proxy could read as another
 * path) is refused. The addresses a name resolves to are checked when the facade connects
 * (`isForbiddenCallbackAddress`, read by the callback sender's resolver): link-local (cloud metadata
 * at 169.254.169.254), unspecified, multicast and broadcast addresses, the same embedded in IPv6 by
 * NAT64, the IPv4-compatible form or 6to4, and the metadata endpoints outside link-local
 * (fd00:ec2::254, 100.100.100.200) are never a gateway.
 */
import { BlockList, isIP } from 'node:net';

/** One allowed prefix: an origin and a path that ends with `/`. */
export interface CallbackUrlPrefix {
  readonly origin: string;
  readonly path: string;
}

/** The longest callback URL taken: a gateway's public URL and a subscription id. */
const MAX_URL_LENGTH = 2_048;

/**
 * A path a callback URL may have: unreserved characters and slashes only (a gateway's callback path
 * is its prefix and a subscription id). Percent-encodings (`%2e`, `%2f`, `%252e` decoded twice),
 * `;` (`..;/`, a parameter some proxies strip), NUL and bytes beyond ASCII are each a way a router
 * or a proxy in front of the gateway could read another path than the one matched here.
 */
const CALLBACK_PATH = /^[A-Za-z0-9._~/-]*$/;

/**
 * Addresses no callback may reach, whatever name resolves to them: link-local (the cloud metadata
 * endpoint), unspecified, multicast and broadcast, in IPv4 and IPv6 (IPv4-mapped ones included).
 */
const FORBIDDEN = createForbiddenAddresses();

function createForbiddenAddresses(): BlockList {
  const list = new BlockList();
  list.addSubnet('169.254.0.0', 16, 'ipv4');
  list.addSubnet('0.0.0.0', 8, 'ipv4');
  list.addSubnet('224.0.0.0', 4, 'ipv4');
  list.addAddress('255.255.255.255', 'ipv4');
  list.addSubnet('fe80::', 10, 'ipv6');
  list.addAddress('::', 'ipv6');
  list.addSubnet('ff00::', 8, 'ipv6');
  list.addSubnet('::ffff:169.254.0.0', 112, 'ipv6');
  list.addSubnet('::ffff:0.0.0.0', 104, 'ipv6');
  list.addSubnet('::ffff:224.0.0.0', 100, 'ipv6');
  // The same IPv4 ranges embedded in IPv6 by translation: NAT64 (64:ff9b::/96), the deprecated
  // IPv4-compatible form (::a.b.c.d) and 6to4 (2002:WWXX:YYZZ::/48).
  for (const [prefix, bits] of [
    ['64:ff9b::a9fe:0', 112],
    ['64:ff9b::', 104],
    ['64:ff9b::e000:0', 100],
    ['::a9fe:0', 112],
    ['::e000:0', 100],
    ['2002:a9fe::', 32],
    ['2002::', 24],
    ['2002:e000::', 20],
  ] as const) {
    list.addSubnet(prefix, bits, 'ipv6');
  }
  // Cloud metadata endpoints outside link-local: AWS's over IPv6, Alibaba Cloud's.
  list.addAddress('fd00:ec2::254', 'ipv6');
  list.addAddress('100.100.100.200', 'ipv4');
  list.addAddress('::ffff:100.100.100.200', 'ipv6');
  return list;
}

/** Whether `address` (an IP literal) is one no callback may reach. */
export function isForbiddenCallbackAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return FORBIDDEN.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * `SUBSCRIPTION_CALLBACK_ALLOWED_URLS`: comma-separated http(s) URL prefixes, each without
 * credentials, query or fragment, already in its normal form (a `..` segment, an encoded separator
 * or a forbidden literal address is a mistake to fix, not to guess at). Answers the prefixes, or
 * the problem to report.
 */
export function parseCallbackPrefixes(raw: string): readonly CallbackUrlPrefix[] | { problem: string } {
  const prefixes: CallbackUrlPrefix[] = [];
  for (const entry of raw
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)) {
    const url = callbackUrlOf(entry);
    if (typeof url === 'string') return { problem: `${url}; got ${shown(entry)}` };
    const written = entry.replace(/\/+$/, '');
    if (url.href.replace(/\/+$/, '') !== written) {
      return { problem: `each entry must be written in its normal form (${url.href}); got ${shown(entry)}` };
    }
    prefixes.push({
      origin: url.origin,
      path: url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`,
    });
  }
  return prefixes;
}

/**
 * The URL a callback subscription names, as the facade will send to it, when it is under one of
 * `prefixes`; otherwise why not (a sentence a caller may read: it never names the prefixes).
 */
export function allowedCallbackUrl(value: unknown, prefixes: readonly CallbackUrlPrefix[]): URL | string {
  if (typeof value !== 'string' || value.length > MAX_URL_LENGTH) {
    return `the callback URL must be a string of at most ${MAX_URL_LENGTH} characters`;
  }
  const url = callbackUrlOf(value);
  if (typeof url === 'string') return url;
  const under = prefixes.some(
    (prefix) => url.origin === prefix.origin && `${url.pathname}/`.startsWith(prefix.path),
  );
  return under ? url : 'the callback URL is not under a prefix this facade may call back';
}

/** `value` parsed as a callback URL may be, or what is wrong with it. */
function callbackUrlOf(value: string): URL | string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'the callback URL must be an absolute http(s) URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'the callback URL must use http or https';
  if (url.username !== '' || url.password !== '') return 'the callback URL must not hold credentials';
  if (url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    return 'the callback URL must have no query and no fragment';
  }
  if (value.includes('\\') || !CALLBACK_PATH.test(url.pathname)) {
    return 'the callback URL’s path must hold only letters, digits, `-`, `.`, `_`, `~` and `/`';
  }
  // A literal address is checked here; a name, by the sender's resolver when it connects.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0 && isForbiddenCallbackAddress(host)) {
    return 'the callback URL must not name a link-local, unspecified, multicast or broadcast address';
  }
  return url;
}

/** An entry as a problem quotes it: never with credentials. */
function shown(entry: string): string {
  return JSON.stringify(entry.replace(/\/\/[^/]*@/, '//[redacted]@'));
}
