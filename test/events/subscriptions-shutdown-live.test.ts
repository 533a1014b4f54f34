/**
 * Shutdown drains every live transport, not graphql-ws alone: `app.close()` completes the running
 * subscriptions over graphql-ws and over SSE (the SSE stream ends with `complete`).
 */
import { describe, expect, test } from 'vitest';
import { startStack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

const SUBSCRIPTION = `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId } }`;

describe('shutdown of every live transport', () => {
  test(
    'app.close() completes the subscriptions over graphql-ws and over SSE',
    { timeout: 60_000 },
    async () => {
      const stack = await startStack({ env: { WEBHOOK_REGISTER: 'true' } });
      try {
        const authorization = `Bearer ${await tokenFor('operator')}`;
        const overWebSocket = stack.connect({ authorization }).subscribe(SUBSCRIPTION);
        const response = await fetch(`${stack.facadeUrl}/graphql/stream`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization },
          body: JSON.stringify({ query: SUBSCRIPTION }),
        });
        expect(response.status).toBe(200);
        let text = '';
        const ended = (async () => {
          const decoder = new TextDecoder();
          const reader = response.body!.getReader();
          for (let read = await reader.read(); !read.done; read = await reader.read()) {
            text += decoder.decode(read.value, { stream: true });
          }
        })();
        await stack.subscriptionsStarted(2);

        const closing = stack.app.close();
        await ended;
        expect(text.trimEnd().endsWith('event: complete\ndata:')).toBe(true);
        await overWebSocket.done;
        expect(overWebSocket.completed).toBe(true);
        await closing;
        await stack.subscriptionsCompleted(2);
      } finally {
        await stack.close();
      }
    },
  );
});
