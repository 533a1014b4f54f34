import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

describe('request ids', () => {
  test('the caller X-Request-Id is echoed and becomes the problem correlationId', async () => {
    const response = await emulator.call('GET', '/v3/customers/cus_missing', {
      headers: { 'X-Request-Id': 'trace-abc-123' },
    });
    expect(response.status).toBe(404);
    expect(response.headers.get('x-request-id')).toBe('trace-abc-123');
    expect(response.body.correlationId).toBe('trace-abc-123');
  });

  test('without one, a req_ id is generated, set on success responses too', async () => {
    const response = await emulator.call('GET', '/v3/customers/cus_acme');
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
  });

  test('an unusable request id (too long) is replaced by a generated one', async () => {
    const response = await emulator.call('GET', '/v3/nowhere', {
      headers: { 'X-Request-Id': 'x'.repeat(201) },
    });
    const id = response.headers.get('x-request-id');
    expect(id).toMatch(/^req_[0-9a-f]{24}$/);
    expect(response.body.correlationId).toBe(id);
  });
});

describe('problems outside the spec catalog', () => {
  test('an unknown route is 404 not_found as problem+json', async () => {
    const response = await emulator.call('GET', '/v3/nowhere/at/all');
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({
      type: 'https://docs.platform.test/v3/errors/not-found',
      title: 'Not Found',
      status: 404,
      code: 'not_found',
    });
    expect(response.body.detail).toContain('/v3/nowhere/at/all');
  });

  test('a known path with another method is 405 method_not_allowed with Allow', async () => {
    const response = await emulator.call('PUT', '/v3/customers', { json: {} });
    expect(response.status).toBe(405);
    expect(response.body.code).toBe('method_not_allowed');
    expect(response.headers.get('allow')).toBe('GET, POST');
  });

  test('malformed JSON is 400 validation_error without field errors', async () => {
    const response = await emulator.call('POST', '/v3/customers', {
      rawBody: '{"type": "individual",',
      contentType: 'application/json',
    });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('validation_error');
    expect(response.body.detail).toMatch(/not valid JSON/);
    expect(response.body.errors).toBeUndefined();
  });

  test('a body that is not application/json is 415 unsupported_media_type', async () => {
    const response = await emulator.call('POST', '/v3/customers', {
      rawBody: 'type=individual&externalId=x',
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(response.status).toBe(415);
    expect(response.body).toMatchObject({
      code: 'unsupported_media_type',
      type: 'https://docs.platform.test/v3/errors/unsupported-media-type',
    });
  });

  test('application/json with a charset parameter is accepted', async () => {
    const response = await emulator.call('POST', '/v3/customers', {
      rawBody: JSON.stringify({ type: 'individual', externalId: 'charset-ok' }),
      contentType: 'application/json; charset=utf-8',
    });
    expect(response.status).toBe(201);
  });

  test('a missing body where the operation needs one is 400 with a required error at the root', async () => {
    const response = await emulator.call('POST', '/v3/customers');
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([{ pointer: '', code: 'required', message: expect.any(String) }]);
  });

  test('a body over 1 MiB is 413 payload_too_large, and the emulator keeps serving', async () => {
    const big = JSON.stringify({ type: 'individual', externalId: 'x'.repeat(1024 * 1024) });
    const response = await emulator.call('POST', '/v3/customers', {
      rawBody: big,
      contentType: 'application/json',
    });
    expect(response.status).toBe(413);
    expect(response.body.code).toBe('payload_too_large');
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
  });

  test('a chunked body over 1 MiB without Content-Length is refused too', async () => {
    const chunk = new TextEncoder().encode('x'.repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 20) return controller.close();
        sent++;
        controller.enqueue(chunk);
      },
    });
    const response = await fetch(`${emulator.url}/v3/customers`, {
      method: 'POST',
      headers: {
        'X-API-Key': 'sk_sandbox_emulator',
        'Idempotency-Key': 'chunked',
        'Content-Type': 'application/json',
      },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(413);
  });

  test('the docs URL of problem types is configurable', async () => {
    const custom = await startEmulator({ docsUrl: 'https://docs.example.test/api' });
    try {
      const response = await custom.call('GET', '/v3/customers/cus_missing');
      expect(response.body.type).toBe('https://docs.example.test/api/errors/not-found');
    } finally {
      await custom.close();
    }
  });

  test('a percent-encoded path id is decoded, and a broken escape is 400 naming the segment', async () => {
    expect((await emulator.call('GET', '/v3/customers/cus%5Facme')).body.data.id).toBe('cus_acme');
    const broken = await emulator.call('GET', '/v3/customers/%E0%A4%A');
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe('validation_error');
    expect(broken.body.detail).toContain('"%E0%A4%A" is not valid percent-encoded UTF-8');
    // Well-formed escapes of a byte sequence that is not UTF-8 are refused the same way.
    expect((await emulator.call('GET', '/v3/customers/%FF%FE')).status).toBe(400);
  });

  test('a unicode id is decoded, then refused as no id: ids are plain ASCII', async () => {
    const response = await emulator.call('GET', `/v3/customers/${encodeURIComponent('cus_Ω😀')}`);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      code: 'validation_error',
      errors: [{ parameter: 'customerId', code: 'invalid_characters' }],
    });
  });

  test('a query parameter given twice is 400 on that parameter, not silently one of the two', async () => {
    const response = await emulator.call('GET', '/v3/customers?limit=1&limit=2');
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { parameter: 'limit', code: 'invalid_value', message: 'limit must be given at most once.' },
    ]);
  });

  test.each([['[]'], ['"x"'], ['null'], ['42']])(
    'a JSON body that is not an object (%s) is 400 invalid_type at the root pointer',
    async (rawBody) => {
      const response = await emulator.call('POST', '/v3/customers', {
        rawBody,
        contentType: 'application/json',
      });
      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        { pointer: '', code: 'invalid_type', message: 'Must be an object.' },
      ]);
      expect(response.body.detail).toContain('invalid fields: the body.');
    },
  );

  test('deeply nested JSON is refused as a validation error, not a stack overflow', async () => {
    const depth = 100_000;
    const response = await emulator.call('POST', '/v3/customers', {
      rawBody: `{"type":"individual","externalId":"deep","extra":${'['.repeat(depth)}${']'.repeat(depth)}}`,
      contentType: 'application/json',
    });
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { pointer: '/extra', code: 'unknown_field', message: expect.any(String) },
    ]);
  });
});

