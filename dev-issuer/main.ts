/**
 * Runs the dev issuer standalone: `npm run dev-issuer`, for trying the facade with real tokens.
 *
 * Environment: DEV_ISSUER_PORT (default 4100), DEV_ISSUER_HOST (default 127.0.0.1),
 * DEV_ISSUER_AUDIENCE (default `platform-graphql-facade`), DEV_ISSUER_URL (the issuer identifier,
 * default `http://<host>:<port>`; set it when clients reach the issuer under another name, as in
 * compose.yaml). The clients are the demo clients, whose secrets are documented: keep its port
 * where only you reach it (compose.yaml publishes it on the host's loopback only); the browser
 * clients and users are the demo ones. It signs with a key generated at each start.
 */
import { DEFAULT_AUDIENCE, startDevIssuer } from './index.ts';

async function main(): Promise<void> {
  const portText = process.env['DEV_ISSUER_PORT'] ?? '4100';
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`DEV_ISSUER_PORT must be a port number from 0 to 65535; got "${portText}".`);
  }
  const issuer = await startDevIssuer({
    port,
    host: process.env['DEV_ISSUER_HOST'] ?? '127.0.0.1',
    audience: process.env['DEV_ISSUER_AUDIENCE'] ?? DEFAULT_AUDIENCE,
    ...(process.env['DEV_ISSUER_URL'] ? { issuerUrl: process.env['DEV_ISSUER_URL'] } : {}),
  });
  console.log(
    `Dev issuer (key generated at this start, documented demo clients: local use only) listening: AUTH_ISSUER=${issuer.issuer} AUTH_AUDIENCE=${issuer.audience}`,
  );
  console.log(
    `Clients: ${issuer.clients.map((client) => client.clientId).join(', ')}; tokens from ${issuer.tokenUrl}`,
  );
  console.log(
    `Browser sign-in: ${issuer.webClients.map((client) => client.clientId).join(', ')} as ` +
      `${issuer.users.map((user) => user.username).join(', ')} (demo users, loopback only)`,
  );

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    issuer.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('Shutdown failed', String(error));
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
