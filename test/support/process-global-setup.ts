/**
 * Vitest global setup: a mark for this run's processes (test/support/processes.ts puts it in every
 * worker's environment, so every process a test starts carries it), and at teardown, after the last
 * test, the end of every process that still carries it, named on stderr: a test whose clean-up
 * missed a process can then neither leave it running past the run nor go unnoticed.
 */
import { randomUUID } from 'node:crypto';
import type { TestProject } from 'vitest/node';
import { endOwnedProcesses } from './owned-processes.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** This run's mark: the value of `PROCESS_OWNER_VARIABLE` in every process a test starts. */
    processOwner: string;
  }
}

export default function setup(project: TestProject): () => Promise<void> {
  const mark = `run-${randomUUID()}`;
  project.provide('processOwner', mark);
  return async () => {
    const left = await endOwnedProcesses(mark);
    for (const { pid, command } of left)
      process.stderr.write(
        `A test left process ${String(pid)} running (ended at the run's end): ${command}\n`,
      );
  };
}
