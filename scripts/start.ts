/**
 * `npm start`. With no UPSTREAM_BASE_URL, starts the emulator in-process on an ephemeral loopback
 * port with its demo data and points the facade at it; with UPSTREAM_BASE_URL set, the facade
 * calls that upstream with UPSTREAM_API_KEY (required). Either way, main.ts does the rest.
 *
 * Callers need an access token. With no AUTH_ISSUER (and AUTH_MODE not `none`) beside the embedded
 * emulator, a real OpenID provider (dev-issuer/) starts in-process too, with two demo clients, and
 * the commands that get their tokens are printed. Nothing of it runs when AUTH_ISSUER is set, and a
 * real upstream without AUTH_ISSUER refuses to start (config.ts says how to proceed). The demo
 * issuer signs with a key generated at this start, and the facade refuses to run it while listening
 * beyond loopback unless DEMO_ALLOW_NETWORK=true (scripts/demo-network-exposure.ts).
 *
 * Traces: when the OTEL_* variables ask for them (src/observability/tracing-config.ts), the
 * OpenTelemetry entry is imported first, and only then everything else, so its loader hook sees
 * express and ioredis imported; the same as `node --import ./src/observability/tracing-entry.ts`,
 * in one process. Every other import below is therefore dynamic: a static one would load the app
 * before the entry runs. With tracing off, nothing of OpenTelemetry is imported.
 */
import { tracingRequested } from '../src/observability/tracing-config.ts';

if (tracingRequested(process.env)) await import('../src/observability/tracing-entry.ts');

const [
  { DEMO_CLIENTS, startDevIssuer },
  { createEmulator },
  { ConfigError, loadConfig },
  { createLogger },
  { main },
  { demoExposure },
] = await Promise.all([
  import('../dev-issuer/index.ts'),
  import('../emulator/index.ts'),
  import('../src/config.ts'),
  import('../src/logger.ts'),
  import('../src/main.ts'),
  import('./demo-network-exposure.ts'),
]);

/** The demo was asked to listen where it must not: the message says what to do instead. */
class DemoRefusal extends Error {}

/** The emulator's default sandbox key (read_write): a demo value, not a secret. */
const EMULATOR_SANDBOX_KEY = 'sk_sandbox_emulator';

/** Where the demo issuer listens, so the printed token commands stay the same from run to run. */
const DEFAULT_DEV_ISSUER_PORT = 4100;

const env = { ...process.env };
const logger = createLogger({ level: 'info' });
const stops: (() => Promise<void>)[] = [];
const stopAll = async (): Promise<void> => {
  for (const stop of stops.splice(0).reverse()) await stop();
};
const blank = (value: string | undefined): boolean => value === undefined || value.trim() === '';

try {
  if (blank(env.UPSTREAM_BASE_URL)) {
    const emulator = createEmulator({ data: 'demo' });
    const { url } = await emulator.listen(0, '127.0.0.1');
    stops.push(() => emulator.close());
    if (env.UPSTREAM_API_KEY !== undefined) {
      logger.warn('UPSTREAM_API_KEY is ignored: without UPSTREAM_BASE_URL the in-process emulator is used');
    }
    env.UPSTREAM_BASE_URL = url;
    env.UPSTREAM_API_KEY = EMULATOR_SANDBOX_KEY;
    // The embedded emulator can reach the facade's loopback address: register it for webhooks.
    env.WEBHOOK_REGISTER ??= 'true';
    logger.info('upstream: in-process emulator with demo data', { upstream: url });

    if (blank(env.AUTH_ISSUER) && env.AUTH_MODE?.trim() !== 'none') {
      const exposure = demoExposure(blank(env.HOST) ? '127.0.0.1' : env.HOST!, env);
      if (exposure.kind === 'refused') throw new DemoRefusal(exposure.message);
      if (exposure.kind === 'allowed') logger.warn(exposure.warning);
      const port = blank(env.DEV_ISSUER_PORT) ? DEFAULT_DEV_ISSUER_PORT : Number(env.DEV_ISSUER_PORT);
      const issuer = await startDevIssuer({ port });
      stops.push(() => issuer.close());
      env.AUTH_ISSUER = issuer.issuer;
      env.AUTH_AUDIENCE = issuer.audience;
      logger.info('callers: in-process OpenID provider with demo clients', {
        issuer: issuer.issuer,
        clients: DEMO_CLIENTS.map(({ clientId, roles, customerIds }) => ({ clientId, roles, customerIds })),
      });
      // For the person at the terminal; stdout stays JSON lines.
      process.stderr.write(tokenHelp(issuer.tokenUrl));
    }
  }

  const config = loadConfig(env);
  // Logged only once validated: a URL refused for holding credentials never reaches a log line.
  if (stops.length === 0) logger.info('upstream: configured', { upstream: config.upstream.baseUrl });
  await main(config, { afterClose: stopAll });
} catch (error) {
  await stopAll();
  if (error instanceof ConfigError || error instanceof DemoRefusal) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  throw error;
}

/** How to get each demo client's token: one `curl` with client credentials. Demo secrets only. */
function tokenHelp(tokenUrl: string): string {
  const lines = DEMO_CLIENTS.map((client) => {
    const who = client.roles?.includes('operator')
      ? 'operator (every customer)'
      : `caller scoped to ${(client.customerIds ?? []).join(', ')}`;
    return (
      `#   ${who}:\n` +
      `curl -s -u ${client.clientId}:${client.clientSecret} -d grant_type=client_credentials ${tokenUrl} | jq -r .access_token\n`
    );
  });
  return (
    `# Demo access tokens (send them as "Authorization: Bearer <token>"):\n${lines.join('')}` +
    '# In Apollo Sandbox: Connection settings > Headers > Authorization: Bearer <token>\n'
  );
}
