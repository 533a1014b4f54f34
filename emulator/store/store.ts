/**
 * The emulator's whole state: both environments, loaded with the demo data or left empty, and the
 * clock that stamps every change.
 */
import { createTimestampSource } from './clock.ts';
import type { TimestampSource } from './clock.ts';
import { createDemoData, createEmptyData, DEMO_DATA_LATEST_TIMESTAMP } from './demo-data.ts';
import type { EnvironmentStore } from './environment-store.ts';
import type { Environment } from './records.ts';

/** Which data set a store starts from: the documented demo data, or nothing but institutions. */
export type DataSet = 'demo' | 'empty';

/** The emulator's in-memory state: one {@link EnvironmentStore} per environment and one clock. */
export type Store = {
  /** The records of `environment`; never shared with the other environment. */
  environment(environment: Environment): EnvironmentStore;
  /** Stamps every change; strictly increasing across both environments. */
  readonly timestamps: TimestampSource;
  /** Replaces every record of both environments with a fresh copy of `data`. */
  load(data: DataSet): void;
};

/** Creates a store holding `data`. `clock` drives timestamps (tests inject one). */
export function createStore(options: { data: DataSet; clock?: () => Date }): Store {
  const timestamps = createTimestampSource(options.clock);
  let environments = build(options.data);

  function build(data: DataSet): Record<Environment, EnvironmentStore> {
    // Changes must sort after the demo records even under a clock set in the past.
    timestamps.advancePast(DEMO_DATA_LATEST_TIMESTAMP);
    return data === 'demo' ? createDemoData() : createEmptyData();
  }

  return {
    environment: (environment) => environments[environment],
    timestamps,
    load(data) {
      environments = build(data);
    },
  };
}
