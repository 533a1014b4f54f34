/**
 * The callback transport's allow-list as an operator writes it (`SUBSCRIPTION_CALLBACK_ALLOWED_URLS`)
 * and the names it connects to: an entry not in its normal form or naming an address no gateway
 * has is refused at start; a name that resolves to such an address (the cloud metadata endpoint,
 * in IPv4 or IPv4-mapped IPv6) is never connected to, checked on the resolution the connection uses.
 */
import type { LookupFunction } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createCallbackSender } from '../../src/edge/callback-sender.ts';
import {
  allowedCallbackUrl,
  isForbiddenCallbackAddress,
  parseCallbackPrefixes,
} from '../../src/edge/callback-urls.ts';
import { readEdgeConfig } from '../../src/edge/config.ts';
import { startCallbackReceiver, type CallbackReceiver } from '../support/harness/callback-receiver.ts';

describe('SUBSCRIPTION_CALLBACK_ALLOWED_URLS', () => {
  test('unset allows no URL; entries are origins and paths ending at a segment boundary', () => {
    const problems: string[] = [];
    expect(readEdgeConfig({}, (name) => problems.push(name)).callbackUrls).toEqual([]);
    expect(parseCallbackPrefixes('https://gw.internal/callback, http://127.0.0.1:4000')).toEqual([
      { origin: 'https://gw.internal', path: '/callback/' },
      { origin: 'http://127.0.0.1:4000', path: '/' },
    ]);
    expect(problems).toEqual([]);
  });

  test.each([
    ['a `..` segment', 'https://gw.internal/callback/../admin'],
    ['another case or a default port', 'https://GW.internal:443/callback'],
    ['credentials', 'https://user:secret@gw.internal/callback'],
    ['a query', 'https://gw.internal/callback?x=1'],
    ['the metadata address', 'http://169.254.169.254/'],
    ['the unspecified address', 'http://[::]/callback'],
    ['not http', 'ftp://gw.internal/callback'],
  ])('an entry with %s is refused at start, without its credentials in the message', (_name, entry) => {
    const problems: string[] = [];
    const config = readEdgeConfig({ SUBSCRIPTION_CALLBACK_ALLOWED_URLS: entry }, (name, problem) =>
      problems.push(`${name}: ${problem}`),
    );
    expect(config.callbackUrls).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^SUBSCRIPTION_CALLBACK_ALLOWED_URLS: /);
    expect(problems[0]).not.toContain('secret');
  });

  test('a URL is compared as it will be sent: normalised, then origin and path prefix', () => {
    const prefixes = parseCallbackPrefixes('https://gw.internal/callback/') as {
      origin: string;
      path: string;
    }[];
    const allowed = (url: string) => typeof allowedCallbackUrl(url, prefixes) !== 'string';
    expect(allowed('https://gw.internal/callback/3f1c')).toBe(true);
    expect(allowed('https://GW.internal:443/callback/3f1c')).toBe(true);
    expect(allowed('https://gw.internal/callback/a/../b')).toBe(true);
    expect(allowed('https://gw.internal/callback/../admin')).toBe(false);
    expect(allowed('http://gw.internal/callback/3f1c')).toBe(false);
    expect(allowed('https://gw.internal.evil.example/callback/3f1c')).toBe(false);
    expect(allowed('https://gw.internal@evil.example/callback/3f1c')).toBe(false);
  });

  test('addresses no callback may reach', () => {
    for (const address of [
      '169.254.169.254',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      'fe80::1',
      '::',
      '::ffff:169.254.169.254',
      '64:ff9b::a9fe:a9fe',
      '::a9fe:a9fe',
      '2002:a9fe:a9fe::1',
      'fd00:ec2::254',
      '100.100.100.200',
      'not an address',
    ]) {
      expect({ address, forbidden: isForbiddenCallbackAddress(address) }).toEqual({
        address,
        forbidden: true,
      });
    }
    for (const address of ['127.0.0.1', '10.0.0.7', '192.168.1.2', '::1', 'fd00::7']) {
      expect({ address, forbidden: isForbiddenCallbackAddress(address) }).toEqual({
        address,
        forbidden: false,
      });
    }
  });
});

describe('the callback sender resolves names through the guard', () => {
  let gateway: CallbackReceiver;
  beforeAll(async () => {
    gateway = await startCallbackReceiver();
  });
  afterAll(async () => {
    await gateway.close();
  });

  /** A resolver that answers `address` for every name, and counts what it was asked. */
  function resolvingTo(address: string, family: 4 | 6) {
    const asked: string[] = [];
    const lookup = ((hostname: string, _options: unknown, callback: (...args: unknown[]) => void) => {
      asked.push(hostname);
      callback(null, [{ address, family }]);
    }) as unknown as LookupFunction;
    return { asked, lookup };
  }

  test('a name resolving to loopback is connected to; one resolving to 0.0.0.0 or the metadata address never is', async () => {
    const port = new URL(gateway.url).port;
    const target = (host: string) => ({
      url: new URL(`http://${host}:${port}/callback/x`),
      id: 'x',
      verifier: 'v',
    });
    const never = new AbortController().signal;

    const good = resolvingTo('127.0.0.1', 4);
    const sender = createCallbackSender({ lookup: good.lookup });
    expect(await sender.send(target('gateway.test'), { action: 'check' }, 2_000, never)).toBe('taken');
    expect(good.asked).toEqual(['gateway.test']);
    expect(gateway.received).toHaveLength(1);
    await sender.close();

    // 0.0.0.0 reaches this host's own services on Linux: without the guard the gateway would hear it.
    for (const [address, family] of [
      ['0.0.0.0', 4],
      ['169.254.169.254', 4],
      ['::ffff:169.254.169.254', 6],
    ] as const) {
      const bad = resolvingTo(address, family);
      const guarded = createCallbackSender({ lookup: bad.lookup });
      expect(await guarded.send(target('rebound.test'), { action: 'check' }, 500, never)).toBe('unreachable');
      expect(bad.asked.length).toBeGreaterThan(0);
      await guarded.close();
    }
    expect(gateway.received).toHaveLength(1);
  });
});
