/**
 * The upstream's environments, a word of every layer (the door, the callers, the upstream client,
 * the event pipeline): kept at the ground, beside `environments.ts`, so no layer imports another's
 * file for it.
 */

/** The two upstream environments; a key belongs to exactly one. */
export type PlatformEnvironment = 'sandbox' | 'live';

/** The environments the upstream serves, in the order they are listed. */
export const PLATFORM_ENVIRONMENTS: readonly PlatformEnvironment[] = ['sandbox', 'live'];
