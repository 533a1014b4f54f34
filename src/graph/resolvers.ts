/**
 * Every resolver map of the schema, one per domain file of `schema/graph/`. `createSchema` merges
 * them; a new domain adds its map here.
 */
import type { Resolvers } from '../generated/graphql.ts';
import { accountResolvers } from './accounts.ts';
import { baseResolvers } from './base.ts';
import { capabilityResolvers } from './capabilities.ts';
import { customerResolvers } from './customers.ts';
import { documentResolvers } from './documents.ts';
import { eventResolvers } from './events.ts';
import { institutionResolvers } from './institutions.ts';
import { moneyMovementResolvers } from './money-movement.ts';
import { nodeResolvers } from './node.ts';
import { recipientResolvers } from './recipients.ts';
import { relatedPartyResolvers } from './related-parties.ts';
import { ruleResolvers } from './rules.ts';
import { sandboxResolvers } from './sandbox.ts';
import { taskResolvers } from './tasks.ts';
import { webhookResolvers } from './webhooks.ts';

export const resolverMaps: Resolvers[] = [
  baseResolvers,
  customerResolvers,
  accountResolvers,
  relatedPartyResolvers,
  capabilityResolvers,
  institutionResolvers,
  documentResolvers,
  recipientResolvers,
  taskResolvers,
  moneyMovementResolvers,
  ruleResolvers,
  webhookResolvers,
  sandboxResolvers,
  eventResolvers,
  nodeResolvers,
];
