/**
 * Writing responses: JSON bodies, problem bodies carrying the request id, and any thrown value
 * turned into a problem without its details.
 */
import type { ServerResponse } from 'node:http';
import { buildProblem, ProblemError } from './problem.ts';

/** Writes a JSON response (`application/json`). */
export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  contentType = JSON_TYPE,
): void {
  sendPayload(response, status, body === undefined ? undefined : JSON.stringify(body), headers, contentType);
}

export const JSON_TYPE = 'application/json; charset=utf-8';
export const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';

/** Writes an already serialised JSON payload; no body for `undefined`, 204 and 304. */
export function sendPayload(
  response: ServerResponse,
  status: number,
  payload: string | undefined,
  headers: Record<string, string>,
  contentType: string,
): void {
  if (response.headersSent || response.destroyed) return;
  if (payload === undefined || status === 204 || status === 304) {
    response.writeHead(status, headers);
    response.end();
    return;
  }
  response.writeHead(status, {
    ...headers,
    'Content-Type': contentType,
    'Content-Length': String(Buffer.byteLength(payload)),
  });
  response.end(payload);
}

/** Writes a problem response (`application/problem+json`) whose correlationId is the request id. */
export function sendProblem(
  response: ServerResponse,
  error: ProblemError,
  context: { requestId: string; docsUrl: string },
  headers: Record<string, string> = {},
): void {
  sendJson(response, error.status, buildProblem(error, context), headers, PROBLEM_TYPE);
}

/** Any thrown value as a problem: unexpected errors become 500 `internal_error`, details hidden. */
export function asProblemError(error: unknown): ProblemError {
  if (error instanceof ProblemError) return error;
  return new ProblemError(
    500,
    'internal_error',
    'The emulator failed unexpectedly while handling the request. Retry it; report it if it persists.',
  );
}
