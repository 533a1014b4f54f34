/**
 * Reads the configuration, builds the app, listens, shuts down gracefully on SIGINT/SIGTERM and
 * reads the trusted-documents manifest and the upstream key file again on SIGHUP.
 * Nothing else.
 */
import { createServer } from 'node:net';
import { createApp } from './app.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';

export interface MainOptions {
  /** Runs after the app has closed, before the process exits (e.g. stopping an in-process upstream). */
  afterClose?: () => Promise<void>;
}

/** A start that cannot succeed as configured; its message is one line that says what to change. */
export class StartError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartError';
  }
}

/**
 * Runs the facade until a signal stops it. Resolves once it listens.
 *
 * @throws {StartError} when a port cannot be listened on; nothing is left running.
 */
export async function main(config: Config = readConfigOrExit(), options: MainOptions = {}): Promise<void> {
  // A busy port is found before anything is built: a server that failed to bind would otherwise
  // report it through every listener of its 'error' event (graphql-ws's included).
  await probeListen(config.port, config.host, 'PORT');
  await probeListen(config.metrics.port, config.host, 'METRICS_PORT');
  const app = await createApp(config);
  let listening: { url: string; metricsUrl: string };
  try {
    listening = await app.listen(config.port, config.host);
  } catch (error) {
    await app.close().catch(() => undefined);
    const port = (error as { port?: unknown }).port;
    const variable = port !== undefined && port === config.metrics.port ? 'METRICS_PORT' : 'PORT';
    throw listenFailure(
      error,
      'the facade',
      config.host,
      typeof port === 'number' ? port : config.port,
      variable,
    );
  }
  const { url, metricsUrl } = listening;
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
  // SIGHUP reads the trusted-documents manifest and the upstream key file again; a bad one is
  // logged and the old one kept. Only with one of them: otherwise SIGHUP keeps its usual meaning
  // (a closed terminal ends the process).
  const keyFiles = [
    config.upstream.apiKeyFile,
    ...Object.values(config.upstream.environmentKeys ?? {}).map((key) => key.apiKeyFile),
  ].filter((file) => file !== undefined);
  if (config.edge.trustedDocumentsPath !== undefined || keyFiles.length > 0) {
    process.on('SIGHUP', () => {
      void app.reloadTrustedDocuments();
      void app.reloadUpstreamKey();
    });
  }
}

/**
 * The one line that says why `what` could not listen on `host:port` and what to change, as a
 * {@link StartError}; any other error is returned as it is.
 */
export function listenFailure(
  error: unknown,
  what: string,
  host: string,
  port: number,
  variable: string,
): Error {
  const code = (error as { code?: unknown } | undefined)?.code;
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const cannot = `Cannot start ${what} on ${where}:`;
  switch (code) {
    case 'EADDRINUSE':
      return new StartError(
        `${cannot} the port is in use by another process. Stop that process, or set ${variable} to another port (0: any free port).`,
        { cause: error },
      );
    case 'EACCES':
      return new StartError(
        `${cannot} permission denied (ports below 1024 need privileges). Set ${variable} to a port from 1024.`,
        {
          cause: error,
        },
      );
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new StartError(
        `${cannot} ${host} is not an address of this machine. Set HOST to one (127.0.0.1, 0.0.0.0).`,
        {
          cause: error,
        },
      );
    default:
      return error instanceof Error ? error : new Error(String(error));
  }
}

/** Binds `port` on `host` and lets it go at once; rejects with a {@link StartError} if it cannot. */
async function probeListen(port: number, host: string, variable: string): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (error) => reject(listenFailure(error, 'the facade', host, port, variable)));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
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

if (import.meta.main) {
  await main().catch((error: unknown) => {
    if (!(error instanceof StartError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  });
}
