/**
 * One request over an undici dispatcher whose answer is collected whole: its status, its headers
 * and its body as one string. It stands in for undici's `request()` and `body.text()`, which wrap
 * every answer in a readable stream, an async resource and two promises: on a read that is most of
 * what undici costs per call, and the upstream's answers are small JSON read whole anyway.
 *
 * What reaches the caller is what `request()` then `text()` gave: the same parsed headers, the same
 * text (UTF-8, a leading byte order mark skipped, as undici's `text()` does), and the same error
 * objects, from the pool's own timeouts, lost connections and length checks, or the signal's reason
 * when it is aborted (before the request leaves the pool's queue, on its way, or while the body
 * arrives).
 */
import { errors } from 'undici';
import type { Dispatcher } from 'undici';

/** Response headers as undici parses them (lower-case names; a repeated one as a list). */
type IncomingHttpHeaders = Dispatcher.ResponseData['headers'];

/** An answer read whole. */
export interface CollectedResponse {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  /** The body as UTF-8 text ('' when empty). */
  readonly text: string;
}

/** What `send` needs beside the dispatcher. */
export interface CollectedRequest {
  readonly method: Dispatcher.HttpMethod;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
  /** Aborts the request (queued, sent or answering) with its reason. */
  readonly signal: AbortSignal | undefined;
}

/** One exchange: `response` settles once; `statusCode` is known as soon as the headers are. */
export class CollectedExchange implements Dispatcher.DispatchHandler {
  /** The answer's status once its headers arrived (also when its body then fails). */
  statusCode: number | undefined;
  readonly response: Promise<CollectedResponse>;
  #resolve!: (response: CollectedResponse) => void;
  #reject!: (error: unknown) => void;
  #headers: IncomingHttpHeaders = {};
  #chunks: Buffer[] = [];
  #length = 0;
  #controller: Dispatcher.DispatchController | undefined;
  /** Why the signal aborted before the request reached a connection. */
  #abortReason: unknown;
  /** The watch of the signal this exchange is under (it is among its exchanges until it ends). */
  #watch: SignalWatch | undefined;

  /**
   * The exchanges in flight under each signal. An operation's reads share its signal: one listener
   * per signal aborts them all, where a listener per request cost an `addEventListener` and a
   * `removeEventListener` on every read. The listener is removed once the last exchange under the
   * signal ends: Node keeps a timeout's or a combined signal alive while it has a listener, so a
   * listener left behind would hold every finished operation's signal until its deadline passed.
   */
  static readonly #inFlight = new WeakMap<AbortSignal, SignalWatch>();

  constructor(signal: AbortSignal | undefined) {
    this.response = new Promise<CollectedResponse>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    if (signal === undefined) return;
    if (signal.aborted) {
      this.#abortReason = reasonOf(signal);
      return;
    }
    let watch = CollectedExchange.#inFlight.get(signal);
    if (watch === undefined) {
      const exchanges = new Set<CollectedExchange>();
      const onAbort = () => {
        CollectedExchange.#inFlight.delete(signal);
        const reason = reasonOf(signal);
        for (const exchange of exchanges) exchange.#abort(reason);
        exchanges.clear();
      };
      watch = { signal, exchanges, onAbort };
      CollectedExchange.#inFlight.set(signal, watch);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    watch.exchanges.add(this);
    this.#watch = watch;
  }

  /**
   * As undici's request(): queued, the reason waits for a connection to abort the request there;
   * sent, the request is aborted at once (and the error reaches onResponseError).
   */
  #abort(reason: unknown): void {
    if (this.#controller === undefined) this.#abortReason = reason;
    else this.#controller.abort(reason as Error);
  }

  /** Sends `request` over `dispatcher`; the answer (or the failure) settles `response`. */
  static send(dispatcher: Dispatcher, request: CollectedRequest): CollectedExchange {
    const exchange = new CollectedExchange(request.signal);
    // A request undici refuses outright (a bad header, a closed pool) reaches onResponseError.
    dispatcher.dispatch(
      { method: request.method, path: request.path, headers: request.headers, body: request.body },
      exchange,
    );
    return exchange;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.#abortReason !== undefined) {
      controller.abort(this.#abortReason as Error);
      return;
    }
    this.#controller = controller;
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // An informational answer (1xx) is not the answer: undici's request() skips it too.
    if (statusCode < 200) return;
    this.statusCode = statusCode;
    this.#headers = headers;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#length += chunk.length;
  }

  onResponseEnd(): void {
    this.#stopListening();
    const statusCode = this.statusCode;
    if (statusCode === undefined) {
      // Ended without an answer's headers: what undici's request() reports for a request cut short.
      this.#reject(new errors.RequestAbortedError());
      return;
    }
    this.#resolve({ statusCode, headers: this.#headers, text: decodeText(this.#chunks, this.#length) });
    this.#chunks = [];
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    this.#stopListening();
    this.#chunks = [];
    this.#reject(error);
  }

  #stopListening(): void {
    const watch = this.#watch;
    if (watch === undefined) return;
    this.#watch = undefined;
    watch.exchanges.delete(this);
    if (watch.exchanges.size > 0) return;
    // The last one under the signal: nothing is left to abort, and nothing may hold the signal.
    watch.signal.removeEventListener('abort', watch.onAbort);
    if (CollectedExchange.#inFlight.get(watch.signal) === watch)
      CollectedExchange.#inFlight.delete(watch.signal);
  }
}

/** One signal's listener and the exchanges in flight under it. */
interface SignalWatch {
  readonly signal: AbortSignal;
  readonly exchanges: Set<CollectedExchange>;
  readonly onAbort: () => void;
}

function reasonOf(signal: AbortSignal): unknown {
  return (signal.reason as unknown) ?? new errors.RequestAbortedError();
}

/** The body as undici's `text()` decodes it: UTF-8, a leading byte order mark skipped. */
function decodeText(chunks: readonly Buffer[], length: number): string {
  if (chunks.length === 0 || length === 0) return '';
  const buffer = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
  const start = buffer.length > 2 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
  return buffer.toString('utf8', start);
}
