import { describe, expect, test } from 'vitest';
import { createTimestampSource } from '../../emulator/store/clock.ts';
import { formatAmount, parseAmount } from '../../emulator/store/decimal.ts';

describe('decimal money arithmetic', () => {
  test('adds amounts exactly where binary floats would not', () => {
    expect(formatAmount(parseAmount('0.1') + parseAmount('0.2'))).toBe('0.30');
    expect(formatAmount(parseAmount('999999999999.999999') + parseAmount('0.000001'))).toBe(
      '1000000000000.00',
    );
  });

  test('formats with at least two decimals and only significant further ones', () => {
    expect(formatAmount(parseAmount('12'))).toBe('12.00');
    expect(formatAmount(parseAmount('12.5'))).toBe('12.50');
    expect(formatAmount(parseAmount('0.000001'))).toBe('0.000001');
    expect(formatAmount(parseAmount('1') - parseAmount('2.25'))).toBe('-1.25');
  });

  test.each([['1.1234567'], ['-1'], ['1e3'], [''], ['.5'], ['1.']])('refuses %j', (value) => {
    expect(() => parseAmount(value)).toThrow(RangeError);
  });
});

describe('timestamps of changes', () => {
  test('strictly increase even when the clock stalls or steps back', () => {
    const readings = [
      new Date('2026-01-01T00:00:00.000Z'),
      new Date('2026-01-01T00:00:00.000Z'),
      new Date('2025-12-31T23:00:00.000Z'),
    ];
    let index = 0;
    const timestamps = createTimestampSource(() => readings[Math.min(index++, readings.length - 1)]!);
    expect([timestamps.next(), timestamps.next(), timestamps.next()]).toEqual([
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T00:00:00.001Z',
      '2026-01-01T00:00:00.002Z',
    ]);
  });

  test('come after a timestamp the store has been told about', () => {
    const timestamps = createTimestampSource(() => new Date('2020-01-01T00:00:00.000Z'));
    timestamps.advancePast('2025-01-06T19:00:00.000Z');
    expect(timestamps.next()).toBe('2025-01-06T19:00:00.001Z');
  });
});
