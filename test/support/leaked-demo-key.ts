/**
 * What the tests know of the RSA key that earlier versions of the dev issuer shipped as their fixed
 * demo signing key: its key id and its public modulus, both public facts (the issuer's key set served
 * them). Its private part is not in the repository. A token minted offline with it reaches the
 * verifier exactly as any token signed with a key the issuer did not generate at its start: so the
 * tests sign such tokens with a key of their own, generated here, under the old key id or the
 * issuer's, and check that the old modulus is nowhere in the key set.
 */
import { generateKeyPair } from 'jose';

/** The old key's id, as the tokens it signed carried it. */
export const LEAKED_DEMO_SIGNING_KEY_ID = 'dev-issuer-demo-2026';

/** The old key's public modulus (`n`), as the issuer's key set published it. */
export const LEAKED_DEMO_PUBLIC_MODULUS =
  'xbrYn6Pm95clP4iLDZRB-cKiB-7ScOwU-mV07maV7etnWG2zZLeB1NLex6hEL1fl8LBHuCHONZQII-i2g8_EUE-mfhUDQgiCp4SaLawdHu6P-MGFpk8fvdUauMQfbZ_5mmjnfw7klQnlBNqyiM9C2mRaeGWWGE4o6SB4OjXIkScPZV_JoF79GD1PAa39CEJuyka8S1LO7zRmcqSOacADVKl_vmvmoccQ5Dqx1zTa18qWtcYQHAuNTIT2ltfQr5VvfmacZYMVcjbJw0cIqDE7Pgd35ShsNr8cwuLdWV_SCowBcDAEonHAxlPCRyYXzpk_fKcGYUnAhitNzGVn-AF79w';

/** A private key no issuer ever published: what an attacker signing offline holds. */
export async function offlineSigningKey(): Promise<CryptoKey> {
  return (await generateKeyPair('RS256')).privateKey;
}
