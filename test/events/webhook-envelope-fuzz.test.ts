/**
 * The signed envelope, fuzzed: generated bodies, properly signed with the facade's webhook secret,
 * with lone surrogates, control characters, huge strings, deep nesting, odd types and odd ids in
 * every field, posted twice each to a real facade (memory pipeline, then two replicas' Redis one).
 * Every delivery is answered deterministically, never 5xx: 200 for a valid event, 202 and the
 * documented reason for one that can never be processed, 413 over the body cap. The facade keeps
 * serving, the emulator counts no request, and the dead-letter record stays within its bound.
 *
 * The generator is seeded (`FUZZ_SEED`, default 35): a failure names its seed and case, and
 * replays. `expectedOf` is the rule of docs/events.md ("Poison events") written out on its own.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { DeadLetter } from '../../src/events/receiving/dead-letters.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { scrape, seriesOf } from '../support/metrics.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 35);
const CASES = 240;
const DEAD_LETTERS_MAX = 20;

/** What a delivery must be answered: accepted (200), parked for a reason (202), or too large (413). */
type Expected = 'accepted' | 'too_large' | { parked: string };

interface FuzzCase {
  name: string;
  body: Buffer;
  webhookId: string;
  expected: Expected;
}

/** mulberry32: small, seeded, good enough to pick cases. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function nested(levels: number, inner: unknown = 1): unknown {
  let value = inner;
  for (let level = 0; level < levels; level += 1) value = [value];
  return value;
}

/** Odd values, each tried in every field. `undefined` removes the member. */
const ODD_VALUES: readonly [string, unknown][] = [
  ['a lone high surrogate', '\ud800'],
  ['a lone low surrogate after a letter', 'a\udfff'],
  ['reversed surrogates', '\udc00\ud800'],
  ['a lone surrogate in a huge string', '\ud800'.repeat(8_000)],
  ['a lone surrogate in a member name', { 'k\ud800': 1 }],
  ['a lone surrogate deep in an array', [['x', ['\udbff']]]],
  ['NUL', 'cus_\u0000'],
  ['a C0 control', '\u001f'],
  ['DEL', 'x\u007f'],
  ['a C1 control', '\u0085'],
  ['an escape sequence', '\u001b[31mred'],
  ['a right-to-left override', 'cus\u202e1'],
  ['an emoji', 'cus_😀'],
  ['a huge string', 'x'.repeat(60_000)],
  ['an empty string', ''],
  ['a space', ' '],
  ['a dot segment', '..'],
  ['a slash', 'cus/1'],
  ['a percent-escape', 'cus%2F1'],
  ['a backslash', 'cus\\1'],
  ['a query', 'cus?x=1'],
  ['an id of 129 characters', 'c'.repeat(129)],
  ['an id of 128 characters', 'c'.repeat(128)],
  ['__proto__', '__proto__'],
  ['constructor', 'constructor'],
  ['toString', 'toString'],
  ['a plain id', 'cus_fuzz'],
  ['a kind', 'payout.invented'],
  ['zero', 0],
  ['a negative number', -1],
  ['a fraction', 1.5],
  ['the largest double', 1e308],
  ['true', true],
  ['false', false],
  ['null', null],
  ['an empty array', []],
  ['an array of 5,000 numbers', Array.from({ length: 5_000 }, (_, index) => index)],
  ['an empty object', {}],
  ['an object', { a: 1, b: ['c'] }],
  ['30 levels of arrays', nested(30)],
  ['40 levels of arrays', nested(40)],
  ['2,000 levels of arrays', nested(2_000)],
  ['absent', undefined],
];

/** Every member of the envelope a case may replace, with its depth (the envelope is 1). */
const FIELDS = [
  ['id', 2],
  ['type', 2],
  ['occurredAt', 2],
  ['environment', 2],
  ['data', 2],
  ['data.customerId', 3],
  ['data.resourceType', 3],
  ['data.resourceId', 3],
  ['data.object', 3],
  ['data.extra', 3],
  ['extra', 2],
] as const;
type Field = (typeof FIELDS)[number][0];

