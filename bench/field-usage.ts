/**
 * `npm run bench:field-usage`: the CPU cost of recording field usage, per operation, on the path
 * every executed operation takes (src/observability/usage-recorder.ts `record`): the facade's own
 * schema, a dashboard query (its one variable an ID) and a mutation whose variables hold an
 * input object and enum values (the walk over values), each document parsed once as the door hands
 * it, then recorded `BENCH_OPERATIONS` times (default 200,000) per round, best of 5 rounds. Beside
 * it, graphql-js's `validate` of the same document, the cheapest step every operation
 * already pays, as a yardstick. The store is memory: a flush is not on the operation's path.
 */
import { parse, validate } from 'graphql';
import { createLogger } from '../src/logger.ts';
import { createSchema, loadTypeDefs } from '../src/graph/schema.ts';
import { createUsageRecorder } from '../src/observability/usage-recorder.ts';
import { createMemoryUsageStore } from '../src/observability/usage-store.ts';
import type { Caller } from '../src/auth/caller.ts';
import { positiveIntegerFromEnv } from './env.ts';

const operations = positiveIntegerFromEnv('BENCH_OPERATIONS', 200_000);
const schema = createSchema(loadTypeDefs());
const caller: Caller = {
  via: 'token',
  subject: 'user-1',
  clientId: 'web',
  roles: [],
  operator: false,
  scope: { kind: 'all' },
  expiresAt: undefined,
};
const cases = [
  {
    name: 'dashboard query, an ID variable (not walked)',
    document: parse(
      'query Dashboard($id: ID!) { customer(id: $id) { id displayName type accounts(first: 5) { nodes { id label balances { available { amount currency } } } } } }',
    ),
    variables: { id: 'cus_acme' },
  },
  {
    name: 'mutation, input object and enums in variables',
    document: parse(
      'mutation AddParty($input: CreateRelatedPartyInput!) { createRelatedParty(input: $input) { relatedParty { id roles } } }',
    ),
    variables: {
      input: {
        customerId: 'cus_acme',
        partyType: 'person',
        roles: ['DIRECTOR', 'OWNER'],
        person: { firstName: 'Ada', lastName: 'Lovelace', residenceCountry: 'GB' },
        idempotencyKey: 'k',
      },
    },
  },
];

const store = createMemoryUsageStore({ days: 1, maxOperations: 1_000 });
const recorder = createUsageRecorder({
  config: {
    enabled: true,
    days: 1,
    maxOperations: 1_000,
    maxOperationsPerCaller: 1_000,
    flushSeconds: 3_600,
  },
  store,
  contractOf: () => undefined,
  logger: createLogger({ level: 'silent' }),
});

function nsPerOperation(run: () => void, times: number): number {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round += 1) {
    const started = process.cpuUsage();
    for (let index = 0; index < times; index += 1) run();
    const spent = process.cpuUsage(started);
    best = Math.min(best, ((spent.user + spent.system) * 1000) / times);
  }
  return best;
}

for (const { name, document, variables } of cases) {
  const usage = {
    schema,
    document,
    operationName: undefined,
    variables,
    caller,
    clientName: 'web',
    clientVersion: '1.4.0',
  };
  const record = nsPerOperation(() => recorder.record(usage), operations);
  const validation = nsPerOperation(
    () => validate(schema, document),
    Math.max(1, Math.floor(operations / 20)),
  );
  console.log(
    `${name}: record ${(record / 1000).toFixed(2)} µs CPU per operation; validate ${(validation / 1000).toFixed(1)} µs (yardstick)`,
  );
}
await recorder.close();
