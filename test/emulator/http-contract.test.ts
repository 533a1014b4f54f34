import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, test } from 'vitest';
import { createDomain } from '../../emulator/domain/index.ts';
import { CONTRACT_URL, loadContract } from '../../emulator/http/contract.ts';

const contract = loadContract();
const document = parse(readFileSync(CONTRACT_URL, 'utf8')) as {
  paths: Record<
    string,
    Record<
      string,
      { operationId: string; tags: string[]; 'x-spec': string; responses: Record<string, unknown> }
    >
  >;
  components: { schemas: Record<string, unknown> };
};

describe('the upstream contract', () => {
  test('every operation has a unique operationId, one tag, and says whether the spec shows it', () => {
    const ids = contract.operations.map((operation) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const pathItem of Object.values(document.paths)) {
      for (const operation of Object.values(pathItem)) {
        expect(operation.tags).toHaveLength(1);
        expect(['shown', 'assumed']).toContain(operation['x-spec']);
        expect(operation.responses.default).toBeDefined();
      }
    }
  });

  test('exactly the operations the spec shows are marked x-spec: shown', () => {
    const shown = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, operation]) => operation['x-spec'] === 'shown')
        .map(([method, operation]) => `${method.toUpperCase()} ${path} ${operation.operationId}`),
    );
    expect(shown.sort()).toEqual(
      [
        // The ten numbered endpoints.
        'GET /v3/customers/{customerId}/accounts/{accountId}/fees getAccountFees',
        'GET /v3/customers/{customerId}/accounts/{accountId} getAccount',
        'POST /v3/customers/{customerId}/related-parties createRelatedParty',
        'GET /v3/customers/{customerId}/related-parties listRelatedParties',
        'POST /v3/sandbox/accounts/{accountId}/topup sandboxTopUp',
        'POST /v3/sandbox/customers/{customerId}/capabilities/{capabilityId}/status sandboxSetCapabilityStatus',
        'DELETE /v3/customers/{customerId}/documents/{documentId} archiveDocument',
        'DELETE /v3/webhooks/{webhookId} archiveWebhookEndpoint',
        'GET /v3/capabilities discoverCapabilities',
        'POST /v3/customers createCustomer',
        // Named by the spec's prose, states table and Events section.
        'PUT /v3/customers/{customerId}/accounts/{accountId}/fees replaceAccountFees',
        'PATCH /v3/customers/{customerId}/rules/{ruleId} updateRuleStatus',
        'DELETE /v3/customers/{customerId}/rules/{ruleId} archiveRule',
        'POST /v3/webhooks createWebhookEndpoint',
        'GET /v3/webhooks listWebhookEndpoints',
        'PATCH /v3/webhooks/{webhookId} updateWebhookEndpoint',
        'DELETE /v3/customers/{customerId}/related-parties/{relatedPartyId} archiveRelatedParty',
        'DELETE /v3/customers/{customerId}/accounts/{accountId} archiveAccount',
      ].sort(),
    );
  });

  test('every effectful operation takes an Idempotency-Key; only sandbox ones make it optional', () => {
    for (const operation of contract.operations) {
      const header = operation.parameters.find((parameter) => parameter.name === 'Idempotency-Key');
      if (operation.method === 'GET') {
        expect(header).toBeUndefined();
      } else {
        expect(header?.required, operation.route).toBe(!operation.pathTemplate.startsWith('/v3/sandbox/'));
      }
    }
  });

  test('the component schemas the facade maps to exist under their exact names', () => {
    const names = Object.keys(document.components.schemas);
    for (const name of [
      'Customer',
      'Account',
      'Balance',
      'AccountDetails',
      'AccountFees',
      'DeveloperFee',
      'RelatedParty',
      'RelatedPartySummary',
      'Person',
      'Entity',
      'Capability',
      'CapabilityApplication',
      'CapabilityStatusReason',
      'Institution',
      'CustomerDocument',
      'WebhookEndpoint',
      'WebhookEndpointWithSecret',
      'Rule',
      'RuleTrigger',
      'RuleAction',
      'Recipient',
      'RecipientDestination',
      'Task',
      'TaskSubmission',
      'Quote',
      'Transfer',
      'SandboxTopUp',
      'CapabilityDiscovery',
      'Problem',
      'FieldError',
      'StatusReason',
      'BlockingResource',
      'WebhookEvent',
      'CreateCustomerInput',
      'CreateRelatedPartyInput',
      'ReplaceAccountFeesInput',
      'CreateRuleInput',
      'UpdateRuleStatusInput',
      'CreateWebhookEndpointInput',
      'UpdateWebhookEndpointInput',
      'SandboxTopUpInput',
      'SandboxSetCapabilityStatusInput',
      'CreateAccountInput',
      'CreateCapabilityInput',
    ]) {
      expect(names).toContain(name);
    }
  });

  test('the emulator implements every operation of the contract, and nothing else', () => {
    const domain = createDomain({ data: 'empty', publishEvent: () => {} });
    try {
      expect(Object.keys(domain.handlers).sort()).toEqual(
        contract.operations.map((o) => o.operationId).sort(),
      );
    } finally {
      domain.close();
    }
  });
});
