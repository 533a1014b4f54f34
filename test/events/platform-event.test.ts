import { describe, expect, test } from 'vitest';
import { MAX_EVENT_DEPTH, parsePlatformEvent } from '../../src/events/receiving/platform-event.ts';

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

describe('an event the facade can never process', () => {
  const withData = (data: Record<string, unknown>) => ({ ...valid, data: { ...valid.data, ...data } });
  const nested = (depth: number): unknown => {
    let value: unknown = { id: 'acc_1' };
    for (let level = 0; level < depth; level += 1) value = [value];
    return value;
  };

  test.each([
    [
      'a lone high surrogate in customerId',
      withData({ customerId: '\ud800' }),
      'invalid_text',
      '/data/customerId',
    ],
    [
      'a lone low surrogate in resourceId',
      withData({ resourceId: 'acc_\udc00' }),
      'invalid_text',
      '/data/resourceId',
    ],
    [
      'a lone surrogate deep in the record',
      withData({ object: { a: [{ b: 'x\ud83d' }] } }),
      'invalid_text',
      '/data/object/a/0/b',
    ],
    [
      'a lone surrogate in a member name',
      withData({ object: { 'na\udfffme': 1 } }),
      'invalid_text',
      '/data/object/na\udfffme',
    ],
    [
      'a control character in customerId',
      withData({ customerId: 'cus_\u0000' }),
      'invalid_id',
      '/data/customerId',
    ],
    ['a path in resourceId', withData({ resourceId: '../acc_1' }), 'invalid_id', '/data/resourceId'],
    ['a percent-escape in resourceId', withData({ resourceId: 'acc%2F1' }), 'invalid_id', '/data/resourceId'],
    [
      'a resourceId of 129 characters',
      withData({ resourceId: 'a'.repeat(129) }),
      'invalid_id',
      '/data/resourceId',
    ],
    ['a numeric customerId', withData({ customerId: 7 }), 'invalid_id', '/data/customerId'],
    ['an event id with a space', { ...valid, id: 'evt 1' }, 'invalid_id', '/id'],
    ['an event id that is not ASCII', { ...valid, id: 'evt_é' }, 'invalid_id', '/id'],
    ['a kind with a space', { ...valid, type: 'account updated' }, 'invalid_name', '/type'],
    [
      'a kind named like a member of every object',
      { ...valid, type: 'constructor' },
      'invalid_name',
      '/type',
    ],
    [
      'a resource type named like one',
      withData({ resourceType: 'toString' }),
      'invalid_name',
      '/data/resourceType',
    ],
    ['a record that is a string', withData({ object: 'acc_1' }), 'invalid_envelope', '/data/object'],
    ['a record that is an array', withData({ object: [] }), 'invalid_envelope', '/data/object'],
  ])('%s', (_name, event, reason, pointer) => {
    expect(parsePlatformEvent(JSON.stringify(event))).toMatchObject({ ok: false, reason, pointer });
  });

  test('nesting deeper than MAX_EVENT_DEPTH levels, and no deeper is refused', () => {
    // The envelope, data and the record are three levels: the record may nest 29 more.
    const deepest = parsePlatformEvent(JSON.stringify(withData({ object: { a: nested(28) } })));
    expect(deepest.ok).toBe(true);
    const tooDeep = parsePlatformEvent(JSON.stringify(withData({ object: { a: nested(29) } })));
    expect(tooDeep).toMatchObject({ ok: false, reason: 'too_deep' });
    expect(MAX_EVENT_DEPTH).toBe(32);
  });

  test('a body nested 100,000 levels deep is refused without running out of stack', () => {
    const body = JSON.stringify(valid).replace(
      '{"id":"acc_1"}',
      `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
    );
    expect(parsePlatformEvent(body)).toMatchObject({ ok: false, reason: 'too_deep' });
  });

  test('a number no double holds, and a body that is not UTF-8', () => {
    const huge = JSON.stringify(valid).replace('{"id":"acc_1"}', '{"amount":1e400}');
    expect(parsePlatformEvent(huge)).toMatchObject({
      ok: false,
      reason: 'invalid_number',
      pointer: '/data/object/amount',
    });
    const notUtf8 = Buffer.concat([
      Buffer.from(JSON.stringify(valid).slice(0, -2)),
      Buffer.from([0xff, 0x22, 0x7d, 0x7d]),
    ]);
    expect(parsePlatformEvent(notUtf8)).toMatchObject({ ok: false, reason: 'invalid_json' });
  });

  test("keeps the reconciler's own event ids, which are not plain ids", () => {
    const event = { ...valid, id: 'reconciled:account:acc_1:2026-01-02T03:04:05.678Z' };
    expect(parsePlatformEvent(JSON.stringify(event))).toEqual({ ok: true, event });
  });

  test('keeps what only looks odd: control characters, emoji and big numbers inside the record', () => {
    const event = withData({ object: { id: 'acc_1', note: 'tab\there\u0000', name: '😀', big: 1e308 } });
    expect(parsePlatformEvent(JSON.stringify(event))).toEqual({ ok: true, event });
  });

  test('hands back the JSON value of a refused body, for the dead-letter record', () => {
    const event = withData({ customerId: '\ud800' });
    expect(parsePlatformEvent(JSON.stringify(event))).toMatchObject({ ok: false, value: event });
  });
});
