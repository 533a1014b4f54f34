/**
 * A subscriber's replay of the event log after a cursor, read page by page as the subscriber pulls
 * it, so a replay of thousands of events holds one page in memory, not thousands.
 */
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { CursorExpiredError } from '../../errors/cursor-expired.ts';
import type { EventLog, LoggedEvent, LogRead } from '../log/event-log.ts';

/** Events read from the log per page. */
const REPLAY_PAGE_SIZE = 200;

/** What {@link LogReplay.next} yields: an event, the end of the replay, or that the rest was trimmed. */
export type ReplayStep =
  { kind: 'event'; logged: LoggedEvent } | { kind: 'done' } | { kind: 'expired'; oldest: string | undefined };

/** The events of the log after a cursor that a subscriber accepts, in log order. */
export interface LogReplay {
  next(): Promise<ReplayStep>;
  /** The cursor of the last event read from the log (accepted or not), or the starting cursor. */
  readonly readUpTo: string;
}

/**
 * Starts replaying `environment`'s log after `after`, keeping what `accept` keeps. Reads the first
 * page at once, so a cursor the log no longer resumes from is refused here, before anything is
 * delivered.
 *
 * @throws CursorExpiredError when an event after `after` is no longer held.
 */
export async function startLogReplay(
  log: Pick<EventLog, 'readAfter'>,
  environment: PlatformEnvironment,
  after: string,
  accept: (event: PlatformEvent) => boolean,
): Promise<LogReplay> {
  let readUpTo = after;
  let page: LoggedEvent[] = [];

  const readPage = async (): Promise<Extract<LogRead, { expired: true }> | undefined> => {
    const read = await log.readAfter(environment, readUpTo, REPLAY_PAGE_SIZE);
    if (read.expired) return read;
    page = read.events;
    return undefined;
  };

  const first = await readPage();
  if (first !== undefined) throw new CursorExpiredError(after, first.oldest, first.ahead);

  return {
    get readUpTo() {
      return readUpTo;
    },
    async next() {
      for (;;) {
        const logged = page.shift();
        if (logged !== undefined) {
          readUpTo = logged.cursor;
          if (accept(logged.event)) return { kind: 'event', logged };
          continue;
        }
        // Trimmed between two pages: the subscriber is told, as if it had asked with this cursor.
        const expired = await readPage();
        if (expired !== undefined) return { kind: 'expired', oldest: expired.oldest };
        // Done only when the log has nothing more: the replay must reach where the live queue began.
        if (page.length === 0) return { kind: 'done' };
      }
    },
  };
}
