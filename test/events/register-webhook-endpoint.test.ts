import { afterAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import {
  registerWebhookEndpoint,
  type WebhookEndpointRecord,
  type WebhookEndpointsApi,
} from '../../src/events/receiving/register-webhook-endpoint.ts';
import { SUBSCRIBED_EVENT_KINDS } from '../../src/events/receiving/event-kinds.ts';
import { createLogger } from '../../src/logger.ts';
import { type RunningEmulator, startEmulator } from '../support/harness/emulator.ts';
import { type RunningFacade, startFacade } from '../support/harness/facade.ts';

// The upstream side is a small in-memory stand-in here, to pin down each decision and the exact calls
// made; test/events/subscriptions.test.ts registers against the real emulator.
function upstreamWith(initial: WebhookEndpointRecord[]) {
  const endpoints = initial.map((endpoint) => ({ ...endpoint }));
  const calls: string[] = [];
  const secrets = new Map<string, string>();
  const api: WebhookEndpointsApi = {
    async list() {
      calls.push('list');
      return endpoints.map((endpoint) => ({ ...endpoint }));
    },
    async create(input) {
      calls.push(`create ${input.url}`);
      const endpoint = {
        id: `we_${endpoints.length + 1}`,
        url: input.url,
        events: [...input.events],
        status: 'active',
      };
      endpoints.push(endpoint);
      const secret = generateWebhookSecret();
      secrets.set(endpoint.id, secret);
      return { endpoint: { ...endpoint }, secret };
    },
    async update(id, patch) {
      calls.push(`update ${id} ${JSON.stringify(patch)}`);
      const endpoint = endpoints.find((candidate) => candidate.id === id)!;
      Object.assign(endpoint, patch);
      return { ...endpoint };
    },
    async archive(id) {
      calls.push(`archive ${id}`);
      endpoints.find((candidate) => candidate.id === id)!.status = 'archived';
    },
  };
  return { api, calls, endpoints, secrets };
}

const URL_A = 'http://127.0.0.1:4000/webhooks/platform';
const KINDS = ['account.updated', 'capability.status_changed'];

function logCollector() {
  const lines: string[] = [];
  return { lines, logger: createLogger({ level: 'debug', write: (line) => lines.push(line) }) };
}

describe('registerWebhookEndpoint', () => {
  test('creates an endpoint when none is registered at the URL, and verifies with its secret', async () => {
    const upstream = upstreamWith([
      { id: 'we_other', url: 'https://elsewhere.test/hook', events: KINDS, status: 'active' },
    ]);
    const { lines, logger } = logCollector();
    const registration = await registerWebhookEndpoint({
      api: upstream.api,
      url: URL_A,
      events: KINDS,
      configuredSecrets: [],
      logger,
    });
    expect(upstream.calls).toEqual(['list', `create ${URL_A}`]);
    expect(registration).toEqual({
      endpointId: 'we_2',
      action: 'created',
      archivedEndpointIds: [],
      secrets: [upstream.secrets.get('we_2')],
    });
    expect(lines.join('\n')).not.toContain(upstream.secrets.get('we_2')!.slice(6));
  });

  test('reuses the endpoint at the URL when its secret is configured, adding missing kinds', async () => {
    const configured = generateWebhookSecret();
    const upstream = upstreamWith([
      { id: 'we_1', url: URL_A, events: ['account.updated'], status: 'disabled' },
    ]);
    const { lines, logger } = logCollector();
    const registration = await registerWebhookEndpoint({
      api: upstream.api,
      url: URL_A,
      events: KINDS,
      configuredSecrets: [configured],
      logger,
    });
    expect(upstream.calls).toEqual([
      'list',
      `update we_1 ${JSON.stringify({ events: ['account.updated', 'capability.status_changed'], status: 'active' })}`,
    ]);
    expect(registration).toEqual({
      endpointId: 'we_1',
      action: 'reused',
      archivedEndpointIds: [],
      secrets: [configured],
    });
    expect(lines.join('\n')).not.toContain(configured.slice(6));
  });

  test('reuses an up-to-date endpoint without changing it', async () => {
    const upstream = upstreamWith([
      { id: 'we_1', url: URL_A, events: [...KINDS, 'rule.created'], status: 'active' },
    ]);
    await registerWebhookEndpoint({
      api: upstream.api,
      url: URL_A,
      events: KINDS,
      configuredSecrets: [generateWebhookSecret()],
      logger: createLogger({ level: 'silent' }),
    });
    expect(upstream.calls).toEqual(['list']);
  });

  test('replaces an endpoint whose secret it does not hold: creates a new one, archives the old', async () => {
    const upstream = upstreamWith([
      { id: 'we_1', url: URL_A, events: KINDS, status: 'active' },
      { id: 'we_2', url: URL_A, events: KINDS, status: 'archived' },
    ]);
    const registration = await registerWebhookEndpoint({
      api: upstream.api,
      url: URL_A,
      events: KINDS,
      configuredSecrets: [],
      logger: createLogger({ level: 'silent' }),
    });
    expect(upstream.calls).toEqual(['list', `create ${URL_A}`, 'archive we_1']);
    expect(registration).toMatchObject({
      endpointId: 'we_3',
      action: 'created',
      archivedEndpointIds: ['we_1'],
    });
    expect(upstream.endpoints.filter((endpoint) => endpoint.status === 'active').map((e) => e.id)).toEqual([
      'we_3',
    ]);
  });
});

describe('registration at start against the emulator', () => {
  const running: Array<RunningFacade | RunningEmulator> = [];
  afterAll(async () => {
    for (const server of running.reverse()) await server.close();
  });

  test('a facade given the secret of the endpoint at its URL reuses it, re-enabled with every kind', async () => {
    const emulator = await startEmulator();
    running.push(emulator);
    // Nothing listens there: this test is about what is registered, and no event is made.
    const url = 'http://127.0.0.1:9/webhooks/platform';
    const created = await emulator.rest('POST', '/v3/webhooks', {
      body: { url, events: ['account.updated'] },
    });
    expect(created.status).toBe(201);
    const { id, secret } = created.body.data as { id: string; secret: string };
    expect(
      (await emulator.rest('PATCH', `/v3/webhooks/${id}`, { body: { status: 'disabled' } })).status,
    ).toBe(200);

    const facade = await startFacade(emulator.url, {
      env: { WEBHOOK_REGISTER: 'true', WEBHOOK_PUBLIC_URL: url, WEBHOOK_SECRETS: secret },
    });
    running.push(facade);

    const listed = await emulator.rest('GET', '/v3/webhooks');
    const atUrl = (
      listed.body.data as { id: string; url: string; status: string; events: string[] }[]
    ).filter((endpoint) => endpoint.url === url);
    expect(atUrl).toHaveLength(1);
    expect(atUrl[0]).toMatchObject({ id, status: 'active' });
    expect([...atUrl[0]!.events].sort()).toEqual([...SUBSCRIBED_EVENT_KINDS].sort());
    const log = facade.logs().join('\n');
    expect(log).toMatch(/reusing the webhook endpoint registered before/);
    expect(log).not.toContain(secret.slice('whsec_'.length));
  });
});
