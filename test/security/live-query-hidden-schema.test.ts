/**
 * With `INTROSPECTION=off` the schema stays hidden on every transport, not only over HTTP: a live
 * query is a query, so without the door's check a customer-scoped caller could send
 * `query @live { _service { sdl } }` or `query @live { __schema { … } }` over graphql-ws, SSE or
 * Apollo's multipart protocol and read the whole schema that Apollo Server refuses it over HTTP,
 * and a typo's "Did you mean …" there would name the fields it guessed at.
 */
import { describe, expect, test } from 'vitest';
import { openMultipartStream } from '../support/harness/multipart-stream.ts';
import { openSseStream } from '../support/harness/sse-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer, tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { CACHE_ENABLED: 'true', INTROSPECTION: 'off' } });

const SDL = 'query @live { _service { sdl } customer(id: "cus_acme") { id } }';
const SCHEMA = 'query @live { __schema { types { name } } customer(id: "cus_acme") { id } }';

describe('INTROSPECTION=off over the live transports', () => {
  test('over HTTP a customer-scoped caller is refused the SDL (the reference answer)', async () => {
    const http = await stack.queryAs('acme', '{ _service { sdl } }');
    expect(http.status).toBe(403);
    expect(http.body.errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
  });

  test('a live query selecting _service is refused to a customer-scoped caller, with no upstream call', async () => {
    await stack.resetUpstreamCalls();
    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const received = acme.subscribe(SDL);
    const closed = await acme.closed;
    expect(closed.code).toBe(4403);
    expect(JSON.stringify(received.data)).not.toContain('sdl');

    const sse = await openSseStream(stack.facadeUrl, SDL, await bearer('acme'));
    expect(sse.status).toBe(403);
    expect(sse.text).not.toContain('extend schema');
    expect(sse.text).toContain('schema-reader or operator role');

    const multipart = await openMultipartStream(stack.facadeUrl, SDL, await bearer('acme'));
    expect(multipart.status).toBe(403);
    expect(multipart.body).toMatchObject({ errors: [{ extensions: { code: 'FORBIDDEN' } }] });
    expect((await stack.upstreamCalls()).byRoute['GET /v3/customers/{customerId}'] ?? 0).toBe(0);
    await acme.dispose();
  });

  test('a live query introspecting __schema is refused to everyone, as over HTTP', async () => {
    const operator = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const received = operator.subscribe(SCHEMA);
    await received.done;
    expect(received.data).toEqual([]);
    expect(received.errors.flat()).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/introspection/i),
        extensions: expect.objectContaining({ code: 'GRAPHQL_VALIDATION_FAILED' }),
      }),
    ]);
    await operator.dispose();
  });

  test('validation errors over the live transports suggest no field names, as over HTTP', async () => {
    const typo = 'query @live { custome(id: "cus_acme") { id } }';
    const http = await stack.queryAs('acme', '{ custome(id: "cus_acme") { id } }');
    expect(http.body.errors?.[0]?.message).toBe('Cannot query field "custome" on type "Query".');

    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const received = acme.subscribe(typo);
    await received.done;
    const subscription = acme.subscribe('subscription { accountChange(customerId: "cus_acme") { eventId } }');
    await subscription.done;
    const messages = [...received.errors, ...subscription.errors]
      .flat()
      .map((error) => (error as { message: string }).message);
    expect(messages).toEqual([
      'Cannot query field "custome" on type "Query".',
      'Cannot query field "accountChange" on type "Subscription".',
    ]);
    const sse = await openSseStream(stack.facadeUrl, typo, await bearer('acme'));
    expect(sse.status).toBe(400);
    expect(sse.text).not.toContain('Did you mean');
    await acme.dispose();
  });

  test('an operator still reads the SDL in a live query', async () => {
    const operator = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const received = operator.subscribe(SDL);
    await waitFor(() => received.data.length + received.errors.length > 0, 'the operator’s answer');
    expect(received.errors).toEqual([]);
    expect(JSON.stringify(received.data)).toContain('extend schema');
    received.stop();
    await operator.dispose();
  });
});
