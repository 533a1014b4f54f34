/**
 * Resolvers of `events.graphql`: live subscriptions over graphql-ws. Each subscription listens to
 * its environment's events through a bounded queue (src/events/), keeps what it asked for, and
 * reads the resource as it is now with a fresh per-event context, so nested selections resolve as
 * in a query. A read the upstream refuses (401, 403, 404) drops the event for that subscriber.
 */
import { GraphQLError } from 'graphql';
import { toGraphQLError } from '../errors/to-graphql-error.ts';
import { liveRuntimeOf } from '../events/live-context.ts';
import {
  DROP,
  openLiveStream,
  type ChangeFeed,
  type LiveDelivery,
  type ReplayedChange,
} from '../events/live-stream.ts';
import type { PlatformEvent } from '../events/platform-event.ts';
import type { Resolvers } from '../generated/graphql.ts';
import { UpstreamProblemError } from '../upstream/errors.ts';
import type { Page, PageParams } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';

/** Pages of 100 read at most to replay; more changes than that ask for a later `since`. */
const MAX_REPLAY_PAGES = 20;
const REPLAY_PAGE_SIZE = 100;

/** How the resource of an event is read now, per upstream `resourceType`. */
const READS: Record<string, (context: GraphContext, customerId: string, id: string) => Promise<unknown>> = {
  customer: (context, _customerId, id) => context.loaders.customer.load(id),
  account: (context, customerId, id) => context.loaders.account.load({ customerId, id }),
  capability: (context, customerId, id) => context.loaders.capability.load({ customerId, id }),
  related_party: (context, customerId, id) => context.loaders.relatedParty.load({ customerId, id }),
  document: (context, customerId, id) => context.loaders.document.load({ customerId, id }),
  transfer: (context, customerId, id) => context.loaders.transfer.load({ customerId, id }),
  rule: (context, customerId, id) => context.loaders.rule.load({ customerId, id }),
};

/** GraphQL type of a resource, by the prefix of its id (docs/upstream-assumptions.md, "Ids"). */
const TYPE_BY_ID_PREFIX: Record<
  string,
  'Customer' | 'Account' | 'Capability' | 'RelatedParty' | 'CustomerDocument' | 'Transfer' | 'Rule'
> = {
  cus: 'Customer',
  acc: 'Account',
  cap: 'Capability',
  rp: 'RelatedParty',
  doc: 'CustomerDocument',
  trf: 'Transfer',
  rul: 'Rule',
};

/** A resource read that failed for a reason other than a refusal: shown as an error on the resource field. */
const resourceErrors = new WeakMap<object, unknown>();

type Hydrated = { resource: unknown; error?: unknown } | typeof DROP;

/** Whether the upstream refused the subscriber this read (the event is then not theirs to see). */
function isRefusal(error: unknown): boolean {
  return error instanceof UpstreamProblemError && [401, 403, 404].includes(error.status);
}

/**
 * Reads `event`'s resource as it is now with the subscriber's `context`. An archived related party
 * or document answers 404 to every read: when the subscriber may read its customer, the record the
 * event carried stands in for it.
 */
async function readResource(event: PlatformEvent, context: GraphContext): Promise<Hydrated> {
  const { customerId, resourceType, resourceId, object } = event.data;
  const read = READS[resourceType];
  // Without a customer a customer-scoped resource cannot be read, so access cannot be checked.
  if (read === undefined || (customerId === null && resourceType !== 'customer')) {
    if (customerId === null) return DROP;
    return checkCustomer(context, customerId, null);
  }
  try {
    return { resource: await read(context, customerId ?? '', resourceId) };
  } catch (error) {
    if (!isRefusal(error)) return { resource: null, error };
    // Only where archiving is why the read fails, and only a record of the event's own customer: a
    // 404 may also be the subscriber's scope refusing another customer's resource.
    const gone =
      (error as UpstreamProblemError).status === 404 &&
      customerId !== null &&
      UNREADABLE_ONCE_ARCHIVED.has(resourceType) &&
      isRecord(object) &&
      (object.customerId === undefined || object.customerId === customerId);
    return gone ? checkCustomer(context, customerId, { ...object, customerId }) : DROP;
  }
}

/** Resource types whose archived records answer 404 to every read (docs/events.md). */
const UNREADABLE_ONCE_ARCHIVED = new Set(['related_party', 'document']);

