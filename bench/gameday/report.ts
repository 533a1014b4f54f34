/**
 * The game day's table, from exact counts: the emulator's record of every event it sent
 * (emulator-record.ts) against every subscriber's log of the events it received, every operation the
 * load made, and the ledger's count of the writes applied between two checkpoints. One row per phase
 * (the baseline, then each fault), with the notes each fault took and the details behind every
 * number that is not zero.
 */
import { percentile } from '../load.ts';
import type { SentEvent } from './emulator-record.ts';
import type { LoadReport, OperationRecord, SubscriberRecord } from './load-protocol.ts';

/** The writes of a phase, from the ledger and the load's checkpoint. */
export interface PhaseWrites {
  /** Top-up keys acknowledged through the facade. */
  acknowledged: number;
  /** Keys given up unacknowledged (applied or not: the ledger says in `applied`). */
  unresolved: number;
  /** Top-ups through the facade the ledger shows applied. */
  applied: number;
  /** The platform's own top-ups answered 200, and what the ledger holds beyond whole units for them. */
  producerApplied: number;
  producerMicros: number;
}

/** One phase of the run, as the supervisor recorded it. */
export interface PhaseRecord {
  name: string;
  what: string;
  /** The injection (the phase's start). */
  startedAt: number;
  /** The topology whole again (the end of "during"). */
  restoredAt: number;
  /** The end of the settle time after it. */
  endedAt: number;
  notes: string[];
  writes: PhaseWrites;
  /** Warning and error lines each process logged during the phase, by message. */
  logged: Record<string, Record<string, number>>;
}

/** A phase's figures. */
export interface PhaseRow {
  name: string;
  duringS: number;
  afterS: number;
  events: { sandbox: number; live: number; notDelivered: number };
  lost: { deliveries: number; subscribers: number; notDelivered: number };
  duplicated: { deliveries: number; subscribers: number };
  /** Events received that the emulator never sent to the facade (e.g. a reconciliation's). */
  unknown: number;
  failures: Record<string, number>;
  operations: number;
  writes: PhaseWrites & { doubled: number; lostWrites: number };
  p99: { during: number; after: number };
  /** From the injection to the end of the last failed operation (ms); null if none failed. */
  recoveredMs: number | null;
  /** The slowest failed operation (ms): how long a caller waited to be told. */
  slowestFailureMs: number | null;
  /** Subscriptions that ended, by why they ended. */
  ended: Record<string, number>;
  /** The longest time a subscriber went without a subscription, from an end to the next start (ms). */
  longestGapMs: number;
  /** Subscribers still without a subscription at the phase's end. */
  unresumed: number;
  /** Which subscribers missed or repeated which events, those alike on one line. */
  details: { lost: string[]; duplicated: string[] };
}

function count(into: Record<string, number>, key: string, by = 1): void {
  into[key] = (into[key] ?? 0) + by;
}

function p99Of(operations: readonly OperationRecord[]): number {
  return percentile(
    operations.map(([, , , latencyMs]) => latencyMs).sort((a, b) => a - b),
    0.99,
  );
}

/** Every subscriber's receipts, by event id. */
export function receiptsOf(subscriber: SubscriberRecord): Map<string, number> {
  const receipts = new Map<string, number>();
  for (const [eventId] of subscriber.received) receipts.set(eventId, (receipts.get(eventId) ?? 0) + 1);
  return receipts;
}

