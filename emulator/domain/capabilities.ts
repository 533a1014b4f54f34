/**
 * Capabilities: what a key may request (discovery, the readiness probe of the facade), a customer's
 * capabilities and their applications, and the `capability.*` events their changes announce.
 */
import type { RouteHandlers } from '../http/types.ts';
import { newId } from '../store/ids.ts';
import type { CapabilityRecord, Environment } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { presentRecord } from './presenters.ts';
import { invalidFields, stateConflict } from './problems.ts';

/** The method and account type pairs a customer can request, as discovery lists them. */
export const CAPABILITY_CATALOG: readonly { method: string; accountType: string }[] = [
  { method: 'ach', accountType: 'pooled' },
  { method: 'wire', accountType: 'pooled' },
  { method: 'sepa', accountType: 'pooled' },
  { method: 'swift', accountType: 'pooled' },
];

type CreateCapabilityBody = { method: string; accountType: string };

/** Announces a capability change with the capability as a read now returns it. */
export function emitCapabilityChange(
  context: DomainContext,
  environment: Environment,
  type: 'capability.created' | 'capability.status_changed',
  capability: CapabilityRecord,
): void {
  context.emit(environment, type, {
    customerId: capability.customerId,
    resourceType: 'capability',
    resourceId: capability.id,
    object: presentRecord(capability),
    occurredAt: capability.updatedAt,
  });
}

/** Handlers of the capabilities group: discovery, list, get, create. */
export function capabilityHandlers(context: DomainContext): RouteHandlers {
  return {
    discoverCapabilities: (request) =>
      dataResponse({
        environment: request.environment,
        capabilities: CAPABILITY_CATALOG.map((entry) => ({ ...entry })),
      }),

    listCapabilities: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.capabilities, customer.id), presentRecord);
    },

    getCapability: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return dataResponse(
        presentRecord(
          requireOwned(env.capabilities, customer.id, pathParam(request, 'capabilityId'), 'capability'),
        ),
      );
    },

    createCapability: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const body = request.body as CreateCapabilityBody;
      if (!CAPABILITY_CATALOG.some((entry) => entry.method === body.method)) {
        throw invalidFields([
          {
            pointer: '/method',
            code: 'invalid_value',
            message: `Unknown method; GET /v3/capabilities lists the offered ones (${CAPABILITY_CATALOG.map((entry) => entry.method).join(', ')}).`,
          },
        ]);
      }
      if (
        !CAPABILITY_CATALOG.some(
          (entry) => entry.method === body.method && entry.accountType === body.accountType,
        )
      ) {
        throw invalidFields([
          {
            pointer: '/accountType',
            code: 'invalid_value',
            message: `Method ${body.method} is not offered with this account type.`,
          },
        ]);
      }
      const existing = ownedBy(env.capabilities, customer.id).find(
        (capability) => capability.method === body.method && capability.accountType === body.accountType,
      );
      if (existing) {
        throw stateConflict(
          'capability_exists',
          `Customer ${customer.id} already has capability ${existing.id} for ${body.method}/${body.accountType}.`,
        );
      }
      const now = context.stamp();
      const capability: CapabilityRecord = {
        id: newId('cap'),
        customerId: customer.id,
        method: body.method,
        accountType: body.accountType,
        status: 'pending',
        statusReason: null,
        openTaskIds: [],
        // One application per institution of the environment, each waiting for its decision.
        applications: [...env.institutions.values()].map((institution) => ({
          id: newId('app'),
          institution: { id: institution.id, name: institution.name, bic: institution.bic },
          status: 'requested',
          statusReason: null,
          openTaskIds: [],
          submittedAt: now,
          createdAt: now,
          updatedAt: now,
        })),
        submittedAt: now,
        createdAt: now,
        updatedAt: now,
      };
      env.capabilities.set(capability.id, capability);
      emitCapabilityChange(context, request.environment, 'capability.created', capability);
      return dataResponse(presentRecord(capability), 201);
    },
  };
}
