/**
 * The record catalogue (`src/records.ts`) drives every table that names record types: this walks
 * it and checks each consumer serves each entry, so a record type added to the catalogue (or to the
 * schema or the contract without the catalogue) fails here rather than in production. Each check
 * runs the real code: the loaders, `node(id:)`, the query field and the federation reference over
 * an in-memory upstream client that records the paths it is asked, the cache invalidation of an
 * event of each kind, the schema as built.
 */
import { readFileSync } from 'node:fs';
import { execute, isObjectType, isUnionType, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { OPEN_CALLER } from '../../src/auth/caller.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import { invalidateForEvent } from '../../src/events/invalidation.ts';
import { STALE_BY_EVENT_KIND, SUBSCRIBED_EVENT_KINDS } from '../../src/events/receiving/event-kinds.ts';
import { createGraphContext } from '../../src/graph/context.ts';
import { CUSTOMER_LISTS, RECORD_READS } from '../../src/graph/look-ahead.ts';
import { createSchema } from '../../src/graph/schema.ts';
import { createLoaders, pageKeyOf, recordKeyOf, type Loaders } from '../../src/loaders/index.ts';
import {
  COLLECTION_OF_RESOURCE_TYPE,
  RECORD_ENTRIES,
  replayedKindOf,
  type RecordTypeName,
} from '../../src/records.ts';
import { PLATFORM_SCOPE } from '../../src/upstream/access.ts';
import type { UpstreamClient, UpstreamRequest, UpstreamResponse } from '../../src/upstream/client.ts';
import { createUpstreamContext } from '../../src/upstream/context.ts';
import type { ResponseCache, StaleReads } from '../../src/upstream/response-cache.ts';

const STAMP = '2025-01-06T09:00:00Z';
const CUSTOMER = 'cus_catalogue';

/** An upstream client answering every GET with one record (or a page of one) of the id in its path. */
function recordingClient(paths: string[]): UpstreamClient {
  return {
    retryPolicy: { maxAttempts: 1, budget: 0, baseDelayMs: 1, maxDelayMs: 1 },
    maxCallsPerOperation: 1_000,
    problemDocsUrl: 'https://docs.platform.test/v3',
    async send(_call, request: UpstreamRequest): Promise<UpstreamResponse> {
      paths.push(request.path);
      const last = request.path.split('/').at(-1)!;
      const record = { id: last, customerId: CUSTOMER, createdAt: STAMP, updatedAt: STAMP };
      const isItem = last.includes('_');
      return {
        status: 200,
        body: isItem
          ? { data: record }
          : { data: [{ ...record, id: 'x_1' }], nextCursor: null, hasMore: false },
        replayed: false,
      };
    },
    close: async () => {},
  };
}

function upstream(paths: string[]) {
  return createUpstreamContext(recordingClient(paths), { apiKey: 'sk_test', scope: PLATFORM_SCOPE });
}

/** The routes of a record type, as the contract writes them. */
function routesOf(entry: (typeof RECORD_ENTRIES)[number][1], id: string) {
  const base =
    entry.key === 'customer' ? `/v3/customers/${CUSTOMER}/${entry.collection}` : `/v3/${entry.collection}`;
  return { item: `${base}/${id}`, list: base };
}

const ENTRIES = RECORD_ENTRIES.map(([type, entry]) => ({ type, entry }));

/** Reads one page of `type`'s list, then record `id` of it, through its list and item loaders. */
async function readThroughLoaders<T extends RecordTypeName>(loaders: Loaders, type: T, id: string) {
  await loaders.list[type].load(pageKeyOf(type, CUSTOMER, { limit: 1 }));
  await loaders.item[type].load(recordKeyOf(type, CUSTOMER, id));
}
const schema = createSchema();
const contract = readFileSync(new URL('../../schema/upstream/openapi.yaml', import.meta.url), 'utf8');

describe('every record type of the catalogue', () => {
  it.each(ENTRIES)(
    '$type: its item and list loaders read its routes of the contract',
    async ({ type, entry }) => {
      const paths: string[] = [];
      const id = `${entry.idPrefix}1`;
      const routes = routesOf(entry, id);
      await readThroughLoaders(createLoaders(upstream(paths)), type, id);
      expect(paths).toEqual([routes.list, routes.item]);

      const base = routes.list.replace(CUSTOMER, '{customerId}');
      expect(contract.split('\n')).toContain(`  ${base}:`);
      expect(contract).toMatch(new RegExp(`^  ${base.replace(/[{}]/g, '\\$&')}/\\{\\w+\\}:$`, 'm'));
    },
  );

  it.each(ENTRIES)(
    '$type: node(id:) reads it by its node id, once, and types it',
    async ({ type, entry }) => {
      const paths: string[] = [];
      const id = `${entry.idPrefix}1`;
      const nodeId = entry.key === 'customer' ? `${CUSTOMER}/${id}` : id;
      const result = await execute({
        schema,
        document: parse(`query ($id: ID!) { node(id: $id) { __typename id } }`),
        variableValues: { id: nodeId },
        contextValue: createGraphContext(upstream(paths), OPEN_CALLER),
      });
      expect(result.errors).toBeUndefined();
      expect(result.data).toEqual({ node: { __typename: type, id } });
      expect(paths).toEqual([routesOf(entry, id).item]);
      expect(RECORD_READS[type]).toBeDefined();
    },
  );

  it.each(ENTRIES)(
    '$type: its query field and its federation reference read it by its key, once',
    async ({ type, entry }) => {
      const paths: string[] = [];
      const id = `${entry.idPrefix}1`;
      const key = entry.key === 'customer' ? { customerId: CUSTOMER, id } : { id };
      const field = `${type.charAt(0).toLowerCase()}${type.slice(1)}`;
      const declared = Object.keys(key).map((name) => `$${name}: ID!`);
      const given = Object.keys(key).map((name) => `${name}: $${name}`);
      const read = (document: string, variableValues: Record<string, unknown>) =>
        execute({
          schema,
          document: parse(document),
          variableValues,
          contextValue: createGraphContext(upstream(paths), OPEN_CALLER),
        });
      const byField = await read(
        `query (${declared.join(', ')}) { ${field}(${given.join(', ')}) { id } }`,
        key,
      );
      expect(byField).toEqual({ data: { [field]: { id } } });
      const byReference = await read(
        `query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on ${type} { id } } }`,
        { representations: [{ __typename: type, ...key }] },
      );
      expect(byReference).toEqual({ data: { _entities: [{ id }] } });
      const item = routesOf(entry, id).item;
      expect(paths).toEqual([item, item]);
    },
  );

  it.each(ENTRIES)('$type: the schema has it as a Node, with its list on Customer', ({ type, entry }) => {
    const objectType = schema.getType(type);
    expect(isObjectType(objectType) && objectType.getInterfaces().map((i) => i.name)).toContain('Node');
    if (entry.key !== 'customer') return;
    const customer = schema.getType('Customer');
    expect(isObjectType(customer) && Object.keys(customer.getFields())).toContain(entry.listField);
    expect(Object.keys(CUSTOMER_LISTS)).toContain(entry.listField);
    expect(COLLECTION_OF_RESOURCE_TYPE[entry.resourceType]).toBe(entry.collection);
  });

  it('and no other: every Node type of the schema is in the catalogue', () => {
    const nodes = Object.values(schema.getTypeMap())
      .filter((type) => isObjectType(type) && type.getInterfaces().some((i) => i.name === 'Node'))
      .map((type) => type.name)
      .sort();
    expect(nodes).toEqual(ENTRIES.map(({ type }) => type).sort());
  });
});

describe('every record type with events', () => {
  const withEvents = ENTRIES.filter(({ entry }) => entry.events !== undefined);

  it('is a member of EventResource, and the members are no more', () => {
    const union = schema.getType('EventResource');
    expect(
      isUnionType(union) &&
        union
          .getTypes()
          .map((type) => type.name)
          .sort(),
    ).toEqual(withEvents.map(({ type }) => type).sort());
  });

  it.each(withEvents)(
    '$type: its subscription, its kinds subscribed, its cache rows applied',
    ({ entry }) => {
      const events = entry.events!;
      const subscription = schema.getSubscriptionType()!.getFields();
      expect(Object.keys(subscription)).toContain(`${events.field}Changed`);
      for (const kind of Object.keys(events.kinds)) {
        expect(SUBSCRIBED_EVENT_KINDS).toContain(kind);
        expect(STALE_BY_EVENT_KIND[kind as keyof typeof STALE_BY_EVENT_KIND]).toEqual(
          events.kinds[kind as keyof typeof events.kinds],
        );
        const named: StaleReads[] = [];
        const cache = { invalidate: (stale: readonly StaleReads[]) => named.push(...stale) } as ResponseCache;
        const resourceId = `${entry.idPrefix}1`;
        const event: PlatformEvent = {
          id: 'evt_1',
          type: kind,
          occurredAt: STAMP,
          environment: 'sandbox',
          data: { customerId: CUSTOMER, resourceType: entry.resourceType, resourceId, object: {} },
        };
        invalidateForEvent(cache, event);
        // A kind the cache did not know would drop everything of the customer instead.
        expect(named).not.toContainEqual({ kind: 'all-of-customer', customerId: CUSTOMER });
        expect(named).toContainEqual(
          entry.key === 'customer'
            ? { kind: 'record', customerId: CUSTOMER, collection: entry.collection, id: resourceId }
            : { kind: 'customer', customerId: CUSTOMER },
        );
      }
    },
  );

  it.each(withEvents.filter(({ entry }) => entry.events!.replayedKind !== undefined))(
    '$type: a replayed record stands for one of its own kinds',
    ({ entry }) => {
      const record = { id: `${entry.idPrefix}1`, createdAt: STAMP, updatedAt: STAMP };
      expect(Object.keys(entry.events!.kinds)).toContain(replayedKindOf(entry.resourceType, record));
    },
  );
});
