/** Resolvers of `customers.graphql`: customers and the lists hanging off a customer. */
import type { Resolvers } from '../generated/graphql.ts';
import { written } from '../loaders/written.ts';
import { createCustomer } from '../upstream/customers.ts';
import type { CreateCustomerInput } from '../upstream/types.ts';
import { isObjectType, type GraphQLResolveInfo } from 'graphql';
import type { GraphContext } from './context.ts';
import { CUSTOMER_LISTS, readRecord } from './look-ahead.ts';
import { splitInput, toPayload } from './mutation-payload.ts';
import { connectionsOf, recordByArgs } from './resolver-shapes.ts';
import { readScopedCustomers } from './scoped-customers.ts';
import { selectedFields } from './selection.ts';
import { toConnection, toPageParams } from './pagination.ts';

/**
 * `customer` of any record that names its customer: one read per distinct customer per operation,
 * with the customer's selected lists started alongside it.
 */
export function resolveOwningCustomer(
  parent: { customerId: string },
  _args: unknown,
  context: GraphContext,
  info: GraphQLResolveInfo,
) {
  return readRecord('Customer', { id: parent.customerId }, context, info);
}

/** The lists of a customer, each read by the customer's id alone. */
const LISTS = new Set<string>(Object.keys(CUSTOMER_LISTS));

/**
 * Whether the customer entities being resolved (`info` of `_entities`) are asked for lists and
 * nothing else but the id. That is a gateway's follow-up fetch of a deferred fragment
 * (`_entities { ... on Customer { accounts { ... } } }`, docs/defer.md): the gateway read the
 * customer in its first fetch, and reading the record again here would add an upstream call that the
 * same operation without `@defer` does not make. A selection of the id alone still reads the record,
 * so an id outside the caller's scope is refused at the entity, as before.
 */
function asksOnlyForLists(info: GraphQLResolveInfo): boolean {
  const customer = info.schema.getType('Customer');
  if (!isObjectType(customer)) return false;
  const names = selectedFields(info, info.fieldNodes, customer, () => true).map(({ name }) => name);
  return names.some((name) => LISTS.has(name)) && names.every((name) => name === 'id' || LISTS.has(name));
}

// Each list reads through the look-ahead's entry for it, so a list started ahead is a cache hit.
export const customerResolvers: Resolvers = {
  Query: {
    customer: recordByArgs('Customer'),
    customers: async (_parent, args, { caller, loaders }) => {
      const page = toPageParams(args);
      // Only operators may list the platform's customers; everyone else sees its own.
      if (caller !== undefined && !caller.operator && caller.scope.kind === 'customers') {
        return toConnection(await readScopedCustomers(loaders, caller.scope.customerIds, page), args);
      }
      return toConnection(await loaders.list.Customer.load(page), args);
    },
  },
  Mutation: {
    createCustomer: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input);
      // `type` is a String in the schema (an open set); the upstream validates it and a refusal
      // points at `/type`, which the error mapping turns into the path `input.type`.
      const result = await createCustomer(upstream, body as CreateCustomerInput, idempotencyKey);
      written.record(loaders, 'Customer', { id: result.data.id }, result.data);
      return toPayload('customer', result);
    },
  },
  Customer: {
    // A selection of lists alone is answered from the id: each list's read is scoped like any
    // other (another customer's is refused before the upstream), and an unknown customer's list
    // answers NOT_FOUND where the record's read would have.
    __resolveReference: (reference, context, info) =>
      asksOnlyForLists(info)
        ? { __typename: 'Customer', id: reference.id }
        : readRecord('Customer', { id: reference.id }, context, info),
    // One list per customer record type of the catalogue, its field named as its list loader.
    ...connectionsOf(CUSTOMER_LISTS),
  },
};
