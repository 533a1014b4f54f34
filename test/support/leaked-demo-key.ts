/**
 * The RSA key that earlier versions of the dev issuer shipped, private part included, as their fixed
 * demo signing key. It is no secret: it stays readable in the repository's history, so anyone can
 * sign with it. It is kept here, in the tests only, so that the tests can prove that nothing the
 * repository ships trusts it any more: the dev issuer generates a fresh key at every start.
 */
import type { JWK } from 'jose';

/** The leaked key's id, as the old tokens carried it. */
export const LEAKED_DEMO_SIGNING_KEY_ID = 'dev-issuer-demo-2026';

export const LEAKED_DEMO_SIGNING_KEY: JWK = {
  kty: 'RSA',
  kid: 'dev-issuer-demo-2026',
  alg: 'RS256',
  use: 'sig',
  n: 'xbrYn6Pm95clP4iLDZRB-cKiB-7ScOwU-mV07maV7etnWG2zZLeB1NLex6hEL1fl8LBHuCHONZQII-i2g8_EUE-mfhUDQgiCp4SaLawdHu6P-MGFpk8fvdUauMQfbZ_5mmjnfw7klQnlBNqyiM9C2mRaeGWWGE4o6SB4OjXIkScPZV_JoF79GD1PAa39CEJuyka8S1LO7zRmcqSOacADVKl_vmvmoccQ5Dqx1zTa18qWtcYQHAuNTIT2ltfQr5VvfmacZYMVcjbJw0cIqDE7Pgd35ShsNr8cwuLdWV_SCowBcDAEonHAxlPCRyYXzpk_fKcGYUnAhitNzGVn-AF79w',
  e: 'AQAB',
  d: 'Um0pkKMKzXu8k1egX_DF8BAq65OrNle0Bw30SM2LArt3QW25suqsvMOLC0Ah7Hp_6G4T97Zf-AXVvuJr81bRR4lspnKsAQL7NEoa2588JIDek5xY0pN5b_E-Sne3gkOGEdBZcKYMs_SD_BoPAukjvVbIQBhZEZjDhSt78wgorBkXj2jbM0j2fszPM6zOGeqfcNCRZumVvkRnS8pv0MqsBPK-ogrJoupu3nQRPQHvMWO_WMVJhwRbSzibThwF3BfGtUB5C0Jd6X58TNX08b6u0JbLJ9FJTjSUMkh0pzuHp5ydMWpp7zoF_7QUtlLhAYoyHU0XKAbBnE6Eg_-2QnlmQQ',
  p: '_Aul7Ru7muVuJs6lgBXJlLdpiT6srMSJEh9REfpktnioQaHX3ZMEsNHhK8VdLpie4P-MozOqvrhWB9T8XhZ9TE3PQgTDrH-pgW9sQWaFY0BJ_nhkm21z_JLcCN2e0PH2E81Ix4eba8dHAd8iRgBLml61M4LIysH5qRwC28ckQcM',
  q: 'yNUJcrS5x-0P8bJIkKyso4sHwgJtCu3txRGRJawNvjUl3b0i9MObmjwm2fGUF2nMH-SCHk5F8spFNejYL-EoAOJpfcz2f0AZCPPOKvXsm1pEcsQhbzBQIDLBuUZNpWLoyvJeP8nDxGAu0YzmlxFwxMGY4Bb4guTNQnafnyLZZb0',
  dp: 'kcvTIYNHVGSfAUfMKHlx79rg64kbrZzKhXckGDg1he_ptH2ANyXSMs5VaFJ0gn26egCZQ9ahUE2lRkaH7Y0o0bi4yUGkRuZaEQt5HaPGSRFpPBA8ckQwMcxqB57bPZaZd_7puLHSz9eoVYbTdpa5JQTf4Hoo2FC4sIAJj0R0zq0',
  dq: 'aMjOnyywaiHEWeUde268vK_DonRFlJhDoLjjtHYqzX1JfoI6hN6yhyyvULN9AyJOQK2nPky0rlLe_Zu5gHHHv35icCLK0eYNqeAbR8r8YqocYIz4rNzWUZZqAVMvHAWZVJpUlo-dNw7AHtGXVmbhIaepLfKOQy1B81WVPyCdsTk',
  qi: '3DU0_cziIoEy0UjK1UIstkJCj-Q37DAo3fdKgPr1N_rwthZZarZ64IZpgJwfKMZ4iKvu2Kx25aWlH9lieMZun0Pna_avfQ95IF6dYYW12XGjbUV_ghhHKPoNVrR9ICXYq5EGy21tcSeWZ3NkxmFt6yoiPlPWbk-KhgFE7ymkKd8',
};
