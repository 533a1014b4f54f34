/**
 * Webhook endpoint management (list, get, create, update, archive) and which endpoints receive an
 * event; the signing secret is shown once, by the create response, and read only by the
 * dispatcher.
 */
import type { RouteHandlers } from '../http/types.ts';
import { newId } from '../store/ids.ts';
import { generateWebhookSecret } from '../webhooks/signature.ts';
import type { Environment, WebhookEndpointRecord } from '../store/records.ts';
import type { WebhookTarget } from '../webhooks/types.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { pathParam } from './lookups.ts';
import { presentWebhookEndpoint } from './presenters.ts';
import { notFound, stateConflict } from './problems.ts';

type CreateWebhookEndpointBody = { url: string; events: string[]; description?: string | null };
type UpdateWebhookEndpointBody = Partial<CreateWebhookEndpointBody> & { status?: 'active' | 'disabled' };

/**
 * The endpoints of `environment` that receive events of `eventType`: active ones subscribed to
 * it. The dispatcher signs with the secret; nothing else ever reads it.
 */
export function activeEndpointsFor(
  context: DomainContext,
  environment: Environment,
  eventType: string,
): WebhookTarget[] {
  const targets: WebhookTarget[] = [];
  for (const endpoint of context.env(environment).webhookEndpoints.values()) {
    if (endpoint.status === 'active' && endpoint.events.includes(eventType)) {
      targets.push({ id: endpoint.id, url: endpoint.url, secret: endpoint.secret });
    }
  }
  return targets;
}

/** Handlers of webhook endpoint management: list, get, create (the only response with the secret), update, archive. */
export function webhookEndpointHandlers(context: DomainContext): RouteHandlers {
  function findEndpoint(environment: Environment, webhookId: string): WebhookEndpointRecord {
    const endpoint = context.env(environment).webhookEndpoints.get(webhookId);
    if (!endpoint) throw notFound('webhook endpoint', webhookId);
    return endpoint;
  }

  function rejectIfArchived(endpoint: WebhookEndpointRecord): void {
    if (endpoint.status === 'archived') {
      throw stateConflict(
        'webhook_endpoint_archived',
        `Webhook endpoint ${endpoint.id} is archived; create a new one instead.`,
      );
    }
  }

  return {
    listWebhookEndpoints: (request) =>
      listResponse(
        request,
        context.env(request.environment).webhookEndpoints.values(),
        presentWebhookEndpoint,
      ),

    getWebhookEndpoint: (request) =>
      dataResponse(
        presentWebhookEndpoint(findEndpoint(request.environment, pathParam(request, 'webhookId'))),
      ),

    createWebhookEndpoint: (request) => {
      const body = request.body as CreateWebhookEndpointBody;
      const now = context.stamp();
      const endpoint: WebhookEndpointRecord = {
        id: newId('we'),
        url: body.url,
        events: [...body.events],
        description: body.description ?? null,
        status: 'active',
        createdAt: now,
        updatedAt: now,
        archivedAt: null,
        secret: generateWebhookSecret(),
      };
      context.env(request.environment).webhookEndpoints.set(endpoint.id, endpoint);
      // The one response that shows the secret: the caller must store it now.
      return dataResponse({ ...(presentWebhookEndpoint(endpoint) as object), secret: endpoint.secret }, 201);
    },

    updateWebhookEndpoint: (request) => {
      const endpoint = findEndpoint(request.environment, pathParam(request, 'webhookId'));
      rejectIfArchived(endpoint);
      const body = request.body as UpdateWebhookEndpointBody;
      const next = {
        url: body.url ?? endpoint.url,
        events: body.events ? [...body.events] : endpoint.events,
        description: body.description === undefined ? endpoint.description : body.description,
        status: body.status ?? endpoint.status,
      };
      const changed =
        next.url !== endpoint.url ||
        next.description !== endpoint.description ||
        next.status !== endpoint.status ||
        next.events.join('\n') !== endpoint.events.join('\n');
      if (changed) Object.assign(endpoint, next, { updatedAt: context.stamp() });
      return dataResponse(presentWebhookEndpoint(endpoint));
    },

    archiveWebhookEndpoint: (request) => {
      const endpoint = findEndpoint(request.environment, pathParam(request, 'webhookId'));
      rejectIfArchived(endpoint);
      const now = context.stamp();
      endpoint.status = 'archived';
      endpoint.archivedAt = now;
      endpoint.updatedAt = now;
      return dataResponse(presentWebhookEndpoint(endpoint));
    },
  };
}
