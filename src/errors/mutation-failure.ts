/**
 * A mutation's failure with the idempotency key the mutation was sent with. The key travels to the
 * client in `extensions.idempotencyKey` on every error of the mutation (see `toGraphQLError`), so a
 * client whose mutation failed, timed out or was cut by a shutdown can send it again with the same
 * key and get the original result instead of a second execution.
 */
export class MutationFailure extends Error {
  /** The key the mutation was sent upstream with (the client's own). */
  readonly idempotencyKey: string;

  constructor(idempotencyKey: string, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'MutationFailure';
    this.idempotencyKey = idempotencyKey;
  }
}

/** The idempotency key carried anywhere in `error`'s `originalError`/`cause` chain, if any. */
export function findIdempotencyKey(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current instanceof MutationFailure) return current.idempotencyKey;
    const next = (current as { originalError?: unknown }).originalError;
    current = next instanceof Error ? next : current.cause;
  }
  return undefined;
}
