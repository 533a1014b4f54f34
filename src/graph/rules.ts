/** Resolvers of `rules.graphql`: rules, the account they watch, and their transitions. */
import type { Resolvers } from '../generated/graphql.ts';
import { recordByArgs, recordReference, linkedRecord } from './resolver-shapes.ts';
import { written } from '../loaders/written.ts';
import { archiveRule, createRule, pauseRule, resumeRule } from '../upstream/rules.ts';
import type { MutationResult, Rule } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import { resolveOwningCustomer } from './customers.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

/** Keeps the operation's loaders true to a rule the upstream just changed. */
function remember(result: MutationResult<Rule>, { loaders }: GraphContext) {
  written.record(loaders, 'Rule', { customerId: result.data.customerId, id: result.data.id }, result.data);
  return toPayload('rule', result);
}

export const ruleResolvers: Resolvers = {
  Query: { rule: recordByArgs('Rule') },
  Mutation: {
    createRule: async (_parent, { input }, context) => {
      const { body, idempotencyKey } = splitInput(input, ['customerId']);
      // Null targets are dropped: the upstream wants exactly one of them set, and says so at `/action`.
      const action = {
        ...(body.action.account ? { account: body.action.account } : {}),
        ...(body.action.destination ? { destination: body.action.destination } : {}),
      };
      const result = await createRule(
        context.upstream,
        input.customerId,
        { ...body, action },
        idempotencyKey,
      );
      return remember(result, context);
    },
    pauseRule: async (_parent, { input }, context) =>
      remember(
        await pauseRule(context.upstream, input.customerId, input.ruleId, splitInput(input).idempotencyKey),
        context,
      ),
    resumeRule: async (_parent, { input }, context) =>
      remember(
        await resumeRule(context.upstream, input.customerId, input.ruleId, splitInput(input).idempotencyKey),
        context,
      ),
    archiveRule: async (_parent, { input }, context) =>
      remember(
        await archiveRule(context.upstream, input.customerId, input.ruleId, splitInput(input).idempotencyKey),
        context,
      ),
  },
  Rule: {
    __resolveReference: recordReference('Rule'),
    customer: resolveOwningCustomer,
    triggerAccountId: (rule) => rule.trigger.accountId,
    trigger: linkedRecord('Account', (rule) => rule.trigger.accountId),
    action: (rule) => ({ ...rule.action, customerId: rule.customerId }),
  },
};
