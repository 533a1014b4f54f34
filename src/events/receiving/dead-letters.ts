/**
 * The dead-letter record: signed webhook events the facade can never process (platform-event.ts
 * says why), kept so an operator can see them, then acknowledged so the upstream stops redelivering
 * them. Bounded per environment, the oldest dropped first: in Redis when the event pipeline uses
 * Redis (a capped stream per environment, which every replica reads), in memory otherwise.
 *
 * A letter keeps what identifies the event and why it was parked, never the record it carried
 * (`data.object`, customer data), the signature or any other header: it is read by whoever reaches
 * the metrics port (docs/operations.md, "Poison events"), as the logs are. Every string taken
 * from the body or a header is escaped to printable ASCII and truncated: it may be the poison.
 */
import type { Redis } from 'ioredis';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { POISON_REASONS, type EventPoison, type PoisonReason } from './platform-event.ts';

/** Default bound of the record, per environment (`WEBHOOK_DEAD_LETTERS_MAX`). */
export const DEFAULT_DEAD_LETTERS_MAX = 1_000;

/** Longest string a letter keeps of the body or a header, escapes included. */
const MAX_PRINTED = 128;

/** Where a letter is filed: its route's environment, else the one its body names, else neither. */
export type DeadLetterEnvironment = PlatformEnvironment | 'unknown';

/** Every place a letter may be filed, in listing order. */
const DEAD_LETTER_ENVIRONMENTS: readonly DeadLetterEnvironment[] = ['sandbox', 'live', 'unknown'];

/** The envelope members a letter keeps when they are strings: what finds the event at the platform. */
const KEPT_MEMBERS = ['id', 'type', 'occurredAt', 'environment'] as const;
const KEPT_DATA_MEMBERS = ['customerId', 'resourceType', 'resourceId'] as const;

/** One parked event. */
export interface DeadLetter {
  /** When this facade received it (RFC 3339). */
  readonly receivedAt: string;
  readonly environment: DeadLetterEnvironment;
  readonly reason: PoisonReason;
  /** JSON Pointer to the first offending value, escaped. */
  readonly pointer: string;
  /** The problem in words (fixed text: it never quotes the body). */
  readonly detail: string;
  /** The signed `webhook-id` header: the id the upstream's delivery record knows. Escaped. */
  readonly webhookId: string;
  readonly bodyBytes: number;
  /**
   * The envelope's identifying members that were strings, escaped (`id`, `type`, `occurredAt`,
   * `environment`, `customerId`, `resourceType`, `resourceId`). Never `data.object`.
   */
  readonly event: Readonly<Record<string, string>>;
}

/** What the route knows of a delivery it parks. */
export interface ParkedDelivery {
  readonly poison: EventPoison;
  /** The body's JSON value, when it was JSON. */
  readonly value: unknown;
  readonly webhookId: string;
  readonly bodyBytes: number;
  readonly environment: DeadLetterEnvironment;
  readonly receivedAt: number;
}

/** Builds the letter of `parked`: only escaped, truncated strings of what it carried. */
export function deadLetterOf(parked: ParkedDelivery): DeadLetter {
  const event: Record<string, string> = {};
  const envelope = isRecord(parked.value) ? parked.value : {};
  const data = isRecord(envelope.data) ? envelope.data : {};
  for (const name of KEPT_MEMBERS) keepString(event, name, envelope[name]);
  for (const name of KEPT_DATA_MEMBERS) keepString(event, name, data[name]);
  return {
    receivedAt: new Date(parked.receivedAt).toISOString(),
    environment: parked.environment,
    reason: parked.poison.reason,
    pointer: printable(parked.poison.pointer),
    detail: parked.poison.message,
    webhookId: printable(parked.webhookId),
    bodyBytes: parked.bodyBytes,
    event,
  };
}

/** The environment a letter is filed under: the route's, else the one the body names. */
export function deadLetterEnvironmentOf(
  route: PlatformEnvironment | undefined,
  value: unknown,
): DeadLetterEnvironment {
  if (route !== undefined) return route;
  const named = isRecord(value) ? value.environment : undefined;
  return named === 'sandbox' || named === 'live' ? named : 'unknown';
}

/**
 * `value` as printable ASCII a log line or a listing can carry whatever it held: `\` and every
 * code unit outside space to `~` (controls, non-ASCII, lone surrogates) as `\uXXXX`, cut at
 * {@link MAX_PRINTED} characters with `…` and the original length.
 */
export function printable(value: string, max = MAX_PRINTED): string {
  let printed = '';
  for (let index = 0; index < value.length; index += 1) {
    const unit = value.charCodeAt(index);
    const shown =
      unit === 0x5c
        ? '\\\\'
        : unit >= 0x20 && unit <= 0x7e
          ? value[index]!
          : `\\u${unit.toString(16).padStart(4, '0')}`;
    if (printed.length + shown.length > max) return `${printed}…(${value.length} characters)`;
    printed += shown;
  }
  return printed;
}

