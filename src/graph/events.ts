/**
 * Resolvers of `events.graphql`: live subscriptions over every live transport. Each record type of
 * the catalogue (`src/records.ts`) with events has its `<field>Changed` subscription, named by its
 * payload field, and its `<Field>ChangedEvent` payload; `events` follows them all. The feeds of
 * `resource-feeds.ts` filter the events and replay what changed since `since`; `event-resources.ts`
 * reads each resource as it is now with a fresh per-event context, so nested selections resolve as
 * in a query.
 */
import { RECORD_ENTRIES } from '../records.ts';
import { resourceOf, typenameOf } from './event-resources.ts';
import { payloadOf, subscribeToChanges, subscribeToEvents } from './resource-feeds.ts';
import type { GraphContext } from './context.ts';
import type { Resolvers } from '../generated/graphql.ts';

/** The arguments of every `…Changed` field; `<field>Id` (`accountId`) where one resource can be followed. */
type ChangedArgs = Record<string, string | null | undefined> & { customerId: string };

/** The `…Changed` subscription and its payload type's resource field, per record type with events. */
const CHANGE_RESOLVERS = RECORD_ENTRIES.flatMap(([, { events, resourceType }]) => {
  if (events === undefined) return [];
  const { field } = events;
  const subscription = {
    subscribe: (_root: unknown, args: ChangedArgs, context: GraphContext) =>
      subscribeToChanges(context, resourceType, {
        customerId: args.customerId,
        resourceId: args[`${field}Id`],
        since: args['since'],
        after: args['after'],
      }),
    resolve: payloadOf,
  };
  const payloadType = {
    [field]: (parent: Record<string, unknown>) => resourceOf(parent, parent[field] ?? null),
  };
  return [
    {
      field: `${field}Changed`,
      subscription,
      payloadTypeName: `${capitalized(field)}ChangedEvent`,
      payloadType,
    },
  ];
});

function capitalized(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}

export const eventResolvers = {
  Subscription: {
    ...Object.fromEntries(CHANGE_RESOLVERS.map(({ field, subscription }) => [field, subscription])),
    events: {
      subscribe: (_root, { customerId, types, since, after }, context) =>
        subscribeToEvents(context, { customerId, types, since, after }),
      resolve: payloadOf,
    },
  },
  ...Object.fromEntries(
    CHANGE_RESOLVERS.map(({ payloadTypeName, payloadType }) => [payloadTypeName, payloadType]),
  ),
  PlatformEvent: { resource: (parent) => resourceOf(parent, parent.resource ?? null) },
  EventResource: { __resolveType: typenameOf },
} as Resolvers;
