/**
 * The demo data: the same ids, values and timestamps on every start, so examples in the
 * docs and assertions in tests can name them. Timestamps lie in the past; the store's
 * clock moves every later change after the newest of them. `emulator/README.md`
 * ("Demo data") describes this data set for people.
 */
import { createEnvironmentStore, putAll } from './environment-store.ts';
import type { EnvironmentStore } from './environment-store.ts';
import { generateWebhookSecret } from '../webhooks/signature.ts';
import type {
  AccountRecord,
  CapabilityApplication,
  CapabilityRecord,
  CustomerRecord,
  DeveloperFee,
  DocumentRecord,
  InstitutionRecord,
  QuoteRecord,
  RecipientRecord,
  RelatedPartyRecord,
  RuleRecord,
  TaskRecord,
  TaskSubmissionRecord,
  TransferRecord,
  WebhookEndpointRecord,
} from './records.ts';

const DEMO_EPOCH_MS = Date.parse('2025-01-06T09:00:00.000Z');

/** The demo timestamp `minutes` after the demo epoch. */
function at(minutes: number): string {
  return new Date(DEMO_EPOCH_MS + minutes * 60_000).toISOString();
}

/** The newest timestamp in the demo data; every later change is stamped after it. */
export const DEMO_DATA_LATEST_TIMESTAMP = at(600);

const FAR_FUTURE = '2099-12-31T23:59:59.000Z';

function institution(id: string, name: string, bic: string, country: string): InstitutionRecord {
  return { id, name, bic, country, createdAt: at(0), updatedAt: at(0) };
}

const INSTITUTIONS = [
  institution('ins_lead_bank', 'Lead Bank', 'LEADUS44', 'US'),
  institution('ins_cross_river', 'Cross River Bank', 'CRBKUS33', 'US'),
  institution('ins_bankhaus_nord', 'Bankhaus Nord AG', 'BHNODEFF', 'DE'),
];

function customer(
  id: string,
  type: 'business' | 'individual',
  externalId: string,
  displayName: string,
  email: string,
  minute: number,
): CustomerRecord {
  return {
    id,
    type,
    externalId,
    displayName,
    email,
    status: 'active',
    createdAt: at(minute),
    updatedAt: at(minute),
  };
}

type WalletSeed = {
  id: string;
  customerId: string;
  origin: 'issued' | 'external';
  network: string;
  address: string;
  label: string;
  isDefault?: boolean;
  available?: string;
  pending?: string;
  developerFee?: DeveloperFee;
  minute: number;
};

function wallet(seed: WalletSeed): AccountRecord {
  return {
    id: seed.id,
    customerId: seed.customerId,
    type: 'wallet',
    network: seed.network,
    origin: seed.origin,
    status: 'ready',
    openTaskIds: [],
    currency: 'USDC',
    label: seed.label,
    isDefault: seed.isDefault ?? false,
    details: { network: seed.network, address: seed.address },
    fees: { breakdown: { developer: seed.developerFee ?? null } },
    // Issued wallets carry their balances; the upstream knows none for external wallets.
    balances:
      seed.origin === 'issued'
        ? [{ currency: 'USDC', available: seed.available ?? '0.00', pending: seed.pending ?? '0.00' }]
        : [],
    createdAt: at(seed.minute),
    updatedAt: at(seed.minute),
    archivedAt: null,
  };
}

type BankAccountSeed = {
  id: string;
  customerId: string;
  label: string;
  bankName: string;
  accountHolderName: string;
  routingNumber: string;
  accountNumberLast4: string;
  developerFee?: DeveloperFee;
  minute: number;
};

function bankAccount(seed: BankAccountSeed): AccountRecord {
  return {
    id: seed.id,
    customerId: seed.customerId,
    type: 'bank_account',
    network: null,
    origin: 'external',
    status: 'ready',
    openTaskIds: [],
    currency: 'USD',
    label: seed.label,
    isDefault: false,
    details: {
      bankName: seed.bankName,
      accountHolderName: seed.accountHolderName,
      routingNumber: seed.routingNumber,
      accountNumberLast4: seed.accountNumberLast4,
      country: 'US',
    },
    fees: { breakdown: { developer: seed.developerFee ?? null } },
    balances: [],
    createdAt: at(seed.minute),
    updatedAt: at(seed.minute),
    archivedAt: null,
  };
}

