/**
 * A raw reader of Apollo's multipart HTTP subscriptions (fetch and the protocol's own framing, no
 * client library), for tests that read every part as the facade wrote it (heartbeats included),
 * send headers a client would not, and see the closing delimiter.
 */

/** One part's JSON body: `{}` (a heartbeat), `{ payload }`, or `{ payload: null, errors }`. */
export interface MultipartPart<Data = unknown> {
  payload?: { data?: Data; errors?: unknown[]; extensions?: { cursor?: string } } | null;
  errors?: { message: string; extensions: Record<string, unknown> }[];
}

/** A multipart request's answer: a refusal's status and body, or the parts of its stream as they come. */
export interface MultipartStream<Data> {
  status: number;
  headers: Headers;
  /** A refusal's (or an unstarted subscription's) JSON body; undefined for a stream. */
  body: unknown;
  /** Every part received, heartbeats included, in order. */
  parts: MultipartPart<Data>[];
  /** The parts that carry a result (`payload` not null). */
  results(): NonNullable<MultipartPart<Data>['payload']>[];
  /** Whether the closing delimiter (`--graphql--`) was received. */
  closed(): boolean;
  /** Resolves when the response ends (at once for a refusal). */
  ended: Promise<void>;
  close(): void;
}

/** What Apollo Client's `HttpLink` sends for a subscription. */
export const APOLLO_SUBSCRIPTION_ACCEPT =
  'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9';

/** POSTs `query` to `${facadeUrl}/graphql` asking for multipart subscriptions, and reads what comes back. */
export async function openMultipartStream<Data = unknown>(
  facadeUrl: string,
  query: string,
  headers: Record<string, string>,
  variables: Record<string, unknown> = {},
  method: 'POST' | 'GET' = 'POST',
): Promise<MultipartStream<Data>> {
  const abort = new AbortController();
  const url = new URL(`${facadeUrl}/graphql`);
  if (method === 'GET') {
    url.searchParams.set('query', query);
    url.searchParams.set('variables', JSON.stringify(variables));
  }
  const response = await fetch(url, {
    method,
    headers: {
      accept: APOLLO_SUBSCRIPTION_ACCEPT,
      ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(method === 'POST' ? { body: JSON.stringify({ query, variables }) } : {}),
    signal: abort.signal,
  });
  const contentType = response.headers.get('content-type') ?? '';
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)?.[1];
  const streaming = contentType.startsWith('multipart/mixed') && boundary !== undefined;
  const parts: MultipartPart<Data>[] = [];
  let text = '';
  const body: unknown = streaming ? undefined : await response.json().catch(() => undefined);
  const ended = (async () => {
    if (!streaming) return;
    const decoder = new TextDecoder();
    const delimiter = `\r\n--${boundary}`;
    let consumed = 0;
    try {
      const reader = response.body!.getReader();
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        text += decoder.decode(read.value, { stream: true });
        // A part is whole once the delimiter after it arrived.
        for (;;) {
          const start = text.indexOf(delimiter, consumed);
          if (start === -1) break;
          const next = text.indexOf(delimiter, start + delimiter.length);
          if (next === -1) break;
          const raw = text.slice(start + delimiter.length, next);
          const bodyStart = raw.indexOf('\r\n\r\n');
          parts.push(JSON.parse(raw.slice(bodyStart + 4)) as MultipartPart<Data>);
          consumed = next;
        }
      }
    } catch {
      // Aborted by the test.
    }
  })();
  return {
    status: response.status,
    headers: response.headers,
    body,
    parts,
    results: () =>
      parts.flatMap((part) => (part.payload === undefined || part.payload === null ? [] : [part.payload])),
    closed: () => text.endsWith(`\r\n--${boundary ?? ''}--\r\n`),
    ended,
    close: () => abort.abort(),
  };
}
