/**
 * The one place that knows the form of a cursor as clients see it. Inside the facade a cursor is a
 * position in one environment's event log (`<milliseconds>-<sequence>`, `event-log.ts`). Each
 * environment has its own log, so with callers bound to environments (a key per environment) a
 * bare position would be read as a position in whichever log the caller resumes in: a sandbox
 * cursor given to live would resume, silently and meaninglessly, at that point of live's log.
 * There, every cursor handed out names its environment (`live~1732000000000-0`: `~` is URL-safe
 * and never part of a position), and a cursor naming another environment, or none, is refused as a
 * malformed one is, before anything listens or reads. With `UPSTREAM_API_KEY` alone there is one
 * log per environment of the key and the caller's key decides which: cursors stay bare positions.
 */
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { isCursor } from './event-log.ts';

/** What a cursor given back by a client stands for. */
export type CursorReading =
  /** A position in the caller's own environment's log (it may still be unknown to the log). */
  | { kind: 'position'; position: string }
  /** Not a cursor's shape at all. */
  | { kind: 'malformed' }
  /** A well-formed cursor of another environment's log (`named`), or one naming none (undefined). */
  | { kind: 'other-environment'; named: PlatformEnvironment | undefined };

/** Turns log positions into the cursors one environment's callers see, and back. */
export interface CursorCodec {
  /** The environment whose callers this codec serves; undefined when callers are not bound. */
  readonly environment: PlatformEnvironment | undefined;
  /** The cursor handed out for `position` of this environment's log. */
  encode(position: string): string;
  /** What `cursor`, given back by a caller of this environment, stands for. */
  decode(cursor: string): CursorReading;
  /**
   * Why a cursor read as `other-environment` is refused, as the end of a sentence naming where it
   * came from (`"after" …`, `"Last-Event-ID" …`).
   */
  describeForeign(reading: Extract<CursorReading, { kind: 'other-environment' }>): string;
  /**
   * The sentence refusing `value`, given as `name` (`after`, `Last-Event-ID`), that did not read as a
   * position: a malformed one is told it `must be <expected>`, another environment's where it is from.
   */
  refusal(
    name: string,
    value: string,
    reading: Exclude<CursorReading, { kind: 'position' }>,
    expected: string,
  ): string;
}

/** Between an environment's name and a position: URL-safe, and never part of a position. */
const SEPARATOR = '~';

const LABELLED = /^(sandbox|live)~(.*)$/;

/** Cursors as they are: positions of the one log the caller's key reads (`UPSTREAM_API_KEY` alone). */
const UNBOUND: CursorCodec = {
  environment: undefined,
  encode: (position) => position,
  decode: (cursor) => (isCursor(cursor) ? { kind: 'position', position: cursor } : { kind: 'malformed' }),
  describeForeign: () => 'is not a cursor of this deployment',
  refusal(name, value, reading, expected) {
    return refusalOf(this, name, value, reading, expected);
  },
};

/**
 * The codec of callers bound to `environment` (a key per environment), or the bare one when
 * callers are not bound (undefined).
 */
export function cursorCodec(environment: PlatformEnvironment | undefined): CursorCodec {
  if (environment === undefined) return UNBOUND;
  const prefix = `${environment}${SEPARATOR}`;
  return {
    environment,
    encode: (position) => `${prefix}${position}`,
    decode(cursor) {
      const labelled = LABELLED.exec(cursor);
      if (labelled === null) {
        return isCursor(cursor) ? { kind: 'other-environment', named: undefined } : { kind: 'malformed' };
      }
      const [, named, position] = labelled as unknown as [string, PlatformEnvironment, string];
      if (!isCursor(position)) return { kind: 'malformed' };
      return named === environment ? { kind: 'position', position } : { kind: 'other-environment', named };
    },
    describeForeign: ({ named }) =>
      named === undefined
        ? `names no environment, and this caller is bound to ${environment}: give a cursor received over a ${environment} connection, or none to receive events from now on`
        : `belongs to the ${named} environment's events, and this caller is bound to ${environment}: give a cursor received over a ${environment} connection, or none to receive events from now on`,
    refusal(name, value, reading, expected) {
      return refusalOf(this, name, value, reading, expected);
    },
  };
}

/** See {@link CursorCodec.refusal}; the value is quoted as JSON, cut at 64 characters. */
function refusalOf(
  codec: CursorCodec,
  name: string,
  value: string,
  reading: Exclude<CursorReading, { kind: 'position' }>,
  expected: string,
): string {
  const given = JSON.stringify(value.slice(0, 64));
  return reading.kind === 'malformed'
    ? `"${name}" must be ${expected}, got ${given}.`
    : `"${name}" ${given} ${codec.describeForeign(reading)}.`;
}
