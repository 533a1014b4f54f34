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
 * beyond loopback unless DEMO_ALLOW_NETWORK=true (src/demo-network-exposure.ts).
 *
 * Traces: when the OTEL_* variables ask for them (src/observability/tracing-config.ts), the
 * OpenTelemetry entry is imported first, and only then everything else, so its loader hook sees
 * express and ioredis imported; the same as `node --import ./src/observability/tracing-entry.ts`,
 * in one process. Every other import below is therefore dynamic: a static one would load the app
 * before the entry runs. With tracing off, nothing of OpenTelemetry is imported.
 */
import type * as DevIssuerModule from '../dev-issuer/index.ts';
import type { DevIssuerClient } from '../dev-issuer/index.ts';
import { tracingRequested } from '../src/observability/tracing-config.ts';

if (tracingRequested(process.env)) await import('../src/observability/tracing-entry.ts');

const [
  { createEmulator },
  { ConfigError, loadConfig },
  { createLogger },
  { main, StartError, listenFailure },
  { demoExposure },
] = await Promise.all([
  import('../emulator/index.ts'),
  import('../src/config.ts'),
  import('../src/logger.ts'),
  import('../src/main.ts'),
  import('../src/demo-network-exposure.ts'),
]);

/** The demo was asked to listen where it must not: the message says what to do instead. */

/** The emulator's default sandbox key (read_write): a demo value, not a secret. */
const EMULATOR_SANDBOX_KEY = 'sk_sandbox_emulator';

/** Where the demo issuer listens, so the printed token commands stay the same from run to run. */
const DEFAULT_DEV_ISSUER_PORT = 4100;

/**
 * Stands in for the embedded services' addresses while the configuration is checked before they
 * start: never called.
 */
const NOT_YET_LISTENING = 'http://127.0.0.1:1';

const env = { ...process.env };
const logger = createLogger({ level: 'info' });
const stops: (() => Promise<void>)[] = [];
const stopAll = async (): Promise<void> => {
  for (const stop of stops.splice(0).reverse()) await stop();
};
const blank = (value: string | undefined): boolean => value === undefined || value.trim() === '';

/** Every variable that names the facade's upstream key: the embedded emulator's key replaces them. */
const UPSTREAM_KEY_VARIABLES = [
  'UPSTREAM_API_KEY',
  'UPSTREAM_API_KEY_FILE',
  'UPSTREAM_API_KEY_SANDBOX',
  'UPSTREAM_API_KEY_SANDBOX_FILE',
  'UPSTREAM_API_KEY_LIVE',
  'UPSTREAM_API_KEY_LIVE_FILE',
] as const;

/** `variables` without any upstream key (the embedded emulator's is set instead). */
function withoutUpstreamKeys(variables: typeof env): typeof env {
  return Object.fromEntries(
    Object.entries(variables).filter(
      ([name]) => !(UPSTREAM_KEY_VARIABLES as readonly string[]).includes(name),
    ),
  );
}

