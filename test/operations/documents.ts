/** The documents a reader follows: README.md, every page of docs/, and the example web app's README. */
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The repository's root. */
export const ROOT = resolve(import.meta.dirname, '../..');

/** The documents' paths, relative to {@link ROOT}. */
export const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
  'examples/web/README.md',
];