describe('hostile clients', () => {
  test('a client that disconnects mid-body leaves the emulator serving and logs nothing', async () => {
    const errors: string[] = [];
    const local = await startEmulator({
      logger: { info: () => {}, warn: () => {}, error: (message) => errors.push(message) },
    });
    try {
      const { port } = new URL(local.url);
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(
        'POST /v3/customers HTTP/1.1\r\nHost: emulator\r\nX-API-Key: sk_sandbox_emulator\r\n' +
          'Idempotency-Key: cut-off\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"type":',
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      socket.destroy();

      // The key of the cut-off request was never taken: the same key works for a full request.
      const response = await local.call('POST', '/v3/customers', {
        idempotencyKey: 'cut-off',
        json: { type: 'individual', externalId: 'after-cut-off' },
      });
      expect(response.status).toBe(201);
      expect(errors).toEqual([]);
    } finally {
      await local.close();
    }
  });

  test('oversized headers get 431 as a problem and the emulator keeps serving', async () => {
    const response = await emulator.call('GET', '/v3/customers/cus_acme', {
      headers: { 'X-Padding': 'a'.repeat(20_000) },
    });
    expect(response.status).toBe(431);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({
      type: 'https://docs.platform.test/v3/errors/request-header-fields-too-large',
      status: 431,
      code: 'request_header_fields_too_large',
      correlationId: response.headers.get('x-request-id'),
    });
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
  });

  test('a request line Node cannot parse (an unknown method) gets a 400 problem, then the socket closes', async () => {
    const { port } = new URL(emulator.url);
    const socket = connect(Number(port), '127.0.0.1');
    let raw = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (raw += chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write('FROB /v3/customers HTTP/1.1\r\nHost: emulator\r\nX-API-Key: sk_sandbox_emulator\r\n\r\n');
    await closed;

    const [head = '', body = ''] = raw.split('\r\n\r\n', 2);
    expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request/);
    expect(head).toMatch(/content-type: application\/problem\+json/i);
    const requestId = /x-request-id: (\S+)/i.exec(head)?.[1];
    expect(JSON.parse(body)).toMatchObject({
      status: 400,
      code: 'validation_error',
      correlationId: requestId,
    });
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
  });
});