const MAX_DEPTH = 32;
const PLAIN_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
const EVENT_ID = /^[\x21-\x7e]{1,512}$/;
const NAME = /^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$/;

function hasLoneSurrogate(value: unknown): boolean {
  if (typeof value === 'string') return !value.isWellFormed();
  if (typeof value !== 'object' || value === null) return false;
  return Object.entries(value).some(([key, member]) => !key.isWellFormed() || hasLoneSurrogate(member));
}

/** Levels of objects and arrays in `value` (0 for a scalar). */
function levelsOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  let deepest = 0;
  let level: unknown[] = [value];
  while (level.length > 0) {
    deepest += 1;
    level = level.flatMap((node) =>
      Object.values(node as object).filter((member) => typeof member === 'object' && member !== null),
    );
  }
  return deepest;
}

const isRecord = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
const isPlainId = (value: unknown) => typeof value === 'string' && PLAIN_ID.test(value);
const isName = (value: unknown) =>
  typeof value === 'string' && value.length <= 128 && NAME.test(value) && !(value in Object.prototype);

/** The answer the documented rules give `value` in `field` of an otherwise valid event. */
function expectedOf(field: Field, depth: number, value: unknown): Expected {
  if (hasLoneSurrogate(value)) return { parked: 'invalid_text' };
  const levels = levelsOf(value);
  if (levels > 0 && depth + levels - 1 > MAX_DEPTH) return { parked: 'too_deep' };
  const valid = {
    id: typeof value === 'string' && EVENT_ID.test(value),
    type: isName(value),
    occurredAt: false,
    environment: value === 'sandbox' || value === 'live',
    // A data object without the members is refused at its first member, customerId.
    data: false,
    'data.customerId': value === null || isPlainId(value),
    'data.resourceType': isName(value),
    'data.resourceId': isPlainId(value),
    'data.object': isRecord(value),
    'data.extra': true,
    extra: true,
  }[field];
  if (valid) return 'accepted';
  const reason = {
    id: 'invalid_id',
    type: 'invalid_name',
    occurredAt: 'invalid_envelope',
    environment: 'invalid_envelope',
    data: isRecord(value) ? 'invalid_id' : 'invalid_envelope',
    'data.customerId': 'invalid_id',
    'data.resourceType': 'invalid_name',
    'data.resourceId': 'invalid_id',
    'data.object': 'invalid_envelope',
  }[field as Exclude<Field, 'data.extra' | 'extra'>];
  return { parked: reason };
}

function validEvent(index: number): Record<string, unknown> {
  return {
    id: `evt_fuzz_${SEED}_${index}_${process.pid}`,
    type: 'account.updated',
    occurredAt: '2026-03-04T05:06:07.089Z',
    environment: 'sandbox',
    data: { customerId: 'cus_1', resourceType: 'account', resourceId: 'acc_1', object: { id: 'acc_1' } },
  };
}

/** The event of case `index` with `field` set to `value` (removed when undefined). */
function withField(index: number, field: Field, value: unknown): Record<string, unknown> {
  const event = validEvent(index);
  const set = (record: Record<string, unknown>, name: string) =>
    Object.fromEntries([...Object.entries(record).filter(([key]) => key !== name), [name, value]]);
  const [outer, inner] = field.split('.') as [string, string | undefined];
  return inner === undefined
    ? set(event, outer)
    : { ...event, data: set(event.data as Record<string, unknown>, inner) };
}

/** A header can carry the body's id only when it is printable ASCII; else another id is sent. */
function headerIdOf(event: Record<string, unknown>, index: number): string {
  return typeof event.id === 'string' && /^[\x21-\x7e]{1,200}$/.test(event.id)
    ? event.id
    : `evt_header_${index}`;
}

