/**
 * The habit beside the one for functions (docs/architecture.md, "Size, by habit"): a file of the
 * door, the transports and HTTP under 400 lines unless its first lines say why it is longer, and
 * each file of the door under 250. Measured by the script a reader runs (scripts/longest-files.ts).
 */
import { expect, test } from 'vitest';
import { longFiles } from '../../scripts/longest-files.ts';

test('no file of src/edge, src/http, app.ts or transports.ts is over 400 lines without saying why', () => {
  const long = longFiles(['src/edge', 'src/http', 'src/app.ts', 'src/transports.ts']);
  expect(long.filter((file) => !file.saysWhy)).toEqual([]);
});

test('each file of the door is under 250 lines', () => {
  expect(longFiles(['src/edge/door'], 250)).toEqual([]);
});
