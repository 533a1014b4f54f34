/**
 * The route the upstream POSTs its events to: the checks of a delivery as one declared list
 * ({@link WEBHOOK_CHECKS}), each refusal answered from one table (webhook-answers.ts). The order is
 * what keeps unauthenticated input cheap, and each event published once and never acknowledged
 * unpublished.
 */
import type { IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { EventDeduplicator } from '../dedup/event-dedup.ts';
import { createEventPublisher, type EventPublisher, type Publication } from '../dedup/publish-once.ts';
import type { EventLog } from '../log/event-log.ts';
import type { Logger } from '../../logger.ts';
import type { EventTracer, WebhookReceiptTrace } from '../event-tracing.ts';
import type { PlatformEnvironment, PlatformEvent, WebhookDeliveryOutcome } from '../event-types.ts';
import { parsePlatformEvent } from './platform-event.ts';
import {
  checkWebhookHeaders,
  verifyWebhookSignature,
  type CheckedWebhookHeaders,
  type WebhookHeaderCheck,
} from './verify-webhook.ts';
import {
  createWebhookBodyReader,
  type WebhookBodyLimits,
  type WebhookBodyReader,
  type WebhookBodyReaderState,
} from './webhook-body.ts';
import { createWebhookRefusals, type WebhookRefusals } from './webhook-refusals.ts';
import { answerWebhook, WEBHOOK_ANSWERS, type WebhookRefusal } from './webhook-answers.ts';

/**
 * Default cap of a webhook body: 64 KiB. The platform's events are an envelope and one resource
 * (a few KiB at most); the cap bounds what one unauthenticated sender makes the facade hold.
 */
export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 64 * 1024;

/** Default limits on reading bodies (variables in `src/events/config.ts`, docs/security.md). */
export const DEFAULT_WEBHOOK_BODY_LIMITS: WebhookBodyLimits = {
  maxBodyBytes: DEFAULT_WEBHOOK_MAX_BODY_BYTES,
  // A few KiB from a server in a data centre: seconds are plenty, and a slow sender loses its slot.
  receiveTimeoutMs: 10_000,
  maxConcurrentReads: 16,
  maxConcurrentReadsPerAddress: 4,
  maxWaiting: 64,
};

/** Default: an address refused more than 30 times in a minute is answered 429 for the rest of it. */
export const DEFAULT_WEBHOOK_REFUSALS = { limit: 30, windowMs: 60_000 } as const;

/** Options of {@link createWebhookRouter}. */
export interface WebhookRouterOptions {
  /**
   * The signing secrets currently accepted (several during a rotation). A function, because the
   * secret of an endpoint registered at start is known only after the router exists.
   */
  secrets: () => readonly string[];
  dedup: EventDeduplicator;
  /** Where a verified, new event is appended; the delivery is acknowledged once it holds it. */
  log: Pick<EventLog, 'append'>;
  /**
   * How a new event is claimed and published once, durably (dedup/publish-once.ts): with Redis,
   * the append and its mark in one step, acknowledged once the replicas hold them. Default:
   * `dedup`'s claim, `log`'s append, `dedup`'s confirmation.
   */
  publisher?: EventPublisher;
  logger: Logger;
  /** Largest accepted body; a larger one is answered 413 unread. Default 64 KiB. */
  maxBodyBytes?: number;
  /** Limits on reading bodies, over {@link DEFAULT_WEBHOOK_BODY_LIMITS} (`maxBodyBytes` above wins). */
  bodyLimits?: Partial<WebhookBodyLimits>;
  /** Refusals per address and window before 429 (default {@link DEFAULT_WEBHOOK_REFUSALS}). */
  refusals?: { limit: number; windowMs: number };
  /** The sender's address, as the rest of the facade sees it (trusted proxies). Default: the socket's. */
  addressOf?: (request: IncomingMessage) => string;
  /** Accepted distance between `webhook-timestamp` and the clock, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Clock in milliseconds. Default `Date.now`. */
  now?: () => number;
  /** Told how each delivery was answered (metrics). Must not throw. */
  onDelivery?: (outcome: WebhookDeliveryOutcome) => void;
  /**
   * Called with each verified, de-duplicated event just before it is published (so before it is
   * acknowledged): the response cache drops what it makes stale. Must not throw.
   */
  beforePublish?: (event: PlatformEvent) => void;
  /** Told of each event this route published, before the delivery is acknowledged. Must not throw. */
  onPublished?: (event: PlatformEvent) => void;
  /** With tracing on: a receipt span per POST, the publish under it. */
  tracer?: EventTracer;
  /**
   * With a route per environment: the one environment whose events it takes; a signed event naming
   * the other is refused as malformed (400), so nothing crosses over. Absent: either.
   */
  environment?: PlatformEnvironment;
}

export type { WebhookDeliveryOutcome } from '../event-types.ts';

/** The router and the switch that stops it taking deliveries (for shutdown). */
export interface WebhookRouter {
  /** Mount it at the webhook path; it answers `POST /`. */
  router: Router;
  /** From now on every delivery is answered 503, so the upstream retries it elsewhere or later. */
  stopAccepting(): void;
  /** Bodies being read and waiting, and the bytes they hold. */
  bodies(): WebhookBodyReaderState;
}

/**
 * The checks of a delivery, in the order they run; the first that refuses answers from
 * {@link WEBHOOK_ANSWERS} and the rest never run. Everything the headers can tell comes before a
 * byte of the body is read, the signature before the body is parsed, and the event is appended
 * before the delivery is acknowledged (an acknowledged event is an event the subscribers get).
 */
export const WEBHOOK_CHECKS = [
  /** Shutting down: 503 with `Retry-After`. */
  'accepting',
  /**
   * Headers without a well-formed, current signature, from an address refused too often in this
   * window: 429 with `Retry-After`, unread. Only those meet the budget: a signed delivery is always
   * verified, so junk from a shared address (NAT, a proxy) cannot turn the upstream's own
   * deliveries away; its cost stays bounded by the body's cap and reading slots.
   */
  'address_budget',
  /** Missing `webhook-*` headers, a timestamp outside the tolerance, no well-formed signature: 401, unread. */
  'signed_headers',
  /** Body over `maxBodyBytes` (413), not received in time (408), no reading slot in time (503). */
  'body',
  /** No signature matches the body: 401, and the body is not even parsed. */
  'signature',
  /** Malformed JSON or envelope, or `webhook-id` differing from the body's `id`: 400. */
  'envelope',
  /**
   * Published before: 200 with `duplicate: true` once the replicas hold it (503 until they do);
   * being published by a concurrent delivery: 409.
   */
  'first_delivery',
  /**
   * The event log does not take it, or fewer replicas than `REDIS_MIN_REPLICAS_ACK` hold it in
   * time: 503, and the upstream's retry publishes it (or finds it published) later.
   */
  'append',
] as const;

/** The name of one check of {@link WEBHOOK_CHECKS}. */
export type WebhookCheck = (typeof WEBHOOK_CHECKS)[number];

/** What the checks learn of one delivery, each from those before it. */
interface Delivery {
  readonly request: Request;
  readonly address: string;
  /** The receipt span, when tracing is on and recorded. */
  readonly receipt?: WebhookReceiptTrace | undefined;
  headers?: WebhookHeaderCheck;
  body?: Buffer;
  event?: PlatformEvent;
}

type CheckResult = WebhookRefusal | undefined;

/**
 * Builds the route the upstream posts its webhooks to: it runs {@link WEBHOOK_CHECKS} in order and
 * answers the first refusal from {@link WEBHOOK_ANSWERS}, or 200 once the event log holds the event.
 *
 * Every answer to a refused delivery is `application/problem+json`; none mentions a secret. A
 * refusal of the sender (401, 408, 413) closes the connection, whatever of the body is unread; it
 * counts against the sender's address (webhook-refusals.ts), and only the first of each address in
 * a window is logged.
 */
export function createWebhookRouter(options: WebhookRouterOptions): WebhookRouter {
  const { logger, tracer } = options;
  const now = options.now ?? Date.now;
  const router = express.Router();
  let accepting = true;
  const bodyReader = createWebhookBodyReader({
    ...DEFAULT_WEBHOOK_BODY_LIMITS,
    ...options.bodyLimits,
    ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
  });
  const refusals = createWebhookRefusals({ ...(options.refusals ?? DEFAULT_WEBHOOK_REFUSALS), now });
  const addressOf =
    options.addressOf ?? ((request: IncomingMessage) => request.socket.remoteAddress ?? 'unknown');
  const checks = createWebhookChecks(options, {
    accepting: () => accepting,
    bodyReader,
    refusals,
    now,
  });

  /** Tells `onDelivery` and the receipt span (tracing on and recorded) how the delivery was answered. */
  const report = (response: Response, outcome: WebhookDeliveryOutcome): void => {
    options.onDelivery?.(outcome);
    receiptOf(response)?.outcome(outcome);
  };

  /** Answers a refusal; one of the sender counts against its address and is logged as a sample. */
  const refuse = (delivery: Delivery, response: Response, refusal: WebhookRefusal): void => {
    const row = WEBHOOK_ANSWERS[refusal.reason];
    report(response, row.outcome);
    if (row.counted) {
      const sample = refusals.refused(delivery.address);
      if (sample.log) {
        logger.warn('refused a webhook delivery', {
          reason: refusal.logged ?? refusal.reason,
          address: delivery.address,
          // Later refusals from this address in the same window are counted, not logged.
          refusedInPreviousWindow: sample.refusedInPreviousWindow,
        });
      }
    }
    answerWebhook(delivery.request, response, refusal);
  };

  const receive = async (request: Request, response: Response): Promise<void> => {
    const delivery: Delivery = { request, address: addressOf(request), receipt: receiptOf(response) };
    for (const name of WEBHOOK_CHECKS) {
      const refusal = await checks[name](delivery);
      if (refusal !== undefined) {
        refuse(delivery, response, refusal);
        return;
      }
    }
    report(response, 'accepted');
    response.status(200).json({ received: true, eventId: delivery.event!.id, duplicate: false });
  };

  router.post('/', (request: Request, response: Response, next: NextFunction) => {
    const receipt = tracer?.startReceipt();
    if (receipt === undefined) {
      receive(request, response).catch(next);
      return;
    }
    (response.locals as { receipt?: WebhookReceiptTrace }).receipt = receipt;
    response.once('close', () => receipt.end());
    receipt.run(() => receive(request, response)).catch(next);
  });

  router.use((error: unknown, request: Request, response: Response, next: NextFunction) => {
    if (response.headersSent) {
      next(error);
      return;
    }
    // The body is read by webhook-body.ts, which never throws: what reaches here is a failure of ours.
    logger.error('webhook delivery failed', { error: String(error) });
    refuse({ request, address: addressOf(request) }, response, { reason: 'failed' });
  });

  return {
    router,
    stopAccepting() {
      accepting = false;
    },
    bodies: () => bodyReader.state(),
  };
}

/** The receipt span of `response`'s delivery, when tracing is on and recorded. */
function receiptOf(response: Response): WebhookReceiptTrace | undefined {
  return (response.locals as { receipt?: WebhookReceiptTrace }).receipt;
}

/** Each check of {@link WEBHOOK_CHECKS}: a refusal, or nothing when the delivery passes it. */
function createWebhookChecks(
  options: WebhookRouterOptions,
  parts: {
    accepting: () => boolean;
    bodyReader: WebhookBodyReader;
    refusals: WebhookRefusals;
    now: () => number;
  },
): Record<WebhookCheck, (delivery: Delivery) => CheckResult | Promise<CheckResult>> {
  const { logger } = options;
  const publisher =
    options.publisher ?? createEventPublisher({ dedup: options.dedup, log: options.log, logger });
  /** The event is in the log, not yet on enough replicas: 503, the retry finds it published. */
  const notDurable = (event: PlatformEvent): WebhookRefusal => {
    logger.warn('a webhook event is not yet held by enough Redis replicas; the upstream will retry', {
      eventId: event.id,
    });
    return { reason: 'not_durable' };
  };
  const tolerance =
    options.toleranceSeconds === undefined ? {} : { toleranceSeconds: options.toleranceSeconds };
  return {
    accepting: () => (parts.accepting() ? undefined : { reason: 'shutting_down' }),
    address_budget: (delivery) => {
      delivery.headers = checkWebhookHeaders(delivery.request.headers, { ...tolerance, now: parts.now() });
      const blockedFor = delivery.headers.ok ? undefined : parts.refusals.blockedFor(delivery.address);
      return blockedFor === undefined
        ? undefined
        : { reason: 'address_blocked', retryAfterSeconds: blockedFor };
    },
    signed_headers: ({ headers }) => {
      if (headers!.ok) return undefined;
      const { reason, message } = headers!;
      return {
        reason: reason === 'timestamp_outside_tolerance' ? 'stale' : 'unsigned',
        detail: message,
        logged: reason,
      };
    },
    body: async (delivery) => {
      const read = await parts.bodyReader.read(delivery.request, delivery.address);
      if (!read.ok) return { reason: read.failure };
      delivery.body = read.body;
      return undefined;
    },
    signature: ({ headers, body }) => {
      const verification = verifyWebhookSignature(headers as CheckedWebhookHeaders, body!, options.secrets());
      if (verification.ok) return undefined;
      return { reason: 'forged', detail: verification.message, logged: verification.reason };
    },
    envelope: (delivery) => {
      const parsed = parsePlatformEvent(delivery.body!);
      if (!parsed.ok) return { reason: 'malformed', detail: parsed.message };
      if (parsed.event.id !== (delivery.headers as CheckedWebhookHeaders).id) {
        return { reason: 'malformed', detail: 'the webhook-id header differs from the body\'s "id"' };
      }
      if (options.environment !== undefined && parsed.event.environment !== options.environment) {
        return { reason: 'malformed', detail: `this route takes ${options.environment} events only` };
      }
      delivery.event = parsed.event;
      delivery.receipt?.event(parsed.event);
      return undefined;
    },
    first_delivery: async ({ event }) => {
      const claim = await publisher.claim(event!.id);
      if (claim === 'seen') return { reason: 'duplicate', eventId: event!.id };
      if (claim === 'seen_unconfirmed') return notDurable(event!);
      return claim === 'in_flight' ? { reason: 'in_flight' } : undefined;
    },
    append: async ({ event }) => {
      options.beforePublish?.(event!);
      let publication: Publication;
      try {
        publication = await publisher.publish(event!);
      } catch (error) {
        logger.error('could not publish a webhook event; the upstream will retry', {
          eventId: event!.id,
          error: String(error),
        });
        return { reason: 'not_published' };
      }
      if (!publication.published) {
        logger.warn("a webhook event's claim was gone before its append; the upstream will retry", {
          eventId: event!.id,
        });
        return { reason: 'not_published' };
      }
      options.onPublished?.(event!);
      return publication.durable ? undefined : notDurable(event!);
    },
  };
}
