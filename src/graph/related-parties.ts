/**
 * Resolvers of `related-parties.graphql`. A list gives summaries; the fields only the full record
 * holds are completed by one `getRelatedParty` read per party, made only when such a field is
 * selected (and shared by all of them through the loader).
 */
import { GraphQLError } from 'graphql';
import type { Resolvers } from '../generated/graphql.ts';
import { written } from '../loaders/written.ts';
import { archiveRelatedParty, createRelatedParty } from '../upstream/related-parties.ts';
import type { RelatedParty } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import { resolveOwningCustomer } from './customers.ts';
import { RELATED_PARTY_ROLE_VALUES } from '../enum-values.ts';
import { splitInput, toPayload } from './mutation-payload.ts';
import type { RelatedPartyParent } from './parents.ts';
import { recordByArgs, recordReference, fieldsOfFullRecord } from './resolver-shapes.ts';

/**
 * The party types the upstream accepts. `partyType` is a string in the schema, spelled as the
 * upstream spells it (like `Customer.type`), and checked here so a typo never reaches the upstream.
 */
const PARTY_TYPES = ['person', 'entity'] as const;

function isPartyType(value: string): value is (typeof PARTY_TYPES)[number] {
  return (PARTY_TYPES as readonly string[]).includes(value);
}

/** Whether `party` is the full record (a read) rather than a list summary. */
function isFullRecord(party: RelatedPartyParent): party is RelatedParty {
  return 'person' in party;
}

/** The full record of `party`: itself when it is one, else one (shared) read. */
async function fullRecord(party: RelatedPartyParent, { loaders }: GraphContext): Promise<RelatedParty> {
  if (isFullRecord(party)) return party;
  return loaders.item.RelatedParty.load({ customerId: party.customerId, id: party.id });
}

/** A field only the full record holds. */
const fullRecordField = fieldsOfFullRecord(fullRecord);

/** The summary's derived `displayName`, computed the same way for a full record. */
function displayName(party: RelatedPartyParent): string | null {
  if (!isFullRecord(party)) return party.displayName;
  if (party.person) return `${party.person.firstName} ${party.person.lastName}`;
  return party.entity?.legalName ?? null;
}

export const relatedPartyResolvers: Resolvers = {
  // The upstream sends snake_case values; the enum's internal values are those strings.
  RelatedPartyRole: RELATED_PARTY_ROLE_VALUES,
  Query: {
    relatedParty: recordByArgs('RelatedParty'),
  },
  Mutation: {
    createRelatedParty: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input, ['customerId']);
      const { partyType } = body;
      if (!isPartyType(partyType)) {
        throw new GraphQLError(
          `A related party's partyType is "person" or "entity"; got ${JSON.stringify(partyType)}.`,
          { extensions: { code: 'BAD_USER_INPUT', argumentName: 'input.partyType' } },
        );
      }
      const result = await createRelatedParty(
        upstream,
        input.customerId,
        { ...body, partyType },
        idempotencyKey,
      );
      written.relatedParty(loaders, { customerId: input.customerId, id: result.data.id }, result.data);
      return toPayload('relatedParty', result);
    },
    archiveRelatedParty: async (_parent, { input }, { upstream, loaders }) => {
      const { idempotencyKey } = splitInput(input);
      const result = await archiveRelatedParty(
        upstream,
        input.customerId,
        input.relatedPartyId,
        idempotencyKey,
      );
      // Archived: not kept, it answers NOT_FOUND to later reads.
      written.relatedParty(loaders, { customerId: input.customerId, id: input.relatedPartyId }, undefined);
      return toPayload('relatedParty', result);
    },
  },
  RelatedParty: {
    __resolveReference: recordReference('RelatedParty'),
    customer: resolveOwningCustomer,
    displayName,
    title: fullRecordField('title'),
    person: fullRecordField('person'),
    entity: fullRecordField('entity'),
    archivedAt: fullRecordField('archivedAt'),
  },
};
