/**
 * The strictest limits, for documents anyone may send without a token (anonymous-documents.ts):
 * one `_service` field, and no alias anywhere. Without them, fifteen aliases of `_service { sdl }`
 * turn a request of a few hundred bytes into an answer of megabytes, for free. A gateway composing
 * the supergraph sends exactly `{ _service { sdl } }` (under an operation name of its choice).
 */
import { Kind, visit, type DocumentNode } from 'graphql';

/** The field a gateway reads the subgraph's SDL from. */
const SERVICE_FIELD = '_service';

/** True when `document` selects `_service` at most once, and nothing in it has an alias. */
export function withinAnonymousServiceLimits(document: DocumentNode): boolean {
  const seen = { serviceFields: 0, aliases: 0 };
  visit(document, {
    [Kind.FIELD](field) {
      if (field.alias !== undefined) seen.aliases += 1;
      if (field.name.value === SERVICE_FIELD) seen.serviceFields += 1;
    },
  });
  return seen.aliases === 0 && seen.serviceFields <= 1;
}
