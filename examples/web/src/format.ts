/**
 * Money and dates as the reader's locale writes them (Intl). Amounts stay decimal strings end to end:
 * the facade sends them as the upstream does ("12500.00"), and Intl formats a decimal string exactly,
 * never through a binary float.
 */

/** ISO 4217 codes are three letters; stablecoins and tokens (USDC, ETH) are not currencies to Intl. */
const ISO_CURRENCY = /^[A-Z]{3}$/;

/** `12500.00` in `USDC` → `12,500.00 USDC`; in `USD` → `$12,500.00` (for an en-US reader). */
export function formatMoney(amount: string, currency: string): string {
  const fraction = /\.(\d+)$/.exec(amount)?.[1]?.length ?? 0;
  const digits = {
    minimumFractionDigits: Math.max(2, fraction),
    maximumFractionDigits: Math.max(2, fraction),
  };
  // Intl.NumberFormat formats a numeric string as the exact decimal it spells (ECMA-402 v3).
  const exact = amount as unknown as number;
  if (ISO_CURRENCY.test(currency) && isIntlCurrency(currency)) {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency, ...digits }).format(exact);
  }
  return `${new Intl.NumberFormat(undefined, digits).format(exact)} ${currency}`;
}

function isIntlCurrency(currency: string): boolean {
  try {
    new Intl.NumberFormat(undefined, { style: 'currency', currency });
    return true;
  } catch {
    return false;
  }
}

const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** An ISO 8601 instant as the reader's date and time (`Nov 27, 2026, 2:31 AM`); anything else as it is. */
export function formatDateTime(instant: string): string {
  const date = new Date(instant);
  return Number.isNaN(date.getTime()) ? instant : DATE_TIME.format(date);
}
