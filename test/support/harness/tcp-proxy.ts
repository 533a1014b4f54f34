/**
 * A TCP proxy on a loopback port 0 that a test can cut and restore: every connection through it
 * is destroyed, and new ones are refused, until `restore()`. What a network partition between a
 * replica and Redis looks like to the replica. Or held: new connections are accepted and answered
 * nothing, as a server that hangs (an upstream behind a stuck load balancer), until `restore()`.
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
  restore(): void;
  /** How many connections it accepted so far (refused ones and held ones included). */
  accepted(): number;
  close(): Promise<void>;
}

/** Starts a proxy to `target` (`host:port`). Always `close()` it. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let mode: 'forward' | 'refuse' | 'hold' = 'forward';
  let accepted = 0;
  const server = createServer((client) => {
    accepted += 1;
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
  });
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
    restore() {
      mode = 'forward';
    },
    accepted: () => accepted,
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
