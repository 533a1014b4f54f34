/**
 * What a subscription field listens to: the feed of a `…Changed` subscription and of `events`, and
 * what each delivery resolves to. The resolvers of `events.ts` beside it name a resource type and
 * their arguments; the feeds here filter the events, replay what changed `since` a time where the
 * resource type replays (`events/delivery/replay-since.ts` reads the lists), and shape the
 * payloads of the resources `event-resources.ts` reads now.
 */
import { GraphQLError } from 'graphql';
import type { GraphContext } from './context.ts';
import { EVENT_RESOURCES, payloadOfEvent, taggedResource } from './event-resources.ts';
import { CursorExpiredError } from '../errors/cursor-expired.ts';
import { PageLimitExceededError } from '../upstream/all-pages.ts';
import { inScope } from '../upstream/access.ts';
import type { ListedRecord, PageParams } from '../upstream/types.ts';
import { liveSessionOf, SUBSCRIPTIONS_ARE_LIVE } from '../events/delivery/live-context.ts';
import {
  openLiveStream,
  type ChangeFeed,
  type LiveDelivery,
  type ReplayedChange,
} from '../events/delivery/live-stream.ts';
import { replaySince, type ReplayedList } from '../events/delivery/replay-since.ts';
import type { PlatformEvent } from '../events/event-types.ts';
import type { CursorCodec } from '../events/log/cursor-codec.ts';

/** What a `…Changed` subscription asked for. */
export interface ChangeSubscription {
  customerId: string;
  resourceId?: string | null;
  since?: string | null;
  /** A cursor: resume from the event log after it. */
  after?: string | null;
}

/**
 * The log position to resume after, checked: a cursor of the caller's own environment (decoded
 * with its session's `cursors`), well formed, and not asked together with `since` (the two are
 * different replays; the cursor's is the exact one). Judged before anything listens or reads.
 */
function resumeCursor(
  cursors: CursorCodec,
  after: string | null | undefined,
  since: string | null | undefined,
): string | undefined {
  if (after == null) return undefined;
  if (since != null) {
    throw new GraphQLError('Give either "after" (a cursor) or "since" (a time), not both.', {
      extensions: { code: 'BAD_USER_INPUT', argumentName: 'after' },
    });
  }
  const reading = cursors.decode(after);
  if (reading.kind === 'position') return reading.position;
  throw new GraphQLError(
    cursors.refusal('after', after, reading, 'a cursor this API returned (the "cursor" of an event)'),
    { extensions: { code: 'BAD_USER_INPUT', argumentName: 'after' } },
  );
}

/**
 * Reads the subscribed customer once, with the subscriber's credentials, as the first step of the
 * replay phase (after the queue listens, so a change made meanwhile is buffered, not lost): a
 * customer that does not exist answers NOT_FOUND instead of a subscription that never hears
 * anything, and so does another customer's id for a scoped caller (refused by its scope with no
 * upstream call). The record is the customer's own replay (`customerChanged`), and primes the
 * replay context's loader for the replayed selections.
 */
async function readSubscribedCustomer(context: GraphContext, customerId: string): Promise<ListedRecord> {
  return await context.loaders.item.Customer.load({ id: customerId });
}

/**
 * The check of a subscription to `customerId` against the caller's scope, made before its queue
 * listens, its cursor is judged or the customer is watched: a customer outside the scope is refused
 * exactly as the customer read refuses it (NOT_FOUND, as for one that does not exist), and that
 * read sends nothing upstream for it. A customer within the scope is read once the queue listens.
 */
function admitCustomer(customerId: string): (context: GraphContext) => Promise<void> {
  return async (context) => {
    if (inScope(context.upstream.scope, customerId)) return;
    await readSubscribedCustomer(context, customerId);
    throw new Error('a customer outside the caller’s scope was read');
  };
}

/**
 * The stream of one `…Changed` subscription: the changes of `resourceType` of one customer (and
 * one resource, when `resourceId` is given), replayed since `since` first where the type replays.
 */
export async function subscribeToChanges(
  context: GraphContext,
  resourceType: string,
  subscription: ChangeSubscription,
): Promise<AsyncIterableIterator<LiveDelivery>> {
  const live = liveSessionOf(context);
  const after = resumeCursor(live.cursors, subscription.after, subscription.since);
  return openLiveStream(live, changeFeed(resourceType, { ...subscription, after }));
}

