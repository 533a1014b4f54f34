/**
 * Delivery of signed webhooks to the registered endpoints: one delivery per event and endpoint,
 * retried with growing delays up to a number of attempts.
 */
import { Agent, request } from 'undici';
import { signWebhook } from './signature.ts';
import type {
  DeliveryAttempt,
  DeliveryOutcome,
  WebhookDispatcher,
  WebhookDispatcherOptions,
  WebhookEventEnvelope,
  WebhookTarget,
} from './types.ts';

const USER_AGENT = 'platform-api-v3-emulator-webhooks/1.0';
const RECORDED_ATTEMPTS_LIMIT = 1000;
// Receivers' answers are not read; draining a little lets the connection be reused,
// and the cap stops a chatty receiver from costing memory.
const RESPONSE_DRAIN_LIMIT_BYTES = 64 * 1024;

/** One event on its way to one endpoint, across all its attempts. */
type Delivery = {
  readonly endpointId: string;
  readonly url: string;
  readonly secret: string;
  readonly eventId: string;
  readonly eventType: string;
  /** Serialised once, so every retry carries the same bytes and the same signature content. */
  readonly body: string;
  attempts: number;
  retryTimer: NodeJS.Timeout | undefined;
  inFlight: AbortController | undefined;
};

type AttemptResult = { status?: number; error?: string };

class AttemptTimeoutError extends Error {
  override name = 'AttemptTimeoutError';
}

/**
 * Creates the engine that delivers signed webhooks, following the "Events and
 * webhooks" section of `docs/upstream-assumptions.md`: Standard Webhooks headers,
 * success on any 2xx within `attemptTimeoutMs`, otherwise retries after
 * `retryBaseMs`, `2 × retryBaseMs`, `4 × retryBaseMs`, ... for at most
 * `maxAttempts` attempts. Redirects are not followed (a 3xx is a failure).
 *
 * @throws RangeError when an option is out of range (only here; `deliver` never throws).
 */
