/**
 * Who may read the subgraph's SDL (`_service { sdl }`) when introspection is off: the SDL is the
 * whole schema, so `INTROSPECTION=off` would mean little if anyone could still read it there. A
 * gateway composing the supergraph needs it: it calls with a service credential, a token whose
 * roles hold `schema-reader` (that role alone reaches no customer data), or an operator's. Without
 * a token the answer is 401, with another caller's 403. With introspection on (the default, or
 * `public`), `_service` stays readable as before, anonymously within the strictest limits
 * (src/edge/anonymous-service-limits.ts). The door applies it, over every transport, among its
 * operation checks (src/edge/door/operation-checks.ts).
 */
import { Kind, visit, type DocumentNode } from 'graphql';

/** The role of a service credential that may read the SDL and nothing more. */
const SCHEMA_READER_ROLE = 'schema-reader';

/** What a caller without either role is told. */
export const SERVICE_SDL_FORBIDDEN = 'Reading the schema needs the schema-reader or operator role.';

/** Whether `caller` may read `_service { sdl }` when introspection is off. */
export function mayReadServiceSdl(caller: { readonly operator: boolean; readonly roles: readonly string[] }) {
  return caller.operator || caller.roles.includes(SCHEMA_READER_ROLE);
}

/** Whether `document` selects `_service` anywhere. */
export function selectsService(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    [Kind.FIELD](field) {
      if (field.name.value === '_service') found = true;
    },
  });
  return found;
}
