/**
 * A raw GraphQL-over-SSE reader (fetch and the stream's own framing, no client library), for tests
 * that send headers a library would not (`Last-Event-ID`, hostile values) and read every message's
 * `id`, `event` and `data` as the facade wrote them.
 */

/** One SSE message as written: its `id` when it has one, its `event`, its `data` parsed. */
export interface SseMessage<Data = unknown> {
  id?: string;
  event: string;
  data: { data?: Data; errors?: unknown[] } | null;
}

/** An SSE request's answer: a refusal's status and body, or the messages of its stream as they come. */
export interface SseStream<Data> {
  status: number;
  /** A refusal's body, parsed (undefined for a stream or an empty body). */
  body: unknown;
  /** A refusal's body as sent ('' for a stream). */
  text: string;
  messages: SseMessage<Data>[];
  /** Resolves when the stream ends (at once for a refusal). */
  ended: Promise<void>;
  close(): void;
}

/** POSTs `query` to `${facadeUrl}/graphql/stream` with `headers` and reads what comes back. */
export async function openSseStream<Data = unknown>(
  facadeUrl: string,
  query: string,
  headers: Record<string, string>,
): Promise<SseStream<Data>> {
  const abort = new AbortController();
  const response = await fetch(`${facadeUrl}/graphql/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ query }),
    signal: abort.signal,
  });
  const messages: SseMessage<Data>[] = [];
  const streaming = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
  const text = streaming ? '' : await response.text();
  const body: unknown = text === '' ? undefined : JSON.parse(text);
  const ended = (async () => {
    if (!streaming) return;
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      const reader = response.body!.getReader();
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        buffered += decoder.decode(read.value, { stream: true });
        for (let end = buffered.indexOf('\n\n'); end !== -1; end = buffered.indexOf('\n\n')) {
          const lines = buffered.slice(0, end).split('\n');
          buffered = buffered.slice(end + 2);
          const field = (name: string) =>
            lines
              .find((line) => line.startsWith(`${name}:`))
              ?.slice(name.length + 1)
              .trim();
          const event = field('event');
          if (event === undefined) continue;
          const data = field('data');
          const id = field('id');
          messages.push({
            event,
            ...(id === undefined ? {} : { id }),
            data: data === undefined || data === '' ? null : (JSON.parse(data) as SseMessage<Data>['data']),
          });
        }
      }
    } catch {
      // Aborted by the test.
    }
  })();
  return { status: response.status, body, text, messages, ended, close: () => abort.abort() };
}