const SANDBOX_CUSTOMERS = [
  customer('cus_acme', 'business', 'acme-robotics', 'Acme Robotics Ltd', 'finance@acme-robotics.test', 10),
  customer('cus_ada', 'individual', 'ada-lovelace', 'Ada Lovelace', 'ada@lovelace.test', 20),
  customer('cus_globex', 'business', 'globex-trading', 'Globex Trading LLC', 'treasury@globex.test', 30),
];

const SANDBOX_ACCOUNTS = [
  wallet({
    id: 'acc_acme_eth',
    customerId: 'cus_acme',
    origin: 'issued',
    network: 'ethereum',
    address: '0x3f5CE5FBFe3E9af3971dD833D26bA9b5C936f0bE',
    label: 'Acme treasury (Ethereum)',
    isDefault: true,
    available: '12500.00',
    developerFee: { fixed: '0.50', bips: 25 },
    minute: 40,
  }),
  wallet({
    id: 'acc_acme_polygon',
    customerId: 'cus_acme',
    origin: 'issued',
    network: 'polygon',
    address: '0x8dB0a2C5E1f3bF6aC4dE7a91b2F0c3D4e5A6b7C8',
    label: 'Acme collections (Polygon)',
    minute: 41,
  }),
  bankAccount({
    id: 'acc_acme_bank',
    customerId: 'cus_acme',
    label: 'Acme operating account',
    bankName: 'Lead Bank',
    accountHolderName: 'Acme Robotics Ltd',
    routingNumber: '101019644',
    accountNumberLast4: '4821',
    minute: 42,
  }),
  wallet({
    id: 'acc_ada_sol',
    customerId: 'cus_ada',
    origin: 'issued',
    network: 'solana',
    address: '7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV',
    label: 'Everyday (Solana)',
    isDefault: true,
    available: '845.25',
    pending: '10.00',
    minute: 50,
  }),
  wallet({
    id: 'acc_ada_polygon',
    customerId: 'cus_ada',
    origin: 'issued',
    network: 'polygon',
    address: '0x1aD91ee08f21bE3dE0BA2ba6918E714dA6B45836',
    label: 'Savings (Polygon)',
    available: '2000.00',
    developerFee: { fixed: '0.00', bips: 10 },
    minute: 51,
  }),
  wallet({
    id: 'acc_ada_external',
    customerId: 'cus_ada',
    origin: 'external',
    network: 'ethereum',
    address: '0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B',
    label: 'Hardware wallet',
    minute: 52,
  }),
  wallet({
    id: 'acc_globex_eth',
    customerId: 'cus_globex',
    origin: 'issued',
    network: 'ethereum',
    address: '0x71C7656EC7ab88b098defB751B7401B5f6d8976F',
    label: 'Globex settlement (Ethereum)',
    isDefault: true,
    available: '98000.00',
    developerFee: { fixed: '1.00', bips: 50 },
    minute: 60,
  }),
  wallet({
    id: 'acc_globex_external',
    customerId: 'cus_globex',
    origin: 'external',
    network: 'solana',
    address: 'GvpCiTgq9dmEeojCDBivoLoZqc4AkbUDACpqPMwYLWKh',
    label: 'Globex cold storage',
    minute: 61,
  }),
  bankAccount({
    id: 'acc_globex_bank',
    customerId: 'cus_globex',
    label: 'Globex payroll account',
    bankName: 'Cross River Bank',
    accountHolderName: 'Globex Trading LLC',
    routingNumber: '021214891',
    accountNumberLast4: '7730',
    developerFee: { fixed: '2.50', bips: 0 },
    minute: 62,
  }),
];

type PartySeed = Omit<RelatedPartyRecord, 'createdAt' | 'updatedAt' | 'archivedAt' | 'entity' | 'person'> & {
  person?: RelatedPartyRecord['person'];
  entity?: RelatedPartyRecord['entity'];
  minute: number;
  archivedMinute?: number;
};

