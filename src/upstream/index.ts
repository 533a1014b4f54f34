/**
 * The upstream layer's public surface: the only code that knows REST. Resolvers and loaders call
 * these typed functions with an {@link UpstreamContext}.
 */
export * from './accounts.ts';
export * from './capabilities.ts';
export * from './customers.ts';
export * from './documents.ts';
export * from './institutions.ts';
export * from './money-movement.ts';
export * from './recipients.ts';
export * from './related-parties.ts';
export * from './rules.ts';
export * from './sandbox.ts';
export * from './tasks.ts';
export * from './webhook-endpoints.ts';
export { createUpstreamClient } from './client.ts';
export type { UpstreamClient, UpstreamClientOptions } from './client.ts';
export { createUpstreamContext } from './context.ts';
export type { UpstreamContext, UpstreamContextOptions } from './context.ts';
export type { UpstreamCredentials } from './credentials.ts';
export { UpstreamProblemError, UpstreamUnavailableError } from './errors.ts';
export type { UnavailableReason } from './errors.ts';
export type * from './types.ts';
