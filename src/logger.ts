/**
 * A small structured logger: one JSON object per line, with a level, a time, a message and fields.
 *
 * Secrets are kept out by construction (nothing here ever receives a request header), and, as a
 * second line of defence, every string listed in `redact` is replaced before a line is written.
 */

/** Log levels, from most to least verbose; `silent` writes nothing. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;

export type LogLevel = (typeof LOG_LEVELS)[number];

/** Fields attached to a log line; values must be JSON-serialisable. */
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger that adds `bindings` to every line it writes. */
  child(bindings: LogFields): Logger;
}

export interface LoggerOptions {
  /** Lines below this level are dropped. */
  level: LogLevel;
  /** Where a finished line goes; defaults to stdout. Tests pass a collector. */
  write?: (line: string) => void;
  /** Strings (such as API keys) that must never appear in a line; each is replaced by `[redacted]`. */
  redact?: readonly string[];
}

const SEVERITY: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Builds a JSON-lines logger. */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const secrets = (options.redact ?? []).filter((secret) => secret.length > 0);
  const threshold = SEVERITY[options.level];

  const build = (bindings: LogFields): Logger => {
    const log = (level: Exclude<LogLevel, 'silent'>, message: string, fields?: LogFields): void => {
      if (SEVERITY[level] < threshold) return;
      const entry = { level, time: new Date().toISOString(), msg: message, ...bindings, ...fields };
      let line = JSON.stringify(entry, serializeErrors);
      for (const secret of secrets) line = line.replaceAll(secret, '[redacted]');
      write(line);
    };
    return {
      debug: (message, fields) => log('debug', message, fields),
      info: (message, fields) => log('info', message, fields),
      warn: (message, fields) => log('warn', message, fields),
      error: (message, fields) => log('error', message, fields),
      child: (more) => build({ ...bindings, ...more }),
    };
  };
  return build({});
}

// Error objects serialise to `{}` by default, which would hide exactly what an operator needs.
function serializeErrors(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack };
  }
  return value;
}
