/**
 * Builds an upstream path from a template, percent-encoding every interpolated id so that an id
 * from a GraphQL argument can never change the path's shape (`../`, `?`, `#`).
 *
 * @example restPath`/v3/customers/${customerId}/accounts/${accountId}`
 */
export function restPath(strings: TemplateStringsArray, ...ids: readonly string[]): string {
  return strings.reduce((path, part, index) => {
    const id = ids[index - 1];
    return `${path}${id === undefined ? '' : encodeURIComponent(id)}${part}`;
  });
}
