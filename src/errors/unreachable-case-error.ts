/** Thrown from the `default` branch of a switch that the type checker proves exhaustive. */
export class UnreachableCaseError extends Error {
  constructor(value: never) {
    super(`Unreachable case: ${JSON.stringify(value)}`);
    this.name = 'UnreachableCaseError';
  }
}
