/**
 * The upstream's webhook endpoint calls as registration needs them: `src/upstream/` speaks REST,
 * registration speaks of endpoints, and this is where one is put in terms of the other.
 */
import { readAllPages } from '../../upstream/all-pages.ts';
import type { UpstreamContext } from '../../upstream/context.ts';
import type { WebhookEventType } from '../../upstream/types.ts';
import {
  archiveWebhookEndpoint,
  createWebhookEndpoint,
  listWebhookEndpoints,
  updateWebhookEndpoint,
} from '../../upstream/webhook-endpoints.ts';
import type { WebhookEndpointsApi } from './register-webhook-endpoint.ts';

/** Pages read at most when listing endpoints; far more than any account registers. */
const MAX_PAGES = 50;

/**
 * {@link WebhookEndpointsApi} over the upstream layer. `upstream` gives a fresh context (the
 * facade's own key, a new request id and retry budget) for each call.
 */
export function createUpstreamWebhookEndpointsApi(upstream: () => UpstreamContext): WebhookEndpointsApi {
  return {
    // More endpoints than this fails the registration (and the start) rather than missing one.
    list: () =>
      readAllPages((page) => listWebhookEndpoints(upstream(), page), { maxPages: MAX_PAGES, pageSize: 100 }),
    async create(input) {
      const { data } = await createWebhookEndpoint(upstream(), {
        url: input.url,
        events: input.events as WebhookEventType[],
        description: input.description,
      });
      const { secret, ...endpoint } = data;
      return { endpoint, secret };
    },
    async update(id, patch) {
      const { data } = await updateWebhookEndpoint(upstream(), id, {
        ...(patch.events ? { events: patch.events as WebhookEventType[] } : {}),
        ...(patch.status ? { status: patch.status } : {}),
      });
      return data;
    },
    async archive(id) {
      await archiveWebhookEndpoint(upstream(), id);
    },
  };
}
