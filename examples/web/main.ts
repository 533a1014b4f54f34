/**
 * `npm run example:web`: builds the example web app and serves it on http://127.0.0.1:5173, the
 * origin the dev issuer's `demo-web` client redirects to. Start the facade first with this origin
 * allowed (see README.md): `CORS_ORIGINS=http://127.0.0.1:5173 npm start`.
 *
 * Environment: WEB_PORT (default 5173; the issuer's demo client knows 5173 only), FACADE_URL
 * (default http://127.0.0.1:4000), AUTH_ISSUER (default http://127.0.0.1:4100, the dev issuer),
 * AUTH_AUDIENCE (default platform-graphql-facade).
 */
import { buildWebExample, DEFAULT_WEB_OUTDIR } from './build.ts';
import { startWebServer } from './serve.ts';

async function main(): Promise<void> {
  const portText = process.env['WEB_PORT'] ?? '5173';
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new Error(`WEB_PORT must be a port number from 0 to 65535; got "${portText}".`);
  }
  const facadeUrl = (process.env['FACADE_URL'] ?? 'http://127.0.0.1:4000').replace(/\/+$/, '');
  const issuer = (process.env['AUTH_ISSUER'] ?? 'http://127.0.0.1:4100').replace(/\/+$/, '');
  const audience = process.env['AUTH_AUDIENCE'] ?? 'platform-graphql-facade';
  await buildWebExample();
  const config = {
    graphqlUrl: `${facadeUrl}/graphql`,
    issuer,
    clientId: 'demo-web',
    resource: URL.canParse(audience) ? audience : `urn:${audience}`,
  };
  const server = await startWebServer({ root: DEFAULT_WEB_OUTDIR, config: () => config, port });
  console.log(`Example web app: ${server.url} (facade ${config.graphqlUrl}, issuer ${issuer})`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
