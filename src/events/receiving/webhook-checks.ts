/**
 * The checks of a webhook delivery up to the event it holds (webhook-route.ts runs them, then the
 * de-duplication and the append), and the chain they run in: each check receives what the checks
 * before it established, typed, and adds its own or refuses. A signed event the facade can never
 * process stops here, parked in the dead-letter record (dead-letters.ts).
 */
import type { Request } from 'express';
import type { Logger } from '../../logger.ts';
import type { WebhookReceiptTrace } from '../event-tracing.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import {
  deadLetterEnvironmentOf,
  deadLetterOf,
  type DeadLetter,
  type DeadLetterRecord,
} from './dead-letters.ts';
import { parsePlatformEvent, type EventPoison } from './platform-event.ts';
import {
  checkWebhookHeaders,
  verifyWebhookSignature,
  type CheckedWebhookHeaders,
  type WebhookHeaderCheck,
} from './verify-webhook.ts';
import type { WebhookBodyReader } from './webhook-body.ts';
import type { WebhookRefusals } from './webhook-refusals.ts';
import type { WebhookRefusal } from './webhook-answers.ts';

/** A delivery as it arrives: what every check may use. */
export interface Arrival {
  readonly request: Request;
  readonly address: string;
  /** The receipt span, when tracing is on and recorded. */
  readonly receipt: WebhookReceiptTrace | undefined;
}

/** Its headers judged, well-formed or not: the address budget spares a well-signed one. */
export interface JudgedHeaders extends Arrival {
  readonly headers: WebhookHeaderCheck;
}

/** Headers with a well-formed, current signature. */
export interface SignedHeaders extends Arrival {
  readonly headers: CheckedWebhookHeaders;
}

/** The body read in full, within the caps. */
export interface ReadBody extends SignedHeaders {
  readonly body: Buffer;
}

/** The platform event the verified body holds. */
export interface ReceivedEvent extends ReadBody {
  readonly event: PlatformEvent;
}

/** What a check decides: the delivery with what it established, or the refusal that answers it. */
export type Checked<Out> = { readonly passed: Out } | { readonly refused: WebhookRefusal };

/** One check: takes what the checks before it established and adds its own, or refuses. */
export type Check<Context, In, Out> = (
  context: Context,
  delivery: In,
) => Checked<Out> | Promise<Checked<Out>>;

/** The options of the route (`WebhookRouterOptions`, described there) that the checks here read. */
export interface WebhookCheckOptions {
  readonly secrets: () => readonly string[];
  readonly logger: Logger;
  readonly toleranceSeconds?: number | undefined;
  readonly environment?: PlatformEnvironment | undefined;
  readonly onDeadLetter?: ((letter: DeadLetter) => void) | undefined;
}

/** What the checks share: the route's options and the parts its router holds. */
export interface CheckContext {
  readonly options: WebhookCheckOptions;
  readonly accepting: () => boolean;
  readonly bodyReader: WebhookBodyReader;
  readonly refusals: WebhookRefusals;
  readonly deadLetters: DeadLetterRecord;
  readonly now: () => number;
}

/**
 * Checks run one after the other, each on what the ones before it established: the names in
 * order (the declared list) and the one runner of them, so the two cannot drift apart.
 */
export interface CheckChain<Context, In, Out, Names extends readonly string[]> {
  readonly names: Names;
  run(context: Context, delivery: In): Promise<Checked<Out>>;
  then<Name extends string, Next>(
    name: Name,
    check: Check<Context, Out, Next>,
  ): CheckChain<Context, In, Next, readonly [...Names, Name]>;
}

/** A chain of no checks yet, on deliveries of type `In`, whose checks read a `Context`. */
export function checkChain<Context, In>(): CheckChain<Context, In, In, readonly []> {
  return chainOf([] as const, async (_context: Context, delivery: In) => passes(delivery));
}

function chainOf<Context, In, Out, Names extends readonly string[]>(
  names: Names,
  run: (context: Context, delivery: In) => Promise<Checked<Out>>,
): CheckChain<Context, In, Out, Names> {
  return {
    names,
    run,
    then: (name, check) =>
      chainOf([...names, name], async (context, delivery) => {
        const checked = await run(context, delivery);
        // The first refusal answers; the checks after it never run.
        return 'refused' in checked ? checked : check(context, checked.passed);
      }),
  };
}

/** The delivery passes, with what the check established. */
export const passes = <Out>(delivery: Out): Checked<Out> => ({ passed: delivery });
/** The delivery is refused: `refusal` answers it. */
export const refusedWith = (refusal: WebhookRefusal): { readonly refused: WebhookRefusal } => ({
  refused: refusal,
});

