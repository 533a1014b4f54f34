/**
 * A customer's documents: list, get and archive. Archived documents are kept but answer as gone,
 * and archiving announces `document.archived`.
 */
import type { RouteHandlers } from '../http/types.ts';
import type { DocumentRecord, Environment } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer } from './lookups.ts';
import { presentRecord } from './presenters.ts';
import { notFound } from './problems.ts';

/**
 * Handlers of customer documents. Archived documents are kept for compliance but excluded
 * from every read and list: to a client they are gone (404 `not_found`).
 */
export function documentHandlers(context: DomainContext): RouteHandlers {
  function findVisibleDocument(
    environment: Environment,
    customerId: string,
    documentId: string,
  ): DocumentRecord {
    const env = context.env(environment);
    requireCustomer(env, customerId, 'customer_not_found');
    const document = env.documents.get(documentId);
    if (document?.customerId !== customerId || document.archivedAt !== null) {
      throw notFound('document', documentId);
    }
    return document;
  }

  return {
    listDocuments: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'), 'customer_not_found');
      const visible = ownedBy(env.documents, customer.id).filter((document) => document.archivedAt === null);
      return listResponse(request, visible, presentRecord);
    },

    getDocument: (request) =>
      dataResponse(
        presentRecord(
          findVisibleDocument(
            request.environment,
            pathParam(request, 'customerId'),
            pathParam(request, 'documentId'),
          ),
        ),
      ),

    archiveDocument: (request) => {
      const document = findVisibleDocument(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'documentId'),
      );
      const now = context.stamp();
      document.status = 'archived';
      document.archivedAt = now;
      document.updatedAt = now;
      context.emit(request.environment, 'document.archived', {
        customerId: document.customerId,
        resourceType: 'document',
        resourceId: document.id,
        object: presentRecord(document),
        occurredAt: now,
      });
      return dataResponse(presentRecord(document));
    },
  };
}
