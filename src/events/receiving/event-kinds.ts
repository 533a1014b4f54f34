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
