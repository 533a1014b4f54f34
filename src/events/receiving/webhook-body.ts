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
  /**
   * Time from a reading slot granted to the body's last byte (then `too_slow`); also the longest a
   * delivery waits for a slot (then `busy`).
   */
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
  /** Answers it busy: the line was full and another address needed its place more. */
  evict(): void;
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
    // The freed slot goes to the waiter whose address reads least right now (first come among
    // equals): an address with nothing being read is served before the flood that holds the slots.
    while (reading < limits.maxConcurrentReads) {
      let next: number | undefined;
      for (let index = 0; index < waiters.length; index += 1) {
        const held = readingByAddress.get(waiters[index]!.address) ?? 0;
        if (held >= limits.maxConcurrentReadsPerAddress) continue;
        if (next === undefined || held < (readingByAddress.get(waiters[next]!.address) ?? 0)) next = index;
      }
      if (next === undefined) return;
      const [waiter] = waiters.splice(next, 1);
      tryAcquire(waiter!.address);
      waiter!.grant();
    }
  };

  /**
   * Makes room in a full line for a delivery from `address`: the newest waiter of the address with
   * the most waiters gives up its place, when that address has more waiters than `address` does.
   * So a flood from a few addresses fills the line only until another address comes: a sender with
   * nothing waiting gets in line whenever some address has two or more waiting.
   */
  const makeRoomFor = (address: string): boolean => {
    const counts = new Map<string, number>();
    for (const waiter of waiters) counts.set(waiter.address, (counts.get(waiter.address) ?? 0) + 1);
    let crowded: string | undefined;
    for (const [candidate, count] of counts) {
      if (crowded === undefined || count > counts.get(crowded)!) crowded = candidate;
    }
    if (crowded === undefined || counts.get(crowded)! <= (counts.get(address) ?? 0) + 1) return false;
    const index = waiters.findLastIndex((waiter) => waiter.address === crowded);
    const [evicted] = waiters.splice(index, 1);
    evicted!.evict();
    return true;
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
        let timer = setTimeout(() => settle({ ok: false, failure: 'busy' }), limits.receiveTimeoutMs);

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
          // The time to receive the body starts with its slot: waiting is not the sender's slowness.
          clearTimeout(timer);
          timer = setTimeout(() => settle({ ok: false, failure: 'too_slow' }), limits.receiveTimeoutMs);
          request.on('data', onData);
          request.once('end', onEnd);
        };
        request.once('close', onClose);
        request.once('error', onError);
        if (tryAcquire(address)) {
          start();
        } else if (waiters.length >= limits.maxWaiting && !makeRoomFor(address)) {
          settle({ ok: false, failure: 'busy' });
        } else {
          waiter = { address, grant: start, evict: () => settle({ ok: false, failure: 'busy' }) };
          waiters.push(waiter);
        }
      });
    },
  };
}
