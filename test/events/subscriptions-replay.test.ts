import { describe, expect, test } from 'vitest';
import { createRelatedParty } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

const createParty = (lastName: string) => createRelatedParty(stack.emulator, 'cus_globex', lastName);

const RELATED_PARTY_CHANGED = `subscription ($since: DateTime) {
  relatedPartyChanged(customerId: "cus_globex", since: $since) {
    eventId type occurredAt replayed relatedPartyId relatedParty { id displayName person { lastName } }
  }
}`;

describe('nothing missed across a reconnection', () => {
  test('a subscriber that reconnects with since receives the related-party changes it missed, then live ones', async () => {
    const first = stack.connect().subscribe(RELATED_PARTY_CHANGED);
    await stack.subscriptionsStarted(1);
    const seenLive = await createParty('Before');
    await waitFor(() => first.data.length === 1, 'the first party live');
    const lastSeen = first.data[0].relatedPartyChanged;
    expect(lastSeen).toMatchObject({
      relatedPartyId: seenLive,
      replayed: false,
      type: 'related_party.created',
    });
    first.stop();
    await first.done;

    // Away: two parties are created and nobody listens.
    const missed = [await createParty('Missed-One'), await createParty('Missed-Two')];

    const second = stack.connect().subscribe(RELATED_PARTY_CHANGED, { since: lastSeen.occurredAt });
    await stack.subscriptionsStarted(1);
    const afterReconnect = await createParty('After');
    await waitFor(
      () => second.data.some((data) => data.relatedPartyChanged.relatedPartyId === afterReconnect),
      'the party created after reconnecting',
    );
    // Let any late duplicate (a retried webhook of a replayed change) arrive before counting.
    await new Promise((resolve) => setTimeout(resolve, 300));

    const events = second.data.map((data) => data.relatedPartyChanged);
    const ids = events.map((event) => event.relatedPartyId);
    // `since` is inclusive: the last change seen comes again, marked replayed, so nothing at that instant is lost.
    expect(ids).toEqual([seenLive, ...missed, afterReconnect]);
    expect(events.map((event) => event.replayed)).toEqual([true, true, true, false]);
    expect(events[1]).toMatchObject({
      type: 'related_party.created',
      eventId: expect.stringMatching(/^replay:/),
      relatedParty: { id: missed[0], displayName: 'Test Missed-One', person: { lastName: 'Missed-One' } },
    });
    expect(second.errors).toEqual([]);
    second.stop();
  });

  test('a change made while the replay is being read is delivered once, at the seam', async () => {
    const since = new Date().toISOString();
    // Slow down every upstream read so the list read takes a while, and create parties meanwhile.
    await fetch(`${stack.emulator.url}/_emulator/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ latency: { fixedMs: 300, jitterMs: 0 }, rules: [] }),
    });
    try {
      const received = stack.connect().subscribe(RELATED_PARTY_CHANGED, { since });
      const duringReplay = createParty('During-Replay');
      await stack.subscriptionsStarted(1);
      const created = await duringReplay;
      const afterwards = await createParty('Afterwards');
      await waitFor(
        () => received.data.some((data) => data.relatedPartyChanged.relatedPartyId === afterwards),
        'the party created afterwards',
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      const ids = received.data.map((data) => data.relatedPartyChanged.relatedPartyId);
      expect(ids.filter((id) => id === created)).toHaveLength(1);
      expect(ids.filter((id) => id === afterwards)).toHaveLength(1);
      received.stop();
    } finally {
      await fetch(`${stack.emulator.url}/_emulator/faults`, { method: 'DELETE' });
    }
  });

  test('ruleChanged replays an update made while away, with the rule as it is, then goes live', async () => {
    const since = new Date().toISOString();
    const setStatus = (status: 'paused' | 'active') =>
      stack.emulator.rest('PATCH', '/v3/customers/cus_acme/rules/rul_acme_sweep', { body: { status } });
    expect((await setStatus('paused')).status).toBe(200);

    const received = stack
      .connect()
      .subscribe(
        `subscription ($since: DateTime) { ruleChanged(customerId: "cus_acme", since: $since) { type replayed ruleId rule { status } } }`,
        { since },
      );
    await stack.subscriptionsStarted(1);
    expect((await setStatus('active')).status).toBe(200);
    await waitFor(() => received.data.length >= 2, 'the replayed and the live rule change');
    expect(received.data.map((data) => data.ruleChanged)).toEqual([
      { type: 'rule.updated', replayed: true, ruleId: 'rul_acme_sweep', rule: { status: 'paused' } },
      { type: 'rule.updated', replayed: false, ruleId: 'rul_acme_sweep', rule: { status: 'active' } },
    ]);
    expect(received.errors).toEqual([]);
    received.stop();
  });

  test('a subscription whose upstream list cannot be read fails with the upstream error', async () => {
    const received = stack
      .connect()
      .subscribe(
        `subscription { relatedPartyChanged(customerId: "cus_nobody", since: "2025-01-01T00:00:00Z") { eventId } }`,
      );
    await received.done;
    expect(received.errors[0]).toMatchObject({ extensions: { code: 'NOT_FOUND' } });
  });
});
