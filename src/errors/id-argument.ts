/**
 * An id refused where it entered: the argument that held it, by its GraphQL input path. The
 * refusal itself is the upstream layer's ({@link UnsafeIdError}, from the one check every id of an
 * upstream path passes); this says which argument of the operation it came from, so the caller
 * can tell which of several ids was wrong.
 */
import { UnsafeIdError } from '../upstream/errors.ts';
import type { InputPath } from './input-path.ts';

export class IdArgumentError extends Error {
  /** Where the id was given: argument name, then input field names and list indexes. */
  readonly inputPath: InputPath;
  /** The id as the caller gave it. */
  readonly id: string;

  constructor(inputPath: InputPath, cause: UnsafeIdError) {
    super(cause.message, { cause });
    this.name = 'IdArgumentError';
    this.inputPath = inputPath;
    this.id = cause.id;
  }
}

/** The refused id in `error`'s `originalError`/`cause` chain, located or not; undefined when none. */
export function findIdRefusal(error: unknown): IdArgumentError | UnsafeIdError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current instanceof IdArgumentError || current instanceof UnsafeIdError) return current;
    const original = (current as { originalError?: unknown }).originalError;
    current = original instanceof Error ? original : current.cause;
  }
  return undefined;
}
