/**
 * Exact decimal arithmetic for money strings. Amounts are held as BigInt counts of
 * millionths (six decimals, the finest precision the upstream accepts), so adding
 * and subtracting balances never meets a binary float.
 */

const SCALE_DIGITS = 6;
const SCALE = 10n ** BigInt(SCALE_DIGITS);
const DECIMAL_PATTERN = /^(\d+)(?:\.(\d{1,6}))?$/;

/** A money amount in millionths of a major unit. */
export type ScaledAmount = bigint;

/**
 * Parses a non-negative major-unit decimal string (`"12.5"`, `"0.000001"`).
 *
 * @throws RangeError when the string is not digits with at most six decimals.
 */
export function parseAmount(value: string): ScaledAmount {
  const match = DECIMAL_PATTERN.exec(value);
  if (!match)
    throw new RangeError(
      `Not a decimal amount with at most ${SCALE_DIGITS} decimals: ${JSON.stringify(value)}`,
    );
  const [, whole = '0', fraction = ''] = match;
  return BigInt(whole) * SCALE + BigInt(fraction.padEnd(SCALE_DIGITS, '0'));
}

/**
 * Formats an amount the way the upstream writes money: at least two decimals (`"12.50"`),
 * more only when they carry value (`"0.000001"`).
 */
export function formatAmount(amount: ScaledAmount): string {
  const negative = amount < 0n;
  const magnitude = negative ? -amount : amount;
  const whole = magnitude / SCALE;
  const fraction = (magnitude % SCALE)
    .toString()
    .padStart(SCALE_DIGITS, '0')
    .replace(/0+$/, '')
    .padEnd(2, '0');
  return `${negative ? '-' : ''}${whole}.${fraction}`;
}
