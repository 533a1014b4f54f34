/**
 * The route the upstream POSTs its events to: verify, parse, claim the event id, publish, confirm,
 * then answer. The order is what makes each event published once and never acknowledged unpublished.
 */
import type { IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { EventDeduplicator } from '../dedup/event-dedup.ts';
import type { EventLog } from '../log/event-log.ts';
import type { Logger } from '../../logger.ts';
import type { EventTracer, WebhookReceiptTrace } from '../event-tracing.ts';
import type { PlatformEvent } from '../event-types.ts';
import { parsePlatformEvent } from './platform-event.ts';
import { checkWebhookHeaders, verifyWebhookSignature } from './verify-webhook.ts';
import {
  createWebhookBodyReader,
  type BodyReadFailure,
  type WebhookBodyLimits,
  type WebhookBodyReaderState,
} from './webhook-body.ts';
import { createWebhookRefusals, type WebhookRefusals } from './webhook-refusals.ts';
import type { WebhookDeliveryOutcome } from '../event-types.ts';

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
 * Builds the route the upstream posts its webhooks to.
 *
 * Order of checks, and what each answers:
 * - shutting down: 503 with `Retry-After`;
 * - missing `webhook-*` headers, a timestamp outside the tolerance, or no well-formed signature,
 *   from an address refused too often in the current window: 429 with `Retry-After`, unread;
 * - otherwise, the same headers: 401, before a byte of the body is read;
 * - a delivery whose headers carry a well-formed, current signature is read and verified whatever
 *   its address did before (so nobody sharing the upstream's address can crowd its deliveries out);
 * - body over `maxBodyBytes` (413), not received in time (408), or no reading slot in time (503
 *   with `Retry-After`); see webhook-body.ts;
 * - a signature that does not match: 401, and nothing is published (checked before the body is
 *   even parsed, so unauthenticated input goes no further);
 * - malformed JSON or envelope, or `webhook-id` differing from the body's `id`: 400;
 * - an event already published: 200 with `duplicate: true`, not published again;
 * - the same event being published by a concurrent delivery: 409 with `Retry-After` (not 2xx, so
 *   the upstream tries again and then finds it published or free);
 * - otherwise the event is published, and 200 is answered only after the event log holds it: an
 *   acknowledged event is an event the subscribers get. A failed publication answers 503, so the
 *   upstream's retry publishes it later.
 *
 * Every answer to a refused delivery is `application/problem+json`; none mentions a secret. A
 * refusal (401, 408, 413, 429) closes the connection, whatever of the body is unread; it counts
 * against the sender's address (webhook-refusals.ts), and only the first of each address in a
 * window is logged.
 */
export function createWebhookRouter(options: WebhookRouterOptions): WebhookRouter {
  const { dedup, log, logger } = options;
  const now = options.now ?? Date.now;
  const onDelivery = options.onDelivery ?? (() => undefined);
  const { tracer } = options;
  const router = express.Router();
  let accepting = true;
  const bodyReader = createWebhookBodyReader({
    ...DEFAULT_WEBHOOK_BODY_LIMITS,
    ...options.bodyLimits,
    ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
  });
  const refusals: WebhookRefusals = createWebhookRefusals({
    ...(options.refusals ?? DEFAULT_WEBHOOK_REFUSALS),
    now,
  });
  const addressOf =
    options.addressOf ?? ((request: IncomingMessage) => request.socket.remoteAddress ?? 'unknown');

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
      sendProblem(
        response,
        503,
        'Shutting down',
        'this instance no longer accepts webhooks',
        closeAfter(request),
      );
    },
    (request: Request, response: Response, next: NextFunction) => {
      const receipt = receiptOf(response);
      const receiving = () => receive(request, response);
      (receipt === undefined ? receiving() : receipt.run(receiving)).catch(next);
    },
  );

  /** Answers a refused delivery, counts it against its address, logs a sample, and closes the connection. */
  function refuse(
    response: Response,
    address: string,
    refusal: {
      outcome: WebhookDeliveryOutcome;
      status: number;
      title: string;
      detail: string;
      reason: string;
    },
  ): void {
    reportTo(response)(refusal.outcome);
    const sample = refusals.refused(address);
    if (sample.log) {
      logger.warn('refused a webhook delivery', {
        reason: refusal.reason,
        address,
        // Later refusals from this address in the same window are counted, not logged.
        refusedInPreviousWindow: sample.refusedInPreviousWindow,
      });
    }
    // A refused sender keeps no connection: its next attempt pays for a new one.
    sendProblem(response, refusal.status, refusal.title, refusal.detail, true);
  }

  async function receive(request: Request, response: Response): Promise<void> {
    const outcome = reportTo(response);
    const address = addressOf(request);
    // Everything the headers can tell is checked before a byte of the body is read.
    const checked = checkWebhookHeaders(request.headers, {
      ...(options.toleranceSeconds === undefined ? {} : { toleranceSeconds: options.toleranceSeconds }),
      now: now(),
    });
    // Only a post without a well-formed, current signature meets its address's budget: a signed
    // delivery is always verified, so junk from a shared address (NAT, a proxy) cannot turn the
    // upstream's own deliveries away. Its cost stays bounded by the body's cap and reading slots.
    const blockedFor = checked.ok ? undefined : refusals.blockedFor(address);
    if (blockedFor !== undefined) {
      outcome('throttled');
      response.setHeader('Retry-After', String(blockedFor));
      sendProblem(
        response,
        429,
        'Too many refused deliveries',
        'this address was refused too often; retry later',
        true,
      );
      return;
    }
    if (!checked.ok) {
      refuse(response, address, {
        outcome: checked.reason === 'timestamp_outside_tolerance' ? 'stale' : 'forged',
        status: 401,
        title: 'Invalid webhook signature',
        detail: checked.message,
        reason: checked.reason,
      });
      return;
    }
    const read = await bodyReader.read(request, address);
    if (!read.ok) {
      answerUnread(request, response, address, read.failure);
      return;
    }
    const rawBody = read.body;
    const verification = verifyWebhookSignature(checked, rawBody, options.secrets());
    if (!verification.ok) {
      refuse(response, address, {
        outcome: 'forged',
        status: 401,
        title: 'Invalid webhook signature',
        detail: verification.message,
        reason: verification.reason,
      });
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
      await log.append(event);
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

  /** The answer to a delivery whose body was not read whole. */
  function answerUnread(
    request: Request,
    response: Response,
    address: string,
    failure: BodyReadFailure,
  ): void {
    switch (failure) {
      case 'too_large':
        refuse(response, address, {
          outcome: 'malformed',
          status: 413,
          title: 'Payload too large',
          detail: 'the webhook body exceeds the accepted size',
          reason: 'too_large',
        });
        return;
      case 'too_slow':
        refuse(response, address, {
          outcome: 'too_slow',
          status: 408,
          title: 'Request timeout',
          detail: 'the webhook body did not arrive in time',
          reason: 'too_slow',
        });
        return;
      case 'busy':
        // Not the sender's fault: not counted against it, and the upstream retries.
        reportTo(response)('busy');
        response.setHeader('Retry-After', '1');
        sendProblem(
          response,
          503,
          'Busy',
          'too many webhook bodies are being received; retry later',
          closeAfter(request),
        );
        return;
      case 'aborted':
        reportTo(response)('malformed');
        request.socket.destroy();
        return;
    }
  }

  router.use((error: unknown, _request: Request, response: Response, next: NextFunction) => {
    if (response.headersSent) {
      next(error);
      return;
    }
    // The body is read by webhook-body.ts, which never throws: what reaches here is a failure of ours.
    logger.error('webhook delivery failed', { error: String(error) });
    reportTo(response)('unavailable');
    sendProblem(response, 503, 'Event not received', 'the event could not be received; retry later');
  });

  return {
    router,
    stopAccepting() {
      accepting = false;
    },
    bodies: () => bodyReader.state(),
  };
}

/**
 * Closes the connection once the answer is written when the request's body was not read whole:
 * its unread rest would otherwise be read (and dropped) by Node to keep the connection alive.
 */
function closeAfter(request: IncomingMessage): boolean {
  return !request.complete;
}

function sendProblem(response: Response, status: number, title: string, detail: string, close = false): void {
  if (close) response.setHeader('Connection', 'close');
  response.status(status).type('application/problem+json');
  response.end(JSON.stringify({ type: 'about:blank', title, status, detail }), () => {
    if (close) response.socket?.destroy();
  });
}