function relatedParty({ minute, archivedMinute, person, entity, ...rest }: PartySeed): RelatedPartyRecord {
  return {
    ...rest,
    person: person ?? null,
    entity: entity ?? null,
    createdAt: at(minute),
    updatedAt: at(archivedMinute ?? minute),
    archivedAt: archivedMinute === undefined ? null : at(archivedMinute),
  };
}

const SANDBOX_RELATED_PARTIES = [
  relatedParty({
    id: 'rp_acme_ceo',
    customerId: 'cus_acme',
    partyType: 'person',
    roles: ['control_person', 'officer'],
    title: 'Chief Executive Officer',
    person: { firstName: 'Grace', lastName: 'Hopper', residenceCountry: 'US' },
    hasOwnership: true,
    hasVotingRights: true,
    hasControl: true,
    minute: 100,
  }),
  relatedParty({
    id: 'rp_acme_cfo',
    customerId: 'cus_acme',
    partyType: 'person',
    roles: ['officer', 'authorized_signer'],
    title: 'Chief Financial Officer',
    person: { firstName: 'Katherine', lastName: 'Johnson', residenceCountry: 'US' },
    hasOwnership: false,
    hasVotingRights: false,
    hasControl: false,
    minute: 101,
  }),
  relatedParty({
    id: 'rp_acme_holding',
    customerId: 'cus_acme',
    partyType: 'entity',
    roles: [],
    title: 'Parent company',
    entity: { legalName: 'Acme Holdings plc', registrationCountry: 'GB' },
    hasOwnership: true,
    hasVotingRights: true,
    hasControl: false,
    minute: 102,
  }),
  relatedParty({
    id: 'rp_acme_former_director',
    customerId: 'cus_acme',
    partyType: 'person',
    roles: ['director'],
    title: 'Director',
    person: { firstName: 'Charles', lastName: 'Babbage', residenceCountry: 'GB' },
    hasOwnership: false,
    hasVotingRights: false,
    hasControl: false,
    minute: 103,
    archivedMinute: 300,
  }),
  relatedParty({
    id: 'rp_globex_director',
    customerId: 'cus_globex',
    partyType: 'person',
    roles: ['director', 'control_person'],
    title: 'Managing Director',
    person: { firstName: 'Hedy', lastName: 'Lamarr', residenceCountry: 'AT' },
    hasOwnership: true,
    hasVotingRights: true,
    hasControl: true,
    minute: 110,
  }),
  relatedParty({
    id: 'rp_globex_treasurer',
    customerId: 'cus_globex',
    partyType: 'person',
    roles: ['authorized_signer', 'primary_contact'],
    title: 'Treasury Manager',
    person: { firstName: 'Alan', lastName: 'Turing', residenceCountry: 'GB' },
    hasOwnership: false,
    hasVotingRights: false,
    hasControl: false,
    minute: 111,
  }),
];

function application(
  id: string,
  institutionId: string,
  status: string,
  minute: number,
  extra: Partial<Pick<CapabilityApplication, 'statusReason' | 'openTaskIds'>> = {},
): CapabilityApplication {
  const found = INSTITUTIONS.find((candidate) => candidate.id === institutionId)!;
  return {
    id,
    institution: { id: found.id, name: found.name, bic: found.bic },
    status,
    statusReason: extra.statusReason ?? null,
    openTaskIds: extra.openTaskIds ?? [],
    submittedAt: at(minute),
    createdAt: at(minute),
    updatedAt: at(minute + 30),
  };
}

type CapabilitySeed = Pick<CapabilityRecord, 'id' | 'customerId' | 'method' | 'accountType' | 'status'> &
  Partial<Pick<CapabilityRecord, 'statusReason' | 'openTaskIds' | 'applications'>> & { minute: number };

function capability(seed: CapabilitySeed): CapabilityRecord {
  const { minute, ...rest } = seed;
  return {
    statusReason: null,
    openTaskIds: [],
    applications: [],
    ...rest,
    submittedAt: at(minute),
    createdAt: at(minute),
    updatedAt: at(minute + 30),
  };
}

