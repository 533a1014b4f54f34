/**
 * Every way the webhook route answers a delivery it does not publish, in one table: the checks of
 * webhook-route.ts say only which row applies ({@link WebhookRefusal}), and {@link answerWebhook}
 * writes it (status, an `application/problem+json` body, `Retry-After`, whether the connection
 * closes). No answer mentions a secret.
 */
import type { IncomingMessage } from 'node:http';
import type { Response } from 'express';
import type { WebhookDeliveryOutcome } from '../event-types.ts';
import type { PoisonReason } from './platform-event.ts';

/** Why a delivery was answered without being published. */
export type WebhookRefusalReason =
  /** This instance is shutting down. */
  | 'shutting_down'
  /** The sender's address was refused too often in the current window (webhook-refusals.ts). */
  | 'address_blocked'
  /** The `webhook-*` headers are missing, or carry no well-formed signature. */
  | 'unsigned'
  /** `webhook-timestamp` is outside the tolerance. */
  | 'stale'
  /** The body is over the cap (by its Content-Length, or as it arrived). */
  | 'too_large'
  /** The body did not arrive in time. */
  | 'too_slow'
  /** No reading slot was free in time: not the sender's fault. */
  | 'busy'
  /** The sender went away before its body arrived: nobody is left to answer. */
  | 'aborted'
  /** No signature matches the body under any accepted secret. */
  | 'forged'
  /**
   * Signed, but an event the facade can never process (platform-event.ts): kept in the dead-letter
   * record and acknowledged, so the upstream stops redelivering it.
   */
  | 'parked'
  /** An event to park that the dead-letter record did not take; the upstream's retry parks it. */
  | 'not_parked'
  /** The event was published before: acknowledged again, not published again. */
  | 'duplicate'
  /** A concurrent delivery of the same event is publishing it. */
  | 'in_flight'
  /** The event log did not take the event; the upstream's retry publishes it. */
  | 'not_published'
  /** The event log holds the event, too few of its replicas do yet; the retry is acknowledged once they do. */
  | 'not_durable'
  /** A failure of ours, outside every check. */
  | 'failed';

/** What a check found: the row that answers, and what only the delivery knows. */
export interface WebhookRefusal {
  readonly reason: WebhookRefusalReason;
  /** The problem's `detail`, when the check says more than the row. */
  readonly detail?: string;
  /** The reason in the sampled log line, when more precise than `reason` (verify-webhook.ts's). */
  readonly logged?: string;
  /** `Retry-After` in seconds, when only the check knows it (an address's window). */
  readonly retryAfterSeconds?: number;
  /** The event acknowledged again (a duplicate). */
  readonly eventId?: string;
  /** Why a parked event can never be processed. */
  readonly poison?: PoisonReason;
}

/**
 * When the connection closes after the answer: `always` (a refused sender pays for a new one),
 * `when_unread` (only if a rest of the body was left unread, which Node would otherwise read and
 * drop to keep the connection alive), `never`, or `at_once` (no answer: the socket is destroyed).
 */
export type WebhookClose = 'always' | 'when_unread' | 'never' | 'at_once';

/** The row of one reason in {@link WEBHOOK_ANSWERS}. */
export interface WebhookAnswerRow {
  /** What `onDelivery` and the receipt span are told. */
  readonly outcome: WebhookDeliveryOutcome;
  readonly status: number;
  /** The problem's `title`; the body is a receipt instead when undefined (an acknowledgement, 2xx). */
  readonly title?: string;
  /** The problem's `detail`, unless the refusal carries its own. */
  readonly detail?: string;
  /** `Retry-After` in seconds, unless the refusal carries its own. */
  readonly retryAfterSeconds?: number;
  /** Counted against the sender's address (then 429 past the limit) and logged as a sample. */
  readonly counted: boolean;
  readonly close: WebhookClose;
}

const INVALID_SIGNATURE = 'Invalid webhook signature';

