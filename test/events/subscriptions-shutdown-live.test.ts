/**
 * Shutdown drains every live transport, not graphql-ws alone: `app.close()` completes the running
 * subscriptions over graphql-ws, over SSE (the SSE stream ends with `complete`) and over the
 * multipart protocol (its response ends with the closing delimiter, which Apollo Client reads as
 * the subscription's completion).
 */
import { describe, expect, test } from 'vitest';
import { startStack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

const SUBSCRIPTION = `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId } }`;

describe('shutdown of every live transport', () => {
  test(
    'app.close() completes the subscriptions over graphql-ws, SSE and multipart',
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
        const multipart = await fetch(stack.graphqlUrl, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9',
            authorization,
          },
          body: JSON.stringify({ query: SUBSCRIPTION }),
        });
        expect(multipart.status).toBe(200);
        const multipartText = multipart.text();
        await stack.subscriptionsStarted(3);

        const closing = stack.app.close();
        await ended;
        expect(text.trimEnd().endsWith('event: complete\ndata:')).toBe(true);
        expect((await multipartText).endsWith('\r\n--graphql--\r\n')).toBe(true);
        await overWebSocket.done;
        expect(overWebSocket.completed).toBe(true);
        await closing;
        await stack.subscriptionsCompleted(3);
      } finally {
        await stack.close();
      }
    },
  );
});
