/**
 * Request bodies: read within a byte cap without buffering more, and parsed as JSON with a
 * problem response for anything else.
 */
import type { IncomingMessage } from 'node:http';
import { ProblemError } from './problem.ts';

/** 1 MiB: larger bodies get 413 `payload_too_large`. */
export const MAX_BODY_BYTES = 1024 * 1024;

const EMPTY = Buffer.alloc(0);

/** Reads the whole request body, refusing more than `limit` bytes without buffering them. */
export async function readBody(request: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer> {
  const declared = request.headers['content-length'];
  if (declared === undefined && request.headers['transfer-encoding'] === undefined) return EMPTY;
  if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit);

  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of request as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw tooLarge(limit);
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof ProblemError) throw error;
    // The client went away mid-body: nobody is left to answer, and it is not the emulator's fault.
    throw new ProblemError(400, 'validation_error', 'The request body ended before it was complete.');
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

function tooLarge(limit: number): ProblemError {
  return new ProblemError(413, 'payload_too_large', `The request body is larger than ${limit} bytes.`);
}

/** Whether a Content-Type header names JSON (`application/json`, any parameters). */
export function isJsonContentType(value: string | undefined): boolean {
  if (!value) return false;
  const mediaType = value.split(';', 1)[0]!.trim().toLowerCase();
  return mediaType === 'application/json';
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Parses a JSON body, throwing 400 `validation_error` (without a pointer) when it is not JSON. */
export function parseJsonBody(raw: Buffer): unknown {
  try {
    return JSON.parse(UTF8.decode(raw));
  } catch (error) {
    const reason = error instanceof Error ? error.message : 'unreadable';
    throw new ProblemError(400, 'validation_error', `The request body is not valid JSON (${reason}).`);
  }
}
