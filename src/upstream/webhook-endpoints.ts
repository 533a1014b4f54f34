/** Webhook endpoints: `/v3/webhooks`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  CreateWebhookEndpointInput,
  MutationResult,
  Page,
  PageParams,
  UpdateWebhookEndpointInput,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
} from './types.ts';

/** Reads one page of webhook endpoints. */
export function listWebhookEndpoints(up: UpstreamContext, page?: PageParams): Promise<Page<WebhookEndpoint>> {
  return readPage<WebhookEndpoint>(up, '/v3/webhooks', page);
}

/** Reads one webhook endpoint (never with its secret). */
export function getWebhookEndpoint(up: UpstreamContext, webhookId: string): Promise<WebhookEndpoint> {
  return readRecord<WebhookEndpoint>(up, restPath`/v3/webhooks/${webhookId}`);
}

/** Creates a webhook endpoint; the result holds its signing secret, shown this once. */
export function createWebhookEndpoint(
  up: UpstreamContext,
  body: CreateWebhookEndpointInput,
  idempotencyKey?: string,
): Promise<MutationResult<WebhookEndpointWithSecret>> {
  return sendEffect<WebhookEndpointWithSecret>(up, 'POST', '/v3/webhooks', body, idempotencyKey);
}

/** Updates a webhook endpoint's url, events, description or status. */
export function updateWebhookEndpoint(
  up: UpstreamContext,
  webhookId: string,
  body: UpdateWebhookEndpointInput,
  idempotencyKey?: string,
): Promise<MutationResult<WebhookEndpoint>> {
  return sendEffect<WebhookEndpoint>(up, 'PATCH', restPath`/v3/webhooks/${webhookId}`, body, idempotencyKey);
}

/** Archives a webhook endpoint. */
export function archiveWebhookEndpoint(
  up: UpstreamContext,
  webhookId: string,
  idempotencyKey?: string,
): Promise<MutationResult<WebhookEndpoint>> {
  return sendEffect<WebhookEndpoint>(
    up,
    'DELETE',
    restPath`/v3/webhooks/${webhookId}`,
    undefined,
    idempotencyKey,
  );
}
