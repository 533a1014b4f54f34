/**
 * graphql-ws's `next` message for the results of a live stream delivered directly
 * (`events/delivery/direct-delivery.ts`), written by the adapter itself rather than by graphql-ws's
 * server: the same bytes graphql-ws writes (`{"id":…,"type":"next","payload":…}`, the payload
 * formatted as its `onNext` hook formats it), around a payload serialised once per result, so one
 * event to thousands of subscribers costs one `JSON.stringify`, not thousands. Everything else of
 * the protocol (the connection, `subscribe`, `error`, `complete`, pings) stays graphql-ws's.
 *
 * A write waits as graphql-ws's does: the stream goes on at once when the socket took the message
 * whole (or, for a frame written in a turn of writes, when the socket had nothing waiting as the
 * turn began), else once its callback says it was written. A socket no longer open drops the message, as
 * graphql-ws does: its close ends the subscription.
 */
import type { ExecutionResult } from 'graphql';
import type { WebSocket } from 'ws';
import type { ResultWrite } from '../direct-delivery-contract.ts';
import { sendFrame } from './graphql-ws-socket.ts';
import { formattedResult, type ErrorFormatting } from './live-results.ts';

/** Writes the `next` messages of one subscription (`id`) on `socket`. */
export type NextWriter = (socket: WebSocket, id: string) => ResultWrite<ExecutionResult>;

const TAIL = Buffer.from('}');

/**
 * One unmasked, unfragmented text frame (RFC 6455, 5.2) of `head`, `payload` and the closing brace:
 * the bytes `ws` would send for the message, in one buffer.
 */
function textFrame(head: Buffer, payload: Buffer): Buffer {
  const length = head.length + payload.length + TAIL.length;
  const lengthBytes = length < 126 ? 0 : length < 65_536 ? 2 : 8;
  const frame = Buffer.allocUnsafe(2 + lengthBytes + length);
  frame[0] = 0x81; // FIN, opcode 1 (text)
  if (lengthBytes === 0) frame[1] = length;
  else if (lengthBytes === 2) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  let at = 2 + lengthBytes;
  at += head.copy(frame, at);
  at += payload.copy(frame, at);
  TAIL.copy(frame, at);
  return frame;
}

/** The writer of `next` messages of one graphql-ws endpoint, whose payloads are kept once per result. */
export function nextMessages(formatting: ErrorFormatting): NextWriter {
  const payloads = new WeakMap<ExecutionResult, Buffer>();
  const payloadOf = (result: ExecutionResult): Buffer => {
    let payload = payloads.get(result);
    if (payload === undefined) {
      payload = Buffer.from(JSON.stringify(formattedResult(result, formatting)));
      payloads.set(result, payload);
    }
    return payload;
  };
  return (socket, id) => {
    const head = Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
    let unwritten = 0;
    let drained: ((open: boolean) => void) | undefined;
    // The socket's callback: null or undefined once written, an error when the socket broke.
    const written = (error?: Error | null): void => {
      unwritten -= 1;
      const failed = error !== undefined && error !== null;
      if (unwritten > 0 && !failed) return;
      const waiting = drained;
      drained = undefined;
      waiting?.(!failed);
    };
    return (result) => {
      if (socket.readyState !== socket.OPEN) return true;
      const payload = payloadOf(result);
      unwritten += 1;
      const sent = sendFrame(socket, textFrame(head, payload), written);
      if (sent === 'refused') socket.send(Buffer.concat([head, payload, TAIL]), { binary: false }, written);
      if (sent === 'taken' || (sent === 'refused' && socket.bufferedAmount === 0)) return true;
      return new Promise((resolve) => {
        drained = resolve;
      });
    };
  };
}
