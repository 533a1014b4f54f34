/**
 * Who may read the subgraph's SDL (`_service { sdl }`) when introspection is off: the SDL is the
 * whole schema, so `INTROSPECTION=off` would mean little if anyone could still read it there. A
 * gateway composing the supergraph needs it: it calls with a service credential, a token whose
 * roles hold `schema-reader` (that role alone reaches no customer data), or an operator's. Without
 * a token the answer is 401, with another caller's 403. With introspection on (the default, or
 * `public`), `_service` stays readable as before, anonymously within the strictest limits
 * (src/edge/anonymous-service-limits.ts).
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { GraphQLError, Kind, visit, type DocumentNode } from 'graphql';

/** The role of a service credential that may read the SDL and nothing more. */
const SCHEMA_READER_ROLE = 'schema-reader';

/** What the plugin reads from the context: the caller, absent for an anonymous request. */
export interface ServiceSdlContext {
  readonly caller?: { readonly operator: boolean; readonly roles: readonly string[] } | undefined;
}

/** Refuses `_service` to callers without the operator or schema-reader role; add it when introspection is off. */
export function createServiceSdlAccessPlugin<
  TContext extends ServiceSdlContext,
>(): ApolloServerPlugin<TContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ document, contextValue }) {
          if (!selectsService(document)) return;
          const caller = contextValue.caller;
          if (caller === undefined) {
            throw new GraphQLError('Reading the schema needs a service credential.', {
              extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } },
            });
          }
          if (!mayReadServiceSdl(caller)) {
            throw new GraphQLError(SERVICE_SDL_FORBIDDEN, {
              extensions: { code: 'FORBIDDEN', http: { status: 403 } },
            });
          }
        },
      };
    },
  };
}

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
