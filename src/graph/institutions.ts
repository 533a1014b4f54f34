/**
 * Resolvers of `institutions.graphql`. Applications embed an institution reference (id, name,
 * bic); the other fields are completed by one read per institution, made only when selected.
 */
import type { Resolvers } from '../generated/graphql.ts';
import type { Institution } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import type { InstitutionParent } from './parents.ts';
import { fieldsOfFullRecord, recordByArgs, recordReference, topLevelConnection } from './resolver-shapes.ts';

async function fullRecord(institution: InstitutionParent, { loaders }: GraphContext): Promise<Institution> {
  return 'country' in institution ? institution : loaders.item.Institution.load({ id: institution.id });
}

/** A field the embedded reference lacks. */
const fullRecordField = fieldsOfFullRecord(fullRecord);

export const institutionResolvers: Resolvers = {
  Query: {
    institution: recordByArgs('Institution'),
    institutions: topLevelConnection((loaders) => loaders.list.Institution),
  },
  Institution: {
    __resolveReference: recordReference('Institution'),
    country: fullRecordField('country'),
    createdAt: fullRecordField('createdAt'),
    updatedAt: fullRecordField('updatedAt'),
  },
};
