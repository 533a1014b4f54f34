/**
 * Registers (or reuses) the facade's webhook endpoint with the upstream at start, so that the
 * upstream knows where to deliver events and the route knows which secrets sign them.
 */
import type { Logger } from '../../logger.ts';

/** A webhook endpoint as the upstream lists it (the secret is never part of it). */
export interface WebhookEndpointRecord {
  id: string;
  url: string;
  events: readonly string[];
  /** `active`, `disabled` or `archived` (an open set). */
  status: string;
}

/** The upstream's webhook endpoint operations, with the facade's own key. */
export interface WebhookEndpointsApi {
  /** Every endpoint of the key's environment, all pages. */
  list(): Promise<WebhookEndpointRecord[]>;
  /** Creates an endpoint; the answer is the only time the upstream shows its secret. */
  create(input: { url: string; events: readonly string[]; description: string }): Promise<{
    endpoint: WebhookEndpointRecord;
    secret: string;
  }>;
  update(
    id: string,
    patch: { events?: readonly string[]; status?: 'active' },
  ): Promise<WebhookEndpointRecord>;
  archive(id: string): Promise<void>;
}

/** Options of {@link registerWebhookEndpoint}. */
export interface RegisterWebhookEndpointOptions {
  api: WebhookEndpointsApi;
  /** The URL the upstream must call. */
  url: string;
  /** Kinds the endpoint must receive. */
  events: readonly string[];
  /** `WEBHOOK_SECRETS`: the secret(s) of an endpoint registered before, if the operator kept them. */
  configuredSecrets: readonly string[];
  logger: Logger;
}

/** What {@link registerWebhookEndpoint} did, and the secrets deliveries will be signed with. */
export interface WebhookRegistration {
  endpointId: string;
  action: 'reused' | 'created';
  /** Endpoints at the same URL archived because their secret was unknown. */
  archivedEndpointIds: string[];
  /** The secrets to verify with: the new endpoint's, or the configured ones. Never log them. */
  secrets: string[];
}

const WEBHOOK_ENDPOINT_DESCRIPTION = 'GraphQL facade: live subscriptions';

/**
 * Makes sure the upstream delivers the needed event kinds to `url`, with a secret the facade holds.
 *
 * - An endpoint already registered at `url`, with `configuredSecrets` set: reused, and updated when
 *   it misses a kind or is disabled. The configured secrets are trusted to be its own, since the
 *   upstream shows a secret only at creation.
 * - Otherwise a new endpoint is created, and its secret (from the creation answer) is used. Any
 *   other endpoint at `url` is archived: deliveries signed with a secret the facade does not hold
 *   would only be refused, and retried, for nothing.
 *
 * Several replicas behind one URL must share `WEBHOOK_SECRETS`; otherwise each would replace the
 * others' endpoint at start. Logs ids and URLs only, never a secret.
 */
export async function registerWebhookEndpoint(
  options: RegisterWebhookEndpointOptions,
): Promise<WebhookRegistration> {
  const { api, url, events, configuredSecrets, logger } = options;
  const atUrl = (await api.list()).filter(
    (endpoint) => endpoint.url === url && endpoint.status !== 'archived',
  );

  const reusable = atUrl.find((endpoint) => endpoint.status === 'active') ?? atUrl[0];
  if (reusable !== undefined && configuredSecrets.length > 0) {
    const missing = events.filter((kind) => !reusable.events.includes(kind));
    if (missing.length > 0 || reusable.status !== 'active') {
      await api.update(reusable.id, {
        events: [...new Set([...reusable.events, ...events])],
        status: 'active',
      });
    }
    logger.info('reusing the webhook endpoint registered before', {
      endpointId: reusable.id,
      url,
      addedEvents: missing,
    });
    return {
      endpointId: reusable.id,
      action: 'reused',
      archivedEndpointIds: [],
      secrets: [...configuredSecrets],
    };
  }

  const { endpoint, secret } = await api.create({ url, events, description: WEBHOOK_ENDPOINT_DESCRIPTION });
  const archivedEndpointIds: string[] = [];
  for (const stale of atUrl) {
    await api.archive(stale.id);
    archivedEndpointIds.push(stale.id);
  }
  logger.info('registered a webhook endpoint with the upstream', {
    endpointId: endpoint.id,
    url,
    archivedEndpointIds,
  });
  return {
    endpointId: endpoint.id,
    action: 'created',
    archivedEndpointIds,
    secrets: [secret, ...configuredSecrets],
  };
}
