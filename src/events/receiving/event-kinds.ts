/**
 * The upstream event kinds the facade subscribes its webhook endpoint to: every kind in
 * `docs/upstream-assumptions.md` ("Events and webhooks"), because `events(types:)` serves them all.
 */
export const SUBSCRIBED_EVENT_KINDS = [
  'customer.created',
  'customer.updated',
  'account.created',
  'account.updated',
  'capability.created',
  'capability.status_changed',
  'related_party.created',
  'related_party.archived',
  'document.archived',
  'rule.created',
  'rule.updated',
  'rule.archived',
  'transfer.created',
  'transfer.completed',
] as const;

export type SubscribedEventKind = (typeof SUBSCRIBED_EVENT_KINDS)[number];

/**
 * What an event makes stale in the response cache (`src/events/invalidation.ts` applies it):
 * - `record`: the event's resource and what lies under it (an account's fees);
 * - `list`: its customer's list of that resource, every page and filter;
 * - `customer`: the parent customer's record; `customer-list`: the list of every customer;
 * - `accounts`, `quotes`: every account (balances) or quote (status) of the customer, records and lists.
 */
export type StaleByEvent = 'record' | 'list' | 'customer' | 'customer-list' | 'accounts' | 'quotes';

/**
 * Each kind's stale answers. A related party's creation or archiving advances its customer's
 * `updatedAt` in the same transaction (the contract says so); a transfer moves balances and, when
 * it executes a quote, changes the quote, so those go with it even though the platform also sends
 * `account.updated`. A kind missing here (a new upstream kind) drops everything of its customer.
 */
export const STALE_BY_EVENT_KIND: Readonly<Record<SubscribedEventKind, readonly StaleByEvent[]>> = {
  'customer.created': ['record', 'customer-list'],
  'customer.updated': ['record', 'customer-list'],
  'account.created': ['record', 'list'],
  'account.updated': ['record', 'list'],
  'capability.created': ['record', 'list'],
  'capability.status_changed': ['record', 'list'],
  'related_party.created': ['record', 'list', 'customer', 'customer-list'],
  'related_party.archived': ['record', 'list', 'customer', 'customer-list'],
  'document.archived': ['record', 'list'],
  'rule.created': ['record', 'list'],
  'rule.updated': ['record', 'list'],
  'rule.archived': ['record', 'list'],
  'transfer.created': ['record', 'list', 'accounts', 'quotes'],
  'transfer.completed': ['record', 'list', 'accounts', 'quotes'],
};