async function checkCustomer(
  context: GraphContext,
  customerId: string,
  resource: unknown,
): Promise<Hydrated> {
  try {
    await context.loaders.customer.load(customerId);
    return { resource };
  } catch (error) {
    return isRefusal(error) ? DROP : { resource: null, error };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The fields every change payload has. */
interface ChangeHeader {
  eventId: string;
  type: string;
  occurredAt: string;
  replayed: boolean;
  customerId: string;
}

/** A record as a list returns it, with what a replay needs. */
interface ListedRecord {
  id: string;
  createdAt: string;
  updatedAt: string;
}

/** One subscription over one resource type of one customer. */
interface ResourceFeedSpec<R extends ListedRecord> {
  resourceType: string;
  customerId: string;
  resourceId?: string | null;
  since?: string | null;
  /** The payload of a change from its header and the resource (null when it could not be read). */
  payload(header: ChangeHeader, resourceId: string, resource: unknown): object;
  /** Reads one page of the list with the updated-since filter; absent for resources that cannot replay. */
  list?: (context: GraphContext, page: PageParams) => Promise<Page<R>>;
  /** The event kind a replayed record stands for. */
  replayedType?: (record: R) => string;
}

function resourceFeed<R extends ListedRecord>(spec: ResourceFeedSpec<R>): ChangeFeed<object> {
  const { list, replayedType, since } = spec;
  return {
    accept: (event) =>
      event.data.resourceType === spec.resourceType &&
      event.data.customerId === spec.customerId &&
      (spec.resourceId == null || event.data.resourceId === spec.resourceId),

    async toPayload(event, context) {
      const hydrated = await readResource(event, context);
      if (hydrated === DROP) return DROP;
      const header = {
        eventId: event.id,
        type: event.type,
        occurredAt: event.occurredAt,
        replayed: false,
        customerId: spec.customerId,
      };
      const payload = spec.payload(header, event.data.resourceId, hydrated.resource ?? null);
      if (hydrated.error !== undefined) resourceErrors.set(payload, hydrated.error);
      return payload;
    },

    ...(since != null && list !== undefined && replayedType !== undefined
      ? {
          replay: async (context: GraphContext): Promise<ReplayedChange<object>[]> => {
            const records = await readAllSince(context, since, list);
            return records
              .filter((record) => spec.resourceId == null || record.id === spec.resourceId)
              .map((record) => ({
                resourceId: record.id,
                updatedAt: record.updatedAt,
                payload: spec.payload(
                  {
                    eventId: `replay:${record.id}:${record.updatedAt}`,
                    type: replayedType(record),
                    occurredAt: record.updatedAt,
                    replayed: true,
                    customerId: spec.customerId,
                  },
                  record.id,
                  record,
                ),
              }));
          },
        }
      : {}),
  };
}

async function readAllSince<R>(
  context: GraphContext,
  since: string,
  list: (context: GraphContext, page: PageParams) => Promise<Page<R>>,
): Promise<R[]> {
  const records: R[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_REPLAY_PAGES; page += 1) {
    const result = await list(context, {
      limit: REPLAY_PAGE_SIZE,
      updatedSince: since,
      ...(cursor ? { cursor } : {}),
    });
    records.push(...result.data);
    if (!result.hasMore || result.nextCursor === null) return records;
    cursor = result.nextCursor;
  }
  throw new GraphQLError(
    `More than ${MAX_REPLAY_PAGES * REPLAY_PAGE_SIZE} changes since ${since}: read the list instead, then subscribe with a later "since".`,
    { extensions: { code: 'BAD_USER_INPUT', argumentName: 'since' } },
  );
}

/** The payload of a delivery, or the error that ends an overflowed subscription. */
function payloadOf<T>(delivery: unknown): T {
  const item = delivery as LiveDelivery | undefined;
  // The stream's payloads are built by this file's feeds for the field being resolved.
  if (item?.kind === 'change') return item.payload as T;
  if (item?.kind === 'overflow') {
    throw new GraphQLError(
      `This subscription fell more than ${item.limit} events behind and was ended; ${item.dropped} were not delivered. ` +
        'Subscribe again with "since" set to extensions.resumeSince to receive them (where the subscription replays).',
      {
        extensions: {
          code: 'SUBSCRIPTION_OVERFLOW',
          resumeSince: item.resumeSince,
          limit: item.limit,
          dropped: item.dropped,
        },
      },
    );
  }
  if (item?.kind === 'revoked') {
    throw new GraphQLError(
      'The access token of this connection has expired; the subscription has ended. Reconnect with a fresh token and subscribe with "since" to resume.',
      { extensions: { code: 'UNAUTHENTICATED' } },
    );
  }
  throw new GraphQLError('Subscriptions are served over the graphql-ws protocol (WebSocket) at /graphql.', {
    extensions: { code: 'BAD_REQUEST' },
  });
}

/** The resource of a payload, or its read error as a GraphQL error at the field. */
function resourceOf<T>(payload: object, resource: T): T {
  const error = resourceErrors.get(payload);
  if (error !== undefined) throw toGraphQLError(error);
  return resource;
}

const createdOrUpdated = (created: string, updated: string) => (record: ListedRecord) =>
  record.createdAt === record.updatedAt ? created : updated;

export const eventResolvers: Resolvers = {
  Subscription: {
    accountChanged: {
      subscribe: (_root, { customerId, accountId, since }, context) =>
        openLiveStream(
          liveRuntimeOf(context),
          resourceFeed({
            resourceType: 'account',
            customerId,
            resourceId: accountId,
            since,
            payload: (header, id, account) => ({ ...header, accountId: id, account }),
            list: (c, page) => c.loaders.accounts.load({ customerId, ...page }),
            replayedType: createdOrUpdated('account.created', 'account.updated'),
          }),
        ),
      resolve: payloadOf,
    },
    capabilityChanged: {
      subscribe: (_root, { customerId, since }, context) =>
        openLiveStream(
          liveRuntimeOf(context),
          resourceFeed({
            resourceType: 'capability',
            customerId,
            since,
            payload: (header, id, capability) => ({ ...header, capabilityId: id, capability }),
            list: (c, page) => c.loaders.capabilities.load({ customerId, ...page }),
            replayedType: createdOrUpdated('capability.created', 'capability.status_changed'),
          }),
        ),
      resolve: payloadOf,
    },
    relatedPartyChanged: {
      subscribe: (_root, { customerId, since }, context) =>
        openLiveStream(
          liveRuntimeOf(context),
          resourceFeed({
            resourceType: 'related_party',
            customerId,
            since,
            payload: (header, id, relatedParty) => ({ ...header, relatedPartyId: id, relatedParty }),
            list: (c, page) => c.loaders.relatedParties.load({ customerId, ...page }),
            // Parties are never updated, only created or archived, and archived ones leave the list.
            replayedType: () => 'related_party.created',
          }),
        ),
      resolve: payloadOf,
    },
    documentChanged: {
      subscribe: (_root, { customerId }, context) =>
        openLiveStream(
          liveRuntimeOf(context),
          resourceFeed({
            resourceType: 'document',
            customerId,
            payload: (header, id, document) => ({ ...header, documentId: id, document }),
          }),
        ),
      resolve: payloadOf,
    },
    transferChanged: {
      subscribe: (_root, { customerId, since }, context) =>
        openLiveStream(
          liveRuntimeOf(context),
          resourceFeed({
            resourceType: 'transfer',
            customerId,
            since,
            payload: (header, id, transfer) => ({ ...header, transferId: id, transfer }),
            list: (c, page) => c.loaders.transfers.load({ customerId, ...page }),
            replayedType: (transfer) =>
              transfer.state === 'completed' ? 'transfer.completed' : 'transfer.created',
          }),
        ),
      resolve: payloadOf,
    },
    ruleChanged: {
      subscribe: (_root, { customerId, since }, context) =>
        openLiveStream(
          liveRuntimeOf(context),
          resourceFeed({
            resourceType: 'rule',
            customerId,
            since,
            payload: (header, id, rule) => ({ ...header, ruleId: id, rule }),
            list: (c, page) => c.loaders.rules.load({ customerId, ...page }),
            replayedType: (rule) =>
              rule.status === 'archived'
                ? 'rule.archived'
                : rule.createdAt === rule.updatedAt
                  ? 'rule.created'
                  : 'rule.updated',
          }),
        ),
      resolve: payloadOf,
    },
    events: {
      subscribe: (_root, { customerId, types }, context) =>
        openLiveStream(liveRuntimeOf(context), {
          accept: (event) =>
            (customerId == null || event.data.customerId === customerId) &&
            (types == null || types.includes(event.type)),
          async toPayload(event, eventContext) {
            const hydrated = await readResource(event, eventContext);
            if (hydrated === DROP) return DROP;
            const payload = {
              eventId: event.id,
              type: event.type,
              occurredAt: event.occurredAt,
              customerId: event.data.customerId,
              resourceType: event.data.resourceType,
              resourceId: event.data.resourceId,
              resource: hydrated.resource ?? null,
            };
            if (hydrated.error !== undefined) resourceErrors.set(payload, hydrated.error);
            return payload;
          },
        }),
      resolve: payloadOf,
    },
  },
  AccountChangedEvent: { account: (parent) => resourceOf(parent, parent.account ?? null) },
  CapabilityChangedEvent: { capability: (parent) => resourceOf(parent, parent.capability ?? null) },
  RelatedPartyChangedEvent: { relatedParty: (parent) => resourceOf(parent, parent.relatedParty ?? null) },
  DocumentChangedEvent: { document: (parent) => resourceOf(parent, parent.document ?? null) },
  TransferChangedEvent: { transfer: (parent) => resourceOf(parent, parent.transfer ?? null) },
  RuleChangedEvent: { rule: (parent) => resourceOf(parent, parent.rule ?? null) },
  PlatformEvent: {
    resource: (parent) => {
      const resource = resourceOf(parent, parent.resource ?? null);
      const id = isRecord(resource) && typeof resource.id === 'string' ? resource.id : '';
      // A resource type this schema does not model resolves to null rather than failing the event.
      return TYPE_BY_ID_PREFIX[id.split('_')[0] ?? ''] === undefined ? null : resource;
    },
  },
  EventResource: {
    __resolveType: (resource) => {
      const id = (resource as { id?: unknown }).id;
      const type = typeof id === 'string' ? TYPE_BY_ID_PREFIX[id.split('_')[0] ?? ''] : undefined;
      if (type === undefined) throw new Error('a resource without a known id prefix reached EventResource');
      return type;
    },
  },
};
