/**
 * The address of a new issued wallet, derived from its account id so that it is the same on every
 * run and looks like the network's own.
 */
import { createHash } from 'node:crypto';

const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/**
 * A plausible address for a new issued wallet, derived from the account id so the same account
 * always shows the same address: base58 (44 characters) on Solana, `0x` and 40 hex digits on
 * EVM-style networks and anything else.
 */
export function issuedWalletAddress(network: string, accountId: string): string {
  const digest = createHash('sha256').update(`${network}:${accountId}`).digest();
  if (network === 'solana') {
    let value = BigInt(`0x${digest.toString('hex')}`);
    let encoded = '';
    while (value > 0n) {
      encoded = BASE58_ALPHABET.charAt(Number(value % 58n)) + encoded;
      value /= 58n;
    }
    return encoded.padStart(44, '1');
  }
  return `0x${digest.subarray(0, 20).toString('hex')}`;
}
