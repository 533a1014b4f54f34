/** Rules (standing sweep instructions): `/v3/customers/{customerId}/rules`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  CreateRuleInput,
  MutationResult,
  Page,
  PageParams,
  Rule,
  UpdateRuleStatusInput,
} from './types.ts';

/** Reads one page of a customer's rules. */
export function listRules(up: UpstreamContext, customerId: string, page?: PageParams): Promise<Page<Rule>> {
  return readPage<Rule>(up, restPath`/v3/customers/${customerId}/rules`, page);
}

/** Reads one rule of a customer. */
export function getRule(up: UpstreamContext, customerId: string, ruleId: string): Promise<Rule> {
  return readRecord<Rule>(up, restPath`/v3/customers/${customerId}/rules/${ruleId}`);
}

/** Creates a rule watching a custodial wallet (at most one non-archived rule per trigger account). */
export function createRule(
  up: UpstreamContext,
  customerId: string,
  body: CreateRuleInput,
  idempotencyKey?: string,
): Promise<MutationResult<Rule>> {
  return sendEffect<Rule>(up, 'POST', restPath`/v3/customers/${customerId}/rules`, body, idempotencyKey);
}

/** Pauses an active rule. */
export function pauseRule(
  up: UpstreamContext,
  customerId: string,
  ruleId: string,
  idempotencyKey?: string,
): Promise<MutationResult<Rule>> {
  return updateRuleStatus(up, customerId, ruleId, { status: 'paused' }, idempotencyKey);
}

/** Resumes a paused rule. */
export function resumeRule(
  up: UpstreamContext,
  customerId: string,
  ruleId: string,
  idempotencyKey?: string,
): Promise<MutationResult<Rule>> {
  return updateRuleStatus(up, customerId, ruleId, { status: 'active' }, idempotencyKey);
}

/** Archives a rule (terminal). */
export function archiveRule(
  up: UpstreamContext,
  customerId: string,
  ruleId: string,
  idempotencyKey?: string,
): Promise<MutationResult<Rule>> {
  return sendEffect<Rule>(
    up,
    'DELETE',
    restPath`/v3/customers/${customerId}/rules/${ruleId}`,
    undefined,
    idempotencyKey,
  );
}

function updateRuleStatus(
  up: UpstreamContext,
  customerId: string,
  ruleId: string,
  body: UpdateRuleStatusInput,
  idempotencyKey: string | undefined,
): Promise<MutationResult<Rule>> {
  return sendEffect<Rule>(
    up,
    'PATCH',
    restPath`/v3/customers/${customerId}/rules/${ruleId}`,
    body,
    idempotencyKey,
  );
}
