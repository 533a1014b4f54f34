import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

const RELATED_PARTIES = '/v3/customers/cus_acme/related-parties';
const FEES = '/v3/customers/cus_acme/accounts/acc_acme_eth/fees';

const validParty = {
  partyType: 'person',
  roles: ['director'],
  title: 'Director',
  person: { firstName: 'Grace', lastName: 'Hopper', residenceCountry: 'US' },
};

/** The field errors of a 400 response, as `pointer|parameter -> code`. */
function codes(body: { code: string; errors: { pointer?: string; parameter?: string; code: string }[] }) {
  expect(body.code).toBe('validation_error');
  return Object.fromEntries(
    body.errors.map((error) => [error.pointer ?? `param:${error.parameter}`, error.code]),
  );
}

describe('related party bodies', () => {
  test.each([
    ['leading whitespace', { title: ' Director' }, '/title', 'invalid_characters'],
    ['trailing whitespace', { title: 'Director\t' }, '/title', 'invalid_characters'],
    [
      'a control character inside',
      { person: { ...validParty.person, firstName: 'Gr\u0007ace' } },
      '/person/firstName',
      'invalid_characters',
    ],
    [
      'an empty name',
      { person: { ...validParty.person, lastName: '' } },
      '/person/lastName',
      'invalid_length',
    ],
    [
      'a 257-character name',
      { person: { ...validParty.person, lastName: 'x'.repeat(257) } },
      '/person/lastName',
      'invalid_length',
    ],
    [
      'a lower-case country',
      { person: { ...validParty.person, residenceCountry: 'us' } },
      '/person/residenceCountry',
      'invalid_format',
    ],
    ['an unknown role', { roles: ['director', 'ceo'] }, '/roles/1', 'invalid_value'],
    ['an unknown party type', { partyType: 'robot' }, '/partyType', 'invalid_value'],
    ['roles that is not an array', { roles: 'director' }, '/roles', 'invalid_type'],
    ['a missing person for partyType person', { person: undefined }, '/person', 'required'],
    [
      'a missing residenceCountry',
      { person: { firstName: 'Grace', lastName: 'Hopper' } },
      '/person/residenceCountry',
      'required',
    ],
    ['an unknown top-level field', { nickname: 'Amazing' }, '/nickname', 'unknown_field'],
    [
      'an unknown nested field',
      { person: { ...validParty.person, middleName: 'B' } },
      '/person/middleName',
      'unknown_field',
    ],
  ])('%s is rejected at its pointer', async (_name, change, pointer, code) => {
    const response = await emulator.call('POST', RELATED_PARTIES, { json: { ...validParty, ...change } });
    expect(response.status).toBe(400);
    expect(codes(response.body)).toEqual({ [pointer]: code });
    expect(response.body.errors[0].message).toEqual(expect.any(String));
  });

  test('text at the 256-character limit, with inner spaces and non-ASCII letters, passes validation', async () => {
    const lastName = `Hopper-${'é'.repeat(249)}`;
    const response = await emulator.call('POST', RELATED_PARTIES, {
      json: { ...validParty, title: 'Rear  Admiral', person: { ...validParty.person, lastName } },
    });
    expect(response.status).toBe(201);
    expect(response.body.data.person.lastName).toBe(lastName);
    expect(response.body.data.title).toBe('Rear  Admiral');
  });

  test('every invalid field is reported at once', async () => {
    const response = await emulator.call('POST', RELATED_PARTIES, {
      json: {
        partyType: 'person',
        roles: ['boss'],
        title: '',
        person: { firstName: ' G', lastName: 'H', residenceCountry: 'USA' },
      },
    });
    expect(codes(response.body)).toEqual({
      '/roles/0': 'invalid_value',
      '/title': 'invalid_length',
      '/person/firstName': 'invalid_characters',
      '/person/residenceCountry': 'invalid_format',
    });
  });
});