function generateCases(): FuzzCase[] {
  const random = generator(SEED);
  const cases: FuzzCase[] = [];
  for (let index = 0; index < CASES; index += 1) {
    const [field, depth] = FIELDS[Math.floor(random() * FIELDS.length)]!;
    const [label, value] = ODD_VALUES[Math.floor(random() * ODD_VALUES.length)]!;
    const event = withField(index, field, value);
    cases.push({
      name: `#${index} ${label} in ${field}`,
      body: Buffer.from(JSON.stringify(event)),
      webhookId: headerIdOf(event, index),
      expected: expectedOf(field, depth, value),
    });
  }
  return [...cases, ...rawCases()];
}

/** Bodies JSON.stringify cannot write, and the answers outside the envelope's rules. */
function rawCases(): FuzzCase[] {
  const base = (index: number) => JSON.stringify(validEvent(index));
  const raw = (
    index: number,
    name: string,
    body: Buffer | string,
    expected: Expected,
    webhookId?: string,
  ) => ({
    name: `raw #${index} ${name}`,
    body: Buffer.isBuffer(body) ? body : Buffer.from(body),
    webhookId: webhookId ?? `evt_fuzz_${SEED}_${index}_${process.pid}`,
    expected,
  });
  const notUtf8 = Buffer.concat([
    Buffer.from(base(9001).replace('"acc_1"}}', '"acc_')),
    Buffer.from([0xc3, 0x28]),
    Buffer.from('"}}'),
  ]);
  return [
    raw(9000, 'a number no double holds', base(9000).replace('{"id":"acc_1"}', '{"amount":1e400}'), {
      parked: 'invalid_number',
    }),
    raw(9001, 'bytes that are not UTF-8', notUtf8, { parked: 'invalid_json' }),
    raw(9002, 'truncated JSON', base(9002).slice(0, -3), { parked: 'invalid_json' }),
    raw(9003, 'an array', '[]', { parked: 'invalid_envelope' }, 'evt_raw_array'),
    raw(9004, 'a string', '"evt"', { parked: 'invalid_envelope' }, 'evt_raw_string'),
    raw(9005, 'null', 'null', { parked: 'invalid_envelope' }, 'evt_raw_null'),
    raw(
      9006,
      '100,000 levels',
      base(9006).replace('{"id":"acc_1"}', `${'['.repeat(30_000)}${']'.repeat(30_000)}`),
      { parked: 'too_deep' },
    ),
    raw(
      9007,
      'a webhook-id differing from the body',
      base(9007),
      { parked: 'id_mismatch' },
      'evt_someone_else',
    ),
    raw(9008, 'the live environment on the one route', base(9008).replace('"sandbox"', '"live"'), 'accepted'),
    raw(
      9009,
      'a body over the cap',
      base(9009).replace('{"id":"acc_1"}', `{"pad":"${'x'.repeat(70_000)}"}`),
      'too_large',
    ),
  ];
}

/**
 * Standard Webhooks' `v1` signature over the exact bytes sent (the emulator's `signWebhook` takes
 * text, and some bodies here are not UTF-8).
 */
function signBytes(secret: string, id: string, timestamp: number, body: Buffer): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

async function postSigned(
  url: string,
  secret: string,
  fuzz: FuzzCase,
): Promise<{ status: number; reason?: string }> {
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': fuzz.webhookId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signBytes(secret, fuzz.webhookId, timestamp, fuzz.body),
    },
    body: new Uint8Array(fuzz.body),
  });
  const answer = (await response.json().catch(() => ({}))) as { reason?: string };
  return { status: response.status, ...(answer.reason === undefined ? {} : { reason: answer.reason }) };
}

function answerOf(expected: Expected): { status: number; reason?: string } {
  if (expected === 'accepted') return { status: 200 };
  if (expected === 'too_large') return { status: 413 };
  return { status: 202, reason: expected.parked };
}

