/**
 * Ids as the upstream makes them: a prefix per resource and random hex, so ids never repeat
 * across resets.
 */
import { randomBytes } from 'node:crypto';

/** Id prefixes of the upstream's resources (`docs/upstream-assumptions.md`, "Ids"). */
export type IdPrefix =
  | 'cus'
  | 'acc'
  | 'rp'
  | 'cap'
  | 'app'
  | 'ins'
  | 'doc'
  | 'rcp'
  | 'dst'
  | 'tsk'
  | 'tsb'
  | 'quo'
  | 'trf'
  | 'rul'
  | 'we'
  | 'evt'
  | 'tu';

/** A fresh opaque id such as `acc_5f0c9a1e2b7d4c80`. Random, so ids never collide across resets. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(8).toString('hex')}`;
}
