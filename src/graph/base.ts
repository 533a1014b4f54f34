/** Resolvers of `base.graphql`: scalars, the actor enum, and `apiStatus`. */
import type { Resolvers } from '../generated/graphql.ts';
import { checkApiStatus } from './api-status.ts';
import { STATUS_REASON_ACTOR_VALUES } from '../enum-values.ts';
import { DateTimeScalar, DecimalScalar } from './scalars.ts';

export const baseResolvers: Resolvers = {
  DateTime: DateTimeScalar,
  Decimal: DecimalScalar,
  // The upstream sends snake_case values; the enum's internal values are those strings.
  StatusReasonActor: STATUS_REASON_ACTOR_VALUES,
  Query: {
    apiStatus: (_parent, _args, { upstream }) => checkApiStatus(upstream),
  },
};
