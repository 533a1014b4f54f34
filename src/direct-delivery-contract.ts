/**
 * What a live stream and a live transport agree on for direct delivery
 * (`events/delivery/direct-delivery.ts`): a stream whose results are shared by many subscribers
 * offers {@link DIRECT}; a transport that frames a shared result itself (around one serialisation
 * of it) takes it, hands over its write, and consumes the rest of the stream as it would the whole.
 * Here, beside both, because the transports (src/edge/) read no values of src/events/.
 */

/** The property of a live stream that a transport able to frame shared results asks for. */
export const DIRECT = Symbol('direct delivery');

/**
 * Hands one result to the subscriber's transport: `true` once the socket took it and can take
 * more, `false` when the reader is gone, else a promise of one of the two once the socket took it.
 */
export type ResultWrite<R> = (result: R) => boolean | Promise<boolean>;

/** A live stream a transport may deliver directly. */
export interface DirectStream<R> {
  /**
   * Hands every shared result to `write` as soon as it is made, and answers the iterator of the
   * rest of the stream, in order, which the transport consumes as it would the whole stream: it
   * ends when the stream ends, and its `return()` ends the stream. Called once, before any `next()`.
   */
  [DIRECT](write: ResultWrite<R>): AsyncIterableIterator<R> & { return(): Promise<IteratorResult<R>> };
}

/** Whether `stream` can be delivered directly. */
export function isDirectStream<R>(stream: object): stream is DirectStream<R> & AsyncIterable<R> {
  return DIRECT in stream;
}
