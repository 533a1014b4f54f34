import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret, signWebhook } from '../../emulator/webhooks/signature.ts';

/** The receiver's side, written from the Standard Webhooks definition rather than from the signer. */
function expectedSignature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
}

describe('signWebhook', () => {
  test('reproduces the published Standard Webhooks test vector', () => {
    expect(
      signWebhook({
        secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
        timestamp: 1614265330,
        body: '{"test": 2432232314}',
      }),
    ).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  test('matches an independent HMAC over id.timestamp.body with the decoded secret', () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ id: 'evt_1', amount: '10.50', note: 'caf\u00e9 \u2713' });
    expect(signWebhook({ secret, id: 'evt_1', timestamp: 1_700_000_000, body })).toBe(
      expectedSignature(secret, 'evt_1', 1_700_000_000, body),
    );
  });

  test('changes when the body, the id, the timestamp or the secret changes', () => {
    const secret = generateWebhookSecret();
    const base = { secret, id: 'evt_1', timestamp: 1_700_000_000, body: '{"a":1}' };
    const signature = signWebhook(base);
    expect(signWebhook({ ...base, body: '{"a":2}' })).not.toBe(signature);
    expect(signWebhook({ ...base, id: 'evt_2' })).not.toBe(signature);
    expect(signWebhook({ ...base, timestamp: 1_700_000_001 })).not.toBe(signature);
    expect(signWebhook({ ...base, secret: generateWebhookSecret() })).not.toBe(signature);
  });

  test('rejects a malformed secret without echoing it', () => {
    for (const secret of [
      '',
      'whsec_',
      'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      'whsec_not base64!!',
      'whsec_abc',
    ]) {
      let thrown: unknown;
      try {
        signWebhook({ secret, id: 'evt_1', timestamp: 1, body: '{}' });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, secret).toBeInstanceOf(TypeError);
      const message = (thrown as Error).message;
      expect(message).toMatch(/whsec_/);
      if (secret.length > 6) expect(message).not.toContain(secret);
    }
  });

  test('rejects a timestamp that is not whole Unix seconds', () => {
    const secret = generateWebhookSecret();
    expect(() => signWebhook({ secret, id: 'evt_1', timestamp: 1.5, body: '{}' })).toThrow(TypeError);
    expect(() => signWebhook({ secret, id: 'evt_1', timestamp: -1, body: '{}' })).toThrow(TypeError);
  });
});

describe('generateWebhookSecret', () => {
  test('is whsec_ followed by the base64 of 32 random bytes, different every time', () => {
    const secrets = new Set(Array.from({ length: 20 }, () => generateWebhookSecret()));
    expect(secrets.size).toBe(20);
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    }
  });
});