async function fuzz(stack: Stack, secret: string): Promise<void> {
  const cases = generateCases();
  const parked = new Map<string, number>();
  for (const fuzzCase of cases) {
    const expected = answerOf(fuzzCase.expected);
    // Twice each: the same bytes get the same answer (a valid event: accepted, then a duplicate).
    for (const attempt of [1, 2]) {
      const url = stack.facades[attempt - 1]?.webhookUrl ?? stack.facade.webhookUrl;
      const answer = await postSigned(url, secret, fuzzCase);
      expect(answer, `seed ${SEED}, ${fuzzCase.name}, attempt ${attempt}`).toEqual(expected);
      if (answer.status === 202) parked.set(answer.reason!, (parked.get(answer.reason!) ?? 0) + 1);
    }
  }
  const parkedCount = [...parked.values()].reduce((sum, count) => sum + count, 0);
  expect(parkedCount).toBeGreaterThan(CASES / 2);

  // No request reached the upstream, and the facade still serves.
  expect((await stack.upstreamCalls()).total).toBe(0);
  expect((await fetch(`${stack.facadeUrl}/healthz`)).status).toBe(200);
  expect((await postSigned(stack.facade.webhookUrl, secret, rawCases()[7]!)).status).toBe(202);

  const logs = stack.facades
    .flatMap((facade) => facade.logs())
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(logs.filter((line) => line.msg === 'webhook delivery failed')).toEqual([]);
  const parkedLines = logs.filter(
    (line) => line.msg === 'parked a webhook event that can never be processed',
  );
  expect(parkedLines).toHaveLength(parkedCount + 1);
  for (const line of parkedLines) {
    // The id and pointer may be the poison: escaped to printable ASCII and cut.
    for (const field of [line.eventId, line.pointer] as string[]) {
      expect(field).toMatch(/^[\x20-\x7e]{0,128}(?:…\(\d+ characters\))?$/);
    }
  }

  // Every replica counted what it parked; the record holds no more than its bound per environment.
  let counted = 0;
  for (const facade of stack.facades) {
    const samples = await scrape(facade.metricsUrl);
    for (const value of Object.values(seriesOf(samples, 'facade_webhook_dead_letters_total')))
      counted += value;
  }
  expect(counted).toBe(parkedCount + 1);
  const response = await fetch(`${new URL(stack.facade.metricsUrl).origin}/dead-letters?limit=1000`);
  const { deadLetters } = (await response.json()) as { deadLetters: DeadLetter[] };
  for (const environment of ['sandbox', 'live', 'unknown']) {
    expect(deadLetters.filter((letter) => letter.environment === environment).length).toBeLessThanOrEqual(
      DEAD_LETTERS_MAX,
    );
  }
  expect(deadLetters.length).toBeGreaterThanOrEqual(DEAD_LETTERS_MAX);
  for (const letter of deadLetters) {
    // Printable ASCII but for the mark of a cut string, which no escaped character can be.
    expect(JSON.stringify(letter).replaceAll(/…\(\d+ characters\)/g, '')).toMatch(/^[\x20-\x7e]*$/);
    expect(letter).not.toHaveProperty('object');
  }
}

describe(`the signed envelope, fuzzed (seed ${SEED})`, () => {
  describe('one facade, memory pipeline', () => {
    const secret = generateWebhookSecret();
    const stack = useStack({
      env: {
        WEBHOOK_SECRETS: secret,
        CACHE_ENABLED: 'true',
        WEBHOOK_DEAD_LETTERS_MAX: String(DEAD_LETTERS_MAX),
      },
    });
    test('every delivery answered as the rules say, twice alike, no upstream call, the record bounded', async () => {
      await fuzz(stack, secret);
    });
  });

  describe('two replicas on Redis', () => {
    const secret = generateWebhookSecret();
    const stack = useStack({
      redis: true,
      facades: 2,
      env: {
        WEBHOOK_SECRETS: secret,
        CACHE_ENABLED: 'true',
        WEBHOOK_DEAD_LETTERS_MAX: String(DEAD_LETTERS_MAX),
      },
    });
    test('every delivery answered as the rules say on either replica, no upstream call, the record bounded', async () => {
      await fuzz(stack, secret);
    });
  });
});
