/**
 * The upstream's resource types with events, as the subscriptions see them, derived from the record
 * catalogue (`src/records.ts`): each one's GraphQL type, how it is read now and how a `since`
 * replay lists it. An event's resource is read now with the subscriber's credentials (fresh
 * loaders); what the upstream refuses that subscriber is dropped, and a read that fails otherwise
 * reaches the payload's resource field as its error. The feeds are `resource-feeds.ts`.
 */
import type { GraphContext } from './context.ts';
import { DROP } from '../events/delivery/live-stream.ts';
import type { PlatformEvent } from '../events/event-types.ts';
import { pageKeyOf, recordKeyOf } from '../loaders/index.ts';
import { isEventRecordType, RECORD_ENTRIES, type EventRecordTypeName, type RecordEntry } from '../records.ts';
import { UpstreamProblemError } from '../upstream/errors.ts';
import type { ListedRecord, Page, PageParams } from '../upstream/types.ts';

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
export const EVENT_RESOURCES: Readonly<Record<string, EventResourceKind>> = Object.fromEntries(
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
  const kind = EVENT_RESOURCES[resourceType];
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

/**
 * The payload `shape` makes of `event`'s resource read now, carrying the read's error for the
 * resource field; DROP when the event is not the subscriber's to see.
 */
export async function payloadOfEvent(
  event: PlatformEvent,
  context: GraphContext,
  shape: (resource: unknown) => object,
): Promise<object | typeof DROP> {
  const hydrated = await readResource(event, context);
  if (hydrated === DROP) return DROP;
  return { ...shape(hydrated.resource), ...readErrorOf(hydrated) };
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

/**
 * A resource of `resourceType` as an `EventResource`, tagged with its GraphQL type; null for a
 * resource type this schema does not model (rather than failing the event), or one not read.
 */
export function taggedResource(resourceType: string, resource: unknown): object | null {
  const typename = EVENT_RESOURCES[resourceType]?.typename;
  return typename === undefined || !isRecord(resource) ? null : { ...resource, __typename: typename };
}

/** The GraphQL type of an `EventResource`, from the tag {@link taggedResource} gave it. */
export function typenameOf(resource: unknown): EventRecordTypeName {
  const typename = (resource as { __typename?: EventRecordTypeName }).__typename;
  if (typename === undefined) throw new Error('an untagged resource reached EventResource');
  return typename;
}
