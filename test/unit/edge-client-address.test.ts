import { once } from 'node:events';
import http, { type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { clientAddress, UNKNOWN_ADDRESS } from '../../src/http/client-address.ts';

/** A request as far as clientAddress reads it: the socket's peer and the headers Node parsed. */
function request(remoteAddress: string | undefined, forwardedFor?: string | string[]): IncomingMessage {
  const headers = forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor };
  return { socket: { remoteAddress }, headers } as unknown as IncomingMessage;
}

describe('clientAddress without trusted proxies', () => {
  test.each([
    ['no header', undefined],
    ['a forged single address', '198.51.100.1'],
    ['a forged chain', '198.51.100.1, 198.51.100.2'],
    ['garbage', 'not-an-address'],
    ['an empty header', ''],
  ])('answers the socket peer whatever X-Forwarded-For says (%s)', (_what, header) => {
    expect(clientAddress(request('203.0.113.7', header), 0)).toBe('203.0.113.7');
  });

  test.each([
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::FFFF:203.0.113.7', '203.0.113.7'],
    ['::ffff:cb00:7107', '203.0.113.7'],
    ['0:0:0:0:0:ffff:203.0.113.7', '203.0.113.7'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['::1', '::1'],
    ['fe80::1%eth0', 'fe80::1'],
    ['127.0.0.1', '127.0.0.1'],
  ])('normalises the peer %s to %s', (peer, expected) => {
    expect(clientAddress(request(peer), 0)).toBe(expected);
  });

  test('a socket already gone answers "unknown"', () => {
    expect(clientAddress(request(undefined, '198.51.100.1'), 0)).toBe(UNKNOWN_ADDRESS);
  });
});

describe('clientAddress behind trusted proxies', () => {
  test.each([
    // [trusted hops, X-Forwarded-For, expected]
    [1, '198.51.100.1', '198.51.100.1'],
    [1, '192.0.2.66, 198.51.100.1', '198.51.100.1'],
    [1, 'forged, 192.0.2.66, 198.51.100.1', '198.51.100.1'],
    [2, '198.51.100.1, 10.0.0.2', '198.51.100.1'],
    [2, '192.0.2.66, 198.51.100.1, 10.0.0.2', '198.51.100.1'],
    [3, '198.51.100.1, 10.0.0.3, 10.0.0.2', '198.51.100.1'],
    [1, ' 198.51.100.1 ', '198.51.100.1'],
    [1, '192.0.2.66,,198.51.100.1,', '198.51.100.1'],
    [1, '198.51.100.1:53211', '198.51.100.1'],
    [1, '[2001:db8::7]:443', '2001:db8::7'],
    [1, '[2001:DB8::7]', '2001:db8::7'],
    [1, '2001:db8:0:0::7', '2001:db8::7'],
    [1, '::ffff:198.51.100.1', '198.51.100.1'],
  ])('%i hop(s), X-Forwarded-For %j: %s', (hops, header, expected) => {
    expect(clientAddress(request('10.0.0.1', header), hops)).toBe(expected);
  });

  test('repeated X-Forwarded-For headers count as one list, in order', () => {
    expect(clientAddress(request('10.0.0.1', ['192.0.2.66', '198.51.100.1, 10.0.0.2']), 2)).toBe(
      '198.51.100.1',
    );
  });

  test.each([
    ['no header', 1, undefined],
    ['an empty header', 1, ''],
    ['fewer entries than trusted hops', 2, '198.51.100.1'],
    ['fewer entries than trusted hops (3)', 3, '192.0.2.66, 198.51.100.1'],
    ['an entry that is not an address', 1, '192.0.2.66, unknown'],
    ['a hostname', 1, 'proxy.internal'],
    ['an address with a path', 1, '198.51.100.1/24'],
  ])('falls back to the socket peer with %s', (_what, hops, header) => {
    expect(clientAddress(request('::ffff:10.0.0.1', header), hops)).toBe('10.0.0.1');
  });
});

describe('clientAddress on a real socket', () => {
  test('a loopback IPv4 client of a dual-stack server is 127.0.0.1, and a forged header changes nothing', async () => {
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      seen.push(clientAddress(req, 0));
      res.end();
    });
    // '::' accepts IPv4 as mapped IPv6 (::ffff:127.0.0.1) where the system allows dual stack.
    server.listen(0, '::');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      await fetch(`http://127.0.0.1:${port}/`, { headers: { 'x-forwarded-for': '198.51.100.1' } });
      expect(seen).toEqual(['127.0.0.1']);
    } finally {
      server.close();
    }
  });
});
