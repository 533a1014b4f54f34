/**
 * docs/security.md's table of every root field and its rule is the contract callers and reviewers
 * read: it must name each Query, Mutation and Subscription field the schema serves, and no other,
 * so a new field cannot arrive without someone writing down who may call it.
 */
import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { createSchema } from '../../src/graph/schema.ts';

const SECTION = '### Every root field and its rule';

/** The field names in backticks in the first column of the section's table. */
function fieldsInTable(): string[] {
  const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
  const start = doc.indexOf(SECTION);
  expect(start, `docs/security.md has a "${SECTION}" section`).toBeGreaterThan(-1);
  // The table: the first run of `|` lines after the heading.
  const lines = doc.slice(start).split('\n').slice(1);
  const first = lines.findIndex((line) => line.startsWith('|'));
  const end = lines.findIndex((line, index) => index > first && !line.startsWith('|'));
  const rows = lines.slice(first, end);
  const names: string[] = [];
  for (const row of rows.slice(2)) {
    const cell = row.split('|')[1] ?? '';
    for (const match of cell.matchAll(/`([A-Za-z_]+)(?:\([^`]*\))?`/g)) names.push(match[1]!);
  }
  return names;
}

test('docs/security.md gives a rule for exactly the root fields the schema serves', () => {
  const schema = createSchema();
  const served = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]
    .flatMap((type) => (type === null || type === undefined ? [] : Object.keys(type.getFields())))
    .sort();

  expect([...new Set(fieldsInTable())].sort()).toEqual(served);
});
