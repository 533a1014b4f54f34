/**
 * The facade's own upstream key, from its variable or from a file (the way Kubernetes and Docker
 * mount secrets), read again on SIGHUP and when the file changes, so the key rotates without a
 * restart. A new key is taken only once the upstream accepts it (capability discovery, the probe
 * every report uses), so an empty, half-written or not yet valid file never replaces a working key:
 * the current key stays and one line says why, without the key. One source per environment: what
 * keeps answers per key (the response cache, the environment probe) keeps them per source instead,
 * so a rotation neither misses nor flushes them.
 */
import { closeSync, constants, fstatSync, openSync, readSync, watch, type FSWatcher } from 'node:fs';
import { open } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Logger } from '../logger.ts';
import type { CurrentKey } from './credentials.ts';
import type { UpstreamProbe } from './probe.ts';
import type { CapabilityDiscovery } from './types.ts';

type Environment = CapabilityDiscovery['environment'];

/** Why a reload ran, as its log line says. */
export type KeyReloadReason = 'signal' | 'file-change' | 'retry';

/** What a reload did. */
export type KeyReload =
  /** No file to read: the key came from the variable. */
  | { outcome: 'fixed' }
  /** The file holds the key in use. */
  | { outcome: 'unchanged' }
  /** The file's new key is the key in use from now on. */
  | { outcome: 'rotated'; environment: Environment }
  /** The file could not be used; the current key stays. `problem` never includes a key. */
  | { outcome: 'kept'; problem: string };

export interface UpstreamKeySource extends CurrentKey {
  /** The variable that names the key (`UPSTREAM_API_KEY`), for log lines. */
  readonly name: string;
  /** The file the key is read from, when there is one. */
  readonly file: string | undefined;
  /** Every key this source has held (to redact them from log lines). */
  keysHeld(): readonly string[];
  /**
   * The probe of the key in use, made once per key and remembered while it says `ready` (a
   * rotation hands over the probe it made of the new key). Never throws.
   */
  probe(): Promise<UpstreamProbe>;
  /** Reads the file again (serialised with any other reload). Never rejects. */
  reload(reason: KeyReloadReason): Promise<KeyReload>;
  /** Watches the file's directory and reloads (debounced) on a change; nothing without a file. */
  watch(): void;
  /** Stops watching and retrying. */
  close(): void;
}

export interface KeySourceOptions {
  /** See {@link UpstreamKeySource.name}. */
  name: string;
  /** The key read at start (from the variable or the file). */
  initial: string;
  /** The `*_FILE` path; undefined when the key came from the variable. */
  file?: string | undefined;
  /** Asks the upstream whether `apiKey` works and which environment it selects. Never throws. */
  check(apiKey: string): Promise<UpstreamProbe>;
  logger: Logger;
  /** Told of every key taken, before it is used (log redaction). */
  onKey?: (apiKey: string) => void;
  /** Quiet time after the last change in the directory before the file is read. */
  debounceMs?: number;
  /** First wait before a file whose key could not be taken is tried again; it doubles to a minute. */
  retryMs?: number;
}

/** A key of visible ASCII, as the variable must be; the file may end with one line break. */
const KEY_FORM = /^[\x21-\x7e]+$/;
const MAX_RETRY_MS = 60_000;
/**
 * The most a key file may hold. API keys are short; a file swapped for something else (a log, a
 * device, a pipe) is refused after this many bytes instead of read into memory to its end.
 */
export const MAX_KEY_FILE_BYTES = 4096;

/**
 * The text of the key file, read without following it anywhere it should not lead: opened without
 * blocking (a named pipe with no writer would hold the reload, and every later one, forever), only
 * a regular file, and at most {@link MAX_KEY_FILE_BYTES}. Either the text or why there is none
 * (never any of the content).
 */
