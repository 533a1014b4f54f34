/**
 * Vitest global setup: one real Redis (Debian's redis-server) on a free loopback port for the whole
 * run, without persistence, stopped at teardown. Tests read its URL with `inject('redisUrl')`
 * (see `test/support/harness/redis.ts`, which fails loudly when it is missing).
 *
 * A missing redis-server does not fail the whole run here: tests that do not need Redis still run,
 * and every test that does fails with `redisUnavailable` as its message.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createConnection, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `redis://127.0.0.1:<port>` of the run's Redis, or '' when it could not start. */
    redisUrl: string;
    /** Why Redis is not available ('' when it is). */
    redisUnavailable: string;
  }
}

const START_ATTEMPTS = 5;
const READY_TIMEOUT_MS = 10_000;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: { child: ChildProcess; port: number } | undefined;
  let failure = '';
  try {
    server = await startRedis();
  } catch (error) {
    failure =
      `Redis is needed by this test but could not start: ${error instanceof Error ? error.message : String(error)}. ` +
      `Install it with "apt-get update && apt-get install -y redis-server" (scripts/test.sh does it).`;
  }
  project.provide('redisUrl', server === undefined ? '' : `redis://127.0.0.1:${server.port}`);
  project.provide('redisUnavailable', failure);

  return async () => {
    if (server === undefined || server.child.exitCode !== null) return;
    const exited = once(server.child, 'exit');
    server.child.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000)]);
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  };
}

async function startRedis(): Promise<{ child: ChildProcess; port: number }> {
  let lastError: unknown;
  // A free port found now may be taken before redis-server binds it; another port then.
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt += 1) {
    const port = await findFreePort();
    const child = spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    try {
      await waitUntilReady(child, port);
      return { child, port };
    } catch (error) {
      lastError = error;
      if (child.exitCode === null) child.kill('SIGKILL');
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') break;
    }
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}

async function waitUntilReady(child: ChildProcess, port: number): Promise<void> {
  let spawnError: Error | undefined;
  child.once('error', (error) => {
    spawnError = error;
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (spawnError !== undefined) throw spawnError;
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
    if (await answersPing(port)) return;
    await sleep(50);
  }
  throw new Error(`redis-server did not answer PING on port ${port} within ${READY_TIMEOUT_MS} ms`);
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
    socket.on('data', (chunk) => {
      answer += chunk.toString('utf8');
      if (answer.includes('\r\n')) finish(answer.startsWith('+PONG'));
    });
  });
}

async function findFreePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const address = probe.address();
  probe.close();
  await once(probe, 'close');
  if (address === null || typeof address === 'string') throw new Error('could not find a free port');
  return address.port;
}
