/**
 * The customer dashboard: the signed-in user's customer, its accounts a page at a time, a sandbox
 * top-up per wallet, and the account changes arriving live. Balances are read from the cache only:
 * the top-up's payload and each live event carry the account, and the normalised cache puts them in
 * place, with no refetch. The customer's total is a live query (`query @live`, which the client's
 * link sends over graphql-ws): the facade answers it again whenever a change makes what it read
 * stale, each answer lands in the same cache, and an error (an expired token) is shown, not hidden. Money and dates are written in the reader's locale (format.ts); a facade
 * that cannot be asked is explained (facade-problem.ts), not shown as "Failed to fetch".
 */
import { useEffect, useState, type ReactNode } from 'react';
import type { ApolloClient } from '@apollo/client';
import { CombinedGraphQLErrors, ServerError } from '@apollo/client/errors';
import { ApolloProvider, useMutation, useQuery, useSubscription } from '@apollo/client/react';
import { explainUnanswered } from './facade-problem.ts';
import { formatDateTime, formatMoney } from './format.ts';
import {
  AccountChangesDocument,
  DashboardDocument,
  LiveBalanceDocument,
  MyCustomersDocument,
  TopUpDocument,
  type AccountSummaryFragment,
  type LiveBalanceQuery,
} from './gql/graphql.ts';

/** Accounts per page: small, so paging shows. */
const PAGE_SIZE = 2;

/** What one top-up click deposits. */
const TOP_UP_AMOUNT = '25.00';

/** The page around everything: one heading, and who is signed in with the way out. */
export function Page({
  user,
  onSignOut,
  children,
}: {
  user?: string;
  onSignOut?: () => void;
  children: ReactNode;
}) {
  return (
    <>
      <header>
        <h1>Platform dashboard</h1>
        {user !== undefined ? (
          <p className="session">
            Signed in as <strong data-testid="user">{user}</strong>
            {onSignOut ? (
              <button type="button" data-testid="sign-out" onClick={onSignOut}>
                Sign out
              </button>
            ) : null}
          </p>
        ) : null}
      </header>
      <main>{children}</main>
    </>
  );
}

export function SignIn({ onSignIn, signedOut }: { onSignIn: () => void; signedOut?: boolean }) {
  return (
    <>
      {signedOut ? (
        <p data-testid="signed-out">
          Signed out: this page forgot its token. The issuer may still remember you, and sign you in again
          without asking while its session lasts.
        </p>
      ) : (
        <p>Sign in with a demo user of the dev issuer.</p>
      )}
      <button type="button" data-testid="sign-in" onClick={onSignIn}>
        Sign in
      </button>
    </>
  );
}

export function Problem({ message }: { message: string }) {
  return (
    <p role="alert" data-testid="problem">
      {message}
    </p>
  );
}

/**
 * A failed operation: the facade's own words when it answered, and when it did not (the browser
 * says only "Failed to fetch"), whether it is down or refuses this page's origin.
 */
function OperationProblem({ error, graphqlUrl }: { error: Error; graphqlUrl: string }) {
  const answered = CombinedGraphQLErrors.is(error) || ServerError.is(error);
  const [explanation, setExplanation] = useState<string | undefined>();
  useEffect(() => {
    if (answered) return;
    let current = true;
    void explainUnanswered(graphqlUrl).then((text) => {
      if (current) setExplanation(text);
    });
    return () => {
      current = false;
    };
  }, [answered, graphqlUrl]);
  if (answered) return <Problem message={error.message} />;
  return explanation === undefined ? (
    <p data-testid="loading">Asking the facade…</p>
  ) : (
    <Problem message={explanation} />
  );
}

export function App({ client, graphqlUrl }: { client: ApolloClient; graphqlUrl: string }) {
  return (
    <ApolloProvider client={client}>
      <Customers graphqlUrl={graphqlUrl} />
    </ApolloProvider>
  );
}

function Customers({ graphqlUrl }: { graphqlUrl: string }) {
  const { data, error, loading } = useQuery(MyCustomersDocument);
  if (error) return <OperationProblem error={error} graphqlUrl={graphqlUrl} />;
  if (loading || !data) return <p data-testid="loading">Loading…</p>;
  const customers = data.customers.nodes;
  if (customers.length === 0) return <p>No customer is yours.</p>;
  return (
    <>
      {customers.map((customer) => (
        <Dashboard key={customer.id} customerId={customer.id} graphqlUrl={graphqlUrl} />
      ))}
    </>
  );
}

interface LiveEvent {
  eventId: string;
  occurredAt: string;
  text: string;
}

