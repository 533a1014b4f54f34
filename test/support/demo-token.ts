/**
 * The token a newcomer gets from `npm start`'s embedded OpenID provider, the way the printed `curl`
 * gets it: the client credentials grant with a demo client's public secret.
 */

/** The demo clients `npm start` prints, with their demo secrets (dev-issuer/index.ts). */
const DEMO_SECRETS = { 'demo-operator': 'demo-operator-secret', 'demo-acme': 'demo-acme-secret' } as const;

/** The issuer URL `npm start` logged (`callers: in-process OpenID provider with demo clients`). */
export function loggedIssuer(lines: readonly Record<string, unknown>[]): string {
  const entry = lines.find((line) => line.msg === 'callers: in-process OpenID provider with demo clients');
  if (typeof entry?.issuer !== 'string') throw new Error('npm start logged no embedded OpenID provider');
  return entry.issuer;
}

/** A fresh access token of a demo client from the issuer at `issuer`. */
export async function demoToken(
  issuer: string,
  client: keyof typeof DEMO_SECRETS = 'demo-operator',
): Promise<string> {
  const response = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${client}:${DEMO_SECRETS[client]}`).toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  const body = (await response.json()) as { access_token?: string };
  if (!response.ok || typeof body.access_token !== 'string') {
    throw new Error(`The demo issuer refused ${client}: ${response.status} ${JSON.stringify(body)}`);
  }
  return body.access_token;
}
