/** The lifecycle emitter itself: who is told, in which order, and what a failing listener costs. */
import { describe, expect, test } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { createLifecycle } from '../../src/observability/lifecycle.ts';

function lifecycleWithLog() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'debug',
    write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>),
  });
  return { lifecycle: createLifecycle(logger), lines };
}

const COMPLETED = { subscriptionId: '1:a' };

describe('createLifecycle', () => {
  test('tells every listener of an event, in the order they started listening, and no other event', () => {
    const { lifecycle } = lifecycleWithLog();
    const told: string[] = [];
    lifecycle.on('subscriptionCompleted', (message) => told.push(`first ${message.subscriptionId}`));
    lifecycle.on('subscriptionCompleted', (message) => told.push(`second ${message.subscriptionId}`));
    lifecycle.on('subscriptionStarted', () => told.push('started'));

    lifecycle.emit('subscriptionCompleted', COMPLETED);
    expect(told).toEqual(['first 1:a', 'second 1:a']);
  });

  test('observed says whether anyone listens, and a stopped listener is no longer told', () => {
    const { lifecycle } = lifecycleWithLog();
    expect(lifecycle.observed('subscriptionCompleted')).toBe(false);
    const told: unknown[] = [];
    const listener = (message: unknown) => told.push(message);
    const stopFirst = lifecycle.on('subscriptionCompleted', listener);
    const stopSecond = lifecycle.on('subscriptionCompleted', listener);
    expect(lifecycle.observed('subscriptionCompleted')).toBe(true);

    lifecycle.emit('subscriptionCompleted', COMPLETED);
    expect(told).toHaveLength(2);
    stopFirst();
    lifecycle.emit('subscriptionCompleted', COMPLETED);
    expect(told).toHaveLength(3);
    stopSecond();
    expect(lifecycle.observed('subscriptionCompleted')).toBe(false);
    lifecycle.emit('subscriptionCompleted', COMPLETED);
    expect(told).toHaveLength(3);
  });

  test('a listener that throws or rejects is logged, and the next listeners are still told', async () => {
    const { lifecycle, lines } = lifecycleWithLog();
    const told: string[] = [];
    lifecycle.on('subscriptionCompleted', () => {
      throw new Error('thrown by a listener');
    });
    // Deliberately a listener that rejects: the lifecycle must log it, not leave it unhandled.
    // eslint-disable-next-line @typescript-eslint/no-misused-promises
    lifecycle.on('subscriptionCompleted', async () => {
      await Promise.resolve();
      throw new Error('rejected by a listener');
    });
    lifecycle.on('subscriptionCompleted', () => told.push('told'));

    expect(() => lifecycle.emit('subscriptionCompleted', COMPLETED)).not.toThrow();
    expect(told).toEqual(['told']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'error',
        msg: 'a lifecycle listener failed',
        event: 'subscriptionCompleted',
        error: expect.objectContaining({ message: 'thrown by a listener' }),
      }),
      expect.objectContaining({
        level: 'error',
        msg: 'a lifecycle listener failed',
        event: 'subscriptionCompleted',
        error: expect.objectContaining({ message: 'rejected by a listener' }),
      }),
    ]);
  });

  test('a listener may stop listening while it is told, without skipping the others', () => {
    const { lifecycle } = lifecycleWithLog();
    const told: string[] = [];
    const stop = lifecycle.on('subscriptionCompleted', () => {
      told.push('once');
      stop();
    });
    lifecycle.on('subscriptionCompleted', () => told.push('always'));
    lifecycle.emit('subscriptionCompleted', COMPLETED);
    lifecycle.emit('subscriptionCompleted', COMPLETED);
    expect(told).toEqual(['once', 'always', 'always']);
  });
});
