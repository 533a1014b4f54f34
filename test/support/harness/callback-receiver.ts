/**
 * A callback endpoint as a gateway serves one for Apollo's HTTP callback protocol: a real HTTP
 * server on loopback port 0 that records every request it receives (its path, headers and JSON
 * body) and answers as the test says (204 by default, as Hive Gateway does), and the subscription
 * request a gateway POSTs to the facade to name it.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the endpoint received. */
export interface ReceivedCallback {
  path: string;
  headers: IncomingMessage['headers'];
  /** The JSON body (`{ kind, action, id, verifier, payload?, errors? }`), or the text when it is not JSON. */
  body: {
    kind?: string;
    action?: string;
    id?: string;
    verifier?: string;
    payload?: {
      data?: unknown;
      errors?: { extensions?: { code?: string } }[];
      extensions?: { cursor?: string };
    };
    errors?: { message: string; extensions?: { code?: string } }[];
  };
  at: number;
}

/** How the endpoint answers one request (it may also never answer, or answer anything). */
export type CallbackAnswer = (request: ReceivedCallback, res: ServerResponse) => void;

export interface CallbackReceiver {
  /** Base URL, no path: `http://127.0.0.1:<port>`. */
  url: string;
  /** Every request so far, in the order received. */
  received: ReceivedCallback[];
  /** The answer to every later request. */
  answerWith(answer: CallbackAnswer): void;
  close(): Promise<void>;
}

/** Answers 204, as Hive Gateway answers a callback it took. */
export const TAKE: CallbackAnswer = (_request, res) => {
  res.statusCode = 204;
  res.end();
};

/** Answers 404, as a gateway that knows no such subscription. */
export const UNKNOWN: CallbackAnswer = (_request, res) => {
  res.statusCode = 404;
  res.end();
};

export async function startCallbackReceiver(): Promise<CallbackReceiver> {
  const received: ReceivedCallback[] = [];
  let answer: CallbackAnswer = TAKE;
  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (text += chunk));
    req.on('end', () => {
      let body: ReceivedCallback['body'];
      try {
        body = JSON.parse(text) as ReceivedCallback['body'];
      } catch {
        body = { kind: text };
      }
      const request = { path: req.url ?? '', headers: req.headers, body, at: Date.now() };
      received.push(request);
      answer(request, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answerWith: (next) => (answer = next),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What a gateway names in `extensions.subscription`. */
export interface CallbackSubscriptionExtension {
  callbackUrl: string;
  subscriptionId: string;
  verifier: string;
  heartbeatIntervalMs?: number;
}

/** `extensions.subscription` for a callback at `base` + `/callback/<id>`, with a fresh id and verifier. */
export function callbackExtension(base: string, heartbeatIntervalMs = 0): CallbackSubscriptionExtension {
  const subscriptionId = randomUUID();
  return {
    callbackUrl: `${base}/callback/${subscriptionId}`,
    subscriptionId,
    verifier: randomUUID(),
    heartbeatIntervalMs,
  };
}

/**
 * POSTs a subscription to the facade's `graphqlUrl` as a gateway does over the callback protocol,
 * with `headers` (credentials): the status, the protocol header and the parsed body.
 */
export async function subscribeByCallback(
  graphqlUrl: string,
  headers: Record<string, string>,
  query: string,
  subscription: CallbackSubscriptionExtension | Record<string, unknown>,
  variables?: Record<string, unknown>,
): Promise<{
  status: number;
  protocol: string | null;
  body: { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] };
}> {
  const response = await fetch(graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json;callbackSpec=1.0; charset=utf-8',
      ...headers,
    },
    body: JSON.stringify({ query, variables, extensions: { subscription } }),
  });
  return {
    status: response.status,
    protocol: response.headers.get('subscription-protocol'),
    body: (await response.json()) as {
      data?: unknown;
      errors?: { message: string; extensions?: { code?: string } }[];
    },
  };
}
