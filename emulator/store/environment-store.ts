/**
 * The records of one environment (sandbox or live), one map per resource, keyed by id.
 */
import type {
  AccountRecord,
  CapabilityRecord,
  CustomerRecord,
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

/**
 * All the records of one environment. Sandbox and live each get their own, so an id
 * of one environment is simply absent from the other's maps.
 */
export type EnvironmentStore = {
  customers: Map<string, CustomerRecord>;
  accounts: Map<string, AccountRecord>;
  relatedParties: Map<string, RelatedPartyRecord>;
  institutions: Map<string, InstitutionRecord>;
  capabilities: Map<string, CapabilityRecord>;
  documents: Map<string, DocumentRecord>;
  recipients: Map<string, RecipientRecord>;
  tasks: Map<string, TaskRecord>;
  taskSubmissions: Map<string, TaskSubmissionRecord>;
  quotes: Map<string, QuoteRecord>;
  transfers: Map<string, TransferRecord>;
  rules: Map<string, RuleRecord>;
  webhookEndpoints: Map<string, WebhookEndpointRecord>;
};

/** Creates an environment with no records at all. */
export function createEnvironmentStore(): EnvironmentStore {
  return {
    customers: new Map(),
    accounts: new Map(),
    relatedParties: new Map(),
    institutions: new Map(),
    capabilities: new Map(),
    documents: new Map(),
    recipients: new Map(),
    tasks: new Map(),
    taskSubmissions: new Map(),
    quotes: new Map(),
    transfers: new Map(),
    rules: new Map(),
    webhookEndpoints: new Map(),
  };
}

/** Puts records into one of an environment's maps, keyed by id. */
export function putAll<T extends { id: string }>(map: Map<string, T>, records: readonly T[]): void {
  for (const record of records) map.set(record.id, record);
}
