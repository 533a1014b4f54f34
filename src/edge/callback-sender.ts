/**
 * The requests of Apollo's HTTP callback protocol, sent to a gateway's callback URL: one message
 * at a time per subscription (`check`, `next`, `complete`), each a JSON POST with the protocol's
 * `subscription-protocol: callback/1.0` header, and the gateway's answer read as the protocol
 * says: 2xx taken; 404 (or any other 4xx) the subscription is unknown there and ends, with nothing
 * more sent; 5xx, 429 or no answer tried again with a growing pause until the message's deadline,
 * then the subscription ends.
 *
 * The callback URL is a caller's, so each request is held short: no redirect is ever followed (a
 * 3xx ends the subscription, since it could point anywhere); the answer's body is never read past
 * {@link MAX_ANSWER_BYTES} (then the connection is dropped); the head and the body must each
 * arrive within the message's deadline; and a name is connected to only when none of the
 * addresses it resolves to is one no callback may reach (`callback-urls.ts`), checked at every
 * connect, so a name that starts resolving elsewhere is caught when it does.
 */
import { lookup as dnsLookup } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import { isForbiddenCallbackAddress } from './callback-urls.ts';

/** Where and as whom one subscription's messages go: the gateway's URL, id and verifier. */
export interface CallbackTarget {
  readonly url: URL;
  readonly id: string;
  /** The gateway's secret for this subscription: sent back with every message, never logged. */
  readonly verifier: string;
}

/** One message of the protocol: its action and what it carries. */
export type CallbackMessage =
  | { readonly action: 'check' }
  | { readonly action: 'next'; readonly payload: unknown }
  | { readonly action: 'complete'; readonly errors?: readonly unknown[] };

/**
 * What became of one message: `taken` (2xx); `unknown` (the gateway does not know the
 * subscription: 404, another 4xx, a redirect); `unreachable` (no 2xx before the deadline).
 */
export type Delivery = 'taken' | 'unknown' | 'unreachable';

/** Sends the protocol's messages. */
export interface CallbackSender {
  /**
   * Sends `message` to `target`, trying again until `deadlineMs` has passed; `signal` stops it
   * (answering `unreachable`).
   */
  send(
    target: CallbackTarget,
    message: CallbackMessage,
    deadlineMs: number,
    signal: AbortSignal,
  ): Promise<Delivery>;
  /** Closes every connection to the gateways. */
  close(): Promise<void>;
}

/** The most of an answer's body read (and dropped): the protocol's answers have none. */
const MAX_ANSWER_BYTES = 4_096;

/** The first pause before a message is tried again, doubled up to {@link MAX_RETRY_PAUSE_MS}. */
const FIRST_RETRY_PAUSE_MS = 100;
const MAX_RETRY_PAUSE_MS = 1_000;

/** Connections kept to one gateway's origin at most. */
const CONNECTIONS_PER_ORIGIN = 32;

export interface CallbackSenderOptions {
  /** How names are resolved (tests give one of their own); the system's by default. */
  lookup?: LookupFunction;
}

/** The callback transport's sender, over connections of its own. */
export function createCallbackSender(options: CallbackSenderOptions = {}): CallbackSender {
  const agent = new Agent({
    connections: CONNECTIONS_PER_ORIGIN,
    connect: { lookup: guardedLookup(options.lookup ?? dnsLookup) },
    // An answer the gateway pads past this is refused by the client before it is buffered.
    maxResponseSize: MAX_ANSWER_BYTES,
  });
  return {
    async send(target, message, deadlineMs, signal) {
      const deadline = AbortSignal.any([signal, AbortSignal.timeout(Math.max(1, deadlineMs))]);
      const body = JSON.stringify({
        kind: 'subscription',
        id: target.id,
        verifier: target.verifier,
        ...message,
      });
      for (let pause = FIRST_RETRY_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_RETRY_PAUSE_MS)) {
        const answer = await post(agent, target.url, body, deadline);
        if (answer === 'taken' || answer === 'unknown') return answer;
        if (deadline.aborted || !(await wait(pause, deadline))) return 'unreachable';
      }
    },
    close: () => agent.close(),
  };
}

/** One attempt: `again` when it may be tried again (no answer, 5xx, 429). */
async function post(
  dispatcher: Dispatcher,
  url: URL,
  body: string,
  signal: AbortSignal,
): Promise<'taken' | 'unknown' | 'again'> {
  try {
    const answer = await dispatcher.request({
      origin: url.origin,
      path: url.pathname,
      method: 'POST',
      headers: {
        // Exactly this: Hive Gateway parses a callback's body only when its type is `application/json`.
        'content-type': 'application/json',
        'subscription-protocol': 'callback/1.0',
      },
      body,
      signal,
    });
    await answer.body.dump({ limit: MAX_ANSWER_BYTES }).catch(() => undefined);
    const status = answer.statusCode;
    if (status >= 200 && status < 300) return 'taken';
    return status >= 500 || status === 429 ? 'again' : 'unknown';
  } catch {
    return 'again';
  }
}

/** Waits `ms`; false when `signal` ended the wait. */
function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (waited: boolean) => () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', aborted);
      resolve(waited);
    };
    const aborted = done(false);
    const timer = setTimeout(done(true), ms);
    signal.addEventListener('abort', aborted, { once: true });
  });
}

/**
 * `lookup`, answering an error for a name any of whose addresses no callback may reach: the
 * resolution the connection then uses is the one checked.
 */
function guardedLookup(lookup: LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) {
        callback(error, '', 0);
        return;
      }
      const all = Array.isArray(addresses) ? addresses : [];
      if (all.length === 0 || all.some(({ address }) => isForbiddenCallbackAddress(address))) {
        const refused = Object.assign(new Error(`${hostname} resolves to an address no callback may reach`), {
          code: 'ECALLBACKADDRESS',
        });
        callback(refused, '', 0);
        return;
      }
      if (options.all === true) callback(null, all);
      else callback(null, all[0]!.address, all[0]!.family);
    });
  };
}