/** The figures of `phase`, whose events are those first sent before `nextStart`. */
export function analysePhase(
  phase: PhaseRecord,
  nextStart: number,
  sent: ReadonlyMap<string, SentEvent>,
  load: LoadReport,
  measuredFrom: number,
): PhaseRow {
  const inPhase = [...sent.values()].filter(
    (event) => event.sentAt >= Math.max(phase.startedAt, measuredFrom) && event.sentAt < nextStart,
  );
  const accountSubscribers = load.subscribers.filter((subscriber) => subscriber.transport !== 'live-query');
  const lost = { deliveries: 0, subscribers: 0, notDelivered: 0 };
  const duplicated = { deliveries: 0, subscribers: 0 };
  // Subscribers that missed (or repeated) the same events are one line: `ids: what`.
  const lostGroups = new Map<string, string[]>();
  const duplicatedGroups = new Map<string, string[]>();
  const group = (groups: Map<string, string[]>, what: string, id: string): void => {
    groups.set(what, [...(groups.get(what) ?? []), id]);
  };
  for (const subscriber of accountSubscribers) {
    const receipts = receiptsOf(subscriber);
    const expected = inPhase.filter((event) => event.environment === subscriber.environment);
    const missed = expected.filter((event) => !receipts.has(event.eventId));
    const repeated = expected.filter((event) => (receipts.get(event.eventId) ?? 0) > 1);
    lost.deliveries += missed.length;
    lost.notDelivered += missed.filter((event) => event.state !== 'delivered').length;
    if (missed.length > 0) {
      lost.subscribers += 1;
      group(
        lostGroups,
        `${missed.length} events (${missed
          .slice(0, 4)
          .map(
            (event) =>
              `${event.eventId} sent ${new Date(event.sentAt).toISOString().slice(11, 23)}, answered ${event.answers.join(' ')}`,
          )
          .join('; ')}${missed.length > 4 ? '; ...' : ''})`,
        subscriber.id,
      );
    }
    const extra = repeated.reduce((sum, event) => sum + (receipts.get(event.eventId) ?? 0) - 1, 0);
    duplicated.deliveries += extra;
    if (extra > 0) {
      duplicated.subscribers += 1;
      group(
        duplicatedGroups,
        `${extra} repeats (${repeated
          .slice(0, 4)
          .map((event) => `${event.eventId} x${receipts.get(event.eventId) ?? 0}`)
          .join(', ')}${repeated.length > 4 ? ', ...' : ''})`,
        subscriber.id,
      );
    }
  }
  const unknown = accountSubscribers.reduce(
    (sum, subscriber) =>
      sum +
      subscriber.received.filter(
        ([eventId, at]) => at >= phase.startedAt && at < phase.endedAt && !sent.has(eventId),
      ).length,
    0,
  );

  const operations = load.operations.filter(([, , at]) => at >= phase.startedAt && at < phase.endedAt);
  const failures: Record<string, number> = {};
  let lastFailure: number | null = null;
  let slowestFailureMs: number | null = null;
  for (const [kind, environment, at, latencyMs, failure] of operations) {
    if (failure === null) continue;
    count(failures, `${kind} ${environment}: ${failure}`);
    lastFailure = Math.max(lastFailure ?? 0, at + latencyMs);
    slowestFailureMs = Math.max(slowestFailureMs ?? 0, latencyMs);
  }
  const ended: Record<string, number> = {};
  let unresumed = 0;
  let longestGapMs = 0;
  for (const subscriber of load.subscribers) {
    subscriber.sessions.forEach((session, index) => {
      if (session.ended === undefined || session.ended < phase.startedAt || session.ended >= phase.endedAt)
        return;
      count(ended, `${subscriber.transport}: ${session.ending ?? '?'}`);
      const back = subscriber.sessions.slice(index + 1).find((next) => next.started !== undefined)?.started;
      if (back === undefined || back >= phase.endedAt) unresumed += 1;
      longestGapMs = Math.max(longestGapMs, Math.min(back ?? phase.endedAt, phase.endedAt) - session.ended);
    });
  }
  const grouped = (groups: Map<string, string[]>): string[] =>
    [...groups].map(([what, ids]) => `${ids.length} subscribers (${ids.join(', ')}) each: ${what}`);
  const details = { lost: grouped(lostGroups), duplicated: grouped(duplicatedGroups) };
  const { writes } = phase;
  return {
    name: phase.name,
    duringS: (phase.restoredAt - phase.startedAt) / 1000,
    afterS: (phase.endedAt - phase.restoredAt) / 1000,
    events: {
      sandbox: inPhase.filter((event) => event.environment === 'sandbox').length,
      live: inPhase.filter((event) => event.environment === 'live').length,
      notDelivered: inPhase.filter((event) => event.state !== 'delivered').length,
    },
    lost,
    duplicated,
    unknown,
    failures,
    operations: operations.length,
    writes: {
      ...writes,
      doubled: Math.max(0, writes.applied - writes.acknowledged - writes.unresolved),
      lostWrites: Math.max(0, writes.acknowledged - writes.applied),
    },
    p99: {
      during: p99Of(operations.filter(([, , at]) => at < phase.restoredAt)),
      after: p99Of(operations.filter(([, , at]) => at >= phase.restoredAt)),
    },
    recoveredMs: lastFailure === null ? null : Math.max(0, lastFailure - phase.startedAt),
    slowestFailureMs,
    ended,
    longestGapMs,
    unresumed,
    details,
  };
}

