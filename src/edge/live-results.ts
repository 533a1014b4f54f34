/**
 * What every live transport does with a result before its framing: its errors formatted as over
 * HTTP (the facade's `formatError`: upstream problems kept, the unexpected masked), and its text
 * made once per result object. Subscribers that share an event's execution share its result object
 * (`events/delivery/direct-delivery.ts`), so a fan-out serialises it once, not once per subscriber.
 */
import type { ExecutionResult, GraphQLFormattedError } from 'graphql';

/** A result as it is sent: its errors formatted as over HTTP. */
export type FormattedResult = Omit<ExecutionResult, 'errors'> & {
  errors?: readonly GraphQLFormattedError[];
};

/** Whoever holds the facade's error formatting, as every transport is given it. */
export interface ErrorFormatting {
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
}

/** `result` with its errors formatted; the result itself when it has none. */
export function formattedResult(result: ExecutionResult, formatting: ErrorFormatting): FormattedResult {
  if (result.errors === undefined) return result;
  return { ...result, errors: result.errors.map((error) => formatting.formatError(error.toJSON(), error)) };
}

/**
 * The text of each result, made by `serialize` the first time it is asked for and then kept as long
 * as the result object lives (a weak map: nothing is held once no subscriber holds the result).
 */
export function textOnce(
  serialize: (result: ExecutionResult) => string,
): (result: ExecutionResult) => string {
  const texts = new WeakMap<ExecutionResult, string>();
  return (result) => {
    let text = texts.get(result);
    if (text === undefined) {
      text = serialize(result);
      texts.set(result, text);
    }
    return text;
  };
}
