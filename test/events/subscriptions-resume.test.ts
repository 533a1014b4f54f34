/**
 * Resuming from the event log with a cursor, across two replicas sharing the real Redis: what
 * happened while a client was away (archivings included) arrives in order, once, then live; a
 * scoped caller resuming hears only its own customers; a cursor past retention is refused.
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import {
  acmeAccountUpdated,
  createRelatedParty,
  postSignedEvent,
  upstreamEvent,
} from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';
import { parseExposition, valueOf } from '../support/metrics.ts';

const secret = generateWebhookSecret();
// Each replica registers its own URL: the upstream delivers every event to both, the log holds it once.
const stack = useStack({
  facades: 2,
  redis: true,
  env: { WEBHOOK_REGISTER: 'true', WEBHOOK_SECRETS: secret, EVENT_LOG_RETENTION: '20' },
});
const replicas = () => stack.facades as [RunningFacade, RunningFacade];
/** Subscriptions started on each replica so far: its lifecycle counts them since it started. */
const started = new Map<RunningFacade, number>();
async function subscriptionsStarted(replica: RunningFacade, more: number): Promise<void> {
  const total = (started.get(replica) ?? 0) + more;
  started.set(replica, total);
  await replica.subscriptionsStarted(total);
}

const createParty = (lastName: string) => createRelatedParty(stack.emulator, 'cus_globex', lastName);

async function archiveParty(id: string): Promise<void> {
  const archived = await stack.emulator.rest('DELETE', `/v3/customers/cus_globex/related-parties/${id}`);
  expect(archived.status).toBeLessThan(300);
}

const PARTIES = `subscription ($after: String) {
  relatedPartyChanged(customerId: "cus_globex", after: $after) {
    eventId cursor type replayed relatedPartyId relatedParty { id person { lastName } }
  }
}`;

