/**
 * The `User-Agent` of every upstream request, in a module of its own so the tracing entry can tell
 * the upstream client's requests apart (they are traced by the client itself) without importing it.
 */
export const UPSTREAM_USER_AGENT = 'platform-graphql-facade';
