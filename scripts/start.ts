/**
 * `npm start`. With no UPSTREAM_BASE_URL, starts the emulator in-process on an ephemeral loopback
 * port with its demo data and points the facade at it; with UPSTREAM_BASE_URL set, the facade
 * calls that upstream with UPSTREAM_API_KEY (required). Either way, main.ts does the rest.
 */
import { createEmulator } from '../emulator/index.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { createLogger } from '../src/logger.ts';
import { main } from '../src/main.ts';

/** The emulator's default sandbox key (read_write): a demo value, not a secret. */
const EMULATOR_SANDBOX_KEY = 'sk_sandbox_emulator';

const env = { ...process.env };
const logger = createLogger({ level: 'info' });
let stopEmulator: (() => Promise<void>) | undefined;

if (env.UPSTREAM_BASE_URL === undefined || env.UPSTREAM_BASE_URL.trim() === '') {
  const emulator = createEmulator({ data: 'demo' });
  const { url } = await emulator.listen(0, '127.0.0.1');
  stopEmulator = () => emulator.close();
  if (env.UPSTREAM_API_KEY !== undefined) {
    logger.warn('UPSTREAM_API_KEY is ignored: without UPSTREAM_BASE_URL the in-process emulator is used');
  }
  env.UPSTREAM_BASE_URL = url;
  env.UPSTREAM_API_KEY = EMULATOR_SANDBOX_KEY;
  // The embedded emulator can reach the facade's loopback address: register it for webhooks.
  env.WEBHOOK_REGISTER ??= 'true';
  logger.info('upstream: in-process emulator with demo data', { upstream: url });
}

try {
  const config = loadConfig(env);
  // Logged only once validated: a URL refused for holding credentials never reaches a log line.
  if (!stopEmulator) logger.info('upstream: configured', { upstream: config.upstream.baseUrl });
  await main(config, { afterClose: stopEmulator });
} catch (error) {
  await stopEmulator?.();
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  throw error;
}
