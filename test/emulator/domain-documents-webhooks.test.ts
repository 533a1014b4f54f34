import { describe, expect, test } from 'vitest';
import { startWebhookReceiver, useTestEmulator, useWebhookReceiver } from './domain-harness.ts';

const emulator = useTestEmulator();
const receiver = useWebhookReceiver();

const ids = (page: Record<string, unknown>) => (page['data'] as { id: string }[]).map((record) => record.id);

describe('customer documents', () => {
  test('lists only documents that are not archived', async () => {
    const { status, body } = await emulator.get('/v3/customers/cus_acme/documents');
    expect(status).toBe(200);
    expect(ids(body)).toEqual(['doc_acme_incorporation', 'doc_acme_ownership']);
    const archived = await emulator.get('/v3/customers/cus_acme/documents/doc_acme_old_statement');
    expect(archived.status).toBe(404);
    expect(archived.body.code).toBe('not_found');
  });

  test('archiving keeps the answer, then the document vanishes from reads, lists and task submissions', async () => {
    await emulator.call('POST', '/v3/webhooks', {
      body: { url: receiver.url, events: ['document.archived'] },
    });
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_acme/documents/doc_acme_ownership',
    );
    expect(status).toBe(200);
    expect(body.data).toMatchObject({
      id: 'doc_acme_ownership',
      status: 'archived',
      archivedAt: expect.any(String),
    });

    expect((await emulator.get('/v3/customers/cus_acme/documents/doc_acme_ownership')).status).toBe(404);
    expect(ids((await emulator.get('/v3/customers/cus_acme/documents')).body)).toEqual([
      'doc_acme_incorporation',
    ]);
    const submission = await emulator.get(
      '/v3/customers/cus_acme/tasks/tsk_acme_ownership/submissions/tsb_acme_ownership_1',
    );
    expect(submission.body.data.documentIds).toEqual([]);

    const event = await receiver.waitFor((candidate) => candidate.data.resourceId === 'doc_acme_ownership');
    expect(event).toMatchObject({
      type: 'document.archived',
      data: { customerId: 'cus_acme', resourceType: 'document', object: body.data },
    });
  });

  test('answers 404 not_found when archiving an archived or unknown document', async () => {
    for (const documentId of ['doc_acme_old_statement', 'doc_nope', 'doc_ada_passport']) {
      const { status, body } = await emulator.call(
        'DELETE',
        `/v3/customers/cus_acme/documents/${documentId}`,
      );
      expect(status).toBe(404);
      expect(body.code).toBe('not_found');
    }
  });

  test('answers 404 customer_not_found for an unknown customer', async () => {
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_nope/documents/doc_acme_ownership',
    );
    expect(status).toBe(404);
    expect(body.code).toBe('customer_not_found');
  });
});

describe('webhook endpoints', () => {
  test('shows the signing secret in the create response only', async () => {
    const { status, body } = await emulator.call('POST', '/v3/webhooks', {
      body: { url: receiver.url, events: ['account.updated'], description: 'Ledger sync' },
    });
    expect(status).toBe(201);
    expect(body.data).toMatchObject({
      id: expect.stringMatching(/^we_/),
      url: receiver.url,
      events: ['account.updated'],
      description: 'Ledger sync',
      status: 'active',
      archivedAt: null,
    });
    expect(Buffer.from(body.data.secret.replace(/^whsec_/, ''), 'base64')).toHaveLength(32);

    const read = await emulator.get(`/v3/webhooks/${body.data.id}`);
    expect(read.body.data).not.toHaveProperty('secret');
    const { secret: _secret, ...withoutSecret } = body.data;
    expect(read.body.data).toEqual(withoutSecret);
    const list = await emulator.get('/v3/webhooks');
    expect(ids(list.body)).toEqual(['we_demo', body.data.id]);
    expect(JSON.stringify(list.body)).not.toContain(body.data.secret);
  });

  test('updates fields of an endpoint and advances its updatedAt', async () => {
    const created = (
      await emulator.call('POST', '/v3/webhooks', {
        body: { url: receiver.url, events: ['account.updated'] },
      })
    ).body.data;
    const { status, body } = await emulator.call('PATCH', `/v3/webhooks/${created.id}`, {
      body: { events: ['rule.created', 'rule.updated'], status: 'disabled' },
    });
    expect(status).toBe(200);
    expect(body.data).toMatchObject({
      url: receiver.url,
      events: ['rule.created', 'rule.updated'],
      status: 'disabled',
    });
    expect(Date.parse(body.data.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));
  });

  test('archives an endpoint; updating or archiving it again answers 409 webhook_endpoint_archived', async () => {
    const { status, body } = await emulator.call('DELETE', '/v3/webhooks/we_demo');
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ id: 'we_demo', status: 'archived', archivedAt: expect.any(String) });
    expect(body.data).not.toHaveProperty('secret');

    const update = await emulator.call('PATCH', '/v3/webhooks/we_demo', { body: { status: 'active' } });
    expect(update.status).toBe(409);
    expect(update.body.statusReason.code).toBe('webhook_endpoint_archived');
    const again = await emulator.call('DELETE', '/v3/webhooks/we_demo');
    expect(again.status).toBe(409);
    expect(again.body.statusReason.code).toBe('webhook_endpoint_archived');
  });

  test('rejects a URL that is not http or https, and an unknown event kind, at their pointers', async () => {
    const badUrl = await emulator.call('POST', '/v3/webhooks', {
      body: { url: 'ftp://127.0.0.1/hooks', events: ['account.updated'] },
    });
    expect(badUrl.status).toBe(400);
    expect(badUrl.body.errors).toEqual([expect.objectContaining({ pointer: '/url' })]);
    const badEvent = await emulator.call('POST', '/v3/webhooks', {
      body: { url: receiver.url, events: ['account.deleted'] },
    });
    expect(badEvent.status).toBe(400);
    expect(badEvent.body.errors).toEqual([
      expect.objectContaining({ pointer: '/events/0', code: 'invalid_value' }),
    ]);
  });

  test('answers 404 not_found for an unknown endpoint', async () => {
    const { status, body } = await emulator.call('DELETE', '/v3/webhooks/we_nope');
    expect(status).toBe(404);
    expect(body.code).toBe('not_found');
  });

  test('delivers only to active endpoints subscribed to the event kind', async () => {
    const disabledReceiver = await startWebhookReceiver();
    try {
      const disabled = (
        await emulator.call('POST', '/v3/webhooks', {
          body: { url: disabledReceiver.url, events: ['document.archived'] },
        })
      ).body.data;
      await emulator.call('PATCH', `/v3/webhooks/${disabled.id}`, { body: { status: 'disabled' } });
      await emulator.call('POST', '/v3/webhooks', {
        body: { url: receiver.url, events: ['document.archived'] },
      });

      await emulator.call('DELETE', '/v3/customers/cus_globex/documents/doc_globex_registration');
      await receiver.waitFor((event) => event.data.resourceId === 'doc_globex_registration');
      expect(disabledReceiver.events).toEqual([]);
    } finally {
      await disabledReceiver.close();
    }
  });
});
