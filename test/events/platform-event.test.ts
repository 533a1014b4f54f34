import { describe, expect, test } from 'vitest';
import { parsePlatformEvent } from '../../src/events/receiving/platform-event.ts';

const valid = {
  id: 'evt_1',
  type: 'account.updated',
  occurredAt: '2026-01-02T03:04:05.678Z',
  environment: 'sandbox',
  data: { customerId: 'cus_1', resourceType: 'account', resourceId: 'acc_1', object: { id: 'acc_1' } },
};

describe('parsePlatformEvent', () => {
  test('returns the documented envelope typed', () => {
    expect(parsePlatformEvent(Buffer.from(JSON.stringify(valid)))).toEqual({ ok: true, event: valid });
  });

  test('keeps an unknown event kind (the set is open) and a null customer', () => {
    const event = { ...valid, type: 'payout.invented', data: { ...valid.data, customerId: null } };
    expect(parsePlatformEvent(JSON.stringify(event))).toMatchObject({ ok: true, event });
  });

  test.each([
    ['not JSON', '{"id":', /not valid JSON/],
    ['an array', '[]', /JSON object/],
    ['no id', JSON.stringify({ ...valid, id: undefined }), /"id"/],
    ['a numeric type', JSON.stringify({ ...valid, type: 7 }), /"type"/],
    ['a bad timestamp', JSON.stringify({ ...valid, occurredAt: 'yesterday' }), /"occurredAt"/],
    ['an unknown environment', JSON.stringify({ ...valid, environment: 'staging' }), /"environment"/],
    ['no data', JSON.stringify({ ...valid, data: null }), /"data"/],
    ['no resource id', JSON.stringify({ ...valid, data: { ...valid.data, resourceId: '' } }), /resourceId/],
    ['no object', JSON.stringify({ ...valid, data: { ...valid.data, object: undefined } }), /object/],
  ])('refuses %s with a message naming the problem', (_name, body, message) => {
    const result = parsePlatformEvent(body);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(message);
  });
});
