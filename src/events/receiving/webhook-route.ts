/**
 * The route the upstream POSTs its events to: verify, parse, claim the event id, publish, confirm,
 * then answer. The order is what makes each event published once and never acknowledged unpublished.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { EventBus } from '../fan-out/event-bus.ts';
import type { EventDeduplicator } from '../fan-out/event-dedup.ts';
import type { Logger } from '../../logger.ts';
import type { EventTracer, WebhookReceiptTrace } from '../event-tracing.ts';
import { parsePlatformEvent, type PlatformEvent } from './platform-event.ts';
import { verifyWebhook } from './verify-webhook.ts';

/** Default cap of a webhook body; the upstream's own request cap is the same 1 MiB. */
export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 1024 * 1024;

/** Options of {@link createWebhookRouter}. */
export interface WebhookRouterOptions {
  /**
   * The signing secrets currently accepted (several during a rotation). A function, because the
   * secret of an endpoint registered at start is known only after the router exists.
   */
  secrets: () => readonly string[];
  dedup: EventDeduplicator;
  bus: EventBus;
  logger: Logger;
  /** Largest accepted body; a larger one is answered 413 unread. Default 1 MiB. */
  maxBodyBytes?: number;
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
}

/**
 * How a delivery was answered: `accepted` (published), `duplicate` (published before), `forged`
 * (no valid signature), `stale` (signature timestamp outside the tolerance), `malformed` (bad body
 * or too large), `in_flight` (another delivery of it is being published), `unavailable` (not
 * published: shutting down or the pub/sub failed).
 */
export type WebhookDeliveryOutcome =
  'accepted' | 'duplicate' | 'forged' | 'stale' | 'malformed' | 'in_flight' | 'unavailable';

/** The router and the switch that stops it taking deliveries (for shutdown). */
export interface WebhookRouter {
  /** Mount it at the webhook path; it answers `POST /`. */
  router: Router;
  /** From now on every delivery is answered 503, so the upstream retries it elsewhere or later. */
  stopAccepting(): void;
}

/**
 * Builds the route the upstream posts its webhooks to.
 *
 * Order of checks, and what each answers:
 * - shutting down: 503 with `Retry-After`;
 * - body over `maxBodyBytes`: 413;
 * - missing, forged or stale signature: 401, and nothing is published (checked before the body is
 *   even parsed, so unauthenticated input goes no further);
 * - malformed JSON or envelope, or `webhook-id` differing from the body's `id`: 400;
 * - an event already published: 200 with `duplicate: true`, not published again;
 * - the same event being published by a concurrent delivery: 409 with `Retry-After` (not 2xx, so
 *   the upstream tries again and then finds it published or free);
 * - otherwise the event is published, and 200 is answered only after the pub/sub accepted it: an
 *   acknowledged event is an event the subscribers get. A failed publication answers 503, so the
 *   upstream's retry publishes it later.
 *
 * Every answer to a refused delivery is `application/problem+json`; none mentions a secret.
 */
