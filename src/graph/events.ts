/**
 * Resolvers of `events.graphql`: live subscriptions over graphql-ws. Each field names the resource
 * type it follows and passes its arguments on; the feeds of `resource-feeds.ts` filter
 * the events, replay what changed since `since`, and read each resource as it is now with a fresh
 * per-event context, so nested selections resolve as in a query.
 */
import {
  payloadOf,
  resourceOf,
  subscribeToChanges,
  subscribeToEvents,
  typenameOf,
} from './resource-feeds.ts';
import type { Resolvers } from '../generated/graphql.ts';

export const eventResolvers: Resolvers = {
  Subscription: {
    customerChanged: {
      subscribe: (_root, { customerId, since, after }, context) =>
        subscribeToChanges(context, 'customer', { customerId, since, after }),
      resolve: payloadOf,
    },
    accountChanged: {
      subscribe: (_root, { customerId, accountId, since, after }, context) =>
        subscribeToChanges(context, 'account', { customerId, resourceId: accountId, since, after }),
      resolve: payloadOf,
    },
    capabilityChanged: {
      subscribe: (_root, { customerId, since, after }, context) =>
        subscribeToChanges(context, 'capability', { customerId, since, after }),
      resolve: payloadOf,
    },
    relatedPartyChanged: {
      subscribe: (_root, { customerId, since, after }, context) =>
        subscribeToChanges(context, 'related_party', { customerId, since, after }),
      resolve: payloadOf,
    },
    documentChanged: {
      subscribe: (_root, { customerId, after }, context) =>
        subscribeToChanges(context, 'document', { customerId, after }),
      resolve: payloadOf,
    },
    transferChanged: {
      subscribe: (_root, { customerId, since, after }, context) =>
        subscribeToChanges(context, 'transfer', { customerId, since, after }),
      resolve: payloadOf,
    },
    ruleChanged: {
      subscribe: (_root, { customerId, since, after }, context) =>
        subscribeToChanges(context, 'rule', { customerId, since, after }),
      resolve: payloadOf,
    },
    events: {
      subscribe: (_root, { customerId, types, since, after }, context) =>
        subscribeToEvents(context, { customerId, types, since, after }),
      resolve: payloadOf,
    },
  },
  CustomerChangedEvent: { customer: (parent) => resourceOf(parent, parent.customer ?? null) },
  AccountChangedEvent: { account: (parent) => resourceOf(parent, parent.account ?? null) },
  CapabilityChangedEvent: { capability: (parent) => resourceOf(parent, parent.capability ?? null) },
  RelatedPartyChangedEvent: { relatedParty: (parent) => resourceOf(parent, parent.relatedParty ?? null) },
  DocumentChangedEvent: { document: (parent) => resourceOf(parent, parent.document ?? null) },
  TransferChangedEvent: { transfer: (parent) => resourceOf(parent, parent.transfer ?? null) },
  RuleChangedEvent: { rule: (parent) => resourceOf(parent, parent.rule ?? null) },
  PlatformEvent: { resource: (parent) => resourceOf(parent, parent.resource ?? null) },
  EventResource: { __resolveType: typenameOf },
};
