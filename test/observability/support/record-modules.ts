/**
 * Loaded with `--import` into a facade process by the trace tests: records the URL of every module
 * the process loads (ESM and CommonJS alike, through Node's synchronous module hooks) and writes the
 * list as JSON to the file named by `RECORD_MODULES_TO` when the process exits.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const loaded = new Set<string>();
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url);
    return nextLoad(url, context);
  },
});
process.once('exit', () => {
  const file = process.env.RECORD_MODULES_TO;
  if (file !== undefined) writeFileSync(file, JSON.stringify([...loaded]));
});
