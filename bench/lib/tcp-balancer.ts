/**
 * A TCP balancer on a loopback port, as kube-proxy balances a Service: each new connection goes to
 * the port `nextPort()` names (refused, by closing it, when it names none), and stays with that
 * backend until one side closes it. bench/rolling-restart.ts and the game day's Services
 * (bench/gameday/service.ts) send connections through it.
 */
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface TcpBalancer {
  port: number;
  /** Destroys every open connection, then stops listening. */
  close(): Promise<void>;
}

/** Starts the balancer on a free loopback port. Always `close()` it. */
export async function startTcpBalancer(nextPort: () => number | undefined): Promise<TcpBalancer> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const port = nextPort();
    if (port === undefined) {
      client.destroy();
      return;
    }
    const backend = connect(port, '127.0.0.1');
    sockets.add(client);
    sockets.add(backend);
    // A side's FIN reaches the other after everything it sent (pipe ends the other side once
    // flushed), as through kube-proxy's NAT; a reset resets the other side.
    const reset = (): void => {
      client.destroy();
      backend.destroy();
    };
    client.on('error', reset).on('close', () => sockets.delete(client));
    backend.on('error', reset).on('close', () => sockets.delete(backend));
    client.pipe(backend);
    backend.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
