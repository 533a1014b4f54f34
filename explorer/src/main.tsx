/**
 * The self-hosted explorer: GraphiQL, bundled from npm at build time (explorer/build.ts), served by
 * the facade itself at `/graphql` when `EXPLORER=graphiql`, so it loads where a CDN cannot be
 * reached. Queries and mutations go over HTTP with the headers of the Headers tab; subscriptions go
 * over graphql-ws on the same URL, with the Headers tab's `Authorization` in `connection_init` (one
 * connection per distinct token). Headers are never persisted: a token lives as long as the tab.
 *
 * The schema is introspected with the Headers tab's token, so not before there is one (the
 * placeholder would only earn two 401s), and again whenever the token changes: GraphiQL introspects
 * when it is given a schema of `undefined` after `null`, and whenever its fetcher changes.
 */
import 'graphiql/style.css';
import { GraphiQL, type GraphiQLProps } from 'graphiql';
import { getOperationAST, OperationTypeNode, parse } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import { useEffect, useMemo, useState } from 'react';
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

const fetchGraphQL: Fetcher = async (params, options) => {
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

/** What the Headers tab holds until the user puts a token in. */
const PLACEHOLDER_TOKEN = '<access token>';

const DEFAULT_HEADERS = `{
  "Authorization": "Bearer ${PLACEHOLDER_TOKEN}"
}`;

const DEFAULT_QUERY = `# Put your access token in the Headers tab below:
#   { "Authorization": "Bearer <access token>" }
# The schema (the Docs pane, completion, validation) loads with it, and
# loads again whenever the token changes.
`;

/** How long the headers rest before a changed token is introspected (typing, not pasting). */
const HEADERS_SETTLE_MS = 400;

/** The Headers tab's `Authorization`, if it holds a token: not the placeholder, not unparsable JSON. */
function tokenAuthorization(headersText: string): string | undefined {
  let headers: unknown;
  try {
    headers = JSON.parse(headersText);
  } catch {
    return undefined;
  }
  if (typeof headers !== 'object' || headers === null) return undefined;
  const authorization = authorizationOf(headers as Record<string, unknown>)?.trim();
  if (authorization === undefined || authorization.includes(PLACEHOLDER_TOKEN)) return undefined;
  return /^\S+\s+\S+$/.test(authorization) ? authorization : undefined;
}

function Explorer() {
  const [authorization, setAuthorization] = useState(() => tokenAuthorization(DEFAULT_HEADERS));
  const [headersText, setHeadersText] = useState(DEFAULT_HEADERS);
  useEffect(() => {
    const settled = setTimeout(() => setAuthorization(tokenAuthorization(headersText)), HEADERS_SETTLE_MS);
    return () => clearTimeout(settled);
  }, [headersText]);
  // A new fetcher per token: GraphiQL introspects again with it (requests read the Headers tab).
  const fetcher = useMemo<Fetcher>(() => (params, options) => fetchGraphQL(params, options), [authorization]);
  return (
    <GraphiQL
      fetcher={fetcher}
      // `null`: no schema and no introspection; `undefined`: introspect.
      schema={authorization === undefined ? null : undefined}
      defaultHeaders={DEFAULT_HEADERS}
      defaultQuery={DEFAULT_QUERY}
      onEditHeaders={setHeadersText}
      shouldPersistHeaders={false}
      defaultEditorToolsVisibility="headers"
    />
  );
}

createRoot(document.getElementById('graphiql')!).render(<Explorer />);
