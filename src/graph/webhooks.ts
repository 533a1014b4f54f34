/** Resolvers of `webhooks.graphql`: webhook endpoint management. */
import type { Resolvers } from '../generated/graphql.ts';
import { written } from '../loaders/written.ts';
import {
  archiveWebhookEndpoint,
  createWebhookEndpoint,
  updateWebhookEndpoint,
} from '../upstream/webhook-endpoints.ts';
import type {
  CreateWebhookEndpointInput,
  MutationResult,
  UpdateWebhookEndpointInput,
  WebhookEndpoint,
} from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import { splitInput, toPayload } from './mutation-payload.ts';
import { recordByArgs, recordReference, topLevelConnection } from './resolver-shapes.ts';

/** Keeps the operation's loaders true to an endpoint the upstream just changed. */
function remember(result: MutationResult<WebhookEndpoint>, { loaders }: GraphContext) {
  written.record(loaders, 'WebhookEndpoint', { id: result.data.id }, result.data);
  return toPayload('webhookEndpoint', result);
}

export const webhookResolvers: Resolvers = {
  Query: {
    webhookEndpoint: recordByArgs('WebhookEndpoint'),
    webhookEndpoints: topLevelConnection((loaders) => loaders.list.WebhookEndpoint),
  },
  Mutation: {
    createWebhookEndpoint: async (_parent, { input }, context) => {
      const { body, idempotencyKey } = splitInput(input);
      // `events` are Strings in the schema (an open set); the upstream refuses unknown kinds at `/events/<i>`.
      const result = await createWebhookEndpoint(
        context.upstream,
        body as CreateWebhookEndpointInput,
        idempotencyKey,
      );
      // The signing secret leaves the facade in this payload only: the endpoint record (which the
      // loaders cache and every other field reads) never holds it, and nothing logs a payload.
      const { secret, ...endpoint } = result.data;
      return { ...remember({ ...result, data: endpoint }, context), signingSecret: secret };
    },
    updateWebhookEndpoint: async (_parent, { input }, context) => {
      const { body, idempotencyKey } = splitInput(input, ['webhookEndpointId']);
      // A null description clears it, so it is sent; every other null means "keep".
      const changes = input.description === null ? { ...body, description: null } : body;
      const result = await updateWebhookEndpoint(
        context.upstream,
        input.webhookEndpointId,
        changes as UpdateWebhookEndpointInput,
        idempotencyKey,
      );
      return remember(result, context);
    },
    archiveWebhookEndpoint: async (_parent, { input }, context) =>
      remember(
        await archiveWebhookEndpoint(
          context.upstream,
          input.webhookEndpointId,
          splitInput(input).idempotencyKey,
        ),
        context,
      ),
  },
  WebhookEndpoint: {
    __resolveReference: recordReference('WebhookEndpoint'),
  },
};