export function createWebhookRouter(options: WebhookRouterOptions): WebhookRouter {
  const { dedup, bus, logger } = options;
  const now = options.now ?? Date.now;
  const onDelivery = options.onDelivery ?? (() => undefined);
  const { tracer } = options;
  const router = express.Router();
  let accepting = true;

  /** The receipt span of `response`'s delivery (tracing on and recorded), ended once it is answered. */
  const receiptOf = (response: Response): WebhookReceiptTrace | undefined =>
    (response.locals as { receipt?: WebhookReceiptTrace }).receipt;
  const reportTo = (response: Response) => (delivery: WebhookDeliveryOutcome) => {
    onDelivery(delivery);
    receiptOf(response)?.outcome(delivery);
  };

  router.post(
    '/',
    (request: Request, response: Response, next: NextFunction) => {
      const receipt = tracer?.startReceipt();
      if (receipt !== undefined) {
        (response.locals as { receipt?: WebhookReceiptTrace }).receipt = receipt;
        response.once('close', () => receipt.end());
      }
      const outcome = reportTo(response);
      if (accepting) {
        next();
        return;
      }
      outcome('unavailable');
      response.setHeader('Retry-After', '5');
      sendProblem(response, 503, 'Shutting down', 'this instance no longer accepts webhooks');
    },
    // Every content type is read raw: the signature covers the exact bytes, whatever they claim to be.
    express.raw({ type: () => true, limit: options.maxBodyBytes ?? DEFAULT_WEBHOOK_MAX_BODY_BYTES }),
    (request: Request, response: Response, next: NextFunction) => {
      const receipt = receiptOf(response);
      const receiving = () => receive(request, response);
      (receipt === undefined ? receiving() : receipt.run(receiving)).catch(next);
    },
  );

  async function receive(request: Request, response: Response): Promise<void> {
    const outcome = reportTo(response);
    const rawBody: Buffer = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const verification = verifyWebhook({
      headers: request.headers,
      rawBody,
      secrets: options.secrets(),
      ...(options.toleranceSeconds === undefined ? {} : { toleranceSeconds: options.toleranceSeconds }),
      now: now(),
    });
    if (!verification.ok) {
      logger.warn('refused a webhook delivery', { reason: verification.reason });
      outcome(verification.reason === 'timestamp_outside_tolerance' ? 'stale' : 'forged');
      sendProblem(response, 401, 'Invalid webhook signature', verification.message);
      return;
    }

    const parsed = parsePlatformEvent(rawBody);
    if (!parsed.ok) {
      outcome('malformed');
      sendProblem(response, 400, 'Malformed webhook', parsed.message);
      return;
    }
    const { event } = parsed;
    if (event.id !== verification.id) {
      outcome('malformed');
      sendProblem(response, 400, 'Malformed webhook', 'the webhook-id header differs from the body\'s "id"');
      return;
    }

    receiptOf(response)?.event(event);
    const claim = await dedup.claim(event.id);
    if (claim === 'seen') {
      outcome('duplicate');
      response.status(200).json({ received: true, eventId: event.id, duplicate: true });
      return;
    }
    if (claim === 'in_flight') {
      outcome('in_flight');
      response.setHeader('Retry-After', '1');
      sendProblem(response, 409, 'Delivery in progress', 'this event is being received by another delivery');
      return;
    }

    options.beforePublish?.(event);
    try {
      await bus.publish(event);
    } catch (error) {
      await dedup.release(event.id).catch(() => undefined);
      logger.error('could not publish a webhook event; the upstream will retry', {
        eventId: event.id,
        error: String(error),
      });
      outcome('unavailable');
      response.setHeader('Retry-After', '1');
      sendProblem(response, 503, 'Event not published', 'the event could not be handed to the subscribers');
      return;
    }
    // Published: from here the delivery is acknowledged whatever happens, or a retry after the claim
    // expired would publish the event a second time.
    await dedup.confirm(event.id).catch((error: unknown) => {
      logger.error('published an event but could not record it as seen', {
        eventId: event.id,
        error: String(error),
      });
    });
    options.onPublished?.(event);
    outcome('accepted');
    response.status(200).json({ received: true, eventId: event.id, duplicate: false });
  }

  router.use((error: unknown, _request: Request, response: Response, next: NextFunction) => {
    if (response.headersSent) {
      next(error);
      return;
    }
    const outcome = reportTo(response);
    const status = (error as { status?: unknown; type?: unknown } | null)?.status;
    const type = (error as { type?: unknown } | null)?.type;
    if (status === 413 || type === 'entity.too.large') {
      outcome('malformed');
      sendProblem(response, 413, 'Payload too large', 'the webhook body exceeds the accepted size');
    } else if (typeof status === 'number' && status >= 400 && status < 500) {
      outcome('malformed');
      sendProblem(response, 400, 'Malformed webhook', 'the webhook body could not be read');
    } else {
      logger.error('webhook delivery failed', { error: String(error) });
      outcome('unavailable');
      sendProblem(response, 503, 'Event not received', 'the event could not be received; retry later');
    }
  });

  return {
    router,
    stopAccepting() {
      accepting = false;
    },
  };
}

function sendProblem(response: Response, status: number, title: string, detail: string): void {
  response
    .status(status)
    .type('application/problem+json')
    .send(JSON.stringify({ type: 'about:blank', title, status, detail }));
}
