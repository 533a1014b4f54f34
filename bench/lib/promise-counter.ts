/**
 * Loaded into a facade with `--import` by `bench/promises.ts`: counts every promise V8 creates
 * (`v8.promiseHooks.onInit`, which async functions and `await` go through too) and writes the count
 * so far to `PROMISE_COUNT_FILE` on SIGUSR2.
 */
import { writeFileSync } from 'node:fs';
import { promiseHooks } from 'node:v8';

const file = process.env.PROMISE_COUNT_FILE;
if (file !== undefined) {
  let created = 0;
  promiseHooks.onInit(() => {
    created += 1;
  });
  process.on('SIGUSR2', () => writeFileSync(file, String(created)));
}
