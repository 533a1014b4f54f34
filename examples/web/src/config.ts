/** Where the app finds the facade and the issuer: `/config.json`, written by the server that serves the app. */
export interface WebConfig {
  /** The facade's GraphQL endpoint (HTTP); graphql-ws is the same URL over ws(s). */
  graphqlUrl: string;
  /** The OpenID provider's issuer identifier; its endpoints come from its discovery document. */
  issuer: string;
  /** This app's public client at the issuer. */
  clientId: string;
  /** The facade's resource indicator (RFC 8707): the audience the access token is for. */
  resource: string;
}

export async function loadConfig(): Promise<WebConfig> {
  const response = await fetch('/config.json', { cache: 'no-store' });
  if (!response.ok) throw new Error(`/config.json answered ${response.status}`);
  return (await response.json()) as WebConfig;
}
