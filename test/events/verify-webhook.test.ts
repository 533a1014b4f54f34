import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret, signWebhook } from '../../emulator/webhooks/signature.ts';
import { verifyWebhook } from '../../src/events/receiving/verify-webhook.ts';

const NOW_MS = 1_700_000_000_000;
const NOW_S = NOW_MS / 1000;

function signed(secret: string, body: string, { id = 'evt_1', timestamp = NOW_S } = {}) {
  return {
    headers: {
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ secret, id, timestamp, body }),
    },
    rawBody: Buffer.from(body),
  };
}

describe('verifyWebhook', () => {
  test('accepts the published Standard Webhooks test vector', () => {
    const result = verifyWebhook({
      headers: {
        'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
        'webhook-timestamp': '1614265330',
        'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
      },
      rawBody: '{"test": 2432232314}',
      secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
      now: 1614265330 * 1000,
    });
    expect(result).toEqual({ ok: true, id: 'msg_p5jXN8AQM9LWM0D4loKWxJek', timestamp: 1614265330 });
  });

  test("accepts what the emulator's signer produces, headers in any case", () => {
    const secret = generateWebhookSecret();
    const { headers, rawBody } = signed(secret, '{"id":"evt_1","note":"café ✓"}');
    const upper = Object.fromEntries(
      Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value]),
    );
    expect(verifyWebhook({ headers: upper, rawBody, secrets: [secret], now: NOW_MS }).ok).toBe(true);
  });

  test('refuses a body changed by one byte, another id, or another timestamp', () => {
    const secret = generateWebhookSecret();
    const { headers, rawBody } = signed(secret, '{"amount":"10.00"}');
    const verify = (overrides: Record<string, string>, body = rawBody) =>
      verifyWebhook({ headers: { ...headers, ...overrides }, rawBody: body, secrets: [secret], now: NOW_MS });
    expect(verify({}, Buffer.from('{"amount":"10.01"}'))).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
    expect(verify({ 'webhook-id': 'evt_2' })).toMatchObject({ ok: false, reason: 'no_matching_signature' });
    expect(verify({ 'webhook-timestamp': String(NOW_S + 1) })).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  test('refuses a signature made with another secret', () => {
    const { headers, rawBody } = signed(generateWebhookSecret(), '{}');
    expect(
      verifyWebhook({ headers, rawBody, secrets: [generateWebhookSecret()], now: NOW_MS }),
    ).toMatchObject({
      ok: false,
      reason: 'no_matching_signature',
    });
  });

  test('accepts any of several secrets during a rotation', () => {
    const oldSecret = generateWebhookSecret();
    const newSecret = generateWebhookSecret();
    for (const secret of [oldSecret, newSecret]) {
      const { headers, rawBody } = signed(secret, '{"a":1}');
      expect(verifyWebhook({ headers, rawBody, secrets: [oldSecret, newSecret], now: NOW_MS }).ok).toBe(true);
    }
  });

  test('accepts a header holding several signatures when one of them matches', () => {
    const secret = generateWebhookSecret();
    const { headers, rawBody } = signed(secret, '{"a":1}');
    const other = signWebhook({
      secret: generateWebhookSecret(),
      id: 'evt_1',
      timestamp: NOW_S,
      body: '{"a":1}',
    });
    const header = `v2,abc ${other} v1,not-base64!! ${headers['webhook-signature']}`;
    expect(
      verifyWebhook({
        headers: { ...headers, 'webhook-signature': header },
        rawBody,
        secrets: [secret],
        now: NOW_MS,
      }).ok,
    ).toBe(true);
  });

  test('applies the tolerance in both directions, five minutes by default', () => {
    const secret = generateWebhookSecret();
    const at = (timestamp: number, toleranceSeconds?: number) => {
      const { headers, rawBody } = signed(secret, '{}', { timestamp });
      return verifyWebhook({
        headers,
        rawBody,
        secrets: [secret],
        now: NOW_MS,
        ...(toleranceSeconds === undefined ? {} : { toleranceSeconds }),
      });
    };
    expect(at(NOW_S - 300).ok).toBe(true);
    expect(at(NOW_S + 300).ok).toBe(true);
    expect(at(NOW_S - 301)).toMatchObject({ ok: false, reason: 'timestamp_outside_tolerance' });
    expect(at(NOW_S + 301)).toMatchObject({ ok: false, reason: 'timestamp_outside_tolerance' });
    expect(at(NOW_S - 30, 10)).toMatchObject({ ok: false, reason: 'timestamp_outside_tolerance' });
  });

  test('signs the raw bytes: a re-serialised body with the same meaning is refused', () => {
    const secret = generateWebhookSecret();
    const { headers } = signed(secret, '{"a": 1}');
    expect(verifyWebhook({ headers, rawBody: '{"a":1}', secrets: [secret], now: NOW_MS }).ok).toBe(false);
  });

  test('answers garbage with a reason instead of throwing', () => {
    const secret = generateWebhookSecret();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{}, 'missing_headers'],
      [{ 'webhook-id': 'evt_1', 'webhook-timestamp': String(NOW_S) }, 'missing_headers'],
      [
        { 'webhook-id': 'evt_1', 'webhook-timestamp': 'soon', 'webhook-signature': 'v1,x' },
        'invalid_timestamp',
      ],
      [
        { 'webhook-id': 'evt_1', 'webhook-timestamp': '-5', 'webhook-signature': 'v1,x' },
        'invalid_timestamp',
      ],
      [
        { 'webhook-id': 'evt_1', 'webhook-timestamp': '1e9', 'webhook-signature': 'v1,x' },
        'invalid_timestamp',
      ],
      [
        { 'webhook-id': ['a', 'b'], 'webhook-timestamp': String(NOW_S), 'webhook-signature': 'v1,x' },
        'missing_headers',
      ],
      [
        { 'webhook-id': 'evt_1', 'webhook-timestamp': String(NOW_S), 'webhook-signature': ',,, v1, v1' },
        'no_matching_signature',
      ],
      [
        {
          'webhook-id': 'evt_1',
          'webhook-timestamp': String(NOW_S),
          'webhook-signature': 'v1,' + 'A'.repeat(10_000),
        },
        'no_matching_signature',
      ],
    ];
    for (const [headers, reason] of cases) {
      const result = verifyWebhook({
        headers: headers as Record<string, string>,
        rawBody: Buffer.from([0xff, 0x00]),
        secrets: [secret],
        now: NOW_MS,
      });
      expect(result, JSON.stringify(headers)).toMatchObject({ ok: false, reason });
    }
  });

  test('refuses everything when no configured secret is usable, without echoing them', () => {
    const { headers, rawBody } = signed(generateWebhookSecret(), '{}');
    const result = verifyWebhook({ headers, rawBody, secrets: ['not-a-secret', 'whsec_!!'], now: NOW_MS });
    expect(result).toMatchObject({ ok: false, reason: 'no_usable_secret' });
    expect(JSON.stringify(result)).not.toContain('not-a-secret');
  });

  test('never puts the secret or the expected signature in a refusal', () => {
    const secret = generateWebhookSecret();
    const { headers } = signed(secret, '{"a":1}');
    const result = verifyWebhook({ headers, rawBody: '{"a":2}', secrets: [secret], now: NOW_MS });
    const expected = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'))
      .update(`evt_1.${NOW_S}.{"a":2}`)
      .digest('base64');
    expect(JSON.stringify(result)).not.toContain(secret.slice(6));
    expect(JSON.stringify(result)).not.toContain(expected);
  });
});