describe('account fee bodies', () => {
  test.each([
    ['three decimals', { fixed: '1.234', bips: 50 }, '/breakdown/developer/fixed', 'invalid_format'],
    ['a number instead of a string', { fixed: 1.5, bips: 50 }, '/breakdown/developer/fixed', 'invalid_type'],
    ['a negative fixed fee', { fixed: '-1', bips: 50 }, '/breakdown/developer/fixed', 'invalid_format'],
    ['bips of 10000', { fixed: '1', bips: 10000 }, '/breakdown/developer/bips', 'out_of_range'],
    ['negative bips', { fixed: '1', bips: -1 }, '/breakdown/developer/bips', 'out_of_range'],
    ['fractional bips', { fixed: '1', bips: 1.5 }, '/breakdown/developer/bips', 'invalid_type'],
    ['missing bips', { fixed: '1' }, '/breakdown/developer/bips', 'required'],
  ])('%s is rejected', async (_name, developer, pointer, code) => {
    const response = await emulator.call('PUT', FEES, { json: { breakdown: { developer } } });
    expect(response.status).toBe(400);
    expect(codes(response.body)).toEqual({ [pointer]: code });
  });

  test.each([
    ['the limits 0.00 and 9999', { fixed: '0.00', bips: 9999 }],
    ['an integer fixed fee and 0 bips', { fixed: '25', bips: 0 }],
    ['null (no rule)', null],
  ])('%s is accepted', async (_name, developer) => {
    const response = await emulator.call('PUT', FEES, { json: { breakdown: { developer } } });
    expect(response.status).toBe(200);
    expect(response.body.data.breakdown.developer).toEqual(developer);
  });

  test('a missing developer member is required (null must be explicit)', async () => {
    const response = await emulator.call('PUT', FEES, { json: { breakdown: {} } });
    expect(codes(response.body)).toEqual({ '/breakdown/developer': 'required' });
  });
});

describe('headers and query parameters', () => {
  test('a missing Idempotency-Key is a required parameter error', async () => {
    const response = await emulator.call('POST', RELATED_PARTIES, { json: validParty, idempotencyKey: null });
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { parameter: 'Idempotency-Key', code: 'required', message: expect.any(String) },
    ]);
  });

  test('an Idempotency-Key of 256 characters is invalid_length; 255 is accepted', async () => {
    const tooLong = await emulator.call('POST', RELATED_PARTIES, {
      json: validParty,
      idempotencyKey: 'k'.repeat(256),
    });
    expect(tooLong.status).toBe(400);
    expect(codes(tooLong.body)).toEqual({ 'param:Idempotency-Key': 'invalid_length' });
    const longest = await emulator.call('POST', RELATED_PARTIES, {
      json: validParty,
      idempotencyKey: 'k'.repeat(255),
    });
    expect(longest.status).toBe(201);
  });

  test('header and body errors are reported together', async () => {
    const response = await emulator.call('POST', RELATED_PARTIES, {
      json: { ...validParty, title: ' x' },
      idempotencyKey: null,
    });
    expect(codes(response.body)).toEqual({
      'param:Idempotency-Key': 'required',
      '/title': 'invalid_characters',
    });
  });

  test('sandbox operations accept a request without Idempotency-Key', async () => {
    const response = await emulator.call(
      'POST',
      '/v3/sandbox/customers/cus_acme/capabilities/cap_acme_ach/status',
      {
        json: { status: 'ready' },
        idempotencyKey: null,
      },
    );
    expect(response.status).toBe(200);
  });

  test.each([
    ['limit=0', 'limit', 'out_of_range'],
    ['limit=101', 'limit', 'out_of_range'],
    ['limit=ten', 'limit', 'invalid_type'],
    ['limit=2.5', 'limit', 'invalid_type'],
    ['updatedSince=yesterday', 'updatedSince', 'invalid_format'],
    ['cursor=', 'cursor', 'invalid_length'],
  ])('%s is rejected as a parameter error', async (query, parameter, code) => {
    const response = await emulator.call('GET', `/v3/customers?${query}`);
    expect(response.status).toBe(400);
    expect(codes(response.body)).toEqual({ [`param:${parameter}`]: code });
  });
});
