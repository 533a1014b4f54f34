/**
 * The upstream event kinds the facade subscribes its webhook endpoint to, and what each makes stale
 * in the response cache: read from the record catalogue (`src/records.ts`), where each record type
 * lists its event kinds. Every kind in `docs/upstream-assumptions.md` ("Events and webhooks") is
 * there, because `events(types:)` serves them all.
 */
import { RECORD_ENTRIES, type StaleByEvent, type SubscribedEventKind } from '../../records.ts';

export type { StaleByEvent, SubscribedEventKind } from '../../records.ts';

/**
 * Each kind's stale answers (see {@link StaleByEvent}). A kind missing here (a new upstream kind)
 * drops everything of its customer.
 */
export const STALE_BY_EVENT_KIND = Object.fromEntries(
  RECORD_ENTRIES.flatMap(([, entry]) => Object.entries(entry.events?.kinds ?? {})),
) as Readonly<Record<SubscribedEventKind, readonly StaleByEvent[]>>;

/** Every kind the platform sends for the records of the catalogue. */
export const SUBSCRIBED_EVENT_KINDS = Object.keys(STALE_BY_EVENT_KIND) as readonly SubscribedEventKind[];
