/**
 * A customer's rules (sweep a watched wallet to a target): list, get, create, pause and resume,
 * and archive, with the body checked against the customer's own accounts and recipients.
 */
import type { RouteHandlers } from '../http/types.ts';
import type { EnvironmentStore } from '../store/environment-store.ts';
import { newId } from '../store/ids.ts';
import type { CustomerRecord, Environment, MoneyTarget, RuleRecord } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { holdsBalances } from './money-flows.ts';
import { presentRecord } from './presenters.ts';
import type { FieldError } from './problems.ts';
import { invalidFields, stateConflict } from './problems.ts';

type CreateRuleBody = {
  description?: string | null;
  trigger: { accountId: string };
  action: {
    account?: { accountId: string } | null;
    destination?: { recipientId: string; destinationId: string } | null;
  };
};

/**
 * Checks a rule body against the customer's data: the trigger must be one of its issued,
 * open wallets; the action names exactly one target, another open account of the customer or
 * a destination of one of its recipients. Every problem found is reported at once.
 */
function ruleBodyErrors(env: EnvironmentStore, customer: CustomerRecord, body: CreateRuleBody): FieldError[] {
  const errors: FieldError[] = [];
  const trigger = env.accounts.get(body.trigger.accountId);
  if (trigger?.customerId !== customer.id) {
    errors.push({
      pointer: '/trigger/accountId',
      code: 'not_found',
      message: `Customer ${customer.id} has no such account.`,
    });
  } else if (!holdsBalances(trigger)) {
    errors.push({
      pointer: '/trigger/accountId',
      code: 'invalid_value',
      message: 'A rule watches a custodial wallet: the trigger must be an issued wallet account.',
    });
  } else if (trigger.archivedAt !== null) {
    errors.push({
      pointer: '/trigger/accountId',
      code: 'invalid_value',
      message: 'The trigger account is archived.',
    });
  }

  const { account, destination } = body.action;
  if (account && destination) {
    errors.push({
      pointer: '/action',
      code: 'invalid_value',
      message: 'Set exactly one of account and destination, not both.',
    });
  } else if (!account && !destination) {
    errors.push({
      pointer: '/action',
      code: 'required',
      message: 'Set exactly one of account and destination.',
    });
  } else if (account) {
    const target = env.accounts.get(account.accountId);
    if (target?.customerId !== customer.id) {
      errors.push({
        pointer: '/action/account/accountId',
        code: 'not_found',
        message: `Customer ${customer.id} has no such account.`,
      });
    } else if (target.id === body.trigger.accountId) {
      errors.push({
        pointer: '/action/account/accountId',
        code: 'invalid_value',
        message: 'The target must be another account than the watched one.',
      });
    } else if (target.archivedAt !== null) {
      errors.push({
        pointer: '/action/account/accountId',
        code: 'invalid_value',
        message: 'The target account is archived.',
      });
    }
  } else if (destination) {
    const recipient = env.recipients.get(destination.recipientId);
    if (recipient?.customerId !== customer.id) {
      errors.push({
        pointer: '/action/destination/recipientId',
        code: 'not_found',
        message: `Customer ${customer.id} has no such recipient.`,
      });
    } else if (!recipient.destinations.some((candidate) => candidate.id === destination.destinationId)) {
      errors.push({
        pointer: '/action/destination/destinationId',
        code: 'not_found',
        message: `Recipient ${recipient.id} has no such destination.`,
      });
    }
  }
  return errors;
}

/** Handlers of rules: list, get, create, pause/resume and archive. */
export function ruleHandlers(context: DomainContext): RouteHandlers {
  function findRule(environment: Environment, customerId: string, ruleId: string): RuleRecord {
    const env = context.env(environment);
    requireCustomer(env, customerId);
    return requireOwned(env.rules, customerId, ruleId, 'rule');
  }

  function emitRule(
    environment: Environment,
    type: 'rule.created' | 'rule.updated' | 'rule.archived',
    rule: RuleRecord,
  ): void {
    context.emit(environment, type, {
      customerId: rule.customerId,
      resourceType: 'rule',
      resourceId: rule.id,
      object: presentRecord(rule),
      occurredAt: rule.updatedAt,
    });
  }

  function rejectIfArchived(rule: RuleRecord): void {
    if (rule.status === 'archived') {
      throw stateConflict('rule_archived', `Rule ${rule.id} is archived; archiving is terminal.`);
    }
  }

  return {
    listRules: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.rules, customer.id), presentRecord);
    },

    getRule: (request) =>
      dataResponse(
        presentRecord(
          findRule(request.environment, pathParam(request, 'customerId'), pathParam(request, 'ruleId')),
        ),
      ),

    createRule: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const body = request.body as CreateRuleBody;
      const errors = ruleBodyErrors(env, customer, body);
      if (errors.length > 0) throw invalidFields(errors);

      const watching = [...env.rules.values()].find(
        (rule) => rule.status !== 'archived' && rule.trigger.accountId === body.trigger.accountId,
      );
      if (watching) {
        throw stateConflict(
          'trigger_account_watched',
          `Rule ${watching.id} already watches account ${body.trigger.accountId}; at most one non-archived rule may watch an account. Archive it first.`,
        );
      }
      const action: MoneyTarget = {
        account: body.action.account ? { accountId: body.action.account.accountId } : null,
        destination: body.action.destination
          ? {
              recipientId: body.action.destination.recipientId,
              destinationId: body.action.destination.destinationId,
            }
          : null,
      };
      const now = context.stamp();
      const rule: RuleRecord = {
        id: newId('rul'),
        customerId: customer.id,
        status: 'active',
        description: body.description ?? null,
        trigger: { accountId: body.trigger.accountId },
        action,
        createdAt: now,
        updatedAt: now,
        archivedAt: null,
      };
      env.rules.set(rule.id, rule);
      emitRule(request.environment, 'rule.created', rule);
      return dataResponse(presentRecord(rule), 201);
    },

    updateRuleStatus: (request) => {
      const rule = findRule(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'ruleId'),
      );
      const status = (request.body as { status: 'active' | 'paused' }).status;
      rejectIfArchived(rule);
      if (rule.status === status) {
        throw status === 'paused'
          ? stateConflict('rule_already_paused', `Rule ${rule.id} is already paused.`)
          : stateConflict('rule_already_active', `Rule ${rule.id} is already active.`);
      }
      rule.status = status;
      rule.updatedAt = context.stamp();
      emitRule(request.environment, 'rule.updated', rule);
      return dataResponse(presentRecord(rule));
    },

    archiveRule: (request) => {
      const rule = findRule(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'ruleId'),
      );
      rejectIfArchived(rule);
      const now = context.stamp();
      rule.status = 'archived';
      rule.archivedAt = now;
      rule.updatedAt = now;
      emitRule(request.environment, 'rule.archived', rule);
      return dataResponse(presentRecord(rule));
    },
  };
}
