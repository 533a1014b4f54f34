/**
 * Objects whose values are each built the first time they are read. An operation touches a few of
 * its loaders, so building every one up front (for `{ __typename }` too) was measurable work; the
 * getters live on one prototype, defined once, so each object costs one small allocation.
 */

/**
 * A maker of tables holding `build(key)` under each of `keys`, built from the table's state the
 * first time it is read, then kept. `Table` says what `build` makes for each key: `build` is
 * generic in its key and checked by its own return type (`<T>(type: T) => ItemLoader<T>` for
 * `{ [T in RecordTypeName]: ItemLoader<T> }`); TypeScript cannot check a generic result against
 * `Table[K]`, which is why the table is typed here, once.
 */
export function lazyTable<Table extends object, State>(
  keys: readonly (keyof Table & string)[],
  build: (key: keyof Table & string, state: State, table: Table) => unknown,
): (state: State) => Table {
  class Lazy {
    readonly built: Partial<Record<keyof Table, unknown>> = {};
    readonly state: State;
    constructor(state: State) {
      this.state = state;
    }
  }
  for (const key of keys) {
    Object.defineProperty(Lazy.prototype, key, {
      get(this: Lazy) {
        // The prototype's getters are the table's keys: every instance is a `Table`.
        return (this.built[key] ??= build(key, this.state, this as Table));
      },
    });
  }
  return (state) => new Lazy(state) as Table;
}
