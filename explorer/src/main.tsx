/**
 * The self-hosted explorer: GraphiQL, bundled from npm at build time (explorer/build.ts), served by
 * the facade itself at `/graphql` when `EXPLORER=graphiql`, so it loads where a CDN cannot be
 * reached. Queries and mutations go over HTTP with the headers of the Headers tab; subscriptions go
 * over graphql-ws on the same URL, with the Headers tab's `Authorization` in `connection_init` (one
 * connection per distinct token). Headers are never persisted: a token lives as long as the tab.
 */
import 'graphiql/style.css';
import { GraphiQL, type GraphiQLProps } from 'graphiql';
import { getOperationAST, OperationTypeNode, parse } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import { createRoot } from 'react-dom/client';

type Fetcher = GraphiQLProps['fetcher'];

/** Monaco's workers, bundled beside this script (same origin: the page's CSP allows nothing else). */
const WORKERS: Record<string, string> = {
  json: 'json.worker.js',
  graphql: 'graphql.worker.js',
};

interface MonacoEnvironment {
  getWorker(workerId: string, label: string): Worker;
}

// Monaco reads this global (its own typings declare it with `let`, which is not a property).
(globalThis as unknown as { MonacoEnvironment: MonacoEnvironment }).MonacoEnvironment = {
  getWorker: (_workerId, label) =>
    new Worker(new URL(WORKERS[label] ?? 'editor.worker.js', import.meta.url), { name: label }),
};

const httpUrl = new URL('/graphql', window.location.href).href;
const socketUrl = httpUrl.replace(/^http/, 'ws');

/** graphql-ws clients by the Authorization they connect with. */
const sockets = new Map<string, Client>();

function socketFor(authorization: string | undefined): Client {
  const key = authorization ?? '';
  let client = sockets.get(key);
  if (client === undefined) {
    client = createClient({
      url: socketUrl,
      connectionParams: authorization === undefined ? {} : { Authorization: authorization },
      lazy: true,
    });
    sockets.set(key, client);
  }
  return client;
}

function isSubscription(query: string, operationName: string | null | undefined): boolean {
  try {
    const document = parse(query);
    // The name may lag the text being edited: a document of one operation is that operation.
    const operation = getOperationAST(document, operationName ?? undefined) ?? getOperationAST(document);
    return operation?.operation === OperationTypeNode.SUBSCRIPTION;
  } catch {
    // The server answers an unparsable document with its own error.
    return false;
  }
}

function authorizationOf(headers: Record<string, unknown> | undefined): string | undefined {
  const entry = Object.entries(headers ?? {}).find(([name]) => name.toLowerCase() === 'authorization');
  return typeof entry?.[1] === 'string' ? entry[1] : undefined;
}

const fetcher: Fetcher = async (params, options) => {
  const headers = (options?.headers ?? {}) as Record<string, unknown>;
  if (isSubscription(params.query, params.operationName)) {
    const events = socketFor(authorizationOf(headers)).iterate({
      query: params.query,
      variables: (params.variables ?? {}) as Record<string, unknown>,
      ...(params.operationName == null ? {} : { operationName: params.operationName }),
    });
    // graphql-ws yields formatted results (errors as plain objects), which is what GraphiQL shows.
    return events as unknown as Awaited<ReturnType<Fetcher>>;
  }
  const response = await fetch(httpUrl, {
    method: 'POST',
    headers: {
      ...Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)])),
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
    },
    body: JSON.stringify(params),
  });
  return (await response.json()) as Awaited<ReturnType<Fetcher>>;
};

const DEFAULT_HEADERS = `{
  "Authorization": "Bearer <access token>"
}`;

createRoot(document.getElementById('graphiql')!).render(
  <GraphiQL
    fetcher={fetcher}
    defaultHeaders={DEFAULT_HEADERS}
    shouldPersistHeaders={false}
    defaultEditorToolsVisibility="headers"
  />,
);