const SANDBOX_CAPABILITIES = [
  capability({
    id: 'cap_acme_ach',
    customerId: 'cus_acme',
    method: 'ach',
    accountType: 'pooled',
    status: 'ready',
    applications: [application('app_acme_ach_lead', 'ins_lead_bank', 'approved', 120)],
    minute: 120,
  }),
  capability({
    id: 'cap_acme_wire',
    customerId: 'cus_acme',
    method: 'wire',
    accountType: 'pooled',
    status: 'pending',
    openTaskIds: ['tsk_acme_ownership'],
    applications: [
      application('app_acme_wire_lead', 'ins_lead_bank', 'requested', 121, {
        openTaskIds: ['tsk_acme_ownership'],
      }),
      application('app_acme_wire_cross_river', 'ins_cross_river', 'requested', 121),
    ],
    minute: 121,
  }),
  // No institution application: forcing its status answers 422 invalid_capability.
  capability({
    id: 'cap_acme_sepa',
    customerId: 'cus_acme',
    method: 'sepa',
    accountType: 'pooled',
    status: 'pending',
    minute: 122,
  }),
  capability({
    id: 'cap_ada_ach',
    customerId: 'cus_ada',
    method: 'ach',
    accountType: 'pooled',
    status: 'ready',
    applications: [application('app_ada_ach_lead', 'ins_lead_bank', 'approved', 130)],
    minute: 130,
  }),
  capability({
    id: 'cap_globex_ach',
    customerId: 'cus_globex',
    method: 'ach',
    accountType: 'pooled',
    status: 'restricted',
    statusReason: {
      code: 'pending_review',
      message: 'The institution is reviewing the expected transaction volume.',
      actor: 'provider',
      retryable: true,
    },
    applications: [
      application('app_globex_ach_cross_river', 'ins_cross_river', 'restricted', 140, {
        statusReason: {
          code: 'pending_review',
          message: 'The institution is reviewing the expected transaction volume.',
          actor: 'provider',
          retryable: true,
        },
      }),
    ],
    minute: 140,
  }),
];

function documentRecord(
  id: string,
  customerId: string,
  type: string,
  fileName: string,
  contentType: string,
  sizeBytes: number,
  minute: number,
  archivedMinute?: number,
): DocumentRecord {
  return {
    id,
    customerId,
    type,
    fileName,
    contentType,
    sizeBytes,
    status: archivedMinute === undefined ? 'active' : 'archived',
    createdAt: at(minute),
    updatedAt: at(archivedMinute ?? minute),
    archivedAt: archivedMinute === undefined ? null : at(archivedMinute),
  };
}

const SANDBOX_DOCUMENTS = [
  documentRecord(
    'doc_acme_incorporation',
    'cus_acme',
    'certificate_of_incorporation',
    'acme-incorporation.pdf',
    'application/pdf',
    184_320,
    150,
  ),
  documentRecord(
    'doc_acme_ownership',
    'cus_acme',
    'ownership_structure',
    'acme-ownership.pdf',
    'application/pdf',
    96_256,
    151,
  ),
  // Archived: kept in the store for compliance, invisible to every read and list.
  documentRecord(
    'doc_acme_old_statement',
    'cus_acme',
    'bank_statement',
    'acme-statement-2023.pdf',
    'application/pdf',
    40_960,
    152,
    310,
  ),
  documentRecord('doc_ada_passport', 'cus_ada', 'passport', 'ada-passport.jpg', 'image/jpeg', 512_000, 160),
  documentRecord(
    'doc_globex_registration',
    'cus_globex',
    'certificate_of_incorporation',
    'globex-registration.pdf',
    'application/pdf',
    220_160,
    170,
  ),
];

function recipient(
  id: string,
  customerId: string,
  displayName: string,
  type: string,
  destinations: RecipientRecord['destinations'],
  minute: number,
): RecipientRecord {
  return { id, customerId, displayName, type, destinations, createdAt: at(minute), updatedAt: at(minute) };
}

