/**
 * Public types of the emulator's webhook delivery engine. The store builds
 * {@link WebhookEventEnvelope}s; the HTTP core exposes {@link DeliveryAttempt}s
 * at `GET /_emulator/webhook-deliveries`.
 */

/**
 * The JSON body of every webhook, as described in `docs/upstream-assumptions.md`
 * ("Events and webhooks"). It is serialised once per delivery, so every retry
 * carries the same bytes.
 */
export type WebhookEventEnvelope = {
  /** Event id (`evt_...`); also sent as the `webhook-id` header, the same on every retry. */
  id: string;
  /** Event kind, e.g. `account.updated`. */
  type: string;
  /** RFC 3339 timestamp of the change. */
  occurredAt: string;
  /** The environment whose store changed; only that environment's endpoints receive it. */
  environment: 'sandbox' | 'live';
  data: {
    /** The customer the resource belongs to, or null for resources outside a customer. */
    customerId: string | null;
    /** E.g. `account`, `capability`, `related_party`. */
    resourceType: string;
    resourceId: string;
    /** The record as a read returns it after the change. */
    object: unknown;
  };
};

/** Where one delivery goes. The secret is used only to sign; it is never recorded or logged. */
export type WebhookTarget = {
  /** The webhook endpoint's id (`we_...`). */
  id: string;
  /** An absolute `http:` or `https:` URL. */
  url: string;
  /** The endpoint's signing secret, `whsec_<base64>`. */
  secret: string;
};

/**
 * - `delivered`: the receiver answered 2xx within the attempt timeout; no more attempts.
 * - `failed`: the attempt failed and another one is scheduled.
 * - `gave_up`: the attempt failed and no other will follow (the last allowed
 *   attempt, an unusable URL or secret, or the dispatcher closed mid-attempt).
 */
export type DeliveryOutcome = 'delivered' | 'failed' | 'gave_up';

/** The record of one HTTP attempt (or of a delivery refused before any request). */
export type DeliveryAttempt = {
  endpointId: string;
  eventId: string;
  eventType: string;
  /** 1 for the first attempt, counting up on each retry; 0 when the delivery was refused before any request. */
  attempt: number;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  /** Why the attempt failed without a status (timeout, connection refused, ...). */
  error?: string;
  /** RFC 3339 timestamp of the attempt's start. */
  at: string;
  outcome: DeliveryOutcome;
};

/** Tuning of {@link WebhookDispatcher}; the defaults are the upstream's documented behaviour. */
export type WebhookDispatcherOptions = {
  /** Delay before the first retry; each later retry waits twice as long as the one before. Default 1000 ms. */
  retryBaseMs?: number;
  /** Attempts per delivery, the first included (at least 1). Default 8. */
  maxAttempts?: number;
  /** Time for the receiver to answer with a status before the attempt counts as failed. Default 5000 ms. */
  attemptTimeoutMs?: number;
  /** Clock in milliseconds since the epoch, for `webhook-timestamp` and `at`. Default `Date.now`. */
  now?: () => number;
};

/** Delivers signed webhooks at least once, in the background. */
export type WebhookDispatcher = {
  /**
   * Starts delivering `event` to `endpoint` and returns at once. Never throws:
   * every problem (bad URL, unusable secret, receiver down) ends up in
   * {@link WebhookDispatcher.deliveries}. Ignored after `close()`.
   */
  deliver(endpoint: WebhookTarget, event: WebhookEventEnvelope): void;
  /** Recorded attempts, oldest first (the most recent 1000). A copy; safe to keep. */
  deliveries(): DeliveryAttempt[];
  /** Deliveries not yet finished: in flight or waiting for a retry. */
  pending(): number;
  /** Cancels scheduled retries, aborts requests in flight and releases connections. Idempotent. */
  close(): Promise<void>;
};
