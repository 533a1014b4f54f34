/**
 * graphql-ws clients for the tests: the real client over Node's global WebSocket, recording what
 * each subscription receives, never reconnecting, and telling how its socket closed.
 */
import { createClient, type Client } from 'graphql-ws';

// Results are asserted with toMatchObject; a loose type keeps the tests readable.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** What a subscription received, in order. */
export interface Received {
  data: Json[];
  errors: Json[];
  completed: boolean;
}

export interface LiveClient {
  client: Client;
  /** Starts a subscription and records what arrives; `stop()` ends it from the client side. */
  subscribe(
    query: string,
    variables?: Record<string, unknown>,
  ): Received & { stop(): void; done: Promise<void> };
  /** The close event of the socket, once it closed. */
  closed: Promise<{ code: number; reason: string }>;
  dispose(): Promise<void>;
}

/** A graphql-ws client (the real one, over Node's global WebSocket) that does not reconnect. */
export function connectLive(wsUrl: string, connectionParams?: Record<string, unknown>): LiveClient {
  let resolveClosed!: (event: { code: number; reason: string }) => void;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    resolveClosed = resolve;
  });
  const client = createClient({
    url: wsUrl,
    webSocketImpl: WebSocket,
    lazy: false,
    retryAttempts: 0,
    ...(connectionParams === undefined ? {} : { connectionParams }),
    on: {
      closed: (event) => {
        const { code, reason } = event as CloseEvent;
        resolveClosed({ code, reason });
      },
    },
    onNonLazyError: () => {},
  });
  return {
    client,
    closed,
    subscribe(query, variables) {
      const received: Received = { data: [], errors: [], completed: false };
      let finish!: () => void;
      const done = new Promise<void>((resolve) => {
        finish = resolve;
      });
      const stop = client.subscribe(
        { query, ...(variables === undefined ? {} : { variables }) },
        {
          next: (result) => {
            if (result.errors) received.errors.push(...result.errors);
            if (result.data) received.data.push(result.data);
          },
          error: (error) => {
            received.errors.push(error);
            finish();
          },
          complete: () => {
            received.completed = true;
            finish();
          },
        },
      );
      return Object.assign(received, { stop, done });
    },
    dispose: async () => {
      await client.dispose();
    },
  };
}
