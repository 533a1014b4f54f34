/**
 * Runs the emulator standalone: `npm run emulator`.
 *
 * Environment: EMULATOR_PORT (default 4010), EMULATOR_HOST (default 127.0.0.1),
 * EMULATOR_DATA (`demo` or `empty`, default `demo`), EMULATOR_API_KEYS (JSON array of
 * `{key, id, environment, scope}`; default: the documented emulator keys).
 */
import { createEmulator } from './index.ts';
import type { ApiKeyConfig, DataSet, EmulatorLogger } from './index.ts';

const logger: EmulatorLogger = {
  info: (message, fields) => console.log(message, fields ?? ''),
  warn: (message, fields) => console.warn(message, fields ?? ''),
  error: (message, fields) => console.error(message, fields ?? ''),
};

function readConfig(env: NodeJS.ProcessEnv): {
  port: number;
  host: string;
  data: DataSet;
  apiKeys?: ApiKeyConfig[];
} {
  const portText = env.EMULATOR_PORT ?? '4010';
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`EMULATOR_PORT must be a port number from 0 to 65535; got "${portText}".`);
  }
  const data = env.EMULATOR_DATA ?? 'demo';
  if (data !== 'demo' && data !== 'empty')
    throw new Error(`EMULATOR_DATA must be "demo" or "empty"; got "${data}".`);
  return {
    port,
    host: env.EMULATOR_HOST ?? '127.0.0.1',
    data,
    ...(env.EMULATOR_API_KEYS ? { apiKeys: parseApiKeys(env.EMULATOR_API_KEYS) } : {}),
  };
}

function parseApiKeys(json: string): ApiKeyConfig[] {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new Error(
      'EMULATOR_API_KEYS must be JSON: [{"key", "id", "environment": "sandbox"|"live", "scope": "read_write"|"read_only"}].',
    );
  }
  if (!Array.isArray(value) || value.length === 0)
    throw new Error('EMULATOR_API_KEYS must be a non-empty JSON array.');
  return value.map((item: unknown, index) => {
    const { key, id, environment, scope } = (item ?? {}) as Record<string, unknown>;
    // The key itself is never echoed: an error names the entry by position and id.
    const where = `EMULATOR_API_KEYS[${index}]${typeof id === 'string' ? ` (${id})` : ''}`;
    if (typeof key !== 'string' || key === '') throw new Error(`${where}: "key" must be a non-empty string.`);
    if (typeof id !== 'string' || id === '') throw new Error(`${where}: "id" must be a non-empty string.`);
    if (environment !== 'sandbox' && environment !== 'live')
      throw new Error(`${where}: "environment" must be "sandbox" or "live".`);
    if (scope !== 'read_write' && scope !== 'read_only')
      throw new Error(`${where}: "scope" must be "read_write" or "read_only".`);
    return { key, id, environment, scope };
  });
}

async function main(): Promise<void> {
  const config = readConfig(process.env);
  const emulator = createEmulator({
    data: config.data,
    logger,
    ...(config.apiKeys ? { apiKeys: config.apiKeys } : {}),
  });
  const { url } = await emulator.listen(config.port, config.host);
  logger.info(`Platform API v3 emulator listening on ${url} (data: ${config.data})`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`Received ${signal}; shutting down.`);
    emulator.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('Shutdown failed', { error: String(error) });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