describe('resuming with a cursor', () => {
  test('a client that reconnects to the other replica with its last cursor gets what it missed, archiving included, in order, once, then live', async () => {
    const [first, second] = replicas();
    // A witness that never leaves, to know when everything missed is in the log.
    const witness = first.connect().subscribe(PARTIES);
    const away = first.connect().subscribe(PARTIES);
    await subscriptionsStarted(first, 2);

    const seen = await createParty('Seen');
    await waitFor(() => away.data.length === 1 && witness.data.length === 1, 'the first party');
    const last = away.data[0].relatedPartyChanged;
    expect(last).toMatchObject({ relatedPartyId: seen, type: 'related_party.created' });
    expect(last.cursor).toMatch(/^\d+-\d+$/);
    away.stop();
    await away.done;

    // Away: a party created, another created, the first archived (a read can no longer show it).
    // Each change in the log before the next is made: the platform's webhooks carry no order of
    // their own, and on a loaded machine two sent at once can arrive swapped (the log's order, which
    // the replay keeps, is then theirs).
    const missedParty = await createParty('Missed');
    await waitFor(() => witness.data.length === 2, 'the first change in the log');
    const otherParty = await createParty('Other');
    await waitFor(() => witness.data.length === 3, 'the second change in the log');
    await archiveParty(missedParty);
    await waitFor(() => witness.data.length === 4, 'the three changes in the log');

    const back = second.connect().subscribe(PARTIES, { after: last.cursor });
    await subscriptionsStarted(second, 1);
    await waitFor(() => back.data.length === 3, 'the three missed changes');
    const live = await createParty('Live');
    await waitFor(() => back.data.length === 4 && witness.data.length === 5, 'the live change');
    // A marker delivered after everything else: a duplicate would have come before it.
    const marker = await createParty('Marker');
    await waitFor(
      () => back.data.some((data) => data.relatedPartyChanged.relatedPartyId === marker),
      'marker',
    );

    const events = back.data.map((data) => data.relatedPartyChanged);
    expect(events.map((event) => [event.type, event.relatedPartyId])).toEqual([
      ['related_party.created', missedParty],
      ['related_party.created', otherParty],
      ['related_party.archived', missedParty],
      ['related_party.created', live],
      ['related_party.created', marker],
    ]);
    // The same events, with the same cursors, as the witness received live.
    expect(events.map((event) => event.eventId)).toEqual(
      witness.data.slice(1).map((data) => data.relatedPartyChanged.eventId),
    );
    expect(events.map((event) => event.cursor)).toEqual(
      witness.data.slice(1).map((data) => data.relatedPartyChanged.cursor),
    );
    // The archived party can no longer be read: the record its event carried stands in.
    expect(events[2].relatedParty).toMatchObject({ id: missedParty, person: { lastName: 'Missed' } });
    expect(back.errors).toEqual([]);
    // Counted where they were delivered: three from the log, the rest live.
    const samples = parseExposition(await second.app.metrics.registry.metrics());
    expect(valueOf(samples, 'facade_events_replayed_total')).toBe(3);
    expect(valueOf(samples, 'facade_event_log_length', { environment: 'sandbox' })).toBeGreaterThanOrEqual(6);
    expect(valueOf(samples, 'facade_event_log_lag_seconds', { environment: 'sandbox' })).toBe(0);
    back.stop();
    witness.stop();
  });

  test('documentChanged, which has no since, resumes a document archived while the client was away', async () => {
    const [first, second] = replicas();
    const DOCUMENTS = `subscription ($after: String) {
      documentChanged(customerId: "cus_ada", after: $after) { eventId cursor type documentId document { id fileName } }
    }`;
    const away = first.connect().subscribe(DOCUMENTS);
    await subscriptionsStarted(first, 1);
    // A marker event of ada's, so the client has a cursor from before it left.
    const marker = upstreamEvent({
      type: 'document.archived',
      environment: 'sandbox',
      customerId: 'cus_ada',
      resourceType: 'document',
      resourceId: 'doc_ada_marker',
      object: { id: 'doc_ada_marker', customerId: 'cus_ada', fileName: 'marker.pdf' },
    });
    expect((await postSignedEvent(first.webhookUrl, secret, marker)).status).toBe(200);
    await waitFor(() => away.data.length === 1, 'the marker');
    const last = away.data[0].documentChanged.cursor as string;
    away.stop();
    await away.done;

    const archived = await stack.emulator.rest('DELETE', '/v3/customers/cus_ada/documents/doc_ada_passport');
    expect(archived.status).toBeLessThan(300);
    // Nobody listens now: wait until the archiving was delivered (and so is in the log).
    let delivered = 0;
    await waitFor(
      () => delivered >= 1,
      'the archiving to be delivered',
      15_000,
      async () => {
        const deliveries = (await (
          await fetch(`${stack.emulator.url}/_emulator/webhook-deliveries`)
        ).json()) as {
          data: { eventType: string; outcome: string }[];
        };
        delivered = deliveries.data.filter(
          (delivery) => delivery.eventType === 'document.archived' && delivery.outcome === 'delivered',
        ).length;
      },
    );

    const back = second.connect().subscribe(DOCUMENTS, { after: last });
    await subscriptionsStarted(second, 1);
    await waitFor(() => back.data.length === 1, 'the archiving');
    expect(back.data[0].documentChanged).toMatchObject({
      type: 'document.archived',
      documentId: 'doc_ada_passport',
      document: { id: 'doc_ada_passport', fileName: 'ada-passport.jpg' },
    });
    back.stop();
  });

  test('a caller scoped to one customer resuming with events() never receives another customer’s logged events', async () => {
    const [first, second] = replicas();
    const operator = first.connect().subscribe(`subscription { events { eventId cursor customerId } }`);
    await subscriptionsStarted(first, 1);
    const start = acmeAccountUpdated();
    expect((await postSignedEvent(first.webhookUrl, secret, start)).status).toBe(200);
    await waitFor(() => operator.data.length === 1, 'the starting event');
    const after = operator.data[0].events.cursor as string;

    const globex = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_globex',
      resourceType: 'account',
      resourceId: 'acc_globex_eth',
    });
    const acme = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'account',
      resourceId: 'acc_acme_polygon',
    });
    for (const event of [globex, acme]) {
      expect((await postSignedEvent(first.webhookUrl, secret, event)).status).toBe(200);
    }
    await waitFor(() => operator.data.length === 3, 'both events logged');
    operator.stop();
    await operator.done;

    await stack.emulator.resetUpstreamCalls();
    const scoped = second
      .connect({ Authorization: `Bearer ${await tokenFor('acme')}` })
      .subscribe(
        `subscription ($after: String) { events(after: $after) { eventId customerId resource { ... on Account { id } } } }`,
        { after },
      );
    await subscriptionsStarted(second, 1);
    await waitFor(() => scoped.data.length === 1, 'the acme event');
    // A marker of acme's, appended last: had the globex event been delivered it would be before it.
    const marker = acmeAccountUpdated();
    expect((await postSignedEvent(first.webhookUrl, secret, marker)).status).toBe(200);
    await waitFor(() => scoped.data.length === 2, 'the marker');
    expect(scoped.data.map((data) => data.events.eventId)).toEqual([acme.id, marker.id]);
    expect(scoped.data.every((data) => data.events.customerId === 'cus_acme')).toBe(true);
    // Two reads, both of acme's accounts: the globex event never reached a read (its scope refused it first).
    const calls = await stack.emulator.upstreamCalls();
    expect(calls.byRoute['GET /v3/customers/{customerId}/accounts/{accountId}']).toBe(2);
    scoped.stop();
  });

  test('a cursor past the retention answers CURSOR_EXPIRED naming the oldest cursor held; a malformed one BAD_USER_INPUT', async () => {
    const [first] = replicas();
    const watcher = first
      .connect()
      .subscribe(
        `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { cursor } }`,
      );
    await subscriptionsStarted(first, 1);
    const event = acmeAccountUpdated();
    expect((await postSignedEvent(first.webhookUrl, secret, event)).status).toBe(200);
    await waitFor(() => watcher.data.length === 1, 'the event');
    const old = watcher.data[0].accountChanged.cursor as string;
    watcher.stop();

    // Far past the retention of 20 (Redis trims whole nodes of 100 entries).
    for (let index = 0; index < 220; index += 1) {
      const filler = upstreamEvent({
        type: 'account.updated',
        environment: 'sandbox',
        customerId: 'cus_globex',
        resourceType: 'account',
        resourceId: 'acc_globex_eth',
      });
      expect((await postSignedEvent(first.webhookUrl, secret, filler)).status).toBe(200);
    }

    const client = first.connect();
    const expired = client.subscribe(
      `subscription ($after: String) { accountChanged(customerId: "cus_acme", after: $after) { cursor } }`,
      { after: old },
    );
    await expired.done;
    expect(expired.data).toEqual([]);
    expect(expired.errors).toHaveLength(1);
    expect(expired.errors[0]).toMatchObject({
      extensions: { code: 'CURSOR_EXPIRED', cursor: old, oldestCursor: expect.stringMatching(/^\d+-\d+$/) },
    });
    expect(expired.errors[0].extensions.oldestCursor > old).toBe(true);

    for (const [variables, pattern] of [
      [{ after: 'not-a-cursor' }, /must be a cursor/],
      [{ after: old, since: '2026-01-01T00:00:00Z' }, /either "after".*or "since"/],
    ] as const) {
      const refused = client.subscribe(
        `subscription ($after: String, $since: DateTime) { accountChanged(customerId: "cus_acme", after: $after, since: $since) { cursor } }`,
        variables,
      );
      await refused.done;
      expect(refused.errors[0]).toMatchObject({
        message: expect.stringMatching(pattern),
        extensions: { code: 'BAD_USER_INPUT' },
      });
    }
  });
});
