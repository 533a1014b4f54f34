/**
 * A throw-away Redis for a benchmark: Debian's `redis-server` on a free loopback port, without
 * persistence, stopped by its pid (as `test/support/redis-global-setup.ts` runs it for the tests).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createConnection } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFreePort } from './processes.ts';

export interface RedisServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts `redis-server`; a port taken between finding and binding it gets another try. */
export async function startRedisServer(): Promise<RedisServer> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= 5; attempt += 1) {
    const port = await findFreePort();
    const child = spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    // Set by the child's 'error' event; read through a function, as it changes behind awaits.
    let spawnError: NodeJS.ErrnoException | undefined;
    child.once('error', (error) => (spawnError = error));
    const failed = (): NodeJS.ErrnoException | undefined => spawnError;
    const running = (): boolean => child.exitCode === null;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && failed() === undefined && running()) {
      if (await answersPing(port)) {
        return {
          url: `redis://127.0.0.1:${port}`,
          pid: child.pid ?? 0,
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
    lastError = failed() ?? new Error(`redis-server did not answer PING on port ${port}`);
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
    socket.setTimeout(1_000, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('utf8');
      if (answer.includes('\r\n')) finish(answer.startsWith('+PONG'));
    });
  });
}