export function createWebhookDispatcher(options: WebhookDispatcherOptions = {}): WebhookDispatcher {
  const retryBaseMs = requireNumber('retryBaseMs', options.retryBaseMs ?? 1000, 0);
  const maxAttempts = requireInteger('maxAttempts', options.maxAttempts ?? 8, 1);
  const attemptTimeoutMs = requireNumber('attemptTimeoutMs', options.attemptTimeoutMs ?? 5000, 1);
  const now = options.now ?? Date.now;

  // A private connection pool, so close() can tear down exactly this dispatcher's sockets.
  const agent = new Agent({ connect: { timeout: attemptTimeoutMs } });
  const recorded: DeliveryAttempt[] = [];
  const unfinished = new Set<Delivery>();
  const attemptsRunning = new Set<Promise<void>>();
  let closing: Promise<void> | undefined;

  function record(delivery: Delivery, at: number, outcome: DeliveryOutcome, result: AttemptResult): void {
    recorded.push({
      endpointId: delivery.endpointId,
      eventId: delivery.eventId,
      eventType: delivery.eventType,
      attempt: delivery.attempts,
      ...(result.status === undefined ? {} : { status: result.status }),
      ...(result.error === undefined ? {} : { error: result.error }),
      at: new Date(at).toISOString(),
      outcome,
    });
    if (recorded.length > RECORDED_ATTEMPTS_LIMIT)
      recorded.splice(0, recorded.length - RECORDED_ATTEMPTS_LIMIT);
  }

  function startAttempt(delivery: Delivery): void {
    delivery.retryTimer = undefined;
    delivery.attempts += 1;
    const running = runAttempt(delivery).finally(() => attemptsRunning.delete(running));
    attemptsRunning.add(running);
  }

  async function runAttempt(delivery: Delivery): Promise<void> {
    const startedAt = now();
    const result = await post(delivery, Math.floor(startedAt / 1000));

    if (result.status !== undefined && result.status >= 200 && result.status < 300) {
      unfinished.delete(delivery);
      record(delivery, startedAt, 'delivered', result);
    } else if (closing !== undefined) {
      unfinished.delete(delivery);
      record(delivery, startedAt, 'gave_up', { ...result, error: 'dispatcher closed' });
    } else if (delivery.attempts >= maxAttempts) {
      unfinished.delete(delivery);
      record(delivery, startedAt, 'gave_up', result);
    } else {
      record(delivery, startedAt, 'failed', result);
      const delayMs = retryBaseMs * 2 ** (delivery.attempts - 1);
      delivery.retryTimer = setTimeout(() => startAttempt(delivery), delayMs);
      // A waiting retry alone must not keep a process alive (tests, scripts);
      // a running emulator stays up through its listening server anyway.
      delivery.retryTimer.unref();
    }
  }

  async function post(delivery: Delivery, timestamp: number): Promise<AttemptResult> {
    const controller = new AbortController();
    delivery.inFlight = controller;
    const timeout = setTimeout(
      () => controller.abort(new AttemptTimeoutError(`no response within ${attemptTimeoutMs} ms`)),
      attemptTimeoutMs,
    );
    try {
      const response = await request(delivery.url, {
        dispatcher: agent,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'webhook-id': delivery.eventId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook({
            secret: delivery.secret,
            id: delivery.eventId,
            timestamp,
            body: delivery.body,
          }),
        },
        body: delivery.body,
        signal: controller.signal,
      });
      response.body
        .dump({ limit: RESPONSE_DRAIN_LIMIT_BYTES, signal: AbortSignal.timeout(attemptTimeoutMs) })
        .catch(() => undefined);
      return { status: response.statusCode };
    } catch (error) {
      return { error: describeFailure(error, controller.signal) };
    } finally {
      clearTimeout(timeout);
      delivery.inFlight = undefined;
    }
  }

  return {
    deliver(endpoint: WebhookTarget, event: WebhookEventEnvelope): void {
      if (closing !== undefined) return;
      let delivery: Delivery;
      try {
        delivery = {
          endpointId: endpoint.id,
          url: endpoint.url,
          secret: endpoint.secret,
          eventId: event.id,
          eventType: event.type,
          body: JSON.stringify(event),
          attempts: 0,
          retryTimer: undefined,
          inFlight: undefined,
        };
      } catch (error) {
        recorded.push({
          endpointId: endpoint.id,
          eventId: event.id,
          eventType: event.type,
          attempt: 0,
          error: `event could not be serialised: ${errorMessage(error)}`,
          at: new Date(now()).toISOString(),
          outcome: 'gave_up',
        });
        return;
      }

      const refusal = checkDeliverable(delivery);
      if (refusal !== undefined) {
        // Retrying cannot fix a bad URL or secret; record it rather than send 8 doomed requests.
        record(delivery, now(), 'gave_up', { error: refusal });
        return;
      }
      unfinished.add(delivery);
      startAttempt(delivery);
    },

    deliveries(): DeliveryAttempt[] {
      return recorded.map((attempt) => ({ ...attempt }));
    },

    pending(): number {
      return unfinished.size;
    },

    close(): Promise<void> {
      closing ??= (async () => {
        for (const delivery of unfinished) {
          clearTimeout(delivery.retryTimer);
          delivery.inFlight?.abort(new Error('dispatcher closed'));
        }
        await Promise.allSettled([...attemptsRunning]);
        unfinished.clear();
        await agent.destroy();
      })();
      return closing;
    },
  };
}

/** Why `delivery` cannot be attempted at all, or undefined when it can. Never mentions the secret. */
function checkDeliverable(delivery: Delivery): string | undefined {
  let url: URL;
  try {
    url = new URL(delivery.url);
  } catch {
    return 'endpoint url is not an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `endpoint url must be http: or https:, got ${url.protocol}`;
  }
  try {
    signWebhook({ secret: delivery.secret, id: delivery.eventId, timestamp: 0, body: '' });
  } catch (error) {
    return errorMessage(error);
  }
  return undefined;
}

function describeFailure(error: unknown, signal: AbortSignal): string {
  if (signal.aborted) return errorMessage(signal.reason);
  const code = (error as { code?: unknown } | null)?.code;
  const message = errorMessage(error);
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function requireNumber(name: string, value: number, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw new RangeError(`${name} must be a finite number >= ${min}, got ${String(value)}`);
  }
  return value;
}

function requireInteger(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}