const SANDBOX_RECIPIENTS = [
  recipient(
    'rcp_acme_supplier',
    'cus_acme',
    'Initech Components',
    'business',
    [
      {
        id: 'dst_acme_supplier_eth',
        type: 'wallet',
        network: 'ethereum',
        address: '0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF',
        currency: 'USDC',
      },
      {
        id: 'dst_acme_supplier_sol',
        type: 'wallet',
        network: 'solana',
        address: '9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin',
        currency: 'USDC',
      },
    ],
    180,
  ),
  recipient(
    'rcp_ada_cold',
    'cus_ada',
    'Ada (cold storage)',
    'individual',
    [
      {
        id: 'dst_ada_cold_polygon',
        type: 'wallet',
        network: 'polygon',
        address: '0x6813Eb9362372EEF6200f3b1dbC3f819671cBA69',
        currency: 'USDC',
      },
    ],
    181,
  ),
  recipient(
    'rcp_globex_partner',
    'cus_globex',
    'Umbrella Logistics',
    'business',
    [
      {
        id: 'dst_globex_partner_eth',
        type: 'wallet',
        network: 'ethereum',
        address: '0x1efF47bc3a10a45D4B230B5d10E37751FE6AA718',
        currency: 'USDC',
      },
    ],
    182,
  ),
];

function task(seed: Omit<TaskRecord, 'createdAt' | 'updatedAt'> & { minute: number }): TaskRecord {
  const { minute, ...rest } = seed;
  return { ...rest, createdAt: at(minute), updatedAt: at(minute) };
}

const SANDBOX_TASKS = [
  task({
    id: 'tsk_acme_ownership',
    customerId: 'cus_acme',
    type: 'document_request',
    status: 'open',
    description: 'Upload a document showing the ownership structure of Acme Robotics Ltd.',
    resource: { type: 'capability', id: 'cap_acme_wire' },
    dueAt: '2025-02-06T09:00:00.000Z',
    minute: 200,
  }),
  task({
    id: 'tsk_ada_identity',
    customerId: 'cus_ada',
    type: 'identity_verification',
    status: 'completed',
    description: 'Provide a government-issued identity document.',
    resource: { type: 'customer', id: 'cus_ada' },
    dueAt: null,
    minute: 201,
  }),
];

const SANDBOX_TASK_SUBMISSIONS: TaskSubmissionRecord[] = [
  {
    id: 'tsb_acme_ownership_1',
    customerId: 'cus_acme',
    taskId: 'tsk_acme_ownership',
    status: 'submitted',
    documentIds: ['doc_acme_ownership', 'doc_acme_old_statement'],
    createdAt: at(210),
    updatedAt: at(210),
  },
  {
    id: 'tsb_ada_identity_1',
    customerId: 'cus_ada',
    taskId: 'tsk_ada_identity',
    status: 'accepted',
    documentIds: ['doc_ada_passport'],
    createdAt: at(211),
    updatedAt: at(240),
  },
];

function quote(
  seed: Omit<QuoteRecord, 'createdAt' | 'updatedAt'> & { minute: number; updatedMinute?: number },
): QuoteRecord {
  const { minute, updatedMinute, ...rest } = seed;
  return { ...rest, createdAt: at(minute), updatedAt: at(updatedMinute ?? minute) };
}

const SANDBOX_QUOTES = [
  quote({
    id: 'quo_acme_executed',
    customerId: 'cus_acme',
    sourceAccountId: 'acc_acme_eth',
    source: { amount: '2500.00', currency: 'USDC' },
    target: { amount: '2499.75', currency: 'USD' },
    rate: '0.9999',
    status: 'executed',
    expiresAt: at(255),
    transferId: 'trf_acme_payout',
    minute: 250,
    updatedMinute: 251,
  }),
  quote({
    id: 'quo_acme_open',
    customerId: 'cus_acme',
    sourceAccountId: 'acc_acme_eth',
    source: { amount: '1000.00', currency: 'USDC' },
    target: { amount: '999.90', currency: 'USD' },
    rate: '0.9999',
    status: 'open',
    expiresAt: FAR_FUTURE,
    transferId: null,
    minute: 260,
  }),
  quote({
    id: 'quo_globex_expired',
    customerId: 'cus_globex',
    sourceAccountId: 'acc_globex_eth',
    source: { amount: '500.00', currency: 'USDC' },
    target: { amount: '499.95', currency: 'USD' },
    rate: '0.9999',
    status: 'expired',
    expiresAt: at(275),
    transferId: null,
    minute: 270,
  }),
];

