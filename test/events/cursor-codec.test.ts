/**
 * The form of cursors as callers see them (`src/events/log/cursor-codec.ts`): bare log positions
 * when callers are not bound to an environment, `<environment>~<position>` when they are, and what
 * a cursor given back stands for in each case.
 */
import { describe, expect, test } from 'vitest';
import { cursorCodec } from '../../src/events/log/cursor-codec.ts';

describe('cursors with UPSTREAM_API_KEY alone', () => {
  const cursors = cursorCodec(undefined);

  test('are the log positions as they are, read back as they are', () => {
    expect(cursors.encode('1732000000000-0')).toBe('1732000000000-0');
    expect(cursors.decode('1732000000000-7')).toEqual({ kind: 'position', position: '1732000000000-7' });
  });

  test('anything else, a labelled cursor included, is malformed', () => {
    for (const given of ['', 'not-a-cursor', 'live~1732000000000-0', '1-', '-1', '1-2-3', ' 1-0']) {
      expect(cursors.decode(given), given).toEqual({ kind: 'malformed' });
    }
  });
});

describe('cursors of callers bound to live', () => {
  const cursors = cursorCodec('live');

  test('name their environment, and read back to the position', () => {
    const cursor = cursors.encode('1732000000000-0');
    expect(cursor).toBe('live~1732000000000-0');
    expect(encodeURIComponent(cursor)).toBe(cursor);
    expect(cursors.decode(cursor)).toEqual({ kind: 'position', position: '1732000000000-0' });
  });

  test('a sandbox cursor, or a bare position, is another environment’s', () => {
    expect(cursors.decode('sandbox~1732000000000-0')).toEqual({
      kind: 'other-environment',
      named: 'sandbox',
    });
    expect(cursors.decode('1732000000000-0')).toEqual({ kind: 'other-environment', named: undefined });
    expect(cursors.describeForeign({ kind: 'other-environment', named: 'sandbox' })).toContain(
      'belongs to the sandbox environment',
    );
    expect(cursors.describeForeign({ kind: 'other-environment', named: undefined })).toContain(
      'names no environment',
    );
  });

  test('a label without a position, an unknown label or a mangled one is malformed', () => {
    for (const given of [
      'live~',
      'live~abc',
      'live~1-0~1-0',
      'staging~1-0',
      'LIVE~1-0',
      'live-1-0',
      '~1-0',
    ]) {
      expect(cursors.decode(given), given).toEqual({ kind: 'malformed' });
    }
  });
});
