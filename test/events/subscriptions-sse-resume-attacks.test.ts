/**
 * `Last-Event-ID` as an attacker sends it to GraphQL over SSE: another customer's cursor, a cursor
 * from before every event, one far in the future, one at the largest shape a cursor may take, one
 * without a token, and a header too large to read. Each is answered within the caller's own scope
 * or refused with a clear status, nothing of another customer is resumed, and the process keeps
 * serving.
 */
import { describe, expect, test } from 'vitest';
import { openSseStream, type SseMessage } from '../support/harness/sse-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

/** Account events of one customer each. */
const GLOBEX_ACCOUNTS = `subscription { accountChanged(customerId: "cus_globex") { eventId accountId } }`;
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

describe('Last-Event-ID from an attacker', () => {
  test('another customer’s cursor, or the log’s start, resumes only the caller’s own customer’s events', async () => {
    // Acme's stream hands out a cursor; then both customers' accounts change.
    const acme = { authorization: `Bearer ${await tokenFor('acme')}` };
    const first = await openStream(ACME_ACCOUNTS, acme);
    expect(first.status).toBe(200);
    await stack.subscriptionsStarted(1);
    await topUp('acc_acme_eth');
    await waitFor(() => nexts(first.messages).length === 1, 'acme’s first top-up');
    const acmeCursor = nexts(first.messages)[0]!.id!;
    await topUp('acc_acme_eth');
    await topUp('acc_globex_eth');
    await waitFor(() => nexts(first.messages).length === 2, 'acme’s second top-up');
    first.close();
    await first.ended;
    await stack.subscriptionsCompleted(1);

    // With acme's cursor, globex resumes its own top-up logged after it, and not acme's.
    const globex = { authorization: `Bearer ${await tokenFor('globex')}` };
    const resumed = await openStream(GLOBEX_ACCOUNTS, { ...globex, 'last-event-id': acmeCursor });
    expect(resumed.status).toBe(200);
    await waitFor(() => nexts(resumed.messages).length === 1, 'globex’s own missed top-up');
    await stack.subscriptionsStarted(1);
    await topUp('acc_acme_eth');
    await topUp('acc_globex_eth');
    await waitFor(() => nexts(resumed.messages).length === 2, 'globex’s live top-up');
    const accounts = nexts(resumed.messages).map((message) => message.data?.data?.accountChanged.accountId);
    expect(accounts).toEqual(['acc_globex_eth', 'acc_globex_eth']);
    resumed.close();
    await resumed.ended;
    await stack.subscriptionsCompleted(1);

    // From the log's start: its own events only, or the cursor refused without saying where the
    // log begins (what the log holds is every customer's, not the caller's to learn).
    const fromStart = await openStream(GLOBEX_ACCOUNTS, { ...globex, 'last-event-id': '0-0' });
    expect(fromStart.status).toBe(200);
    await waitFor(
      () =>
        fromStart.messages.some((message) => message.event === 'complete') ||
        nexts(fromStart.messages).length >= 2,
      'globex’s answer to a cursor at the log’s start',
    );
    for (const message of nexts(fromStart.messages)) {
      const account = message.data?.data?.accountChanged.accountId;
      if (account !== undefined) expect(account).toBe('acc_globex_eth');
      for (const error of (message.data?.errors ?? []) as { extensions?: Record<string, unknown> }[]) {
        expect(error.extensions?.['code']).toBe('CURSOR_EXPIRED');
        expect(error.extensions).not.toHaveProperty('oldest');
        // Nor a word about what the log holds (it holds other customers' events).
        expect((error as { message?: string }).message).not.toMatch(/holds|oldest/);
      }
    }
    expect(JSON.stringify(fromStart.messages)).not.toContain('acc_acme');
    fromStart.close();
    await fromStart.ended;
    // Counted like any subscription, so the next test's waits count from here.
    await stack.subscriptionsStarted(1);
    await stack.subscriptionsCompleted(1);
  });

  test('another customer’s subscription with a valid cursor is refused by scope before the cursor is judged', async () => {
    await stack.resetUpstreamCalls();
    const refused = await openStream(GLOBEX_ACCOUNTS, {
      authorization: `Bearer ${await tokenFor('acme')}`,
      'last-event-id': '1-0',
    });
    await refused.ended;
    // The refusal is the scope's, whatever the cursor: as a stream with one error, or an HTTP refusal.
    const answer = JSON.stringify(refused.body ?? refused.messages);
    expect(answer).toMatch(/FORBIDDEN|NOT_FOUND/);
    expect(answer).not.toMatch(/CURSOR_EXPIRED|oldest/);
    expect(nexts(refused.messages).every((message) => message.data?.data == null)).toBe(true);
    await stack.subscriptionsStarted(1);
    await stack.subscriptionsCompleted(1);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a cursor far in the future neither hides live events nor says where the log is', async () => {
    const acme = { authorization: `Bearer ${await tokenFor('acme')}` };
    for (const cursor of ['9999999999999-0', '9007199254740991-9007199254740991']) {
      const ahead = await openStream(ACME_ACCOUNTS, { ...acme, 'last-event-id': cursor });
      expect(ahead.status).toBe(200);
      await stack.subscriptionsStarted(1);
      await topUp('acc_acme_eth');
      await waitFor(() => nexts(ahead.messages).length === 1, 'a live top-up after a future cursor');
      expect(nexts(ahead.messages)[0]!.data?.data?.accountChanged.accountId).toBe('acc_acme_eth');
      ahead.close();
      await ahead.ended;
      await stack.subscriptionsCompleted(1);
    }
  });

  test('without a token a Last-Event-ID is not even read: 401, nothing run', async () => {
    await stack.resetUpstreamCalls();
    for (const lastEventId of ['1-0', 'not-a-cursor']) {
      const refused = await openStream(ACME_ACCOUNTS, { 'last-event-id': lastEventId });
      expect(refused.status).toBe(401);
      expect(refused.body).toMatchObject({ errors: [{ extensions: { code: 'UNAUTHENTICATED' } }] });
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a cursor-shaped id beyond a safe integer, or an oversized header, is refused and the process keeps serving', async () => {
    const acme = { authorization: `Bearer ${await tokenFor('acme')}` };
    const unsafe = await openStream(ACME_ACCOUNTS, { ...acme, 'last-event-id': '99999999999999999-0' });
    expect(unsafe.status).toBe(400);
    expect(unsafe.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });

    const huge = await openStream(ACME_ACCOUNTS, { ...acme, 'last-event-id': `1-${'9'.repeat(40_000)}` });
    expect(huge.status).toBe(431);
    // The refusal quotes at most the start of what was sent.
    const long = await openStream(ACME_ACCOUNTS, { ...acme, 'last-event-id': `x${'y'.repeat(4_000)}` });
    expect(long.status).toBe(400);
    expect(long.text.length).toBeLessThan(1_000);

    const after = await openStream(ACME_ACCOUNTS, acme);
    expect(after.status).toBe(200);
    after.close();
    await after.ended;
  });
});
