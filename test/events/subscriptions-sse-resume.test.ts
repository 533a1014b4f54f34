/**
 * The cursor travels beside each SSE result, not inside it: a document that selects no `cursor`
 * and declares no `$after` still gets each event's cursor as its SSE `id`, and a client that
 * reconnects with it as `Last-Event-ID` resumes from the event log, within its own scope. A
 * `Last-Event-ID` that is not a cursor is refused before anything runs. The facade's own writer
 * speaks the protocol as graphql-sse's own client reads it.
 */
import { createClient } from 'graphql-sse';
import { describe, expect, test } from 'vitest';
import { openSseStream, type SseMessage } from '../support/harness/sse-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

/** Selects neither `cursor` nor `$after`. */
const ACME_ACCOUNTS = `subscription { accountChanged(customerId: "cus_acme") { eventId accountId } }`;

type Message = SseMessage<{ accountChanged: { eventId: string; accountId: string } }>;

const openStream = (query: string, headers: Record<string, string>) =>
  openSseStream<{ accountChanged: { eventId: string; accountId: string } }>(stack.facadeUrl, query, headers);

const topUp = async (accountId: string) => {
  const response = await stack.emulator.rest('POST', `/v3/sandbox/accounts/${accountId}/topup`, {
    body: { amount: '3.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
};

const nexts = (messages: Message[]) => messages.filter((message) => message.event === 'next');

describe('the SSE cursor beside the result', () => {
  test('a stream that selects no cursor carries each event’s cursor as its id, and Last-Event-ID resumes within the caller’s scope', async () => {
    const acme = { authorization: `Bearer ${await tokenFor('acme')}` };
    const first = await openStream(ACME_ACCOUNTS, acme);
    expect(first.status).toBe(200);
    await stack.subscriptionsStarted(1);
    await topUp('acc_acme_eth');
    await waitFor(() => nexts(first.messages).length === 1, 'the first top-up');
    const [received] = nexts(first.messages);
    expect(received!.id).toMatch(/^\d+-\d+$/);
    first.close();
    await first.ended;
    await stack.subscriptionsCompleted(1);

    // Away: a top-up of its own customer and one of another customer's; an operator sees both land.
    const watcher = stack
      .connect({ authorization: `Bearer ${await tokenFor('operator')}` })
      .subscribe(`subscription { events { eventId customerId } }`);
    await stack.subscriptionsStarted(1);
    await topUp('acc_globex_eth');
    await topUp('acc_acme_eth');
    await waitFor(() => watcher.data.length === 2, 'both top-ups in the log');
    const missed = watcher.data
      .map((data) => data.events as { eventId: string; customerId: string })
      .find((event) => event.customerId === 'cus_acme');

    const back = await openStream(ACME_ACCOUNTS, { ...acme, 'last-event-id': received!.id! });
    expect(back.status).toBe(200);
    await waitFor(() => nexts(back.messages).length === 1, 'the missed top-up on resuming');
    await stack.subscriptionsStarted(1);
    // Only its own customer's event: the other customer's, logged in between, is not resumed.
    expect(nexts(back.messages).map((message) => message.data?.data?.accountChanged.eventId)).toEqual([
      missed!.eventId,
    ]);
    expect(nexts(back.messages)[0]!.id).toMatch(/^\d+-\d+$/);
    back.close();
    watcher.stop();
    await stack.subscriptionsCompleted(2);
  });

  test('a Last-Event-ID that is not a cursor is refused 400 BAD_USER_INPUT, nothing run', async () => {
    await stack.resetUpstreamCalls();
    const refused = await openStream(ACME_ACCOUNTS, {
      authorization: `Bearer ${await tokenFor('acme')}`,
      'last-event-id': 'not-a-cursor',
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('graphql-sse’s own client (distinct connections mode) receives an event and completes', async () => {
    const client = createClient({
      url: `${stack.facadeUrl}/graphql/stream`,
      singleConnection: false,
      retryAttempts: 0,
      headers: { authorization: `Bearer ${await tokenFor('acme')}` },
    });
    const received: unknown[] = [];
    let completed = false;
    let failed: unknown;
    const stop = client.subscribe(
      { query: ACME_ACCOUNTS },
      {
        next: (result) => received.push(result),
        error: (error: unknown) => (failed = error),
        complete: () => (completed = true),
      },
    );
    await stack.subscriptionsStarted(1);
    await topUp('acc_acme_eth');
    await waitFor(() => received.length === 1, 'the top-up through the graphql-sse client');
    expect(received[0]).toMatchObject({ data: { accountChanged: { accountId: 'acc_acme_eth' } } });
    stop();
    await stack.subscriptionsCompleted(1);
    expect(failed).toBeUndefined();
    expect(completed).toBe(true);
    client.dispose();
  });
});
