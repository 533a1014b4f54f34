/** Sandbox simulations: `/v3/sandbox`. No real funds move. */
import type { UpstreamContext } from './context.ts';
import { UpstreamAccessDeniedError, UpstreamProblemError } from './errors.ts';
import { readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  Capability,
  MutationResult,
  SandboxSetCapabilityStatusInput,
  SandboxTopUp,
  SandboxTopUpInput,
} from './types.ts';

/**
 * Sandbox simulations are for the sandbox: a caller bound to live is refused before anything is
 * sent (the spec: no real funds move in the sandbox), whatever a live key would answer.
 */
function refuseLiveCaller(up: UpstreamContext): void {
  if (up.environment === 'live') {
    throw new UpstreamAccessDeniedError(
      'live_environment',
      'Sandbox operations are for callers in the sandbox environment; this caller is in the live one.',
    );
  }
}

/**
 * Credits an issued sandbox wallet account with test funds. The path names the account alone, so
 * for a caller scoped to some customers the account is first read under each of them: the top-up
 * is sent only for an account proven to be one of theirs (see `access.ts`), and any other account
 * answers as an unknown one does.
 */
export async function sandboxTopUp(
  up: UpstreamContext,
  accountId: string,
  body: SandboxTopUpInput,
  idempotencyKey?: string,
): Promise<MutationResult<SandboxTopUp> & { ownerCustomerId?: string }> {
  refuseLiveCaller(up);
  const owner = up.scope.operator ? undefined : await findAccountOwner(up, accountId);
  const result = await sendEffect<SandboxTopUp>(
    up,
    'POST',
    restPath`/v3/sandbox/accounts/${accountId}/topup`,
    body,
    idempotencyKey,
    owner,
  );
  // The owner found for a scoped caller lets the caller read the credited account afterwards.
  return owner === undefined ? result : { ...result, ownerCustomerId: owner };
}

/** The most customers a scoped caller's top-up looks through for the account's owner. */
const MAX_OWNER_LOOKUPS = 25;

/** Which of the caller's customers holds `accountId`, read under each; a 404 problem when none does. */
async function findAccountOwner(up: UpstreamContext, accountId: string): Promise<string> {
  const customers = up.scope.customers.kind === 'customers' ? [...up.scope.customers.customerIds] : [];
  const candidates = customers.slice(0, MAX_OWNER_LOOKUPS);
  const reads = await Promise.allSettled(
    candidates.map((customerId) =>
      readRecord<{ id: string }>(up, restPath`/v3/customers/${customerId}/accounts/${accountId}`),
    ),
  );
  for (const [index, read] of reads.entries()) {
    if (read.status === 'fulfilled') return candidates[index]!;
    if (!(read.reason instanceof UpstreamProblemError && read.reason.status === 404)) throw read.reason;
  }
  throw new UpstreamProblemError({
    type: `${up.client.problemDocsUrl}/errors/not-found`,
    title: 'Not Found',
    status: 404,
    code: 'not_found',
    detail: `No account with id ${accountId} exists.`,
    correlationId: up.requestId,
  });
}

/** Forces a sandbox capability to `ready`, `rejected` or `restricted`. */
export function sandboxSetCapabilityStatus(
  up: UpstreamContext,
  customerId: string,
  capabilityId: string,
  body: SandboxSetCapabilityStatusInput,
  idempotencyKey?: string,
): Promise<MutationResult<Capability>> {
  refuseLiveCaller(up);
  return sendEffect<Capability>(
    up,
    'POST',
    restPath`/v3/sandbox/customers/${customerId}/capabilities/${capabilityId}/status`,
    body,
    idempotencyKey,
  );
}
