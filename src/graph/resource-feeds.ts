/**
 * What a subscription field listens to: for each upstream resource type with events, its GraphQL
 * type, how it is read now, and how its changes are replayed from a list, all derived from the
 * record catalogue (`src/records.ts`). The resolvers of `events.ts` beside it name a resource type
 * and their arguments; the feeds here filter the events, read each event's resource with the
 * subscriber's credentials (fresh loaders), drop what the upstream refuses that subscriber, and
 * shape the payloads; the `since` replay itself is `events/delivery/replay-since.ts`.
 */
import { GraphQLError } from 'graphql';
import type { GraphContext } from './context.ts';
import { CursorExpiredError } from '../errors/cursor-expired.ts';
import { pageKeyOf, recordKeyOf } from '../loaders/index.ts';
import type { RecordEntry } from '../record-entry.ts';
import { isEventRecordType, RECORD_ENTRIES, type EventRecordTypeName } from '../records.ts';
import { PageLimitExceededError } from '../upstream/all-pages.ts';
import { inScope } from '../upstream/access.ts';
import { UpstreamProblemError } from '../upstream/errors.ts';
import type { ListedRecord, Page, PageParams } from '../upstream/types.ts';
import { liveSessionOf, SUBSCRIPTIONS_ARE_LIVE } from '../events/delivery/live-context.ts';
import {
  DROP,
  openLiveStream,
  type ChangeFeed,
  type LiveDelivery,
  type ReplayedChange,
} from '../events/delivery/live-stream.ts';
import { replaySince, type ReplayedList } from '../events/delivery/replay-since.ts';
import type { PlatformEvent } from '../events/event-types.ts';
import type { CursorCodec } from '../events/log/cursor-codec.ts';

/** One resource type of the upstream's events, as the subscriptions see it. */
interface EventResourceKind {
  /** Its GraphQL type: the member of `EventResource` it resolves to. */
  typename: EventRecordTypeName;
  /** The payload field of its `…Changed` subscription (`account`, with `accountId` beside it). */
  field: string;
  /** Reads it as it is now. */
  read(context: GraphContext, customerId: string, id: string): Promise<unknown>;
  /** Reads one page of a customer's list with the updated-since filter; absent where there is no replay. */
  list?: (context: GraphContext, customerId: string, page: PageParams) => Promise<Page<ListedRecord>>;
  /** The event kind a replayed record stands for. */
  replayedType?: (record: ListedRecord) => string;
  /** Whether an archived record answers 404 to every read (docs/events.md). */
  unreadableOnceArchived: boolean;
}

/** The subscriptions' view of a catalogue entry that has events. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- its loaders are T's
function eventResourceKind<T extends EventRecordTypeName>(
  typename: T,
  entry: RecordEntry,
  events: NonNullable<RecordEntry['events']>,
): EventResourceKind {
  return {
    typename,
    field: events.field,
    read: (context, customerId, id) =>
      context.loaders.item[typename].load(recordKeyOf(typename, customerId, id)),
    ...(entry.key === 'customer' && events.listedSince
      ? {
          list: (context: GraphContext, customerId: string, page: PageParams) =>
            context.loaders.list[typename].load(pageKeyOf(typename, customerId, page)),
        }
      : {}),
    ...(events.replayedKind === undefined ? {} : { replayedType: events.replayedKind }),
    unreadableOnceArchived: events.unreadableOnceArchived === true,
  };
}

/** Every resource type the schema models, by the upstream's `resourceType`. */
const RESOURCES: Readonly<Record<string, EventResourceKind>> = Object.fromEntries(
  RECORD_ENTRIES.flatMap(([typename, entry]) =>
    entry.events !== undefined && isEventRecordType(typename)
      ? [[entry.resourceType, eventResourceKind(typename, entry, entry.events)]]
      : [],
  ),
);

/**
 * Where a payload carries the error of a resource read that failed for a reason other than a
 * refusal: the resource field throws it as it is, and the facade's `formatError` maps it once, as
 * on the query path. A symbol, so it can never meet a field of the schema.
 */
const READ_ERROR = Symbol('resource read error');

/** A resource read now (null when it could not be), with the error of a failed read. */
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
  const kind = RESOURCES[resourceType];
  // Without a customer a customer-scoped resource cannot be read, so access cannot be checked.
  if (kind === undefined || (customerId === null && resourceType !== 'customer')) {
    if (customerId === null) return DROP;
    return checkCustomer(context, customerId, null);
  }
  try {
    return { resource: await kind.read(context, customerId ?? '', resourceId) };
  } catch (error) {
    if (!isRefusal(error)) return { resource: null, error };
    // Only where archiving is why the read fails, and only a record of the event's own customer: a
    // 404 may also be the subscriber's scope refusing another customer's resource.
    const gone =
      (error as UpstreamProblemError).status === 404 &&
      customerId !== null &&
      kind.unreadableOnceArchived &&
      isRecord(object) &&
      (object.customerId === undefined || object.customerId === customerId);
    return gone ? checkCustomer(context, customerId, { ...object, customerId }) : DROP;
  }
}

