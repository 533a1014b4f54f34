/**
 * A WebSocket client written on a bare TCP socket, for what no well-behaved client does: it never
 * answers the server's close frame and goes on sending messages after it, as a hostile client may.
 * It speaks just enough of RFC 6455 for graphql-ws: the upgrade, masked text frames out, unmasked
 * text and close frames in.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';

export interface RawWebSocket {
  /** Sends one text frame, whatever the state of the connection. */
  send(message: unknown): void;
  /** The text messages received so far, parsed. */
  readonly messages: unknown[];
  /** Resolves with the first message `matching` accepts (received before or after the call). */
  message(matching: (message: unknown) => boolean): Promise<unknown>;
  /** Resolves with the server's close frame's code once it arrives (this client never answers it). */
  readonly closeFrame: Promise<number>;
  /** Resolves once the TCP connection is gone (the server cut it). */
  readonly gone: Promise<void>;
  destroy(): void;
}

/** Opens a graphql-transport-ws connection to `url` (`ws://host:port/path`). */
export async function openRawWebSocket(url: string): Promise<RawWebSocket> {
  const { hostname, port, pathname } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  await once(socket, 'connect');
  socket.write(
    `GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
      `Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n`,
  );
  const messages: unknown[] = [];
  const waiters: { matching: (message: unknown) => boolean; resolve: (message: unknown) => void }[] = [];
  let resolveClose!: (code: number) => void;
  const closeFrame = new Promise<number>((resolve) => (resolveClose = resolve));
  const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let buffer = Buffer.alloc(0);
  let upgraded = false;

  socket.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    if (!upgraded) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) return;
      if (!buffer.subarray(0, end).toString('latin1').startsWith('HTTP/1.1 101')) {
        socket.destroy(new Error(`upgrade refused: ${buffer.subarray(0, end).toString('latin1')}`));
        return;
      }
      upgraded = true;
      buffer = buffer.subarray(end + 4);
    }
    for (;;) {
      const frame = readFrame(buffer);
      if (frame === undefined) return;
      buffer = buffer.subarray(frame.length);
      if (frame.opcode === 0x8)
        resolveClose(frame.payload.length >= 2 ? frame.payload.readUInt16BE(0) : 1005);
      if (frame.opcode !== 0x1) continue;
      const message: unknown = JSON.parse(frame.payload.toString('utf8'));
      messages.push(message);
      for (const waiter of [...waiters]) {
        if (!waiter.matching(message)) continue;
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(message);
      }
    }
  });
  socket.on('error', () => {});

  return {
    messages,
    closeFrame,
    gone,
    send(message) {
      if (!socket.destroyed) socket.write(maskedTextFrame(JSON.stringify(message)));
    },
    message(matching) {
      const known = messages.find(matching);
      if (known !== undefined) return Promise.resolve(known);
      return new Promise((resolve) => waiters.push({ matching, resolve }));
    },
    destroy: () => socket.destroy(),
  };
}

function maskedTextFrame(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  const mask = randomBytes(4);
  const length = payload.length;
  const header =
    length < 126
      ? Buffer.from([0x81, 0x80 | length])
      : Buffer.from([0x81, 0x80 | 126, (length >> 8) & 0xff, length & 0xff]);
  const masked = Buffer.from(payload.map((byte, index) => byte ^ mask[index % 4]!));
  return Buffer.concat([header, mask, masked]);
}

function readFrame(buffer: Buffer): { opcode: number; payload: Buffer; length: number } | undefined {
  if (buffer.length < 2) return undefined;
  const opcode = buffer[0]! & 0x0f;
  let length = buffer[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return undefined;
    length = buffer.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return undefined;
    length = Number(buffer.readBigUInt64BE(2));
    offset = 10;
  }
  if (buffer.length < offset + length) return undefined;
  return { opcode, payload: buffer.subarray(offset, offset + length), length: offset + length };
}
