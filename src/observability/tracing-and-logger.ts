/**
 * The app's tracing and its logger, made first of its parts: the logger's lines carry the current
 * trace id when tracing is on, and every key the facade holds is redacted from them.
 */
import type { Config } from '../config.ts';
import { createLogger, type Logger } from '../logger.ts';
import { tracingStarted } from './tracing-config.ts';

/**
 * Tracing (loaded only when it is on: with it off, nothing of OpenTelemetry is imported) and the
 * logger, whose lines carry the current trace id when tracing is on.
 */
export async function createTracingAndLogger(
  config: Pick<Config, 'tracing' | 'logLevel'>,
  given: Logger | undefined,
  redact: readonly string[],
) {
  const tracing = config.tracing.enabled ? (await import('./tracing.ts')).createTracing() : undefined;
  const currentTrace =
    tracing === undefined
      ? undefined
      : () => {
          const traceId = tracing.traceId();
          return traceId === undefined ? undefined : { traceId };
        };
  const logger =
    given ??
    createLogger({
      level: config.logLevel,
      redact,
      ...(currentTrace === undefined ? {} : { current: currentTrace }),
    });
  if (config.tracing.enabled && !tracingStarted()) {
    logger.warn(
      'tracing is configured but the OpenTelemetry SDK was not started: start with `npm start` or ' +
        '`node --import ./src/observability/tracing-entry.ts src/main.ts`',
    );
  }
  return { tracing, logger };
}
