/**
 * What a running app tells about its work as it happens: GraphQL operations over HTTP started and
 * completed, graphql-ws operations started (listening) and completed, webhook events published.
 * Code holding the app listens with `app.lifecycle.on(...)`: the tests wait on it instead of
 * reading log lines, and an embedding service can count, trace or alert with it.
 *
 * Why a typed emitter of each app's own rather than `node:diagnostics_channel`:
 * - it belongs to one app, as its metrics registry does: two facades in one process (replicas in a
 *   test) are two lifecycles, and a listener never sorts out which app a message came from;
 * - the event's name gives its message type, with no cast from the channel's `unknown`;
 * - a listener that throws is logged and the app goes on, where a channel's subscriber error is
 *   raised again as an uncaught exception and would end the process;
 * - nobody listening costs one size check per event: call sites build a message only when
 *   {@link LifecycleEmitter.observed} says someone will read it.
 * What it does not serve is code that cannot hold the app (a module preloaded with `--import`);
 * tracing has its own instrumentation for that (src/observability/tracing-entry.ts).
 */
import type { Logger } from '../logger.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';

/** How an operation ended: no errors, errors beside data, or errors and no data. */
export type OperationOutcome = 'success' | 'partial' | 'failure';

/** A GraphQL request over HTTP that Apollo Server took (authentication and rate limits passed). */
export interface OperationStarted {
  /** The request id (`X-Request-Id`, or the one generated), as log lines carry it. */
  readonly requestId: string;
  /** The `operationName` the request gave, which is not yet checked against the document. */
  readonly operationName: string | null;
}

/** The same request once its response is ready, just before it is written. */
export interface OperationCompleted {
  readonly requestId: string;
  /** The name of the operation that ran; null for an anonymous one or one that never resolved. */
  readonly operationName: string | null;
  /** The HTTP status of the response. */
  readonly status: number;
  readonly outcome: OperationOutcome;
  /** `extensions.code` of each error in the response, in order (as the client sees them). */
  readonly errorCodes: readonly string[];
  readonly durationMs: number;
}

/**
 * A graphql-ws operation that listens: its queue subscribed and any replay read, so no change made
 * from now on is missed (what a client, or a test, waits for before making one).
 */
export interface SubscriptionStarted {
  /** This app's id for the operation (connection and operation id), the same in its completion. */
  readonly subscriptionId: string;
  /** The name of the operation that runs; null for an anonymous one. */
  readonly operationName: string | null;
  /** The caller's subject (token `sub`), as audit lines name it. */
  readonly subject: string;
}

/** A started graphql-ws operation that ended: by the client, the server, expiry or shutdown. */
export interface SubscriptionCompleted {
  readonly subscriptionId: string;
}

/** A webhook event this app received, verified and appended to the event log (before acknowledging it). */
export interface WebhookEventPublished {
  readonly eventId: string;
  readonly type: string;
  readonly environment: PlatformEnvironment;
  readonly customerId: string | null;
}

/** A step of the door's admission order (src/edge/door.ts `ADMISSION_ORDER`) that an operation took. */
export interface AdmissionStepTaken {
  readonly step: string;
}

/** Every lifecycle event by name, with its message. */
export interface LifecycleEvents {
  operationStarted: OperationStarted;
  operationCompleted: OperationCompleted;
  subscriptionStarted: SubscriptionStarted;
  subscriptionCompleted: SubscriptionCompleted;
  webhookEventPublished: WebhookEventPublished;
  admissionStep: AdmissionStepTaken;
}

export type LifecycleEventName = keyof LifecycleEvents;

/**
 * Called synchronously where the event happens, so keep it short; a listener that throws (or
 * returns a rejected promise) is logged and changes nothing else.
 */
export type LifecycleListener<E extends LifecycleEventName> = (message: LifecycleEvents[E]) => void;

/** What `app.lifecycle` offers: listening. */
export interface Lifecycle {
  /** Calls `listener` with every `event` from now on; the returned function stops it. */
  on<E extends LifecycleEventName>(event: E, listener: LifecycleListener<E>): () => void;
}

/** The app's side: telling. */
export interface LifecycleEmitter extends Lifecycle {
  /** Whether anyone listens to `event` now: build its message only then. */
  observed(event: LifecycleEventName): boolean;
  emit<E extends LifecycleEventName>(event: E, message: LifecycleEvents[E]): void;
}

/** Builds one app's lifecycle; listener failures go to `logger`. */
export function createLifecycle(logger: Logger): LifecycleEmitter {
  // Each event's listeners, stored untyped: `on` and `emit` pair a name with its message type.
  const listeners = new Map<LifecycleEventName, Set<(message: never) => unknown>>();
  const failed = (event: LifecycleEventName, error: unknown): void => {
    logger.error('a lifecycle listener failed', { event, error });
  };

  return {
    on(event, listener) {
      let registered = listeners.get(event);
      if (registered === undefined) listeners.set(event, (registered = new Set()));
      // A wrapper of its own, so the same function registered twice is called twice and each
      // returned function removes its own registration.
      const entry = (message: never): unknown => listener(message);
      registered.add(entry);
      return () => {
        registered.delete(entry);
      };
    },
    observed(event) {
      return (listeners.get(event)?.size ?? 0) > 0;
    },
    emit(event, message) {
      const registered = listeners.get(event);
      if (registered === undefined || registered.size === 0) return;
      // A copy: a listener may stop listening (or add another) while being told.
      for (const listener of [...registered]) {
        try {
          const result = listener(message as never);
          if (result instanceof Promise) result.catch((error: unknown) => failed(event, error));
        } catch (error) {
          failed(event, error);
        }
      }
    },
  };
}
