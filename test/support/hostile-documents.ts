/**
 * Documents an attacker sends: small to write, expensive to answer or even to validate. Shared by
 * the HTTP and graphql-ws tests and by the benchmark.
 */

/**
 * `levels` fragments, each spreading the next one twice: 2^levels spreads once expanded, from a
 * document of about 40 bytes per level.
 */
export function fragmentFanOut(levels: number): string {
  const fragments: string[] = [];
  for (let level = 0; level < levels; level++) {
    fragments.push(`fragment F${level} on Customer { ...F${level + 1} ...F${level + 1} }`);
  }
  fragments.push(`fragment F${levels} on Customer { id displayName }`);
  return `query FanOut { customer(id: "cus_acme") { ...F0 } }\n${fragments.join('\n')}`;
}

/** One introspection document with `count` aliases of `__schema`. */
export function introspectionAliases(count: number): string {
  const fields = Array.from({ length: count }, (_, index) => `s${index}: __schema { types { name } }`);
  return `query Aliases { ${fields.join(' ')} }`;
}

/** A selection nested `depth` levels: `{ a { a { ... } } }`. */
export function nestedSelections(depth: number): string {
  return `${'{ a '.repeat(depth)}${'}'.repeat(depth)}`;
}

/** A list argument nested `depth` levels: `[[[...]]]`, in an otherwise ordinary query. */
export function nestedListArgument(depth: number): string {
  return `{ customer(id: ${'['.repeat(depth)}"x"${']'.repeat(depth)}) { id } }`;
}