async function checkCustomer(
  context: GraphContext,
  customerId: string,
  resource: unknown,
): Promise<Hydrated> {
  try {
    await context.loaders.item.Customer.load({ id: customerId });
    return { resource };
  } catch (error) {
    return isRefusal(error) ? DROP : { resource: null, error };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
  return openLiveStream(live, changeFeed(RESOURCES[resourceType]!, resourceType, { ...subscription, after }));
}

function changeFeed(
  kind: EventResourceKind,
  resourceType: string,
  { customerId, resourceId, since, after }: Omit<ChangeSubscription, 'after'> & { after: string | undefined },
): ChangeFeed<object> {
  const payload = (header: ChangeHeader, id: string, resource: unknown): object => ({
    ...header,
    [`${kind.field}Id`]: id,
    [kind.field]: resource,
  });
  const header = (
    eventId: string,
    cursor: string,
    type: string,
    occurredAt: string,
    replayed: boolean,
  ): ChangeHeader => ({ eventId, cursor, type, occurredAt, replayed, customerId });
  const { replayedType } = kind;
  const replayedChange = (record: ListedRecord, type: string, cursor: string): ReplayedChange<object> => ({
    resourceId: record.id,
    updatedAt: record.updatedAt,
    payload: payload(
      header(`replay:${record.id}:${record.updatedAt}`, cursor, type, record.updatedAt, true),
      record.id,
      record,
    ),
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
      toChange: (_resourceType, record, type) => replayedChange(record, type, cursor),
    });
  };
  return {
    accept: (event) =>
      event.data.resourceType === resourceType &&
      event.data.customerId === customerId &&
      (resourceType !== 'customer' || event.data.resourceId === customerId) &&
      (resourceId == null || event.data.resourceId === resourceId),

    async toPayload(event, cursor, context, resumed) {
      const hydrated = await readResource(event, context);
      if (hydrated === DROP) return DROP;
      return {
        ...payload(
          header(event.id, cursor, event.type, event.occurredAt, resumed),
          event.data.resourceId,
          hydrated.resource ?? null,
        ),
        ...readErrorOf(hydrated),
      };
    },

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
  customerId: string;
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
  header: {
    eventId: string;
    cursor: string;
    type: string;
    occurredAt: string;
    replayed: boolean;
    customerId: string | null;
  },
  resourceType: string,
  resourceId: string,
  resource: unknown,
): object {
  const typename = RESOURCES[resourceType]?.typename;
  return {
    ...header,
    resourceType,
    resourceId,
    // A resource type this schema does not model resolves to null rather than failing the event.
    resource: typename === undefined || !isRecord(resource) ? null : { ...resource, __typename: typename },
  };
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
          const listed = Object.keys(RESOURCES).filter(
            (resourceType) => types == null || types.some((type) => type.startsWith(`${resourceType}.`)),
          );
          return replayOrRefuse(since, {
            since,
            customer: { record: customer, kindOf: RESOURCES.customer!.replayedType! },
            lists: replayedLists(replayContext, customerId, listed),
            keep: (type) => wanted(type),
            toChange: (resourceType, record, type) => ({
              resourceId: record.id,
              updatedAt: record.updatedAt,
              payload: platformEventPayload(
                {
                  eventId: `replay:${record.id}:${record.updatedAt}`,
                  cursor,
                  type,
                  occurredAt: record.updatedAt,
                  replayed: true,
                  customerId,
                },
                resourceType,
                record.id,
                record,
              ),
            }),
          });
        };
  return openLiveStream(live, {
    accept: (event) =>
      (customerId == null || event.data.customerId === customerId) &&
      (types == null || types.includes(event.type)),
    async toPayload(event, cursor, eventContext, resumed) {
      const hydrated = await readResource(event, eventContext);
      if (hydrated === DROP) return DROP;
      return {
        ...platformEventPayload(
          {
            eventId: event.id,
            cursor,
            type: event.type,
            occurredAt: event.occurredAt,
            replayed: resumed,
            customerId: event.data.customerId,
          },
          event.data.resourceType,
          event.data.resourceId,
          hydrated.resource,
        ),
        ...readErrorOf(hydrated),
      };
    },
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
    const { list, replayedType } = RESOURCES[resourceType] ?? {};
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

/** The resource of a payload, or, when it could not be read, its read error at the field. */
export function resourceOf<T>(payload: object, resource: T): T {
  const error = (payload as { [READ_ERROR]?: Error })[READ_ERROR];
  if (error !== undefined) throw error;
  return resource;
}

/** The part of a payload that carries `hydrated`'s read error, if any. */
function readErrorOf(hydrated: { error?: unknown }): { [READ_ERROR]?: Error } {
  const { error } = hydrated;
  if (error === undefined) return {};
  return {
    [READ_ERROR]: error instanceof Error ? error : new Error('the resource read failed', { cause: error }),
  };
}

/** The GraphQL type of an `EventResource`, from the event's `resourceType` the payload tagged it with. */
export function typenameOf(resource: unknown): EventRecordTypeName {
  const typename = (resource as { __typename?: EventRecordTypeName }).__typename;
  if (typename === undefined) throw new Error('an untagged resource reached EventResource');
  return typename;
}
