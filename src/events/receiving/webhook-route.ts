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
import type { PlatformEvent, WebhookDeliveryOutcome } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import {
  createMemoryDeadLetters,
  DEFAULT_DEAD_LETTERS_MAX,
  type DeadLetter,
  type DeadLetterRecord,
} from './dead-letters.ts';
import {
  checkAccepting,
  checkAddressBudget,
  checkChain,
  checkEnvelope,
  checkSignature,
  checkSignedHeaders,
  passes,
  readBody,
  refusedWith,
  type Arrival,
  type CheckContext,
  type Checked,
  type ReceivedEvent,
} from './webhook-checks.ts';
import {
  createWebhookBodyReader,
  type WebhookBodyLimits,
  type WebhookBodyReaderState,
} from './webhook-body.ts';
import { createWebhookRefusals } from './webhook-refusals.ts';
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
   * acknowledged): the response cache drops what it makes stale, and the gateways' caches (awaited:
   * the promise settles within `GATEWAY_INVALIDATION_WAIT_MS`). Must not throw nor reject.
   */
  beforePublish?: (event: PlatformEvent) => unknown;
  /** Told of each event this route published, before the delivery is acknowledged. Must not throw. */
  onPublished?: (event: PlatformEvent) => void;
  /** With tracing on: a receipt span per POST, the publish under it. */
  tracer?: EventTracer;
  /**
   * With a route per environment: the one environment whose events it takes; a signed event naming
   * the other is parked as one it can never process, so nothing crosses over. Absent: either.
   */
  environment?: PlatformEnvironment;
  /**
   * Where signed events that can never be processed are kept (dead-letters.ts). Default: in memory,
   * {@link DEFAULT_DEAD_LETTERS_MAX} per environment.
   */
  deadLetters?: DeadLetterRecord;
  /** Told of each event parked in the dead-letter record (metrics). Must not throw. */
  onDeadLetter?: (letter: DeadLetter) => void;
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

/** What the checks of the route read: the parts of webhook-checks.ts's, and all the route's options. */
interface RouteContext extends CheckContext {
  readonly options: WebhookRouterOptions;
  /** Claims, appends and confirms each event once, durable before it is acknowledged. */
  readonly publisher: EventPublisher;
}

/**
 * The checks of a delivery, in the order they run; the first that refuses answers from
 * {@link WEBHOOK_ANSWERS} and the rest never run. Everything the headers can tell comes before a
 * byte of the body is read, the signature before the body is parsed, and the event is appended
 * before the delivery is acknowledged (an acknowledged event is an event the subscribers get).
 */
const CHECKS = checkChain<RouteContext, Arrival>()
  /** Shutting down: 503 with `Retry-After`. */
  .then('accepting', checkAccepting)
  /**
   * Headers without a well-formed, current signature, from an address refused too often in this
   * window: 429 with `Retry-After`, unread. Only those meet the budget: a signed delivery is always
   * verified, so junk from a shared address (NAT, a proxy) cannot turn the upstream's own
   * deliveries away; its cost stays bounded by the body's cap and reading slots.
   */
  .then('address_budget', checkAddressBudget)
  /** Missing `webhook-*` headers, a timestamp outside the tolerance, no well-formed signature: 401, unread. */
  .then('signed_headers', checkSignedHeaders)
  /** Body over `maxBodyBytes` (413), not received in time (408), no reading slot in time (503). */
  .then('body', readBody)
  /** No signature matches the body: 401, and the body is not even parsed. */
  .then('signature', checkSignature)
  /**
   * A signed event the facade can never process (platform-event.ts), `webhook-id` differing from the
   * body's `id`, or the other environment's event: parked in the dead-letter record and answered
   * 202, before anything claims, appends or reads anything for it.
   */
  .then('envelope', checkEnvelope)
  /**
   * Published before: 200 with `duplicate: true` once the replicas hold it (503 until they do);
   * being published by a concurrent delivery: 409.
   */
  .then('first_delivery', checkFirstDelivery)
  /**
   * The event log does not take it, or fewer replicas than `REDIS_MIN_REPLICAS_ACK` hold it in
   * time: 503, and the upstream's retry publishes it (or finds it published) later.
   */
  .then('append', appendEvent);

/** The names of the checks of a delivery, in the order they run (see `CHECKS` in webhook-route.ts). */
export const WEBHOOK_CHECKS = CHECKS.names;

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
  const deadLetters =
    options.deadLetters ?? createMemoryDeadLetters({ maxPerEnvironment: DEFAULT_DEAD_LETTERS_MAX });
  const context: RouteContext = {
    options,
    publisher: options.publisher ?? createEventPublisher({ dedup: options.dedup, log: options.log, logger }),
    accepting: () => accepting,
    bodyReader,
    refusals,
    deadLetters,
    now,
  };

  /** Tells `onDelivery` and the receipt span (tracing on and recorded) how the delivery was answered. */
  const report = (response: Response, outcome: WebhookDeliveryOutcome): void => {
    options.onDelivery?.(outcome);
    receiptOf(response)?.outcome(outcome);
  };

  /** Answers a refusal; one of the sender counts against its address and is logged as a sample. */
  const refuse = (delivery: Arrival, response: Response, refusal: WebhookRefusal): void => {
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
    const arrival: Arrival = { request, address: addressOf(request), receipt: receiptOf(response) };
    const checked = await CHECKS.run(context, arrival);
    if ('refused' in checked) {
      refuse(arrival, response, checked.refused);
      return;
    }
    report(response, 'accepted');
    response.status(200).json({ received: true, eventId: checked.passed.event.id, duplicate: false });
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
    refuse({ request, address: addressOf(request), receipt: undefined }, response, { reason: 'failed' });
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

async function checkFirstDelivery(
  context: RouteContext,
  delivery: ReceivedEvent,
): Promise<Checked<ReceivedEvent>> {
  const { event } = delivery;
  const claim = await context.publisher.claim(event.id);
  if (claim === 'seen') return refusedWith({ reason: 'duplicate', eventId: event.id });
  if (claim === 'seen_unconfirmed') return notDurable(context, event);
  return claim === 'in_flight' ? refusedWith({ reason: 'in_flight' }) : passes(delivery);
}

async function appendEvent(context: RouteContext, delivery: ReceivedEvent): Promise<Checked<ReceivedEvent>> {
  const { logger } = context.options;
  const { event } = delivery;
  await context.options.beforePublish?.(event);
  let publication: Publication;
  try {
    publication = await context.publisher.publish(event);
  } catch (error) {
    logger.error('could not publish a webhook event; the upstream will retry', {
      eventId: event.id,
      error: String(error),
    });
    return refusedWith({ reason: 'not_published' });
  }
  if (!publication.published) {
    logger.warn("a webhook event's claim was gone before its append; the upstream will retry", {
      eventId: event.id,
    });
    return refusedWith({ reason: 'not_published' });
  }
  context.options.onPublished?.(event);
  return publication.durable ? passes(delivery) : notDurable(context, event);
}

/** The event is in the log, not yet on enough replicas: 503, the retry finds it published. */
function notDurable(context: RouteContext, event: PlatformEvent): Checked<ReceivedEvent> {
  context.options.logger.warn(
    'a webhook event is not yet held by enough Redis replicas; the upstream will retry',
    {
      eventId: event.id,
    },
  );
  return refusedWith({ reason: 'not_durable' });
}
