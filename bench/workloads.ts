/**
 * The benchmark's workloads. Each one is a screen a frontend team builds, asked two ways over the
 * same upstream: as one GraphQL query to the facade, and as the direct REST calls a careful backend
 * client makes for the same data (the baseline: independent calls in parallel, nothing fetched twice).
 */
import { Pool } from 'undici';

/** One screen, asked of the facade and of the upstream directly. */
export interface Workload {
  name: string;
  description: string;
  /** The operation sent to the facade. */
  query: string;
  /** The same data read straight from the REST API; resolves to the number of accounts seen. */
  direct: (rest: RestClient) => Promise<number>;
  /** Number of accounts the facade's answer holds, to check both ways read the same data. */
  countAccounts: (data: unknown) => number;
}

/** A minimal keep-alive REST client for the baseline, as lean as a hand-written one would be. */
export interface RestClient {
  get<T>(path: string): Promise<T>;
  close(): Promise<void>;
}

/** A REST client on one undici pool with the same connection budget as the facade's. */
export function createRestClient(baseUrl: string, apiKey: string, connections: number): RestClient {
  const pool = new Pool(baseUrl, { connections, pipelining: 1 });
  return {
    async get<T>(path: string): Promise<T> {
      const response = await pool.request({ method: 'GET', path, headers: { 'x-api-key': apiKey } });
      const body = (await response.body.json()) as T;
      if (response.statusCode !== 200) throw new Error(`GET ${path} answered ${response.statusCode}`);
      return body;
    },
    close: () => pool.close(),
  };
}

interface Envelope<T> {
  data: T;
}
interface ListEnvelope<T> {
  data: T[];
}
interface IdRecord {
  id: string;
}

/** The customer dashboard: a customer, its accounts with balances and fees, parties, capabilities (`$id`). */
export const dashboardQuery = /* GraphQL */ `
  query Dashboard($id: ID!) {
    customer(id: $id) {
      id
      displayName
      accounts {
        nodes {
          id
          type
          network
          status
          balances {
            currency
            available
            pending
          }
          fees {
            breakdown {
              developer {
                fixed
                bips
              }
            }
          }
        }
      }
      relatedParties {
        nodes {
          id
          displayName
          roles
        }
      }
      capabilities {
        nodes {
          id
          method
          status
          applications {
            status
            institution {
              name
            }
          }
        }
      }
    }
  }
`;

const portfolioQuery = /* GraphQL */ `
  query Portfolio {
    customers(first: 3) {
      nodes {
        id
        displayName
        accounts {
          nodes {
            id
            balances {
              currency
              available
            }
            fees {
              breakdown {
                developer {
                  fixed
                  bips
                }
              }
            }
          }
        }
      }
    }
  }
`;

type Json = Record<string, unknown>;

function accountNodes(customer: unknown): unknown[] {
  const accounts = (customer as Json | null)?.accounts as Json | null | undefined;
  return (accounts?.nodes as unknown[] | undefined) ?? [];
}

export const workloads: readonly Workload[] = [
  {
    name: 'customer dashboard',
    description:
      'one business customer with its accounts (balances, fees), related parties and capabilities (applications)',
    query: JSON.stringify({ query: dashboardQuery, variables: { id: 'cus_acme' } }),
    async direct(rest) {
      const [, accounts] = await Promise.all([
        rest.get<Envelope<IdRecord>>('/v3/customers/cus_acme'),
        rest.get<ListEnvelope<IdRecord>>('/v3/customers/cus_acme/accounts'),
        rest.get<ListEnvelope<IdRecord>>('/v3/customers/cus_acme/related-parties'),
        rest.get<ListEnvelope<IdRecord>>('/v3/customers/cus_acme/capabilities'),
      ]);
      return accounts.data.length;
    },
    countAccounts: (data) => accountNodes((data as Json).customer).length,
  },
  {
    name: 'portfolio',
    description: 'three customers, each with its accounts, balances and fees',
    query: JSON.stringify({ query: portfolioQuery }),
    async direct(rest) {
      const customers = await rest.get<ListEnvelope<IdRecord>>('/v3/customers?limit=3');
      const lists = await Promise.all(
        customers.data.map((customer) =>
          rest.get<ListEnvelope<IdRecord>>(`/v3/customers/${customer.id}/accounts`),
        ),
      );
      return lists.reduce((sum, list) => sum + list.data.length, 0);
    },
    countAccounts: (data) =>
      (((data as Json).customers as Json).nodes as unknown[]).reduce<number>(
        (sum, customer) => sum + accountNodes(customer).length,
        0,
      ),
  },
];
