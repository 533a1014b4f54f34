/**
 * GraphQL over Server-Sent Events at /graphql/stream, through the same door as every transport:
 * a real HTTP client (fetch) reads the event stream; each event's SSE `id` is its cursor, and a
 * client that reconnects with `Last-Event-ID` resumes from the event log where it stopped.
 */
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

const ACCOUNT = `subscription ($after: String) {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth", after: $after) {
    eventId cursor type account { balances { available } }
  }
}`;

/** One message of an event stream: its `id` (if any), its event name and its data. */
interface StreamMessage {
  id?: string;
  event: string;
  data: unknown;
}

/** An SSE request read as it arrives: the response, and the messages so far. */
interface OpenStream {
  status: number;
  headers: Headers;
  messages: StreamMessage[];
  /** The body when the answer was not an event stream. */
  body?: unknown;
  ended: Promise<void>;
  close(): void;
}

async function openStream(
  query: string,
  headers: Record<string, string>,
  variables: Record<string, unknown> = {},
): Promise<OpenStream> {
  const abort = new AbortController();
  const response = await fetch(`${stack.facadeUrl}/graphql/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ query, variables }),
    signal: abort.signal,
  });
  const messages: StreamMessage[] = [];
  const open: OpenStream = {
    status: response.status,
    headers: response.headers,
    messages,
    ended: Promise.resolve(),
    close: () => abort.abort(),
  };
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    open.body = await response.json();
    return open;
  }
  open.ended = (async () => {
    const decoder = new TextDecoder();
    let buffered = '';
    const reader = response.body!.getReader();
    try {
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        buffered += decoder.decode(read.value, { stream: true });
        for (let end = buffered.indexOf('\n\n'); end !== -1; end = buffered.indexOf('\n\n')) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const message: Partial<StreamMessage> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) message.id = line.slice(4);
            else if (line.startsWith('event: ')) message.event = line.slice(7);
            else if (line.startsWith('data:')) {
              const data = line.slice(5).trim();
              message.data = data === '' ? null : JSON.parse(data);
            }
          }
          if (message.event !== undefined) messages.push(message as StreamMessage);
        }
      }
    } catch {
      // Aborted by the test.
    }
  })();
  return open;
}

const operator = async () => ({ authorization: `Bearer ${await tokenFor('operator')}` });
const nexts = (stream: OpenStream) => stream.messages.filter((message) => message.event === 'next');
const topUp = async () => {
  const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '2.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
};

describe('subscriptions over Server-Sent Events', () => {
  test('a client receives a top-up’s event with its cursor as the SSE id, and resumes with Last-Event-ID', async () => {
    const first = await openStream(ACCOUNT, await operator());
    expect(first.status).toBe(200);
    await stack.subscriptionsStarted(1);
    await topUp();
    await waitFor(() => nexts(first).length === 1, 'the top-up over SSE');
    const [received] = nexts(first);
    const event = (received!.data as { data: { accountChanged: { eventId: string; cursor: string } } }).data
      .accountChanged;
    expect(event).toMatchObject({ type: 'account.updated', account: { balances: [{}] } });
    expect(received!.id).toBe(event.cursor);
    first.close();
    await first.ended;
    await stack.subscriptionsCompleted(1);

    // Away: one more top-up; a watcher over graphql-ws shows when it is in the log.
    const watcher = stack.connect().subscribe(ACCOUNT);
    await stack.subscriptionsStarted(1);
    await topUp();
    await waitFor(() => watcher.data.length === 1, 'the missed top-up');
    const missed = watcher.data[0].accountChanged as { eventId: string; cursor: string };

    const back = await openStream(ACCOUNT, { ...(await operator()), 'last-event-id': received!.id! });
    expect(back.status).toBe(200);
    await waitFor(() => nexts(back).length === 1, 'the missed top-up on resuming');
    await stack.subscriptionsStarted(1);
    await topUp();
    await waitFor(() => nexts(back).length === 2 && watcher.data.length === 2, 'a live top-up');
    const ids = nexts(back).map(
      (message) =>
        (message.data as { data: { accountChanged: { eventId: string } } }).data.accountChanged.eventId,
    );
    expect(ids).toEqual([missed.eventId, watcher.data[1].accountChanged.eventId]);
    expect(nexts(back)[0]!.id).toBe(missed.cursor);
    back.close();
    watcher.stop();
  });

  test('the door refuses a request without a token (401) and a query (not a subscription), running nothing', async () => {
    await stack.resetUpstreamCalls();
    const anonymous = await openStream(ACCOUNT, {});
    // A long-lived connection without a credential is a failing attempt, as over graphql-ws.
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(anonymous.body).toMatchObject({ errors: [{ extensions: { code: 'UNAUTHENTICATED' } }] });

    const query = await openStream('{ customer(id: "cus_acme") { id } }', await operator());
    expect(query.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(query.body)).toContain('subscriptions only');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a caller scoped to one customer cannot follow another’s over SSE', async () => {
    const acme = { authorization: `Bearer ${await tokenFor('acme')}` };
    const refused = await openStream(
      `subscription { accountChanged(customerId: "cus_globex") { eventId } }`,
      acme,
    );
    await refused.ended;
    expect(nexts(refused).map((message) => message.data)).toEqual([
      expect.objectContaining({
        errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) })],
      }),
    ]);
  });

  test('a token that expires on an open stream ends it with UNAUTHENTICATED', async () => {
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 2 });
    const stream = await openStream(`subscription { accountChanged(customerId: "cus_acme") { accountId } }`, {
      authorization: `Bearer ${token}`,
    });
    expect(stream.status).toBe(200);
    await stack.subscriptionsStarted(1);
    await stream.ended;
    expect(nexts(stream).map((message) => message.data)).toEqual([
      expect.objectContaining({
        errors: [
          expect.objectContaining({
            message: expect.stringMatching(/access token of this connection has expired/),
            extensions: expect.objectContaining({ code: 'UNAUTHENTICATED' }),
          }),
        ],
      }),
    ]);
    expect(stream.messages.at(-1)?.event).toBe('complete');
  });

  test('a GET with the document in the URL streams too; another Accept is answered 406', async () => {
    const url = new URL(`${stack.facadeUrl}/graphql/stream`);
    url.searchParams.set('query', 'subscription { accountChanged(customerId: "cus_acme") { accountId } }');
    const abort = new AbortController();
    const streaming = await fetch(url, {
      headers: { accept: 'text/event-stream', ...(await operator()) },
      signal: abort.signal,
    });
    expect(streaming.status).toBe(200);
    expect(streaming.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await stack.subscriptionsStarted(1);
    abort.abort();
    await stack.subscriptionsCompleted(1);

    const json = await fetch(url, { headers: { accept: 'application/json', ...(await operator()) } });
    expect(json.status).toBe(406);
    expect(await json.json()).toMatchObject({ errors: [{ extensions: { code: 'BAD_REQUEST' } }] });
  });

  test('a page of another origin is refused at the preflight, as on /graphql', async () => {
    const preflight = await fetch(`${stack.facadeUrl}/graphql/stream`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://hostile.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });
});