function changeFeed(
  resourceType: string,
  { customerId, resourceId, since, after }: Omit<ChangeSubscription, 'after'> & { after: string | undefined },
): ChangeFeed<object> {
  const { field, replayedType } = EVENT_RESOURCES[resourceType]!;
  const payload = (header: ChangeHeader, id: string, resource: unknown): object => ({
    ...header,
    [`${field}Id`]: id,
    [field]: resource,
  });
  // Always run: it checks the customer, then replays what `since` asks for where the type replays.
  const replay = async (context: GraphContext, cursor: string): Promise<ReplayedChange<object>[]> => {
    const customer = await readSubscribedCustomer(context, customerId);
    if (since == null || replayedType === undefined) return [];
    const isCustomer = resourceType === 'customer';
    return replayOrRefuse(since, {
      since,
      ...(isCustomer ? { customer: { record: customer, kindOf: replayedType } } : {}),
      lists: isCustomer ? [] : replayedLists(context, customerId, [resourceType]),
      keep: (_kind, record) => isCustomer || resourceId == null || record.id === resourceId,
      toChange: (_resourceType, record, type) =>
        replayedChange(record, type, cursor, customerId, (header) => payload(header, record.id, record)),
    });
  };
  return {
    accept: (event) =>
      event.data.resourceType === resourceType &&
      event.data.customerId === customerId &&
      (resourceType !== 'customer' || event.data.resourceId === customerId) &&
      (resourceId == null || event.data.resourceId === resourceId),
    // `accept` took only events of `customerId`: the header names it as the replay's does.
    toPayload: (event, cursor, context, resumed) =>
      payloadOfEvent(event, context, (resource) =>
        payload(
          { ...liveHeader(event, cursor, resumed), customerId },
          event.data.resourceId,
          resource ?? null,
        ),
      ),
    replay,
    ...(after === undefined ? {} : { after }),
    customerId,
    admit: admitCustomer(customerId),
  };
}

/** The fields every change payload has. */
interface ChangeHeader {
  eventId: string;
  cursor: string;
  type: string;
  occurredAt: string;
  replayed: boolean;
  customerId: string | null;
}

/** The header of an event delivered live, or resumed from the log (`resumed`). */
function liveHeader(event: PlatformEvent, cursor: string, resumed: boolean): ChangeHeader {
  const { id: eventId, type, occurredAt } = event;
  return { eventId, cursor, type, occurredAt, replayed: resumed, customerId: event.data.customerId };
}

/** A record replayed from a list as a change of kind `type`, its payload made from its header. */
function replayedChange(
  record: ListedRecord,
  type: string,
  cursor: string,
  customerId: string,
  shape: (header: ChangeHeader) => object,
): ReplayedChange<object> {
  const { id, updatedAt } = record;
  const eventId = `replay:${id}:${updatedAt}`;
  const header = { eventId, cursor, type, occurredAt: updatedAt, replayed: true, customerId };
  return { resourceId: id, updatedAt, payload: shape(header) };
}

/** What `events` asked for: one customer's or every visible one's, of some kinds or all, since a time. */
export interface EventsSubscription {
  customerId?: string | null;
  types?: readonly string[] | null;
  since?: string | null;
  /** A cursor: resume from the event log after it. */
  after?: string | null;
}

/** The `PlatformEvent` payload of a change of `resourceType`, its resource tagged with its GraphQL type. */
function platformEventPayload(
  header: ChangeHeader,
  resourceType: string,
  resourceId: string,
  resource: unknown,
): object {
  return { ...header, resourceType, resourceId, resource: taggedResource(resourceType, resource) };
}

/**
 * The stream of the `events` subscription: every event the subscriber may see, its resource read
 * now. With `customerId` the customer is read first (NOT_FOUND when it does not exist or is out of
 * the caller's scope); with `since` (which needs `customerId`) the changes every replayable
 * resource type's list shows since then are replayed first, as the `…Changed` subscriptions do.
 */