function Dashboard({ customerId, graphqlUrl }: { customerId: string; graphqlUrl: string }) {
  const { data, error, fetchMore } = useQuery(DashboardDocument, {
    variables: { customerId, first: PAGE_SIZE },
  });
  const [events, setEvents] = useState<LiveEvent[]>([]);
  useSubscription(AccountChangesDocument, {
    variables: { customerId },
    onData: ({ data: { data: event } }) => {
      const change = event?.accountChanged;
      if (change == null) return;
      const balance = change.account?.balances[0];
      const text = `${change.type} ${change.accountId}${balance ? `: ${formatMoney(balance.available, balance.currency)}` : ''}`;
      setEvents((previous) =>
        [{ eventId: change.eventId, occurredAt: change.occurredAt, text }, ...previous].slice(0, 20),
      );
    },
  });
  if (error) return <OperationProblem error={error} graphqlUrl={graphqlUrl} />;
  // Loading with data is a page being fetched: the dashboard (and its live total) stays.
  if (!data) return <p data-testid="loading">Loading…</p>;
  const customer = data.customer;
  if (!customer) return <Problem message="This customer cannot be read." />;
  const accounts = customer.accounts;
  return (
    <section>
      <h2 data-testid="customer-name">{customer.displayName ?? customer.id}</h2>
      <LiveBalance customerId={customerId} />
      <table data-testid="accounts">
        <thead>
          <tr>
            <th scope="col">Account</th>
            <th scope="col">Network</th>
            <th scope="col" className="amount">
              Available
            </th>
            <th scope="col" className="amount">
              Pending
            </th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {accounts?.edges.map(({ node }) => (
            <AccountRow key={node.id} account={node} />
          ))}
        </tbody>
      </table>
      {accounts?.pageInfo.hasNextPage ? (
        <button
          type="button"
          data-testid="more-accounts"
          onClick={() => void fetchMore({ variables: { after: accounts.pageInfo.endCursor } })}
        >
          More accounts
        </button>
      ) : null}
      <h3>Live changes</h3>
      {events.length === 0 ? <p className="quiet">None yet: changes to these accounts appear here.</p> : null}
      <ul data-testid="live-events">
        {events.map((event) => (
          <li key={event.eventId} data-event-id={event.eventId}>
            <time dateTime={event.occurredAt}>{formatDateTime(event.occurredAt)}</time>{' '}
            <span data-testid="event-text">{event.text}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

/**
 * The customer's total available balance, per currency, from a live query: answered at once, then
 * again by the facade whenever a top-up (its webhook, a write, the reconciler) changes it. Every
 * answer goes through Apollo Client's cache (the accounts it reads are the rows' too); when the
 * query ends with an error (the token expired), the total says it stopped and why.
 */
function LiveBalance({ customerId }: { customerId: string }) {
  // `cache-and-network`: every mount asks the facade, so the live query runs whenever the total
  // shows; cache-first would answer a remount from the cache and never ask live again.
  const { data, error } = useQuery(LiveBalanceDocument, {
    variables: { customerId },
    fetchPolicy: 'cache-and-network',
  });
  if (error) {
    return (
      <p role="alert" data-testid="live-balance-error">
        The live total stopped: {error.message}
      </p>
    );
  }
  if (!data) return null;
  return (
    <p>
      Total available, live: <span data-testid="live-balance">{totalsOf(data)}</span>
    </p>
  );
}

/** The sum of every account's available balance, by currency, as the reader's locale writes money. */
function totalsOf(data: LiveBalanceQuery): string {
  const sums = new Map<string, number>();
  for (const { node } of data.customer?.accounts?.edges ?? []) {
    for (const balance of node.balances) {
      sums.set(balance.currency, (sums.get(balance.currency) ?? 0) + Number(balance.available));
    }
  }
  if (sums.size === 0) return '—';
  return [...sums].map(([currency, sum]) => formatMoney(sum.toFixed(2), currency)).join(' + ');
}

function AccountRow({ account }: { account: AccountSummaryFragment }) {
  const [topUp, { loading, error }] = useMutation(TopUpDocument);
  const balance =
    account.balances.find((entry) => entry.currency === account.currency) ?? account.balances[0];
  return (
    <tr data-testid={`account-${account.id}`}>
      <td data-label="Account">
        {account.label}
        <small>
          {' '}
          updated <time dateTime={account.updatedAt}>{formatDateTime(account.updatedAt)}</time>
        </small>
      </td>
      <td data-label="Network">{account.network ?? account.type}</td>
      <td data-label="Available" className="amount" data-testid="available">
        {balance ? formatMoney(balance.available, balance.currency) : '—'}
      </td>
      <td data-label="Pending" className="amount">
        {balance ? formatMoney(balance.pending, balance.currency) : '—'}
      </td>
      <td className="actions">
        {account.type === 'wallet' ? (
          <button
            type="button"
            data-testid="top-up"
            disabled={loading}
            onClick={() =>
              void topUp({
                variables: {
                  input: {
                    accountId: account.id,
                    customerId: account.customerId,
                    amount: TOP_UP_AMOUNT,
                    currency: account.currency,
                    // One key per click: a retry of this click would send the same one.
                    idempotencyKey: crypto.randomUUID(),
                  },
                },
              }).catch(() => undefined)
            }
          >
            Top up {TOP_UP_AMOUNT}
          </button>
        ) : null}
        {error ? <span role="alert">{error.message}</span> : null}
      </td>
    </tr>
  );
}
