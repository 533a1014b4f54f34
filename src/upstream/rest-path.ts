/**
 * The one place where ids enter upstream paths. An id is interpolated only when it has the plain
 * form below, so nothing a caller sends can change a path's shape: not as sent, and not after a
 * proxy between the facade and the upstream decodes percent-escapes (`%2F`, `%2e`), turns `\` into
 * `/`, drops `;` parameters or resolves dot segments. Percent-encoding alone cannot promise that:
 * `..` has nothing to encode, and `%2F` becomes `/` again in any proxy that decodes.
 */
import { UnsafeIdError } from './errors.ts';

/** The longest id the facade sends. The upstream's ids are a prefix and about 20 characters. */
export const MAX_ID_LENGTH = 128;

/**
 * The form of every upstream id (docs/upstream-assumptions.md, "Ids"): 1 to 128 ASCII letters,
 * digits, `_` and `-`, starting with a letter or a digit. No `/`, `\`, `%`, `.`, `;`, `?`, `#`,
 * space, control or non-ASCII character, so no decoding or normalisation can change it.
 */
const PLAIN_ID = new RegExp(`^[A-Za-z0-9][A-Za-z0-9_-]{0,${MAX_ID_LENGTH - 1}}$`);

/** Whether `id` has the plain form of an upstream id and may become a path segment. */
export function isPlainId(id: string): boolean {
  return PLAIN_ID.test(id);
}

/** Throws {@link UnsafeIdError} unless `id` has the plain form ({@link isPlainId}). */
function assertPlainId(id: string): void {
  if (!isPlainId(id)) throw new UnsafeIdError(id);
}

/**
 * Builds an upstream path from a template, each interpolated id checked to be plain first.
 *
 * @throws {UnsafeIdError} for an id that is not plain; nothing is sent for it.
 * @example restPath`/v3/customers/${customerId}/accounts/${accountId}`
 */
export function restPath(strings: TemplateStringsArray, ...ids: readonly string[]): string {
  for (const id of ids) assertPlainId(id);
  return strings.reduce((path, part, index) => `${path}${ids[index - 1] ?? ''}${part}`);
}
