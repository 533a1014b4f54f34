/**
 * What every mutation resolver does with its input and its result: separate the facade's
 * `idempotencyKey` from the upstream body, and hand back the resource with the key it was sent with.
 */
import type { MutationResult } from '../upstream/types.ts';

/** The fields of a mutation input that are not part of the upstream body. */
interface IdempotentInput {
  idempotencyKey?: string | null;
}

/** A shallow copy of `T` where no field is null: an absent optional field, not a null one. */
export type WithoutNulls<T> = { [K in keyof T]: Exclude<T[K], null> };

/**
 * Splits a mutation input into the upstream body and the idempotency key. Top-level fields set to
 * null are left out, because the upstream bodies mark optional fields by absence.
 *
 * @param omit input fields that belong to the REST path (ids), not to the body.
 */
export function splitInput<T extends IdempotentInput, O extends keyof T = never>(
  input: T,
  omit: readonly O[] = [],
): { body: WithoutNulls<Omit<T, O | 'idempotencyKey'>>; idempotencyKey: string | undefined } {
  const body: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(input)) {
    if (name === 'idempotencyKey' || (omit as readonly string[]).includes(name) || value === null) continue;
    if (value !== undefined) body[name] = value;
  }
  return {
    body: body as WithoutNulls<Omit<T, O | 'idempotencyKey'>>,
    idempotencyKey: input.idempotencyKey ?? undefined,
  };
}

/** The idempotency fields every effectful mutation payload carries. */
export interface IdempotencyFields {
  idempotencyKey: string;
  replayed: boolean;
}

/** Builds a mutation payload holding the resource under `field`, with its idempotency facts. */
export function toPayload<F extends string, T>(
  field: F,
  result: MutationResult<T>,
): Record<F, T> & IdempotencyFields {
  return {
    [field]: result.data,
    idempotencyKey: result.idempotencyKey,
    replayed: result.replayed,
  } as Record<F, T> & IdempotencyFields;
}