async function readKeyFile(file: string): Promise<{ text: string } | { problem: string }> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return { problem: unreadable(error) };
  }
  try {
    if (!(await handle.stat()).isFile()) return { problem: 'the file is not a regular file' };
    const buffer = Buffer.alloc(MAX_KEY_FILE_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_KEY_FILE_BYTES) return { problem: TOO_LARGE };
    }
    return { text: buffer.toString('utf8', 0, length) };
  } catch (error) {
    return { problem: unreadable(error) };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** {@link readKeyFile} at start, before there is anything to keep serving. */
export function readKeyFileSync(file: string): { text: string } | { problem: string } {
  let descriptor: number;
  try {
    descriptor = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return { problem: unreadable(error) };
  }
  try {
    if (!fstatSync(descriptor).isFile()) return { problem: 'the file is not a regular file' };
    const buffer = Buffer.alloc(MAX_KEY_FILE_BYTES + 1);
    let length = 0;
    for (let bytesRead = -1; bytesRead !== 0 && length <= MAX_KEY_FILE_BYTES; length += bytesRead) {
      bytesRead = readSync(descriptor, buffer, length, buffer.length - length, null);
    }
    if (length > MAX_KEY_FILE_BYTES) return { problem: TOO_LARGE };
    return { text: buffer.toString('utf8', 0, length) };
  } catch (error) {
    return { problem: unreadable(error) };
  } finally {
    closeSync(descriptor);
  }
}

const TOO_LARGE = `the file holds more than ${MAX_KEY_FILE_BYTES} bytes, more than a key`;

function unreadable(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  return `the file cannot be read (${typeof code === 'string' ? code : 'error'})`;
}

/** What a file holds as a key, or why it holds none (never the key itself). */
export function keyOfFileText(text: string): { key: string } | { problem: string } {
  const key = text.replace(/\r?\n$/, '');
  if (key.trim() === '') return { problem: 'the file is empty' };
  if (!KEY_FORM.test(key)) {
    return {
      problem: 'the file must hold one key of visible ASCII characters (one final line break allowed)',
    };
  }
  return { key };
}

/** What a source holds while it runs, shared by its reloads and its probe. */
interface KeyState {
  key: string;
  readonly held: string[];
  // Bumped when a new key selects another environment than the old one: answers kept for the old
  // environment are then never served under the new key.
  generation: number;
  probed: { key: string; probe: Promise<UpstreamProbe> } | undefined;
  environment: Environment | undefined;
  closed: boolean;
}

/** Builds the source; nothing is watched until {@link UpstreamKeySource.watch}. */
export function createKeySource(options: KeySourceOptions): UpstreamKeySource {
  const logger = options.logger.child({ component: 'upstream-key', key: options.name });
  const state: KeyState = {
    key: options.initial,
    held: [options.initial],
    generation: 0,
    probed: undefined,
    environment: undefined,
    closed: false,
  };
  options.onKey?.(state.key);

  const probeCurrent = (): Promise<UpstreamProbe> => {
    const { key } = state;
    if (state.probed?.key === key) return state.probed.probe;
    const entry = { key, probe: options.check(key) };
    state.probed = entry;
    void entry.probe.then((answer) => {
      if (answer.outcome === 'ready') state.environment = answer.discovery.environment;
      else if (state.probed === entry) state.probed = undefined;
    });
    return entry.probe;
  };

  const rotation = createKeyRotation(state, options, logger);
  const watcher = createKeyFileWatcher({
    name: options.name,
    file: options.file,
    debounceMs: options.debounceMs ?? 200,
    logger,
    onChange: () => void rotation.reload('file-change'),
  });

  return {
    name: options.name,
    file: options.file,
    current: () => state.key,
    partition: () => `${options.name}#${state.generation}`,
    keysHeld: () => state.held,
    probe: probeCurrent,
    reload: rotation.reload,
    watch() {
      if (!state.closed) watcher.watch();
    },
    close() {
      state.closed = true;
      watcher.close();
      rotation.close();
    },
  };
}

/** Reloads of the file, serialised, with retries of a key the upstream does not accept yet. */
function createKeyRotation(
  state: KeyState,
  options: KeySourceOptions,
  logger: Logger,
): { reload: (reason: KeyReloadReason) => Promise<KeyReload>; close: () => void } {
  const retryMs = options.retryMs ?? 5_000;
  let reloading: Promise<KeyReload> = Promise.resolve({ outcome: 'unchanged' });
  let retry: NodeJS.Timeout | undefined;
  let retryDelayMs = retryMs;
  let lastProblem: string | undefined;
  // The last key the upstream did not accept: another change in the directory does not ask again
  // (a signal or a retry does).
  let refused: string | undefined;

  /** One line per problem until it changes, so a retried bad file does not fill the log. */
  const keep = (reason: KeyReloadReason, problem: string): KeyReload => {
    if (problem !== lastProblem || reason === 'signal') {
      logger.error(`${options.name}: kept the current key: ${problem}`, {
        file: options.file,
        reason,
      });
    }
    lastProblem = problem;
    return { outcome: 'kept', problem };
  };

  /** A retry after a retry waits twice as long, up to a minute; any other reload starts over. */
  const scheduleRetry = (reason: KeyReloadReason): void => {
    if (state.closed || retry !== undefined) return;
    retryDelayMs = reason === 'retry' ? Math.min(retryDelayMs * 2, MAX_RETRY_MS) : retryMs;
    retry = setTimeout(() => {
      retry = undefined;
      void reload('retry');
    }, retryDelayMs);
    retry.unref();
  };
  const settled = (): void => {
    if (retry !== undefined) clearTimeout(retry);
    retry = undefined;
    lastProblem = undefined;
  };

  /** Takes `candidate`, which the upstream accepted (`check`) as selecting `newEnvironment`. */
  async function take(
    candidate: string,
    check: Promise<UpstreamProbe>,
    newEnvironment: Environment,
    reason: KeyReloadReason,
  ): Promise<KeyReload> {
    const oldEnvironment = state.environment ?? (await environmentOf(state.key));
    if (oldEnvironment !== newEnvironment) {
      state.generation += 1;
      logger.warn(
        `${options.name}: the new key selects ${newEnvironment}, the old one ${oldEnvironment ?? 'no environment it could still show'}: answers kept for the old key are not served under the new one`,
      );
    }
    options.onKey?.(candidate);
    state.held.push(candidate);
    state.key = candidate;
    state.environment = newEnvironment;
    state.probed = { key: candidate, probe: check };
    settled();
    refused = undefined;
    logger.info(`${options.name}: rotated: upstream calls use the new key from now on`, {
      file: options.file,
      reason,
      environment: newEnvironment,
    });
    return { outcome: 'rotated', environment: newEnvironment };
  }

  async function readAndTake(reason: KeyReloadReason): Promise<KeyReload> {
    const file = options.file;
    if (file === undefined) return { outcome: 'fixed' };
    const content = await readKeyFile(file);
    if ('problem' in content) return keep(reason, content.problem);
    const read = keyOfFileText(content.text);
    if ('problem' in read) return keep(reason, read.problem);
    if (read.key === state.key) {
      settled();
      return { outcome: 'unchanged' };
    }
    const candidate = read.key;
    if (candidate === refused && reason === 'file-change' && lastProblem !== undefined) {
      return { outcome: 'kept', problem: lastProblem };
    }
    const check = options.check(candidate);
    const answer = await check;
    if (answer.outcome === 'ready') return take(candidate, check, answer.discovery.environment, reason);
    const problem =
      answer.outcome === 'refused'
        ? `the upstream refuses the new key (${answer.problem.status} ${answer.problem.code}); add it at the upstream first`
        : `the new key could not be checked with the upstream (${answer.outcome === 'unreachable' ? answer.reason : answer.outcome})`;
    refused = candidate;
    const kept = keep(reason, problem);
    // Tried again until it is taken or the file changes: the upstream may accept it soon.
    scheduleRetry(reason);
    return kept;
  }

  /** The environment of the key in use, asked now (undefined when the upstream does not accept it). */
  async function environmentOf(apiKey: string): Promise<Environment | undefined> {
    const answer = await options.check(apiKey);
    return answer.outcome === 'ready' ? answer.discovery.environment : undefined;
  }

  function reload(reason: KeyReloadReason): Promise<KeyReload> {
    const next = reloading.then(
      () => readAndTake(reason),
      () => readAndTake(reason),
    );
    // Never rejects: a bug here must not leave the key source unable to reload again.
    reloading = next.catch((error: unknown) => {
      logger.error(`${options.name}: reload failed; the current key stays`, { error });
      return { outcome: 'kept', problem: 'reload failed' } as const;
    });
    return reloading;
  }

  return {
    reload,
    close() {
      if (retry !== undefined) clearTimeout(retry);
      retry = undefined;
    },
  };
}

/** Watches the key file's directory and calls `onChange` (debounced) on any change there. */
function createKeyFileWatcher(options: {
  name: string;
  file: string | undefined;
  debounceMs: number;
  logger: Logger;
  onChange: () => void;
}): { watch(): void; close(): void } {
  const { name, logger } = options;
  let watcher: FSWatcher | undefined;
  let debounce: NodeJS.Timeout | undefined;
  return {
    watch() {
      const file = options.file;
      if (file === undefined || watcher !== undefined) return;
      // The directory, not the file: a mounted Secret is replaced by swapping a symlink, which a
      // watch on the file itself would never see; any change there reads the file again.
      try {
        watcher = watch(dirname(file), { persistent: false }, () => {
          if (debounce !== undefined) clearTimeout(debounce);
          debounce = setTimeout(() => {
            debounce = undefined;
            options.onChange();
          }, options.debounceMs);
          debounce.unref();
        });
        watcher.on('error', (error) => {
          logger.warn(`${name}: watching the key file's directory stopped; SIGHUP still reloads`, {
            file,
            error: { message: error.message },
          });
          watcher?.close();
        });
        logger.info(`${name}: watching the key file`, { file: basename(file) });
      } catch (error) {
        logger.warn(`${name}: cannot watch the key file's directory; SIGHUP still reloads`, {
          file,
          error: { message: (error as Error).message },
        });
      }
    },
    close() {
      watcher?.close();
      watcher = undefined;
      if (debounce !== undefined) clearTimeout(debounce);
    },
  };
}
