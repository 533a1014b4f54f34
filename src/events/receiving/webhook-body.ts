/**
 * Reading a webhook's body, within caps an unauthenticated sender cannot stretch. Nothing of a
 * delivery can be verified before its body is read (the signature covers it), so what reading costs
 * is bounded instead: the body's size, the time it may take to arrive, and how many bodies are read
 * at once, in all and per sender address. A delivery waiting for a reading slot has not been read:
 * its bytes stay in the kernel and in Node's small stream buffer, held back by TCP backpressure.
 */
import type { IncomingMessage } from 'node:http';

/** Limits of {@link createWebhookBodyReader}; the defaults are in `src/events/config.ts`. */
export interface WebhookBodyLimits {
  /** Largest body accepted, in bytes; a larger one is refused unread (by its Content-Length) or cut. */
  maxBodyBytes: number;
  /** Time from the start of a read (waiting for a slot included) to the body's last byte. */
  receiveTimeoutMs: number;
  /** Bodies read at once by this process. */
  maxConcurrentReads: number;
  /** Bodies read at once from one sender address, so one address cannot take every slot. */
  maxConcurrentReadsPerAddress: number;
  /** Deliveries waiting for a slot; one more is answered busy at once. */
  maxWaiting: number;
}

/** Why a body was not read: over the cap, too slow, no slot in time, or the sender went away. */
export type BodyReadFailure = 'too_large' | 'too_slow' | 'busy' | 'aborted';

export type BodyRead = { ok: true; body: Buffer } | { ok: false; failure: BodyReadFailure };

/** What the reader holds right now (tests and measurements read it). */
export interface WebhookBodyReaderState {
  /** Bodies being read. */
  reading: number;
  /** Deliveries waiting for a slot. */
  waiting: number;
  /** Bytes of bodies received and not yet handed over. */
  bufferedBytes: number;
}

export interface WebhookBodyReader {
  /** Reads `request`'s body from `address` within the limits. Never rejects. */
  read(request: IncomingMessage, address: string): Promise<BodyRead>;
  state(): WebhookBodyReaderState;
}

interface Waiter {
  address: string;
  grant(): void;
}

/** Builds a reader; its slots are shared by every delivery this process receives. */
export function createWebhookBodyReader(limits: WebhookBodyLimits): WebhookBodyReader {
  let reading = 0;
  let bufferedBytes = 0;
  const readingByAddress = new Map<string, number>();
  const waiters: Waiter[] = [];

  const tryAcquire = (address: string): boolean => {
    const mine = readingByAddress.get(address) ?? 0;
    if (reading >= limits.maxConcurrentReads || mine >= limits.maxConcurrentReadsPerAddress) return false;
    reading += 1;
    readingByAddress.set(address, mine + 1);
    return true;
  };
  const release = (address: string): void => {
    reading -= 1;
    const mine = (readingByAddress.get(address) ?? 1) - 1;
    if (mine === 0) readingByAddress.delete(address);
    else readingByAddress.set(address, mine);
    // First come, first served among the addresses that may take a slot now.
    for (let index = 0; index < waiters.length && reading < limits.maxConcurrentReads;) {
      const waiter = waiters[index]!;
      if (tryAcquire(waiter.address)) {
        waiters.splice(index, 1);
        waiter.grant();
      } else index += 1;
    }
  };

  return {
    state: () => ({ reading, waiting: waiters.length, bufferedBytes }),
    read(request, address) {
      const declared = Number(request.headers['content-length']);
      if (Number.isFinite(declared) && declared > limits.maxBodyBytes) {
        return Promise.resolve({ ok: false, failure: 'too_large' });
      }
      return new Promise<BodyRead>((resolve) => {
        let settled = false;
        let holdsSlot = false;
        let waiter: Waiter | undefined;
        const chunks: Buffer[] = [];
        let size = 0;

        const onData = (chunk: Buffer): void => {
          size += chunk.length;
          bufferedBytes += chunk.length;
          chunks.push(chunk);
          if (size > limits.maxBodyBytes) settle({ ok: false, failure: 'too_large' });
        };
        const onEnd = (): void => settle({ ok: true, body: Buffer.concat(chunks, size) });
        const onClose = (): void => {
          if (!request.complete) settle({ ok: false, failure: 'aborted' });
        };
        const onError = (): void => settle({ ok: false, failure: 'aborted' });
        const timer = setTimeout(
          () => settle({ ok: false, failure: holdsSlot ? 'too_slow' : 'busy' }),
          limits.receiveTimeoutMs,
        );

        function settle(result: BodyRead): void {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          request.off('data', onData);
          request.off('end', onEnd);
          request.off('close', onClose);
          request.off('error', onError);
          // What is left unread stays unread: the route answers and closes the connection.
          if (!result.ok) request.pause();
          bufferedBytes -= size;
          chunks.length = 0;
          if (waiter !== undefined) {
            const index = waiters.indexOf(waiter);
            if (index >= 0) waiters.splice(index, 1);
          }
          if (holdsSlot) release(address);
          resolve(result);
        }

        const start = (): void => {
          holdsSlot = true;
          if (settled) {
            release(address);
            return;
          }
          request.on('data', onData);
          request.once('end', onEnd);
        };
        request.once('close', onClose);
        request.once('error', onError);
        if (tryAcquire(address)) {
          start();
        } else if (waiters.length >= limits.maxWaiting) {
          settle({ ok: false, failure: 'busy' });
        } else {
          waiter = { address, grant: start };
          waiters.push(waiter);
        }
      });
    },
  };
}