/** `accepting`: refuses every delivery once the route stopped accepting (shutdown). */
export function checkAccepting(context: CheckContext, delivery: Arrival): Checked<Arrival> {
  return context.accepting() ? passes(delivery) : refusedWith({ reason: 'shutting_down' });
}

/** `address_budget`: judges the headers; refuses one without a good signature from an address over its budget. */
export function checkAddressBudget(context: CheckContext, delivery: Arrival): Checked<JudgedHeaders> {
  const { toleranceSeconds } = context.options;
  const headers = checkWebhookHeaders(delivery.request.headers, {
    ...(toleranceSeconds === undefined ? {} : { toleranceSeconds }),
    now: context.now(),
  });
  const blockedFor = headers.ok ? undefined : context.refusals.blockedFor(delivery.address);
  return blockedFor === undefined
    ? passes({ ...delivery, headers })
    : refusedWith({ reason: 'address_blocked', retryAfterSeconds: blockedFor });
}

/** `signed_headers`: refuses headers without a well-formed, current signature, before the body is read. */
export function checkSignedHeaders(_context: CheckContext, delivery: JudgedHeaders): Checked<SignedHeaders> {
  const { headers } = delivery;
  if (headers.ok) return passes({ ...delivery, headers });
  const { reason, message } = headers;
  return refusedWith({
    reason: reason === 'timestamp_outside_tolerance' ? 'stale' : 'unsigned',
    detail: message,
    logged: reason,
  });
}

/** `body`: reads the body within the caps. */
export async function readBody(context: CheckContext, delivery: SignedHeaders): Promise<Checked<ReadBody>> {
  const read = await context.bodyReader.read(delivery.request, delivery.address);
  return read.ok ? passes({ ...delivery, body: read.body }) : refusedWith({ reason: read.failure });
}

/** `signature`: refuses a body no accepted secret signed; nothing of it is parsed before. */
export function checkSignature(context: CheckContext, delivery: ReadBody): Checked<ReadBody> {
  const verification = verifyWebhookSignature(delivery.headers, delivery.body, context.options.secrets());
  if (verification.ok) return passes(delivery);
  return refusedWith({ reason: 'forged', detail: verification.message, logged: verification.reason });
}

/** `envelope`: parses the verified body, parking an event that can never be processed. */
export function checkEnvelope(
  context: CheckContext,
  delivery: ReadBody,
): Checked<ReceivedEvent> | Promise<Checked<ReceivedEvent>> {
  const { environment } = context.options;
  const parsed = parsePlatformEvent(delivery.body);
  if (!parsed.ok) return park(context, delivery, parsed, parsed.value);
  const { event } = parsed;
  if (event.id !== delivery.headers.id) {
    const message = 'the webhook-id header differs from the body\'s "id"';
    return park(context, delivery, { reason: 'id_mismatch', pointer: '/id', message }, event);
  }
  if (environment !== undefined && event.environment !== environment) {
    const message = `this route takes ${environment} events only`;
    return park(context, delivery, { reason: 'other_environment', pointer: '/environment', message }, event);
  }
  delivery.receipt?.event(event);
  return passes({ ...delivery, event });
}

/**
 * Keeps a signed event the facade can never process in the dead-letter record, one log line and
 * `onDeadLetter` telling of it, and acknowledges it (`parked`): nothing is claimed, appended or
 * asked of the upstream for it. When the record does not take it, 503: the upstream's retry parks it.
 */
async function park(
  context: CheckContext,
  delivery: ReadBody,
  poison: EventPoison,
  value: unknown,
): Promise<Checked<ReceivedEvent>> {
  const { options } = context;
  const letter = deadLetterOf({
    poison,
    value,
    webhookId: delivery.headers.id,
    bodyBytes: delivery.body.length,
    environment: deadLetterEnvironmentOf(options.environment, value),
    receivedAt: context.now(),
  });
  try {
    await context.deadLetters.add(letter);
  } catch (error) {
    options.logger.error(
      'could not record a webhook event that can never be processed; the upstream will retry',
      {
        eventId: letter.webhookId,
        reason: letter.reason,
        error: String(error),
      },
    );
    return refusedWith({ reason: 'not_parked' });
  }
  options.logger.warn('parked a webhook event that can never be processed', {
    eventId: letter.webhookId,
    reason: letter.reason,
    pointer: letter.pointer,
    environment: letter.environment,
  });
  options.onDeadLetter?.(letter);
  return refusedWith({ reason: 'parked', poison: poison.reason, detail: poison.message });
}
