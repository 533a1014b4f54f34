/**
 * The related parties of a business customer: list (active ones), get, create and archive, with
 * the body rules the schema cannot express; each change advances the customer's `updatedAt` and
 * announces `related_party.*`.
 */
import type { RouteHandlers } from '../http/types.ts';
import { newId } from '../store/ids.ts';
import type { Environment, EntityFacts, PersonFacts, RelatedPartyRecord } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { emitCustomerChange } from './customers.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer } from './lookups.ts';
import { presentRecord, presentRelatedPartySummary } from './presenters.ts';
import type { FieldError } from './problems.ts';
import { invalidFields, notFound, stateConflict } from './problems.ts';

type CreateRelatedPartyBody = {
  partyType: 'person' | 'entity';
  roles?: string[];
  title?: string;
  person?: PersonFacts;
  entity?: EntityFacts;
  hasOwnership?: boolean;
  hasVotingRights?: boolean;
  hasControl?: boolean;
};

/** The rules of a related-party body that its schema cannot express. */
function relatedPartyBodyErrors(body: CreateRelatedPartyBody): FieldError[] {
  const errors: FieldError[] = [];
  if (body.partyType === 'person' && body.entity !== undefined) {
    errors.push({
      pointer: '/entity',
      code: 'invalid_value',
      message: 'entity is only for partyType entity; a person has person facts.',
    });
  }
  if (body.partyType === 'entity' && body.person !== undefined) {
    errors.push({
      pointer: '/person',
      code: 'invalid_value',
      message: 'person is only for partyType person; an entity has entity facts.',
    });
  }
  const hasFact = body.hasOwnership === true || body.hasVotingRights === true || body.hasControl === true;
  if ((body.roles ?? []).length === 0 && !hasFact) {
    errors.push({
      pointer: '/roles',
      code: 'required',
      message: 'Give at least one role, or set one of hasOwnership, hasVotingRights, hasControl to true.',
    });
  }
  return errors;
}

/** Handlers of related parties: list (active only), get, create and archive. */
export function relatedPartyHandlers(context: DomainContext): RouteHandlers {
  function findActiveParty(
    environment: Environment,
    customerId: string,
    partyId: string,
  ): RelatedPartyRecord {
    const env = context.env(environment);
    requireCustomer(env, customerId, 'customer_not_found');
    const party = env.relatedParties.get(partyId);
    // Archived parties are gone for every read, like parties that never existed.
    if (party?.customerId !== customerId || party.archivedAt !== null)
      throw notFound('related party', partyId);
    return party;
  }

  function emitParty(
    environment: Environment,
    type: 'related_party.created' | 'related_party.archived',
    party: RelatedPartyRecord,
  ): void {
    context.emit(environment, type, {
      customerId: party.customerId,
      resourceType: 'related_party',
      resourceId: party.id,
      object: presentRecord(party),
      occurredAt: party.updatedAt,
    });
  }

  return {
    listRelatedParties: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'), 'customer_not_found');
      // Only business customers have related parties; an individual gets an empty page, not an error.
      const active =
        customer.type === 'individual'
          ? []
          : ownedBy(env.relatedParties, customer.id).filter((party) => party.archivedAt === null);
      return listResponse(request, active, presentRelatedPartySummary);
    },

    getRelatedParty: (request) => {
      const party = findActiveParty(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'relatedPartyId'),
      );
      return dataResponse(presentRecord(party));
    },

    createRelatedParty: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'), 'customer_not_found');
      if (customer.type === 'individual') {
        throw stateConflict(
          'individual_customer',
          `Customer ${customer.id} is an individual; related parties exist only for business customers.`,
        );
      }
      const body = request.body as CreateRelatedPartyBody;
      const errors = relatedPartyBodyErrors(body);
      if (errors.length > 0) throw invalidFields(errors);

      // One transaction: the party and its parent customer carry the same new timestamp.
      const now = context.stamp();
      const party: RelatedPartyRecord = {
        id: newId('rp'),
        customerId: customer.id,
        partyType: body.partyType,
        roles: [...(body.roles ?? [])],
        title: body.title ?? null,
        person: body.person ? { ...body.person } : null,
        entity: body.entity ? { ...body.entity } : null,
        hasOwnership: body.hasOwnership ?? false,
        hasVotingRights: body.hasVotingRights ?? false,
        hasControl: body.hasControl ?? false,
        createdAt: now,
        updatedAt: now,
        archivedAt: null,
      };
      env.relatedParties.set(party.id, party);
      customer.updatedAt = now;
      emitParty(request.environment, 'related_party.created', party);
      emitCustomerChange(context, request.environment, 'customer.updated', customer);
      return dataResponse(presentRecord(party), 201);
    },

    archiveRelatedParty: (request) => {
      const env = context.env(request.environment);
      const party = findActiveParty(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'relatedPartyId'),
      );
      const customer = env.customers.get(party.customerId)!;
      const now = context.stamp();
      party.archivedAt = now;
      party.updatedAt = now;
      customer.updatedAt = now;
      emitParty(request.environment, 'related_party.archived', party);
      emitCustomerChange(context, request.environment, 'customer.updated', customer);
      return dataResponse(presentRecord(party));
    },
  };
}
