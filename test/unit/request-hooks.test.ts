/**
 * The facade's request hooks run as one Apollo listener: in their order, every part at every stage,
 * and the first part that throws decides the error (what Apollo's `Promise.all` over separate
 * plugins gave). Through Apollo Server itself, the hooks' effects are asserted over HTTP elsewhere
 * (cost-transparency, edge-door, runtime-http).
 */
import type { GraphQLRequestContext, GraphQLRequestContextWillSendResponse } from '@apollo/server';
import { describe, expect, test } from 'vitest';
import { createRequestHooksPlugin, type RequestHooksOf } from '../../src/http/request-hooks.ts';

type Context = { calls: string[] };

function part(name: string, options: { throws?: Error; skip?: boolean } = {}): RequestHooksOf<Context> {
  return ({ contextValue }) =>
    options.skip === true
      ? undefined
      : {
          willSendResponse() {
            contextValue.calls.push(name);
            if (options.throws) throw options.throws;
          },
        };
}

async function willSendResponseOf(
  parts: RequestHooksOf<Context>[],
): Promise<{ calls: string[]; error: unknown }> {
  const contextValue: Context = { calls: [] };
  const requestContext = { contextValue } as unknown as GraphQLRequestContext<Context>;
  const listener = await createRequestHooksPlugin(parts).requestDidStart!(requestContext);
  try {
    await listener!.willSendResponse!(requestContext as GraphQLRequestContextWillSendResponse<Context>);
    return { calls: contextValue.calls, error: undefined };
  } catch (error) {
    return { calls: contextValue.calls, error };
  }
}

describe('the facade’s request hooks as one listener', () => {
  test('run in the order listed, a part without hooks for the request skipped', async () => {
    expect(await willSendResponseOf([part('a'), part('b', { skip: true }), part('c')])).toEqual({
      calls: ['a', 'c'],
      error: undefined,
    });
  });

  test('every part runs past one that throws; the first error is the one thrown', async () => {
    const first = new Error('first');
    const second = new Error('second');
    expect(
      await willSendResponseOf([part('a', { throws: first }), part('b'), part('c', { throws: second })]),
    ).toEqual({ calls: ['a', 'b', 'c'], error: first });
  });
});