const SANDBOX_TRANSFERS: TransferRecord[] = [
  {
    id: 'trf_acme_payout',
    customerId: 'cus_acme',
    state: 'completed',
    amount: '2500.00',
    currency: 'USDC',
    source: { accountId: 'acc_acme_eth' },
    target: { account: { accountId: 'acc_acme_bank' }, destination: null },
    ruleId: null,
    quoteId: 'quo_acme_executed',
    completedAt: at(252),
    createdAt: at(251),
    updatedAt: at(252),
  },
];

const SANDBOX_RULES: RuleRecord[] = [
  {
    id: 'rul_acme_sweep',
    customerId: 'cus_acme',
    status: 'active',
    description: 'Sweep Polygon collections into the Ethereum treasury',
    trigger: { accountId: 'acc_acme_polygon' },
    action: { account: { accountId: 'acc_acme_eth' }, destination: null },
    createdAt: at(280),
    updatedAt: at(280),
    archivedAt: null,
  },
];

function demoWebhookEndpoint(): WebhookEndpointRecord {
  return {
    id: 'we_demo',
    // Port 9 (discard) has no listener: deliveries fail and show the retry schedule.
    url: 'http://127.0.0.1:9/webhooks',
    events: ['customer.updated'],
    description: 'Demo endpoint; nothing listens on port 9, so deliveries are retried',
    status: 'active',
    createdAt: at(290),
    updatedAt: at(290),
    archivedAt: null,
    // Random on every start: a secret is never written into source code.
    secret: generateWebhookSecret(),
  };
}

const LIVE_CUSTOMERS = [
  customer(
    'cus_live_northwind',
    'business',
    'northwind-traders',
    'Northwind Traders Inc',
    'ap@northwind.test',
    500,
  ),
];

const LIVE_ACCOUNTS = [
  wallet({
    id: 'acc_live_northwind_eth',
    customerId: 'cus_live_northwind',
    origin: 'issued',
    network: 'ethereum',
    address: '0xdAC17F958D2ee523a2206206994597C13D831ec7',
    label: 'Northwind operating wallet',
    isDefault: true,
    available: '50000.00',
    minute: 600,
  }),
];

/**
 * Builds fresh copies of the demo data for both environments. Every call returns new
 * objects, so a reset never shares records with the store it replaces.
 */
export function createDemoData(): { sandbox: EnvironmentStore; live: EnvironmentStore } {
  const sandbox = createEnvironmentStore();
  putAll(sandbox.institutions, structuredClone(INSTITUTIONS));
  putAll(sandbox.customers, structuredClone(SANDBOX_CUSTOMERS));
  putAll(sandbox.accounts, structuredClone(SANDBOX_ACCOUNTS));
  putAll(sandbox.relatedParties, structuredClone(SANDBOX_RELATED_PARTIES));
  putAll(sandbox.capabilities, structuredClone(SANDBOX_CAPABILITIES));
  putAll(sandbox.documents, structuredClone(SANDBOX_DOCUMENTS));
  putAll(sandbox.recipients, structuredClone(SANDBOX_RECIPIENTS));
  putAll(sandbox.tasks, structuredClone(SANDBOX_TASKS));
  putAll(sandbox.taskSubmissions, structuredClone(SANDBOX_TASK_SUBMISSIONS));
  putAll(sandbox.quotes, structuredClone(SANDBOX_QUOTES));
  putAll(sandbox.transfers, structuredClone(SANDBOX_TRANSFERS));
  putAll(sandbox.rules, structuredClone(SANDBOX_RULES));
  putAll(sandbox.webhookEndpoints, [demoWebhookEndpoint()]);

  const live = createEnvironmentStore();
  // Institutions are the provider's reference data, the same in both environments.
  putAll(live.institutions, structuredClone(INSTITUTIONS));
  putAll(live.customers, structuredClone(LIVE_CUSTOMERS));
  putAll(live.accounts, structuredClone(LIVE_ACCOUNTS));
  return { sandbox, live };
}

/** Empty environments, apart from the institutions every environment knows. */
export function createEmptyData(): { sandbox: EnvironmentStore; live: EnvironmentStore } {
  const sandbox = createEnvironmentStore();
  const live = createEnvironmentStore();
  putAll(sandbox.institutions, structuredClone(INSTITUTIONS));
  putAll(live.institutions, structuredClone(INSTITUTIONS));
  return { sandbox, live };
}
