/**
 * The records the store keeps, one type per upstream resource. Field names are the
 * contract's (`schema/upstream/openapi.yaml`); a stored record is what a read returns,
 * except for the few internal fields noted on each type, which presenters drop.
 */

export type Environment = 'sandbox' | 'live';

/** `statusReason` of a capability, an application or a `conflict` problem. */
export type StatusReason = {
  code: string;
  message: string;
  /** A closed set; `platform` is the service operator. */
  actor: 'customer' | 'developer' | 'provider' | 'network' | 'platform';
  retryable: boolean;
};

export type CustomerRecord = {
  id: string;
  type: string;
  externalId: string;
  displayName: string;
  email: string | null;
  status: string;
  createdAt: string;
  updatedAt: string;
};

export type Balance = { currency: string; available: string; pending: string };

export type DeveloperFee = { fixed: string; bips: number };

/** Wallets: `network` and `address`. Bank accounts: the typed bank members. */
export type AccountDetails = {
  network?: string;
  address?: string;
  bankName?: string;
  accountHolderName?: string;
  accountNumberLast4?: string;
  routingNumber?: string;
  iban?: string;
  bic?: string;
  country?: string;
};

export type AccountRecord = {
  id: string;
  customerId: string;
  type: string;
  network: string | null;
  origin: string;
  status: string;
  openTaskIds: string[];
  currency: string;
  label: string;
  isDefault: boolean;
  details: AccountDetails;
  fees: { breakdown: { developer: DeveloperFee | null } };
  balances: Balance[];
  createdAt: string;
  updatedAt: string;
  archivedAt: string | null;
};

export type PersonFacts = { firstName: string; lastName: string; residenceCountry: string };
export type EntityFacts = { legalName: string; registrationCountry: string };

export type RelatedPartyRecord = {
  id: string;
  customerId: string;
  partyType: string;
  roles: string[];
  title: string | null;
  person: PersonFacts | null;
  entity: EntityFacts | null;
  hasOwnership: boolean;
  hasVotingRights: boolean;
  hasControl: boolean;
  createdAt: string;
  updatedAt: string;
  archivedAt: string | null;
};

export type InstitutionRecord = {
  id: string;
  name: string;
  bic: string;
  country: string;
  createdAt: string;
  updatedAt: string;
};

export type CapabilityApplication = {
  id: string;
  institution: { id: string; name: string; bic: string };
  status: string;
  statusReason: StatusReason | null;
  openTaskIds: string[];
  submittedAt: string | null;
  createdAt: string;
  updatedAt: string;
};

export type CapabilityRecord = {
  id: string;
  customerId: string;
  method: string;
  accountType: string;
  status: string;
  statusReason: StatusReason | null;
  openTaskIds: string[];
  applications: CapabilityApplication[];
  submittedAt: string | null;
  createdAt: string;
  updatedAt: string;
};

export type DocumentRecord = {
  id: string;
  customerId: string;
  type: string;
  fileName: string;
  contentType: string;
  sizeBytes: number;
  status: string;
  createdAt: string;
  updatedAt: string;
  archivedAt: string | null;
};

export type RecipientDestination = {
  id: string;
  type: string;
  network: string;
  address: string;
  currency: string;
};

export type RecipientRecord = {
  id: string;
  customerId: string;
  displayName: string;
  type: string;
  destinations: RecipientDestination[];
  createdAt: string;
  updatedAt: string;
};

export type TaskRecord = {
  id: string;
  customerId: string;
  type: string;
  status: string;
  description: string;
  resource: { type: string; id: string } | null;
  dueAt: string | null;
  createdAt: string;
  updatedAt: string;
};

export type TaskSubmissionRecord = {
  id: string;
  customerId: string;
  taskId: string;
  status: string;
  documentIds: string[];
  createdAt: string;
  updatedAt: string;
};

/** Where money goes: a rule's `action` and a transfer's `target`. Exactly one member is set. */
export type MoneyTarget = {
  account: { accountId: string } | null;
  destination: { recipientId: string; destinationId: string } | null;
};

export type QuoteRecord = {
  id: string;
  customerId: string;
  sourceAccountId: string;
  source: { amount: string; currency: string };
  target: { amount: string; currency: string };
  rate: string;
  status: string;
  expiresAt: string;
  transferId: string | null;
  createdAt: string;
  updatedAt: string;
};

export type TransferRecord = {
  id: string;
  customerId: string;
  state: string;
  amount: string;
  currency: string;
  source: { accountId: string };
  target: MoneyTarget;
  ruleId: string | null;
  quoteId: string | null;
  completedAt: string | null;
  createdAt: string;
  updatedAt: string;
};

export type RuleRecord = {
  id: string;
  customerId: string;
  status: string;
  description: string | null;
  trigger: { accountId: string };
  action: MoneyTarget;
  createdAt: string;
  updatedAt: string;
  archivedAt: string | null;
};

export type WebhookEndpointRecord = {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  status: string;
  createdAt: string;
  updatedAt: string;
  archivedAt: string | null;
  /** Internal: the signing secret; shown once, in the create response, and never again. */
  secret: string;
};