const ms = (value: number): string => (Number.isNaN(value) ? '-' : value.toFixed(0));
const listed = (counts: Record<string, number>, most = 4): string => {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  if (entries.length === 0) return '0';
  const shown = entries.slice(0, most).map(([key, value]) => `${value} ${key}`);
  return `${shown.join('; ')}${entries.length > most ? `; +${entries.length - most} more` : ''}`;
};

/** The table: one row per phase. */
export function tableOf(rows: readonly PhaseRow[]): string {
  const header = [
    'fault',
    'during / after (s)',
    'events sandbox + live (not delivered)',
    'lost: deliveries (subscribers)',
    'duplicated: deliveries (subscribers)',
    'failed operations (of all)',
    'top-ups acknowledged / applied / doubled / unresolved',
    'p99 ms during / after',
    'last failure after (s)',
    'subscriptions ended / longest gap (s)',
  ];
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`];
  for (const row of rows) {
    const ended = Object.values(row.ended).reduce((sum, value) => sum + value, 0);
    const failed = Object.values(row.failures).reduce((sum, value) => sum + value, 0);
    lines.push(
      `| ${[
        row.name,
        `${row.duringS.toFixed(1)} / ${row.afterS.toFixed(1)}`,
        `${row.events.sandbox} + ${row.events.live} (${row.events.notDelivered})`,
        `${row.lost.deliveries} (${row.lost.subscribers})`,
        `${row.duplicated.deliveries} (${row.duplicated.subscribers})`,
        `${failed} (${row.operations}): ${listed(row.failures, 3)}`,
        `${row.writes.acknowledged} / ${row.writes.applied} / ${row.writes.doubled} / ${row.writes.unresolved}`,
        `${ms(row.p99.during)} / ${ms(row.p99.after)}`,
        row.recoveredMs === null ? '-' : (row.recoveredMs / 1000).toFixed(1),
        `${ended} / ${(row.longestGapMs / 1000).toFixed(1)}${row.unresumed > 0 ? ` (${row.unresumed} not resumed)` : ''}`,
      ].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

/** What stands behind each row: the faults' notes, the failures by code, who lost or repeated what. */
export function detailsOf(rows: readonly PhaseRow[], phases: readonly PhaseRecord[]): string {
  const out: string[] = [];
  rows.forEach((row, index) => {
    const phase = phases[index]!;
    out.push(
      `- **${row.name}**: ${phase.what}.${phase.notes.length > 0 ? ` ${phase.notes.join('; ')}.` : ''}`,
    );
    if (Object.keys(row.failures).length > 0)
      out.push(
        `  - failed operations: ${listed(row.failures, 12)}; the slowest failure took ${String(row.slowestFailureMs)} ms`,
      );
    if (Object.keys(row.ended).length > 0) out.push(`  - subscriptions ended: ${listed(row.ended, 8)}`);
    if (row.lost.notDelivered > 0)
      out.push(
        `  - ${row.lost.notDelivered} of the lost deliveries are of events the platform never got a 2xx for`,
      );
    if (row.unknown > 0)
      out.push(`  - ${row.unknown} receipts of events the emulator never sent to the facade`);
    if (row.writes.lostWrites > 0)
      out.push(`  - ${row.writes.lostWrites} acknowledged top-ups not in the ledger`);
    for (const [kind, lines] of [
      ['lost', row.details.lost],
      ['duplicated', row.details.duplicated],
    ] as const) {
      for (const line of lines.slice(0, 8)) out.push(`  - ${kind}: ${line}`);
      if (lines.length > 8) out.push(`  - ${kind}: ${lines.length - 8} more groups (the JSON file has them)`);
    }
    const logged = Object.entries(phase.logged).flatMap(([process, messages]) =>
      Object.entries(messages).map(([message, times]) => `${process} ${times}× ${message}`),
    );
    if (logged.length > 0)
      out.push(`  - logged: ${logged.slice(0, 10).join('; ')}${logged.length > 10 ? '; ...' : ''}`);
  });
  return out.join('\n');
}
