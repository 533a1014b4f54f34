import type { GraphQLResolverMap } from '@apollo/subgraph';
import type { SupportNote, SupportNoteStatus, SupportNoteStore } from './notes.ts';

/** The representation of a facade Account, by its key `customerId id`. */
type AccountReference = { __typename: 'Account'; customerId: string; id: string };
/** What this subgraph knows of a Customer: only its key. */
type CustomerReference = { __typename: 'Customer'; id: string };

type StatusArgs = { status?: SupportNoteStatus | null };

/**
 * The resolvers of the support-notes subgraph over `store`. References to facade entities are
 * returned as representations (`__typename` plus key fields); the gateway asks the facade for the rest.
 */
export function createResolvers(store: SupportNoteStore): GraphQLResolverMap<unknown> {
  return {
    Query: {
      supportNotes: (_: unknown, args: StatusArgs & { customerId?: string | null }) => store.list(args),
      supportNote: (_: unknown, args: { id: string }) => store.get(args.id) ?? null,
    },
    SupportNote: {
      customer: (note: SupportNote): CustomerReference => ({ __typename: 'Customer', id: note.customerId }),
      account: (note: SupportNote): AccountReference | null =>
        note.accountId === null
          ? null
          : { __typename: 'Account', customerId: note.customerId, id: note.accountId },
    },
    Customer: {
      // Any customer id is answered: this subgraph does not own customers, so an id it has no notes
      // for simply has none. Whether the customer exists is the facade's answer to give.
      __resolveReference: (reference: { id: string }): CustomerReference => ({
        __typename: 'Customer',
        id: reference.id,
      }),
      supportNotes: (customer: CustomerReference, args: StatusArgs) =>
        store.list({ customerId: customer.id, status: args.status ?? null }),
      openSupportNoteCount: (customer: CustomerReference) =>
        store.list({ customerId: customer.id, status: 'OPEN' }).length,
    },
  };
}
