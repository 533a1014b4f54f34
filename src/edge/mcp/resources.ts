/**
 * The MCP endpoint's resources: what an agent reads about a customer, and what `resources/subscribe`
 * keeps current. Each is a URI template over one of the facade's own documents, a `query @live`: read
 * once (`resources/read`) it is answered as the query it also is; subscribed, it is the live query
 * every live transport runs (src/events/delivery/live-queries.ts), answered again when the response
 * cache's invalidation (the platform's webhooks, writes here or on another replica, the reconciler)
 * names an answer it read, and each new answer different from the last is a
 * `notifications/resources/updated`.
 *
 * The documents are listed beside the trusted-documents manifest under `mcp:` ids
 * (`configured-door.ts`), so the door admits them as it admits a listed operation, over any
 * transport: the caller's scope, budgets, cost and token expiry apply to them as to every read.
 */

/** One resource kind: its URI template, what it is, and the document that reads it. */
export interface McpResourceKind {
  /** RFC 6570 level 1 template, e.g. `platform://customers/{customerId}/accounts`. */
  readonly uriTemplate: string;
  /** The template's name in `resources/templates/list`. */
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** Its id among the trusted documents (never a manifest's: `mcp:` ids are the facade's own). */
  readonly documentId: string;
  readonly operationName: string;
  /** A `query @live` taking `$customerId` alone. */
  readonly document: string;
}

/** The scheme of every resource URI. */
const SCHEME = 'platform://';

/** The resource kinds, each read for one customer (`{customerId}`). */
export const MCP_RESOURCE_KINDS: readonly McpResourceKind[] = [
  {
    uriTemplate: `${SCHEME}customers/{customerId}`,
    name: 'customer',
    title: 'Customer',
    description:
      'A customer of the platform: its name, type and status, and its capabilities (the payment ' +
      'methods it may use) with their status. Kept current by the platform’s webhooks.',
    documentId: 'mcp:customer',
    operationName: 'McpCustomer',
    document: `query McpCustomer($customerId: ID!) @live {
  customer(id: $customerId) {
    id
    displayName
    type
    status
    createdAt
    updatedAt
    capabilities(first: 50) {
      nodes { id method accountType status statusReason { code message } }
      pageInfo { hasNextPage }
    }
  }
}`,
  },
  {
    uriTemplate: `${SCHEME}customers/{customerId}/accounts`,
    name: 'customer-accounts',
    title: 'Customer accounts and balances',
    description:
      'The accounts of a customer with their balances (available and pending, per currency), ' +
      'oldest first, at most 50. Kept current by the platform’s webhooks: a top-up, a transfer or ' +
      'a new account updates it.',
    documentId: 'mcp:customer-accounts',
    operationName: 'McpCustomerAccounts',
    document: `query McpCustomerAccounts($customerId: ID!) @live {
  customer(id: $customerId) {
    id
    accounts(first: 50) {
      nodes {
        id
        label
        type
        network
        currency
        status
        isDefault
        balances { currency available pending }
        updatedAt
      }
      pageInfo { hasNextPage }
    }
  }
}`,
  },
];

/** The facade's own documents, `[id, body]`, listed beside the manifest. */
export const MCP_RESOURCE_DOCUMENTS: readonly (readonly [id: string, body: string])[] =
  MCP_RESOURCE_KINDS.map((kind) => [kind.documentId, kind.document]);

/** A resource URI read: its kind and the customer it names. */
export interface McpResourceRef {
  readonly uri: string;
  readonly kind: McpResourceKind;
  readonly customerId: string;
}

/** A customer id as a URI segment may carry it: the plain form of ids (no `/`, `%`, dots or spaces). */
const CUSTOMER_ID = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The resource `uri` names, or undefined when it names none. Only the exact form of a template
 * matches: no percent-encoding, no dot segment, no query, so no URI reaches another customer's
 * path by being decoded or normalised.
 */
export function parseResourceUri(uri: string): McpResourceRef | undefined {
  if (!uri.startsWith(SCHEME)) return undefined;
  const segments = uri.slice(SCHEME.length).split('/');
  if (segments[0] !== 'customers') return undefined;
  const customerId = segments[1];
  if (customerId === undefined || !CUSTOMER_ID.test(customerId)) return undefined;
  const rest = segments.slice(2).join('/');
  const kind = MCP_RESOURCE_KINDS.find(
    (candidate) =>
      candidate.uriTemplate.slice(`${SCHEME}customers/{customerId}`.length) ===
      (rest === '' ? '' : `/${rest}`),
  );
  return kind === undefined ? undefined : { uri, kind, customerId };
}

/** The URI of `kind` for `customerId`. */
export function resourceUriOf(kind: McpResourceKind, customerId: string): string {
  return kind.uriTemplate.replace('{customerId}', customerId);
}
