/** Capabilities: discovery at `/v3/capabilities`, a customer's at `/v3/customers/{customerId}/capabilities`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  Capability,
  CapabilityDiscovery,
  CreateCapabilityInput,
  MutationResult,
  Page,
  PageParams,
} from './types.ts';

/** Capability discovery: a 2xx confirms the key is valid and the API reachable. */
export function discoverCapabilities(up: UpstreamContext): Promise<CapabilityDiscovery> {
  return readRecord<CapabilityDiscovery>(up, '/v3/capabilities');
}

/** Reads one page of a customer's capabilities, with their institution applications. */
export function listCapabilities(
  up: UpstreamContext,
  customerId: string,
  page?: PageParams,
): Promise<Page<Capability>> {
  return readPage<Capability>(up, restPath`/v3/customers/${customerId}/capabilities`, page);
}

/** Reads one capability of a customer. */
export function getCapability(
  up: UpstreamContext,
  customerId: string,
  capabilityId: string,
): Promise<Capability> {
  return readRecord<Capability>(up, restPath`/v3/customers/${customerId}/capabilities/${capabilityId}`);
}

/** Requests a capability for a customer. */
export function createCapability(
  up: UpstreamContext,
  customerId: string,
  body: CreateCapabilityInput,
  idempotencyKey?: string,
): Promise<MutationResult<Capability>> {
  return sendEffect<Capability>(
    up,
    'POST',
    restPath`/v3/customers/${customerId}/capabilities`,
    body,
    idempotencyKey,
  );
}
