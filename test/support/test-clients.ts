/**
 * The callers the tests act as: OAuth clients of the run's issuer (client credentials), each with
 * the roles and customers its access tokens carry. Test-only secrets.
 */
export const TEST_CLIENTS = {
  /** Sees every customer and manages platform-wide resources. */
  operator: { clientId: 'test-operator', clientSecret: 'test-operator-secret', roles: ['operator'] },
  /** Scoped to the demo customer `cus_acme` (a business with accounts, parties, capabilities). */
  acme: { clientId: 'test-acme', clientSecret: 'test-acme-secret', roles: [], customerIds: ['cus_acme'] },
  /** Scoped to the demo customer `cus_globex`. */
  globex: {
    clientId: 'test-globex',
    clientSecret: 'test-globex-secret',
    roles: [],
    customerIds: ['cus_globex'],
  },
  /** A gateway's service credential: may read the SDL when introspection is off, and no customer. */
  schemaReader: {
    clientId: 'test-schema-reader',
    clientSecret: 'test-schema-reader-secret',
    roles: ['schema-reader'],
    customerIds: [],
  },
  /** A batch job of `cus_acme`: a client `RATE_LIMIT_BY_CLIENT` can give a small budget. */
  batchJob: {
    clientId: 'test-batch-job',
    clientSecret: 'test-batch-job-secret',
    roles: [],
    customerIds: ['cus_acme'],
  },
  /** A web app of `cus_acme`: a client `RATE_LIMIT_BY_CLIENT` can give a large budget. */
  webApp: {
    clientId: 'test-web-app',
    clientSecret: 'test-web-app-secret',
    roles: [],
    customerIds: ['cus_acme'],
  },
  /** A trusted federation gateway acting for `cus_acme`: gets inline traces (`ftv1`) when it asks. */
  gateway: {
    clientId: 'test-gateway',
    clientSecret: 'test-gateway-secret',
    roles: ['gateway'],
    customerIds: ['cus_acme'],
  },
  /** A partner's application acting for `cus_acme`, served the `partner` contract (no internal fields). */
  partner: {
    clientId: 'test-partner',
    clientSecret: 'test-partner-secret',
    roles: [],
    customerIds: ['cus_acme'],
    contract: 'partner',
  },
  /** An internal tool acting for `cus_acme`, served the `internal` contract: the whole schema. */
  internalTool: {
    clientId: 'test-internal-tool',
    clientSecret: 'test-internal-tool-secret',
    roles: [],
    customerIds: ['cus_acme'],
    contract: 'internal',
  },
  /** Authenticated, with no customer and no role: may read only what any caller may. */
  nobody: { clientId: 'test-nobody', clientSecret: 'test-nobody-secret', roles: [], customerIds: [] },
} as const;

export type TestCallerName = keyof typeof TEST_CLIENTS;