/** The one table: each reason's answer. docs/events.md describes it ("Receiving"). */
export const WEBHOOK_ANSWERS: Readonly<Record<WebhookRefusalReason, WebhookAnswerRow>> = {
  shutting_down: {
    outcome: 'unavailable',
    status: 503,
    title: 'Shutting down',
    detail: 'this instance no longer accepts webhooks',
    retryAfterSeconds: 5,
    counted: false,
    close: 'when_unread',
  },
  address_blocked: {
    outcome: 'throttled',
    status: 429,
    title: 'Too many refused deliveries',
    detail: 'this address was refused too often; retry later',
    counted: false,
    close: 'always',
  },
  unsigned: { outcome: 'forged', status: 401, title: INVALID_SIGNATURE, counted: true, close: 'always' },
  stale: { outcome: 'stale', status: 401, title: INVALID_SIGNATURE, counted: true, close: 'always' },
  too_large: {
    outcome: 'malformed',
    status: 413,
    title: 'Payload too large',
    detail: 'the webhook body exceeds the accepted size',
    counted: true,
    close: 'always',
  },
  too_slow: {
    outcome: 'too_slow',
    status: 408,
    title: 'Request timeout',
    detail: 'the webhook body did not arrive in time',
    counted: true,
    close: 'always',
  },
  busy: {
    outcome: 'busy',
    status: 503,
    title: 'Busy',
    detail: 'too many webhook bodies are being received; retry later',
    retryAfterSeconds: 1,
    counted: false,
    close: 'when_unread',
  },
  aborted: { outcome: 'malformed', status: 400, counted: false, close: 'at_once' },
  forged: { outcome: 'forged', status: 401, title: INVALID_SIGNATURE, counted: true, close: 'always' },
  // 2xx, the only answer the upstream does not retry (docs/upstream-assumptions.md, "Delivery and
  // retries"): the same bytes would be refused for ever, and the record keeps the event instead.
  parked: { outcome: 'dead_lettered', status: 202, counted: false, close: 'never' },
  duplicate: { outcome: 'duplicate', status: 200, counted: false, close: 'never' },
  in_flight: {
    outcome: 'in_flight',
    status: 409,
    title: 'Delivery in progress',
    detail: 'this event is being received by another delivery',
    retryAfterSeconds: 1,
    counted: false,
    close: 'never',
  },
  not_published: {
    outcome: 'unavailable',
    status: 503,
    title: 'Event not published',
    detail: 'the event could not be handed to the subscribers',
    retryAfterSeconds: 1,
    counted: false,
    close: 'never',
  },
  not_parked: {
    outcome: 'unavailable',
    status: 503,
    title: 'Event not recorded',
    detail: 'the event can never be processed and could not be recorded as such; retry later',
    retryAfterSeconds: 1,
    counted: false,
    close: 'never',
  },
  not_durable: {
    outcome: 'unavailable',
    status: 503,
    title: 'Event not yet durable',
    detail: 'the event is held, but not yet by enough replicas of the event log; retry later',
    retryAfterSeconds: 1,
    counted: false,
    close: 'never',
  },
  failed: {
    outcome: 'unavailable',
    status: 503,
    title: 'Event not received',
    detail: 'the event could not be received; retry later',
    counted: false,
    close: 'never',
  },
};

/** Writes `refusal`'s answer to `response` as its row says. Counting and logging are the caller's. */
export function answerWebhook(request: IncomingMessage, response: Response, refusal: WebhookRefusal): void {
  const row = WEBHOOK_ANSWERS[refusal.reason];
  if (row.close === 'at_once') {
    request.socket.destroy();
    return;
  }
  if (row.title === undefined) {
    // An acknowledgement: a duplicate, or a parked event (whose id may be the poison: not echoed).
    response
      .status(row.status)
      .json(
        refusal.poison === undefined
          ? { received: true, eventId: refusal.eventId, duplicate: true }
          : { received: true, parked: true, reason: refusal.poison, detail: refusal.detail },
      );
    return;
  }
  const retryAfter = refusal.retryAfterSeconds ?? row.retryAfterSeconds;
  if (retryAfter !== undefined) response.setHeader('Retry-After', String(retryAfter));
  const close = row.close === 'always' || (row.close === 'when_unread' && !request.complete);
  sendProblem(response, row.status, row.title, refusal.detail ?? row.detail ?? row.title, close);
}

function sendProblem(
  response: Response,
  status: number,
  title: string,
  detail: string,
  close: boolean,
): void {
  if (close) response.setHeader('Connection', 'close');
  response.status(status).type('application/problem+json');
  response.end(JSON.stringify({ type: 'about:blank', title, status, detail }), () => {
    if (close) response.socket?.destroy();
  });
}
