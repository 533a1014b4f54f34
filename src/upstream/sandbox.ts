/** Sandbox simulations: `/v3/sandbox`. No real funds move. */
import type { UpstreamContext } from './context.ts';
import { sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  Capability,
  MutationResult,
  SandboxSetCapabilityStatusInput,
  SandboxTopUp,
  SandboxTopUpInput,
} from './types.ts';

/** Credits an issued sandbox wallet account with test funds. */
export function sandboxTopUp(
  up: UpstreamContext,
  accountId: string,
  body: SandboxTopUpInput,
  idempotencyKey?: string,
): Promise<MutationResult<SandboxTopUp>> {
  return sendEffect<SandboxTopUp>(
    up,
    'POST',
    restPath`/v3/sandbox/accounts/${accountId}/topup`,
    body,
    idempotencyKey,
  );
}

/** Forces a sandbox capability to `ready`, `rejected` or `restricted`. */
export function sandboxSetCapabilityStatus(
  up: UpstreamContext,
  customerId: string,
  capabilityId: string,
  body: SandboxSetCapabilityStatusInput,
  idempotencyKey?: string,
): Promise<MutationResult<Capability>> {
  return sendEffect<Capability>(
    up,
    'POST',
    restPath`/v3/sandbox/customers/${customerId}/capabilities/${capabilityId}/status`,
    body,
    idempotencyKey,
  );
}
