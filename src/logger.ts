/**
 * A small structured logger: one JSON object per line, with a level, a time, a message and fields.
 *
 * Secrets are kept out by construction (nothing here ever receives a request header), and, as a
 * second line of defence, every string listed in `redact` is replaced before a line is written.
 */
import { writeSync } from 'node:fs';

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
  /** Where a finished line goes; defaults to stdout (see {@link writeToStdout}). Tests pass a collector. */
  write?: (line: string) => void;
  /**
   * Strings (such as API keys) that must never appear in a line; each is replaced by `[redacted]`.
   * Read at every line, so a key added to the list later (a rotation) is redacted from then on.
   */
  redact?: readonly string[];
  /** Fields of the moment a line is written (the current trace id when tracing is on). */
  current?: () => LogFields | undefined;
}

const SEVERITY: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Builds a JSON-lines logger. */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? writeToStdout;
  const secrets = options.redact ?? [];
  const threshold = SEVERITY[options.level];
  const current = options.current;

  const build = (bindings: LogFields): Logger => {
    const log = (level: Exclude<LogLevel, 'silent'>, message: string, fields?: LogFields): void => {
      if (SEVERITY[level] < threshold) return;
      const entry = {
        level,
        time: new Date().toISOString(),
        msg: message,
        ...bindings,
        ...current?.(),
        ...fields,
      };
      // The replacer (a call per value) only where a value could hold an error: most lines,
      // the operation's own among them, hold strings, numbers and lists of them.
      let line = holdsOnlyPlainValues(entry) ? JSON.stringify(entry) : JSON.stringify(entry, serializeErrors);
      // Looking costs less than replacing nothing (`replaceAll` copies the line even then).
      for (const secret of secrets) {
        if (secret.length > 0 && line.includes(secret)) line = line.replaceAll(secret, '[redacted]');
      }
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

/** True when no value of `entry` is an object other than a list of strings, numbers or booleans. */
function holdsOnlyPlainValues(entry: Record<string, unknown>): boolean {
  for (const key in entry) {
    const value = entry[key];
    if (typeof value !== 'object' || value === null) continue;
    if (!Array.isArray(value)) return false;
    for (const item of value as unknown[]) if (typeof item === 'object' && item !== null) return false;
  }
  return true;
}

/** Lines written to stdout but not yet handed to it. */
let pendingLines: string[] = [];
let flushScheduled = false;
let exitFlushInstalled = false;

/**
 * Writes a line to stdout together with the other lines of the same turn of the event loop.
 *
 * Writing to a pipe (how a container's stdout is collected) is a synchronous system call on Linux,
 * and one per GraphQL operation was the largest single cost of a cheap operation. Lines are kept in
 * order and written once per turn, so under load one write carries many operations' lines. What is
 * still pending when the process exits (even through `process.exit` or an uncaught exception) is
 * written synchronously then.
 */
export function writeToStdout(line: string): void {
  pendingLines.push(line);
  if (!exitFlushInstalled) {
    exitFlushInstalled = true;
    process.once('exit', () => {
      if (pendingLines.length > 0) writeSync(process.stdout.fd, `${pendingLines.join('\n')}\n`);
      pendingLines = [];
    });
  }
  if (flushScheduled) return;
  flushScheduled = true;
  setImmediate(flushLines);
}

function flushLines(): void {
  flushScheduled = false;
  if (pendingLines.length === 0) return;
  const chunk = `${pendingLines.join('\n')}\n`;
  pendingLines = [];
  process.stdout.write(chunk);
}
