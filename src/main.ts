/**
 * Reads the configuration, builds the app, listens, and shuts down gracefully on SIGINT/SIGTERM.
 * Nothing else.
 */
import { createApp } from './app.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';

export interface MainOptions {
  /** Runs after the app has closed, before the process exits (e.g. stopping an in-process upstream). */
  afterClose?: () => Promise<void>;
}

/** Runs the facade until a signal stops it. Exits with status 1 on invalid configuration. */
export async function main(config: Config = readConfigOrExit(), options: MainOptions = {}): Promise<void> {
  const app = await createApp(config);
  const { url, metricsUrl } = await app.listen(config.port, config.host);
  app.logger.info('facade listening', {
    url: `${url}/graphql`,
    metrics: `${metricsUrl}/metrics`,
    upstream: config.upstream.baseUrl,
  });

  const shutdown = (signal: NodeJS.Signals): void => {
    app.logger.info('shutting down', { signal });
    app
      .close()
      .then(() => options.afterClose?.())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          app.logger.error('shutdown failed', { error });
          process.exit(1);
        },
      );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

function readConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

if (import.meta.main) await main();