try {
  const embedUpstream = blank(env.UPSTREAM_BASE_URL);
  const embedIssuer = embedUpstream && blank(env.AUTH_ISSUER) && env.AUTH_MODE?.trim() !== 'none';
  const devIssuerPort = embedIssuer ? readDevIssuerPort(env.DEV_ISSUER_PORT) : undefined;
  if (embedIssuer) {
    // The demo's callers are documented: beyond loopback they are anyone's, unless asked for.
    const exposure = demoExposure(blank(env.HOST) ? '127.0.0.1' : env.HOST!, env);
    if (exposure.kind === 'refused') throw new StartError(exposure.message);
    if (exposure.kind === 'allowed') logger.warn(exposure.warning);
  }
  const devIssuer = embedIssuer ? await importDevIssuer() : undefined;
  if (embedUpstream) {
    // Everything the facade reads is checked before anything starts, so a bad variable is the only
    // thing printed: the embedded services' own values stand in for the addresses they will have.
    loadConfig({
      ...withoutUpstreamKeys(env),
      UPSTREAM_BASE_URL: NOT_YET_LISTENING,
      UPSTREAM_API_KEY: EMULATOR_SANDBOX_KEY,
      ...(devIssuer === undefined
        ? {}
        : { AUTH_ISSUER: NOT_YET_LISTENING, AUTH_AUDIENCE: devIssuer.DEFAULT_AUDIENCE }),
    });
  }

  let tokenUrl: string | undefined;
  if (embedUpstream) {
    const emulator = createEmulator({ data: 'demo' });
    const { url } = await emulator.listen(0, '127.0.0.1');
    stops.push(() => emulator.close());
    if (UPSTREAM_KEY_VARIABLES.some((name) => env[name] !== undefined)) {
      logger.warn(
        'UPSTREAM_API_KEY and UPSTREAM_API_KEY_FILE (and the per-environment keys) are ignored: without UPSTREAM_BASE_URL the in-process emulator is used',
      );
    }
    for (const name of UPSTREAM_KEY_VARIABLES) Reflect.deleteProperty(env, name);
    env.UPSTREAM_BASE_URL = url;
    env.UPSTREAM_API_KEY = EMULATOR_SANDBOX_KEY;
    // The embedded emulator can reach the facade's loopback address: register it for webhooks.
    env.WEBHOOK_REGISTER ??= 'true';
    logger.info('upstream: in-process emulator with demo data', { upstream: url });

    if (devIssuer !== undefined && devIssuerPort !== undefined) {
      const issuer = await devIssuer.startDevIssuer({ port: devIssuerPort }).catch((error: unknown) => {
        throw listenFailure(error, 'the demo OpenID provider', '127.0.0.1', devIssuerPort, 'DEV_ISSUER_PORT');
      });
      stops.push(() => issuer.close());
      env.AUTH_ISSUER = issuer.issuer;
      env.AUTH_AUDIENCE = issuer.audience;
      tokenUrl = issuer.tokenUrl;
      logger.info('callers: in-process OpenID provider with demo clients', {
        issuer: issuer.issuer,
        clients: devIssuer.DEMO_CLIENTS.map(({ clientId, roles, customerIds }) => ({
          clientId,
          roles,
          customerIds,
        })),
      });
    }
  }

  const config = loadConfig(env);
  // Logged only once validated: a URL refused for holding credentials never reaches a log line.
  if (stops.length === 0) logger.info('upstream: configured', { upstream: config.upstream.baseUrl });
  await main(config, { afterClose: stopAll });
  // Only once the facade listens: for the person at the terminal (stdout stays JSON lines).
  if (devIssuer !== undefined && tokenUrl !== undefined) {
    process.stderr.write(tokenHelp(devIssuer.DEMO_CLIENTS, tokenUrl));
  }
} catch (error) {
  await stopAll();
  if (error instanceof ConfigError || error instanceof StartError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  throw error;
}

/** `DEV_ISSUER_PORT`, or the default; anything but a port number refuses to start. */
function readDevIssuerPort(text: string | undefined): number {
  if (blank(text)) return DEFAULT_DEV_ISSUER_PORT;
  const port = Number(text);
  if (!/^\s*\d+\s*$/.test(text!) || port > 65_535) {
    throw new StartError(
      `DEV_ISSUER_PORT must be a port number from 0 to 65535 (0: any free port); got ${JSON.stringify(text)}.`,
    );
  }
  return port;
}

/**
 * The demo OpenID provider, imported only when it runs: oidc-provider is a development
 * dependency, absent from a production install (`npm ci --omit=dev`, the image).
 */
async function importDevIssuer(): Promise<typeof DevIssuerModule> {
  try {
    return await import('../dev-issuer/index.ts');
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new StartError(
      'The demo OpenID provider needs the development dependencies (npm ci, without --omit=dev). ' +
        'Set AUTH_ISSUER and AUTH_AUDIENCE to use your own identity provider instead.',
    );
  }
}

/** How to get each demo client's token: one `curl` with client credentials. Demo secrets only. */
function tokenHelp(clients: readonly DevIssuerClient[], tokenUrl: string): string {
  const lines = clients.map((client) => {
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
