import { Kind } from 'graphql';
import { describe, expect, it } from 'vitest';
import { DateTimeScalar, DecimalScalar, isDecimalString } from '../../src/graph/scalars.ts';
import { isRfc3339DateTime } from '../../src/rfc3339.ts';

describe('isRfc3339DateTime', () => {
  it.each([
    '2025-01-06T09:00:00Z',
    '2025-01-06T09:00:00.123456Z',
    '2024-02-29T23:59:59+05:30',
    '2016-12-31T23:59:60Z',
    '2025-01-06t09:00:00z',
  ])('accepts %s', (value) => {
    expect(isRfc3339DateTime(value)).toBe(true);
  });

  it.each([
    ['a date without a time', '2025-01-06'],
    ['a time without an offset', '2025-01-06T09:00:00'],
    ['the 30th of February', '2025-02-30T09:00:00Z'],
    ['the 29th of February of a common year', '2025-02-29T09:00:00Z'],
    ['month 13', '2025-13-01T09:00:00Z'],
    ['hour 24', '2025-01-06T24:00:00Z'],
    ['an offset of 24 hours', '2025-01-06T09:00:00+24:00'],
    ['a human date', 'Jan 6 2025 09:00'],
  ])('refuses %s', (_name, value) => {
    expect(isRfc3339DateTime(value)).toBe(false);
  });
});

describe('isDecimalString', () => {
  it.each(['0', '12.50', '-3.000001', '123456789012.123456'])('accepts %s', (value) => {
    expect(isDecimalString(value)).toBe(true);
  });

  it.each(['', '1e3', '1,000.00', '.5', '5.', '+5', ' 5', 'NaN', '1'.repeat(41)])('refuses %j', (value) => {
    expect(isDecimalString(value)).toBe(false);
  });
});

describe('DateTime', () => {
  it('passes a valid variable through unchanged, offset and precision included', () => {
    expect(DateTimeScalar.parseValue('2025-01-06T09:00:00.5+01:00')).toBe('2025-01-06T09:00:00.5+01:00');
  });

  it('refuses a bad variable with BAD_USER_INPUT and says what it expected', () => {
    expect(() => DateTimeScalar.parseValue('yesterday')).toThrow(
      expect.objectContaining({
        message: expect.stringContaining('DateTime must be an RFC 3339 date-time'),
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    );
  });

  it('refuses a non-string literal', () => {
    expect(() => DateTimeScalar.parseLiteral({ kind: Kind.INT, value: '1700000000' })).toThrow(
      'DateTime must be written as a string literal.',
    );
  });

  it('serializes a Date as ISO 8601 UTC and refuses what is not a timestamp', () => {
    expect(DateTimeScalar.serialize(new Date(Date.UTC(2025, 0, 6, 9)))).toBe('2025-01-06T09:00:00.000Z');
    expect(() => DateTimeScalar.serialize('not a time')).toThrow('not an RFC 3339 date-time');
  });
});

describe('Decimal', () => {
  it('passes decimal strings through unchanged, trailing zeros included', () => {
    expect(DecimalScalar.parseValue('100.10')).toBe('100.10');
    expect(DecimalScalar.parseLiteral({ kind: Kind.STRING, value: '0.50' })).toBe('0.50');
    expect(DecimalScalar.serialize('2500.00')).toBe('2500.00');
  });

  it('refuses numbers, as variables and as literals, so no float enters', () => {
    expect(() => DecimalScalar.parseValue(10.5)).toThrow(
      'Decimal must be a string such as "12.50", not a number',
    );
    expect(() => DecimalScalar.parseLiteral({ kind: Kind.FLOAT, value: '10.5' })).toThrow('not a number');
    expect(() => DecimalScalar.parseLiteral({ kind: Kind.INT, value: '10' })).toThrow('not a number');
  });

  it('refuses strings that are not decimals', () => {
    expect(() => DecimalScalar.parseValue('1e3')).toThrow(
      expect.objectContaining({ extensions: { code: 'BAD_USER_INPUT' } }),
    );
  });

  it('refuses to serialize a number, which would mean a float slipped through', () => {
    expect(() => DecimalScalar.serialize(12.5)).toThrow('not a decimal string');
  });
});
