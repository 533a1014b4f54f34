/**
 * Where a field error points in GraphQL terms. Every mutation takes one `input` argument whose
 * fields mirror the upstream body, so a body pointer maps onto `input` directly.
 */

/** A GraphQL input path: argument name, then field names and list indexes. */
export type InputPath = (string | number)[];

/**
 * Translates a JSON Pointer into the request body (RFC 6901) into the GraphQL input path it names:
 * `/person/firstName` → `["input", "person", "firstName"]`, `/roles/1` → `["input", "roles", 1]`.
 */
export function pointerToInputPath(pointer: string): InputPath {
  if (pointer === '' || pointer === '/') return ['input'];
  const segments = pointer
    .replace(/^\//, '')
    .split('/')
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
  return [
    'input',
    ...segments.map((segment) => (/^(0|[1-9]\d*)$/.test(segment) ? Number(segment) : segment)),
  ];
}

/** Upstream query parameters and headers, by the GraphQL argument that supplies them. */
const ARGUMENT_BY_PARAMETER: Readonly<Record<string, InputPath>> = {
  'Idempotency-Key': ['input', 'idempotencyKey'],
  limit: ['first'],
  cursor: ['after'],
  updatedSince: ['updatedSince'],
};

/** The GraphQL argument behind an upstream parameter error, when the facade knows it. */
export function parameterToArgumentPath(parameter: string): InputPath | undefined {
  const exact = ARGUMENT_BY_PARAMETER[parameter];
  if (exact) return [...exact];
  // Header names are case-insensitive.
  const header = Object.keys(ARGUMENT_BY_PARAMETER).find(
    (name) => name.toLowerCase() === parameter.toLowerCase(),
  );
  return header === undefined ? undefined : [...ARGUMENT_BY_PARAMETER[header]!];
}
