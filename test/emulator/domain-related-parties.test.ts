import { describe, expect, test } from 'vitest';
import { useTestEmulator, useWebhookReceiver } from './domain-harness.ts';

const emulator = useTestEmulator();
const receiver = useWebhookReceiver();

const person = { firstName: 'Mary', lastName: 'Jackson', residenceCountry: 'US' };

function createParty(customerId: string, body: unknown) {
  return emulator.call('POST', `/v3/customers/${customerId}/related-parties`, { body });
}

describe('listing related parties', () => {
  test('lists the active parties of a business customer as summaries, archived ones left out', async () => {
    const { status, body } = await emulator.get('/v3/customers/cus_acme/related-parties');
    expect(status).toBe(200);
    expect(body.data.map((party: { id: string }) => party.id)).toEqual([
      'rp_acme_ceo',
      'rp_acme_cfo',
      'rp_acme_holding',
    ]);
    expect(body.data[0]).toEqual({
      id: 'rp_acme_ceo',
      customerId: 'cus_acme',
      partyType: 'person',
      roles: ['control_person', 'officer'],
      displayName: 'Grace Hopper',
      hasOwnership: true,
      hasVotingRights: true,
      hasControl: true,
      createdAt: '2025-01-06T10:40:00.000Z',
      updatedAt: '2025-01-06T10:40:00.000Z',
    });
    expect(body.data[2].displayName).toBe('Acme Holdings plc');
    expect(body).toMatchObject({ nextCursor: null, hasMore: false });
  });

  test('answers an empty page for an individual customer', async () => {
    const { status, body } = await emulator.get('/v3/customers/cus_ada/related-parties');
    expect(status).toBe(200);
    expect(body).toEqual({ data: [], nextCursor: null, hasMore: false });
  });

  test('answers 404 customer_not_found for an unknown customer', async () => {
    const { status, body } = await emulator.get('/v3/customers/cus_missing/related-parties');
    expect(status).toBe(404);
    expect(body.code).toBe('customer_not_found');
  });

  test('pages through parties in creation order with opaque cursors', async () => {
    const created: string[] = [];
    for (const firstName of ['Ann', 'Ben', 'Cy']) {
      const response = await createParty('cus_globex', {
        partyType: 'person',
        roles: ['officer'],
        person: { ...person, firstName },
      });
      created.push(response.body.data.id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${encodeURIComponent(cursor)}`;
      const { status, body } = await emulator.get(`/v3/customers/cus_globex/related-parties${query}`);
      expect(status).toBe(200);
      expect(body.data.length).toBeLessThanOrEqual(2);
      expect(body.hasMore).toBe(body.nextCursor !== null);
      seen.push(...body.data.map((party: { id: string }) => party.id));
      cursor = body.nextCursor;
      pages += 1;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(seen).toEqual(['rp_globex_director', 'rp_globex_treasurer', ...created]);
  });

  test('filters by updatedSince, at or after the timestamp', async () => {
    const first = (await createParty('cus_globex', { partyType: 'person', roles: ['officer'], person })).body
      .data;
    const second = (await createParty('cus_globex', { partyType: 'person', roles: ['director'], person }))
      .body.data;

    const fromFirst = await emulator.get(
      `/v3/customers/cus_globex/related-parties?updatedSince=${encodeURIComponent(first.updatedAt)}`,
    );
    expect(fromFirst.body.data.map((party: { id: string }) => party.id)).toEqual([first.id, second.id]);

    const fromSecond = await emulator.get(
      `/v3/customers/cus_globex/related-parties?updatedSince=${encodeURIComponent(second.updatedAt)}`,
    );
    expect(fromSecond.body.data.map((party: { id: string }) => party.id)).toEqual([second.id]);
  });

  test('rejects a cursor of another list with 400 on the cursor parameter', async () => {
    await createParty('cus_globex', { partyType: 'person', roles: ['officer'], person });
    const page = await emulator.get('/v3/customers/cus_globex/related-parties?limit=1');
    const { status, body } = await emulator.get(
      `/v3/customers/cus_acme/related-parties?limit=1&cursor=${encodeURIComponent(page.body.nextCursor)}`,
    );
    expect(status).toBe(400);
    expect(body.code).toBe('validation_error');
    expect(body.errors[0].parameter).toBe('cursor');
  });
});

describe('creating a related party', () => {
  test('creates a person party and advances the parent customer in the same transaction', async () => {
    const before = (await emulator.get('/v3/customers/cus_acme')).body.data;
    const { status, body } = await createParty('cus_acme', {
      partyType: 'person',
      roles: ['director', 'authorized_signer'],
      title: 'Head of  Operations',
      person: { firstName: 'Zoë', lastName: "O'Brien-Nakamura", residenceCountry: 'IE' },
    });
    expect(status).toBe(201);
    const party = body.data;
    expect(party).toMatchObject({
      customerId: 'cus_acme',
      partyType: 'person',
      roles: ['director', 'authorized_signer'],
      // Text is kept exactly as sent, inner double space included.
      title: 'Head of  Operations',
      person: { firstName: 'Zoë', lastName: "O'Brien-Nakamura", residenceCountry: 'IE' },
      entity: null,
      hasOwnership: false,
      hasVotingRights: false,
      hasControl: false,
      archivedAt: null,
    });
    expect(party.id).toMatch(/^rp_/);
    expect(party.createdAt).toBe(party.updatedAt);

    const after = (await emulator.get('/v3/customers/cus_acme')).body.data;
    expect(after.updatedAt).toBe(party.createdAt);
    expect(Date.parse(after.updatedAt)).toBeGreaterThan(Date.parse(before.updatedAt));

    expect((await emulator.get(`/v3/customers/cus_acme/related-parties/${party.id}`)).body.data).toEqual(
      party,
    );
  });

  test('announces related_party.created and customer.updated to subscribed endpoints', async () => {
    const endpoint = await emulator.call('POST', '/v3/webhooks', {
      body: { url: receiver.url, events: ['related_party.created', 'customer.updated'] },
    });
    expect(endpoint.status).toBe(201);
    const party = (await createParty('cus_acme', { partyType: 'person', roles: ['officer'], person })).body
      .data;

    const created = await receiver.waitFor(
      (event) => event.type === 'related_party.created' && event.data.resourceId === party.id,
    );
    expect(created).toMatchObject({
      environment: 'sandbox',
      data: { customerId: 'cus_acme', resourceType: 'related_party', object: party },
    });
    const updated = await receiver.waitFor(
      (event) => event.type === 'customer.updated' && event.data.object.updatedAt === party.createdAt,
    );
    expect(updated.data).toMatchObject({
      customerId: 'cus_acme',
      resourceType: 'customer',
      resourceId: 'cus_acme',
    });
  });

  test('accepts an entity with an ownership fact and no role', async () => {
    const { status, body } = await createParty('cus_globex', {
      partyType: 'entity',
      entity: { legalName: 'Globex Holdings SA', registrationCountry: 'LU' },
      hasOwnership: true,
    });
    expect(status).toBe(201);
    expect(body.data).toMatchObject({
      roles: [],
      person: null,
      entity: { legalName: 'Globex Holdings SA' },
      hasOwnership: true,
    });
    const list = await emulator.get('/v3/customers/cus_globex/related-parties');
    expect(list.body.data.at(-1)).toMatchObject({ id: body.data.id, displayName: 'Globex Holdings SA' });
  });

  test('requires at least one role or one ownership, voting or control fact (400 at /roles)', async () => {
    const { status, body } = await createParty('cus_acme', {
      partyType: 'person',
      roles: [],
      hasControl: false,
      person,
    });
    expect(status).toBe(400);
    expect(body.code).toBe('validation_error');
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/roles', code: 'required' })]);
  });

  test('rejects a role outside the allowed list at its pointer', async () => {
    const { status, body } = await createParty('cus_acme', {
      partyType: 'person',
      roles: ['officer', 'ceo'],
      person,
    });
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/roles/1', code: 'invalid_value' })]);
  });

  test.each([
    ['leading whitespace', { title: ' Director' }, '/title', 'invalid_characters'],
    [
      'trailing whitespace',
      { person: { ...person, lastName: 'Jackson ' } },
      '/person/lastName',
      'invalid_characters',
    ],
    [
      'a control character',
      { person: { ...person, firstName: 'Ma\u0007ry' } },
      '/person/firstName',
      'invalid_characters',
    ],
    ['an empty string', { title: '' }, '/title', 'invalid_length'],
    [
      '257 characters',
      { person: { ...person, firstName: 'a'.repeat(257) } },
      '/person/firstName',
      'invalid_length',
    ],
    [
      'a lower-case country',
      { person: { ...person, residenceCountry: 'us' } },
      '/person/residenceCountry',
      'invalid_format',
    ],
  ])('rejects a text field with %s at its pointer', async (_case, fields, pointer, code) => {
    const { status, body } = await createParty('cus_acme', {
      partyType: 'person',
      roles: ['officer'],
      person,
      ...fields,
    });
    expect(status).toBe(400);
    expect(body.code).toBe('validation_error');
    expect(body.errors).toEqual([expect.objectContaining({ pointer, code })]);
  });

  test('accepts text fields of exactly 256 characters', async () => {
    const long = `${'x'.repeat(127)}  ${'y'.repeat(127)}`;
    const { status, body } = await createParty('cus_acme', {
      partyType: 'person',
      roles: ['other'],
      title: long,
      person,
    });
    expect(status).toBe(201);
    expect(body.data.title).toBe(long);
  });

  test('answers 409 conflict with statusReason individual_customer for an individual customer', async () => {
    const { status, body } = await createParty('cus_ada', {
      partyType: 'person',
      roles: ['officer'],
      person,
    });
    expect(status).toBe(409);
    expect(body.code).toBe('conflict');
    expect(body.statusReason).toMatchObject({
      code: 'individual_customer',
      actor: 'developer',
      retryable: false,
    });
  });

  test('answers 404 customer_not_found for an unknown customer', async () => {
    const { status, body } = await createParty('cus_missing', {
      partyType: 'person',
      roles: ['officer'],
      person,
    });
    expect(status).toBe(404);
    expect(body.code).toBe('customer_not_found');
  });
});

describe('archiving a related party', () => {
  test('archives the party: 404 afterwards, out of the list, parent customer advanced', async () => {
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_acme/related-parties/rp_acme_cfo',
    );
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ id: 'rp_acme_cfo', archivedAt: expect.any(String) });
    expect(body.data.updatedAt).toBe(body.data.archivedAt);

    expect((await emulator.get('/v3/customers/cus_acme')).body.data.updatedAt).toBe(body.data.archivedAt);
    const read = await emulator.get('/v3/customers/cus_acme/related-parties/rp_acme_cfo');
    expect(read.status).toBe(404);
    expect(read.body.code).toBe('not_found');
    const list = await emulator.get('/v3/customers/cus_acme/related-parties');
    expect(list.body.data.map((party: { id: string }) => party.id)).toEqual([
      'rp_acme_ceo',
      'rp_acme_holding',
    ]);

    const again = await emulator.call('DELETE', '/v3/customers/cus_acme/related-parties/rp_acme_cfo');
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not_found');
  });

  test('answers 404 not_found for a party of another customer', async () => {
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_globex/related-parties/rp_acme_cfo',
    );
    expect(status).toBe(404);
    expect(body.code).toBe('not_found');
  });

  test('answers 404 customer_not_found for an unknown customer', async () => {
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_missing/related-parties/rp_acme_cfo',
    );
    expect(status).toBe(404);
    expect(body.code).toBe('customer_not_found');
  });
});
