/**
 * The customer dashboard: the signed-in user's customer, its accounts a page at a time, a sandbox
 * top-up per wallet, and the account changes arriving live. Balances are read from the cache only:
 * the top-up's payload and each live event carry the account, and the normalised cache puts them in
 * place, with no refetch.
 */
import { useState } from 'react';
import type { ApolloClient } from '@apollo/client';
import { ApolloProvider, useMutation, useQuery, useSubscription } from '@apollo/client/react';
import {
  AccountChangesDocument,
  DashboardDocument,
  MyCustomersDocument,
  TopUpDocument,
  type AccountSummaryFragment,
} from './gql/graphql.ts';

/** Accounts per page: small, so paging shows. */
const PAGE_SIZE = 2;

/** What one top-up click deposits. */
const TOP_UP_AMOUNT = '25.00';

export function SignIn({ onSignIn }: { onSignIn: () => void }) {
  return (
    <main>
      <h1>Platform dashboard</h1>
      <p>Sign in with a demo user of the dev issuer.</p>
      <button type="button" data-testid="sign-in" onClick={onSignIn}>
        Sign in
      </button>
    </main>
  );
}

export function Problem({ message }: { message: string }) {
  return (
    <main>
      <h1>Platform dashboard</h1>
      <p role="alert" data-testid="problem">
        {message}
      </p>
    </main>
  );
}

export function App({ client }: { client: ApolloClient }) {
  return (
    <ApolloProvider client={client}>
      <main>
        <h1>Platform dashboard</h1>
        <Customers />
      </main>
    </ApolloProvider>
  );
}

function Customers() {
  const { data, error, loading } = useQuery(MyCustomersDocument);
  if (error) return <Problem message={error.message} />;
  if (loading || !data) return <p data-testid="loading">Loading…</p>;
  const customers = data.customers.nodes;
  if (customers.length === 0) return <p>No customer is yours.</p>;
  return (
    <>
      {customers.map((customer) => (
        <Dashboard key={customer.id} customerId={customer.id} />
      ))}
    </>
  );
}

function Dashboard({ customerId }: { customerId: string }) {
  const { data, error, fetchMore, loading } = useQuery(DashboardDocument, {
    variables: { customerId, first: PAGE_SIZE },
  });
  const [events, setEvents] = useState<{ eventId: string; text: string }[]>([]);
  useSubscription(AccountChangesDocument, {
    variables: { customerId },
    onData: ({ data: { data: event } }) => {
      const change = event?.accountChanged;
      if (change == null) return;
      const balance = change.account?.balances[0];
      const text = `${change.type} ${change.accountId}${balance ? `: ${balance.available} ${balance.currency}` : ''}`;
      setEvents((previous) => [{ eventId: change.eventId, text }, ...previous].slice(0, 20));
    },
  });
  if (error) return <Problem message={error.message} />;
  if (loading || !data) return <p data-testid="loading">Loading…</p>;
  const customer = data.customer;
  if (!customer) return <Problem message="This customer cannot be read." />;
  const accounts = customer.accounts;
  return (
    <section>
      <h2 data-testid="customer-name">{customer.displayName ?? customer.id}</h2>
      <table>
        <thead>
          <tr>
            <th>Account</th>
            <th>Type</th>
            <th>Available</th>
            <th>Pending</th>
            <th />
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
      <ul data-testid="live-events">
        {events.map((event) => (
          <li key={event.eventId} data-event-id={event.eventId}>
            {event.text}
          </li>
        ))}
      </ul>
    </section>
  );
}

function AccountRow({ account }: { account: AccountSummaryFragment }) {
  const [topUp, { loading, error }] = useMutation(TopUpDocument);
  const balance =
    account.balances.find((entry) => entry.currency === account.currency) ?? account.balances[0];
  return (
    <tr data-testid={`account-${account.id}`}>
      <td>{account.label}</td>
      <td>{account.network ?? account.type}</td>
      <td data-testid="available">{balance ? `${balance.available} ${balance.currency}` : '—'}</td>
      <td>{balance?.pending ?? '—'}</td>
      <td>
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
