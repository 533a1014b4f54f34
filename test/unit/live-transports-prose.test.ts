/**
 * The live transports are a kind in prose too: every text that names them is checked against the
 * one list (src/edge/live-transports.ts), as codegen is checked against the schema, so a transport
 * added there fails here until the `Subscription` type's description, `@live`'s, and the docs of
 * the budgets every live transport shares name it; HTTP's refusal of a subscription is built from
 * the same list.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { howToReachAny, type HowToConnect } from '../../src/edge/live.ts';
import { LIVE_TRANSPORTS } from '../../src/edge/live-transports.ts';
import { createSchema } from '../../src/graph/schema.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (path: string) => readFileSync(resolve(ROOT, path), 'utf8');
const flat = (text: string | null | undefined) => (text ?? '').replace(/\s+/g, ' ');
const ways = LIVE_TRANSPORTS.map((transport) => transport.rules.connects);

const schema = createSchema();

/** Where a transport is, as the `Subscription` type's description says it. */
function whereIs(how: HowToConnect): string {
  return `${how.protocol} at \`${how.path}\`${how.accept === undefined ? '' : ` with \`Accept: ${how.accept}\``}`;
}

describe('the live transports, named from one list', () => {
  test('the Subscription type says where every live transport is, in the list’s order', () => {
    const description = flat(schema.getSubscriptionType()?.description);
    expect(description).toContain(`over every live transport: ${ways.map(whereIs).join('; ')}.`);
  });

  test('@live names every live transport’s protocol', () => {
    const description = flat(schema.getDirective('live')?.description);
    const protocols = ways.map((how) => how.protocol.replace(/ \(.*\)$/, ''));
    expect(description).toContain(`Sent over a live transport (${protocols.join(', ')}:`);
  });

  test('HTTP’s refusal of a subscription names every live transport', () => {
    const sentence = howToReachAny(ways);
    for (const how of ways) expect(sentence).toContain(`to ${how.path}`);
    expect(sentence.split(', or ')).toHaveLength(2);
  });

  test('the budgets of every live transport are documented for every one', () => {
    const names = LIVE_TRANSPORTS.map((transport) => transport.rules.name).join(', ');
    const readme = read('README.md');
    for (const setting of ['RATE_LIMIT_LIVE_CONNECTS', 'RATE_LIMIT_LIVE_OPERATIONS']) {
      const row = readme.split('\n').find((line) => line.startsWith(`| \`${setting}\``));
      expect(row, setting).toContain(`every live transport (${names})`);
    }
  });
});
