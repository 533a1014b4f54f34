/** Pure helpers of the HTTP layer and the logger's stdout writer (the latter in a child process). */
import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { searchOf } from '../../src/http/graphql-handler.ts';

describe('searchOf', () => {
  test.each([
    ['/', ''],
    ['/?query=%7B__typename%7D', '?query=%7B__typename%7D'],
    ['/?a=1&b=2#fragment', '?a=1&b=2'],
    ['/#only-a-fragment', ''],
    ['/?', '?'],
  ])('finds the query string of %s as url.parse does', (url, search) => {
    expect(searchOf(url)).toBe(search);
  });
});

describe('writeToStdout', () => {
  test('writes every line in order, including those pending when the process exits at once', () => {
    const script = `
      import { createLogger } from ${JSON.stringify(new URL('../../src/logger.ts', import.meta.url).href)};
      const logger = createLogger({ level: 'info' });
      setImmediate(() => {
        logger.info('second turn');
        logger.info('then exit');
        process.exit(0);
      });
      logger.info('one');
      logger.info('two');
      logger.debug('below the level');
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });

    expect(child.status).toBe(0);
    const messages = child.stdout
      .trimEnd()
      .split('\n')
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages).toEqual(['one', 'two', 'second turn', 'then exit']);
  });
});
