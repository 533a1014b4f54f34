/**
 * The webhook route's options as an event pipeline configures them (events-runtime.ts): its limits
 * from the configuration, and what it tells the rest of the facade (metrics, the response cache, the
 * lifecycle hooks, traces) of each delivery.
 */
import type { LifecycleEmitter } from '../../observability/lifecycle.ts';
import type { UpstreamClient } from '../../upstream/client.ts';
import { webhookBodyLimits, type EventsConfig } from '../config.ts';
import type { EventTracer } from '../event-tracing.ts';
import type { WebhookDeliveryOutcome } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { invalidateForEventAndWait } from '../invalidation.ts';
import type { DeadLetter } from './dead-letters.ts';
import type { WebhookRouterOptions } from './webhook-route.ts';

/** What of an event pipeline's options the webhook route's are made from (`EventsRuntimeOptions`). */
export interface WebhookRouteWiring {
  config: EventsConfig;
  environment?: PlatformEnvironment;
  addressOf?: WebhookRouterOptions['addressOf'];
  onWebhookDelivery?: (outcome: WebhookDeliveryOutcome, environment: PlatformEnvironment | undefined) => void;
  onDeadLetter?: (letter: DeadLetter) => void;
  lifecycle?: LifecycleEmitter;
  tracer?: EventTracer;
}

/** The webhook route's options: the configured limits, and what it tells the rest of the facade. */
export function webhookRouterOptions(
  options: WebhookRouteWiring,
  parts: Pick<WebhookRouterOptions, 'secrets' | 'dedup' | 'log' | 'publisher' | 'logger' | 'deadLetters'> & {
    cache: UpstreamClient['cache'];
  },
): WebhookRouterOptions {
  const { config, lifecycle, tracer } = options;
  const { secrets, dedup, log, publisher, logger, cache, deadLetters } = parts;
  return {
    secrets,
    dedup,
    log,
    ...(publisher === undefined ? {} : { publisher }),
    logger,
    deadLetters,
    ...(options.onDeadLetter === undefined ? {} : { onDeadLetter: options.onDeadLetter }),
    ...(options.environment === undefined ? {} : { environment: options.environment }),
    maxBodyBytes: config.webhooks.maxBodyBytes,
    bodyLimits: webhookBodyLimits(config.webhooks),
    refusals: { limit: config.webhooks.maxRefusalsPerMinute, windowMs: 60_000 },
    ...(options.addressOf === undefined ? {} : { addressOf: options.addressOf }),
    toleranceSeconds: config.webhooks.toleranceSeconds,
    ...(options.onWebhookDelivery === undefined
      ? {}
      : {
          onDelivery: (outcome: WebhookDeliveryOutcome) =>
            options.onWebhookDelivery?.(outcome, options.environment),
        }),
    // The receiving replica drops the stale answers before acknowledging, its own and the
    // gateways': a read that starts after the acknowledgement asks the upstream.
    ...(cache === undefined ? {} : { beforePublish: (event) => invalidateForEventAndWait(cache, event) }),
    ...(lifecycle === undefined
      ? {}
      : {
          onPublished: (event) => {
            if (!lifecycle.observed('webhookEventPublished')) return;
            lifecycle.emit('webhookEventPublished', {
              eventId: event.id,
              type: event.type,
              environment: event.environment,
              customerId: event.data.customerId,
            });
          },
        }),
    ...(tracer === undefined ? {} : { tracer }),
  };
}