export async function subscribeToEvents(
  context: GraphContext,
  { customerId, types, since, after: afterArgument }: EventsSubscription,
): Promise<AsyncIterableIterator<LiveDelivery>> {
  const live = liveSessionOf(context);
  const after = resumeCursor(live.cursors, afterArgument, since);
  if (since != null && customerId == null) {
    throw new GraphQLError(
      'Replaying events needs "customerId": the upstream lists changes per customer. Subscribe per customer with "since", or without "since".',
      { extensions: { code: 'BAD_USER_INPUT', argumentName: 'since' } },
    );
  }
  const wanted = (type: string) => types == null || types.includes(type);
  // With a customer, run after the queue listens: it checks the customer, then replays for `since`.
  const replay =
    customerId == null
      ? undefined
      : async (replayContext: GraphContext, cursor: string): Promise<ReplayedChange<object>[]> => {
          const customer = await readSubscribedCustomer(replayContext, customerId);
          if (since == null) return [];
          // Only the lists whose kinds were asked for.
          const listed = Object.keys(EVENT_RESOURCES).filter(
            (resourceType) => types == null || types.some((type) => type.startsWith(`${resourceType}.`)),
          );
          return replayOrRefuse(since, {
            since,
            customer: { record: customer, kindOf: EVENT_RESOURCES.customer!.replayedType! },
            lists: replayedLists(replayContext, customerId, listed),
            keep: (type) => wanted(type),
            toChange: (resourceType, record, type) =>
              replayedChange(record, type, cursor, customerId, (header) =>
                platformEventPayload(header, resourceType, record.id, record),
              ),
          });
        };
  return openLiveStream(live, {
    accept: (event) =>
      (customerId == null || event.data.customerId === customerId) &&
      (types == null || types.includes(event.type)),
    toPayload: (event, cursor, eventContext, resumed) =>
      payloadOfEvent(event, eventContext, (resource) =>
        platformEventPayload(
          liveHeader(event, cursor, resumed),
          event.data.resourceType,
          event.data.resourceId,
          resource,
        ),
      ),
    ...(replay === undefined ? {} : { replay }),
    ...(after === undefined ? {} : { after }),
    ...(customerId == null ? {} : { customerId, admit: admitCustomer(customerId) }),
  });
}

/** The lists of `resourceTypes` a `since` replay reads, where the type replays through its list. */
function replayedLists(
  context: GraphContext,
  customerId: string,
  resourceTypes: readonly string[],
): ReplayedList[] {
  return resourceTypes.flatMap((resourceType) => {
    const { list, replayedType } = EVENT_RESOURCES[resourceType] ?? {};
    if (list === undefined || replayedType === undefined) return [];
    return [
      { resourceType, readPage: (page: PageParams) => list(context, customerId, page), kindOf: replayedType },
    ];
  });
}

/** The `since` replay; more changes than the replay may read are the caller's error. */
async function replayOrRefuse<P>(
  since: string,
  request: Parameters<typeof replaySince<P>>[0],
): Promise<ReplayedChange<P>[]> {
  try {
    return await replaySince(request);
  } catch (error) {
    if (!(error instanceof PageLimitExceededError)) throw error;
    throw new GraphQLError(
      `More than ${error.maxRecords} changes since ${since}: read the list instead, then subscribe with a later "since".`,
      { extensions: { code: 'BAD_USER_INPUT', argumentName: 'since' } },
    );
  }
}

/**
 * The payload of a delivery, or the error that ends an overflowed or revoked subscription. Generic
 * in its result alone, so one function is the `resolve` of every subscription field, each typed by
 * graphql-codegen with its own payload.
 */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- see above
export function payloadOf<T>(delivery: unknown): T {
  const item = delivery as LiveDelivery | undefined;
  // The stream's payloads are built by this file's feeds for the field being resolved.
  if (item?.kind === 'change') return item.payload as T;
  if (item?.kind === 'overflow') {
    throw new GraphQLError(
      `This subscription fell more than ${item.limit} events behind and was ended; ${item.dropped} were not delivered. ` +
        'Subscribe again with "after" set to extensions.resumeAfter to receive them.',
      {
        extensions: {
          code: 'SUBSCRIPTION_OVERFLOW',
          resumeSince: item.resumeSince,
          ...(item.resumeAfter === undefined ? {} : { resumeAfter: item.resumeAfter }),
          limit: item.limit,
          dropped: item.dropped,
        },
      },
    );
  }
  if (item?.kind === 'expired') throw new CursorExpiredError(item.after, item.oldest);
  if (item?.kind === 'revoked') {
    throw new GraphQLError(
      'The access token of this connection has expired; the subscription has ended. Reconnect with a fresh token and subscribe again with "after" set to the cursor of the last event received (exact, while the log holds it).',
      { extensions: { code: 'UNAUTHENTICATED' } },
    );
  }
  throw new GraphQLError(SUBSCRIPTIONS_ARE_LIVE, { extensions: { code: 'BAD_REQUEST' } });
}
