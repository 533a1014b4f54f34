/**
 * A throw-away Redis for the tests and the benchmarks: Debian's `redis-server` on a free loopback
 * port, without persistence unless asked for (AOF `everysec` in a folder of the caller's), ready
 * once it answers PING. One way of starting it, so the test run's Redis, a test's own and a
 * benchmark's behave alike. (A primary with replicas and Sentinels: `redis-sentinel.ts`.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RedisServer {
  url: string;
  port: number;
  /** The process, for tests that stop or pause it on purpose. */
  child: ChildProcess;
  /** SIGTERM, then SIGKILL after 5 s; resolves once it has exited. */
  stop(): Promise<void>;
}

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * Keep the data in this folder with AOF `everysec` (`appendonly yes`), as production does: a
   * restart with the same folder (and port) finds it again. Default: no persistence.
   */
  appendOnlyDir?: string;
  /** The port; default a free one (a restart passes the port it had). */
  port?: number;
}

/** Ports tried: a free port found now may be taken before redis-server binds it. */
const START_ATTEMPTS = 5;
const READY_TIMEOUT_MS = 10_000;

/**
 * Starts `redis-server` and waits until it answers PING.
 *
 * @throws the spawn error (ENOENT when redis-server is not installed), or why it never became ready.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  let lastError: unknown;
  const persistence =
    options.appendOnlyDir === undefined
      ? ['--appendonly', 'no']
      : ['--dir', options.appendOnlyDir, '--appendonly', 'yes', '--appendfsync', 'everysec'];
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt += 1) {
    const port = options.port ?? (await findFreePort());
    const child = spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(port), '--save', '', ...persistence],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    // Set by the child's 'error' event; read through a function, as it changes behind awaits.
    let spawnError: NodeJS.ErrnoException | undefined;
    child.once('error', (error) => (spawnError = error));
    const failed = (): NodeJS.ErrnoException | undefined => spawnError;
    const running = (): boolean => child.exitCode === null;
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline && failed() === undefined && running()) {
      if (await answersPing(port)) {
        return {
          url: `redis://127.0.0.1:${String(port)}`,
          port,
          child,
          async stop() {
            if (!running()) return;
            const exited = once(child, 'exit');
            child.kill('SIGTERM');
            await Promise.race([exited, sleep(5_000)]);
            if (running()) child.kill('SIGKILL');
          },
        };
      }
      await sleep(50);
    }
    lastError =
      failed() ??
      (running()
        ? new Error(
            `redis-server did not answer PING on port ${String(port)} within ${String(READY_TIMEOUT_MS)} ms`,
          )
        : new Error(`redis-server exited with code ${String(child.exitCode)}`));
    if (running()) child.kill('SIGKILL');
    if (failed()?.code === 'ENOENT') break;
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let answer = '';
    const finish = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => {
      finish(false);
    });
    socket.once('error', () => {
      finish(false);
    });
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('utf8');
      if (answer.includes('\r\n')) finish(answer.startsWith('+PONG'));
    });
  });
}

/** Every port {@link findFreePort} has handed out in this process, never handed out twice. */
const handedOut = new Set<number>();

/**
 * A loopback port free now (another process may take it before it is bound), and never one this
 * process was handed before: on a busy machine the kernel answers port 0 with a port it has just
 * given back, so a set-up that asks for several ports before binding them got the same one for
 * several services.
 */
export async function findFreePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const address = probe.address();
    probe.close();
    await once(probe, 'close');
    if (address === null || typeof address === 'string') throw new Error('could not find a free port');
    if (handedOut.has(address.port)) continue;
    handedOut.add(address.port);
    return address.port;
  }
  throw new Error('could not find a loopback port not handed out before');
}