/** The dead-letter record of one event pipeline. */
export interface DeadLetterRecord {
  /** Keeps `letter`, dropping the oldest of its environment past the bound. Rejects when it cannot. */
  add(letter: DeadLetter): Promise<void>;
  /** The letters held, newest first, at most `limit`. Rejects when they cannot be read. */
  list(limit: number): Promise<DeadLetter[]>;
}

/** Options of the record: its bound, and the environments whose letters it lists. */
export interface DeadLetterRecordOptions {
  /** Letters kept per environment. */
  maxPerEnvironment: number;
  /** The environments listed (a pipeline per environment lists its own). Default all. */
  environments?: readonly DeadLetterEnvironment[];
}

/**
 * The record of one event pipeline: in Redis when it has a connection (`REDIS_URL`), shared by every
 * replica, else in memory. A pipeline of one environment lists that environment's letters only.
 */
export function createDeadLetterRecord(
  redis: Redis | undefined,
  config: { redisKeyPrefix: string; webhooks: { deadLettersMax: number } },
  environment: PlatformEnvironment | undefined,
): DeadLetterRecord {
  const keyPrefix = config.redisKeyPrefix;
  const maxPerEnvironment = config.webhooks.deadLettersMax;
  const environments = environment === undefined ? DEAD_LETTER_ENVIRONMENTS : [environment];
  return redis === undefined
    ? createMemoryDeadLetters({ maxPerEnvironment, environments })
    : createRedisDeadLetters({ client: redis, keyPrefix, maxPerEnvironment, environments });
}

/** A record in this process's memory: for one replica without Redis. */
export function createMemoryDeadLetters(options: DeadLetterRecordOptions): DeadLetterRecord {
  const held = new Map<DeadLetterEnvironment, DeadLetter[]>();
  const listed = options.environments ?? DEAD_LETTER_ENVIRONMENTS;
  return {
    add(letter) {
      const letters = held.get(letter.environment) ?? [];
      letters.push(letter);
      if (letters.length > options.maxPerEnvironment)
        letters.splice(0, letters.length - options.maxPerEnvironment);
      held.set(letter.environment, letters);
      return Promise.resolve();
    },
    list(limit) {
      const letters = listed.flatMap((environment) => (held.get(environment) ?? []).slice(-limit).reverse());
      return Promise.resolve(newestFirst(letters, limit));
    },
  };
}

/**
 * A record in Redis: a stream per environment (`<prefix>events:dead-letters:<environment>`),
 * capped exactly at the bound by each `XADD`, so every replica files into and lists the same one.
 */
export function createRedisDeadLetters(
  options: DeadLetterRecordOptions & { client: Redis; keyPrefix: string },
): DeadLetterRecord {
  const { client, keyPrefix } = options;
  const keyOf = (environment: DeadLetterEnvironment): string =>
    `${keyPrefix}events:dead-letters:${environment}`;
  const listed = options.environments ?? DEAD_LETTER_ENVIRONMENTS;
  return {
    async add(letter) {
      const max = String(options.maxPerEnvironment);
      await client.xadd(keyOf(letter.environment), 'MAXLEN', '=', max, '*', 'letter', JSON.stringify(letter));
    },
    async list(limit) {
      const read = await Promise.all(
        listed.map((environment) => client.xrevrange(keyOf(environment), '+', '-', 'COUNT', limit)),
      );
      const letters = read.flat().flatMap(([, fields]) => {
        // Another process wrote it: a value that is not a letter is left out, not trusted.
        const letter = readLetter(fields[fields.indexOf('letter') + 1]);
        return letter === undefined ? [] : [letter];
      });
      return newestFirst(letters, limit);
    },
  };
}

/** The letter `text` holds, checked member by member: another process wrote it. */
function readLetter(text: string | undefined): DeadLetter | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
  if (!isRecord(value)) return undefined;
  const { receivedAt, environment, reason, pointer, detail, webhookId, bodyBytes, event } = value;
  const fits =
    typeof receivedAt === 'string' &&
    isOneOf(DEAD_LETTER_ENVIRONMENTS, environment) &&
    isOneOf(POISON_REASONS, reason) &&
    typeof pointer === 'string' &&
    typeof detail === 'string' &&
    typeof webhookId === 'string' &&
    typeof bodyBytes === 'number' &&
    isStringRecord(event);
  return fits ? { receivedAt, environment, reason, pointer, detail, webhookId, bodyBytes, event } : undefined;
}

function isOneOf<T extends string>(known: readonly T[], value: unknown): value is T {
  return known.some((member) => member === value);
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every((member) => typeof member === 'string');
}

/** `letters` (each environment's newest first) merged newest first: a stable sort keeps ties in order. */
export function newestFirst(letters: DeadLetter[], limit: number): DeadLetter[] {
  return letters.sort((a, b) => b.receivedAt.localeCompare(a.receivedAt)).slice(0, limit);
}

function keepString(into: Record<string, string>, name: string, value: unknown): void {
  if (typeof value === 'string') into[name] = printable(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
