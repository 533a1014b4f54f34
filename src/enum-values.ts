/**
 * The upstream's snake_case value behind each GraphQL enum value. Resolvers install these as the
 * enums' internal values, so resolvers and upstream records speak the upstream's strings; codegen.ts
 * reads the same maps, so the generated types and the runtime cannot disagree.
 */

/** `StatusReasonActor`: the spec's closed `statusReason.actor` set. */
export const STATUS_REASON_ACTOR_VALUES = {
  CUSTOMER: 'customer',
  DEVELOPER: 'developer',
  PROVIDER: 'provider',
  NETWORK: 'network',
  PLATFORM: 'platform',
} as const;

/** `RelatedPartyRole`: the roles a related party can hold. */
export const RELATED_PARTY_ROLE_VALUES = {
  CONTROL_PERSON: 'control_person',
  DIRECTOR: 'director',
  OFFICER: 'officer',
  AUTHORIZED_SIGNER: 'authorized_signer',
  AUTHORIZED_REPRESENTATIVE: 'authorized_representative',
  COMPLIANCE_OFFICER: 'compliance_officer',
  PRIMARY_CONTACT: 'primary_contact',
  ACCOUNT_ADMINISTRATOR: 'account_administrator',
  TRUSTEE: 'trustee',
  SETTLOR: 'settlor',
  PROTECTOR: 'protector',
  BENEFICIARY: 'beneficiary',
  GENERAL_PARTNER: 'general_partner',
  LIMITED_PARTNER: 'limited_partner',
  OTHER: 'other',
} as const;
