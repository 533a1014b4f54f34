/**
 * The error of a switch's impossible branch, shared by every layer: it belongs to none of them, so
 * `src/upstream/` need not import from `src/errors/` (which maps upstream errors, not the reverse).
 */
/** Thrown from the `default` branch of a switch that the type checker proves exhaustive. */
export class UnreachableCaseError extends Error {
  constructor(value: never) {
    super(`Unreachable case: ${JSON.stringify(value)}`);
    this.name = 'UnreachableCaseError';
  }
}
