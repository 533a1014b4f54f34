/**
 * A TCP proxy on a loopback port 0 that a test can cut and restore: every connection through it
 * is destroyed, and new ones are refused, until `restore()`. What a network partition between a
 * replica and Redis looks like to the replica. Or held: new connections are accepted and answered
 * nothing, as a server that hangs (an upstream behind a stuck load balancer), until `restore()`. Or
 * deferred: new connections wait, their requests kept, and are put through on `restore()` (a server
 * slow to answer, for exactly as long as the test needs).
 */
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** Destroys every open connection and refuses new ones until `restore()`. */
  cut(): void;
  /** Destroys every open connection, then accepts new ones and sends them nothing until `restore()`. */
  hold(): void;
  /** Keeps open connections, and makes new ones wait (nothing lost) until `restore()` puts them through. */
  defer(): void;
  /** Forwards again, beginning with the connections `defer()` kept waiting. */
  restore(): void;
  /** How many connections it accepted so far (refused ones and held ones included). */
  accepted(): number;
  close(): Promise<void>;
}

/** Starts a proxy to `target` (`host:port`). Always `close()` it. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let mode: 'forward' | 'refuse' | 'hold' | 'defer' = 'forward';
  let accepted = 0;
  const waiting: Socket[] = [];
  const server = createServer((client) => {
    accepted += 1;
    if (mode === 'defer') {
      // Not read: what the client sends stays in the socket until it is put through.
      client.pause();
      client.on('error', () => undefined);
      open.add(client);
      client.on('close', () => open.delete(client));
      waiting.push(client);
      return;
    }
    forward(client);
  });
  const forward = (client: Socket): void => {
    if (client.destroyed) return;
    if (mode === 'refuse') {
      client.destroy();
      return;
    }
    if (mode === 'hold') {
      // Read and dropped: the client's request is taken and never answered.
      open.add(client);
      client.on('close', () => open.delete(client));
      client.on('error', () => undefined);
      client.resume();
      return;
    }
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      // A reset on one side ends both; the error is the partition the test made, not a failure.
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  };
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      mode = 'refuse';
      for (const socket of open) socket.destroy();
    },
    hold() {
      mode = 'hold';
      for (const socket of open) socket.destroy();
    },
    defer() {
      mode = 'defer';
    },
    restore() {
      mode = 'forward';
      for (const client of waiting.splice(0)) forward(client);
    },
    accepted: () => accepted,
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
