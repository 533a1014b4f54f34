/**
 * Institutions: the banks that decide capability applications; reference data, read-only.
 */
import type { RouteHandlers } from '../http/types.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { pathParam } from './lookups.ts';
import { presentRecord } from './presenters.ts';
import { notFound } from './problems.ts';

/** Handlers of institutions: the banks that decide capability applications (read-only). */
export function institutionHandlers(context: DomainContext): RouteHandlers {
  return {
    listInstitutions: (request) =>
      listResponse(request, context.env(request.environment).institutions.values(), presentRecord),

    getInstitution: (request) => {
      const institutionId = pathParam(request, 'institutionId');
      const institution = context.env(request.environment).institutions.get(institutionId);
      if (!institution) throw notFound('institution', institutionId);
      return dataResponse(presentRecord(institution));
    },
  };
}
