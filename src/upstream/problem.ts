/**
 * Turns an upstream error response into a problem object, whatever the upstream (or a proxy in
 * front of it) actually sent.
 */
import type { Problem } from './types.ts';

export interface ErrorResponse {
  status: number;
  contentType: string | undefined;
  text: string;
  /** The X-Request-Id the call was sent with, for problems the upstream did not write itself. */
  requestId: string;
  /** Strings that must never reach a caller (the API key); replaced by `[redacted]` if echoed. */
  secrets: readonly string[];
}

/**
 * Parses a problem+json body. A body that is not a problem (an HTML page from a proxy, an empty
 * 503) becomes a problem with code `upstream_http_error` and the response status, so every upstream
 * failure reaches the error mapping in the same shape.
 */
export function parseProblem(response: ErrorResponse): Problem {
  let text = response.text;
  for (const secret of response.secrets) {
    if (secret.length > 0) text = text.replaceAll(secret, '[redacted]');
  }
  const parsed = isJson(response.contentType) ? tryParse(text) : undefined;
  if (isProblem(parsed)) {
    // Fill only what a careless upstream may omit; everything it sent is kept as sent.
    return {
      ...parsed,
      type: typeof parsed.type === 'string' ? parsed.type : 'about:blank',
      detail: typeof parsed.detail === 'string' ? parsed.detail : parsed.title,
      correlationId: typeof parsed.correlationId === 'string' ? parsed.correlationId : response.requestId,
    };
  }
  return {
    type: 'about:blank',
    title: 'Upstream error',
    status: response.status,
    code: 'upstream_http_error',
    detail: `The upstream API answered with HTTP status ${response.status}.`,
    correlationId: response.requestId,
  };
}

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/(problem\+)?json\b/i.test(contentType);
}

function tryParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isProblem(value: unknown): value is Problem {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return (
    typeof candidate.status === 'number' &&
    typeof candidate.code === 'string' &&
    typeof candidate.title === 'string' &&
    (candidate.errors === undefined || Array.isArray(candidate.errors))
  );
}
