/**
 * GETs through the event's shared reads and the response cache: a held answer costs one call of
 * the operation's budget and no request; a miss is sent and kept.
 */
import { parseJsonBody, toQueryString, type SentResponse } from './attempt-sender.ts';
import { spendCall } from './call-budget.ts';
import type { UpstreamCall, UpstreamResponse } from './call.ts';
import { partitionOfKey } from './credentials.ts';
import { freezeAnswerBody, type CachedAnswer, type ResponseCache } from './response-cache.ts';
import { isUpstreamOutage, recordStaleRead, type DegradedReads } from './outage.ts';
import type { CallSender } from './retrying-sender.ts';
import type { UpstreamRequest } from './types.ts';

/** GETs, through the event's shared reads and the response cache where there are any. */
export function createReader(
  responseCache: ResponseCache | undefined,
  sendTraced: CallSender,
): (call: UpstreamCall, request: UpstreamRequest) => Promise<UpstreamResponse> {
  /**
   * A GET through the response cache: a held answer (or one being read for the same key) costs
   * one call of the budget and no request; a miss is sent and kept.
   */
  async function readCached(
    cache: ResponseCache,
    call: UpstreamCall,
    request: UpstreamRequest,
  ): Promise<UpstreamResponse> {
    let sent: SentResponse | undefined;
    const answer = await cache
      .read(
        {
          partition: call.credentials.partition ?? partitionOfKey(call.credentials.apiKey),
          path: request.path,
          query: toQueryString(request.query),
          readThrough: call.readThrough === true,
          signal: call.signal,
          sources: call.answerSources,
        },
        async () => {
          sent = await sendTraced(call, request);
          // Kept parsed: a hit then costs no JSON.parse (it was the largest cost of a hit).
          return { status: sent.status, text: sent.text, body: freezeAnswerBody(sent.body) };
        },
      )
      // A read that joined another's failing one met the outage too.
      .catch((error: unknown) => failedFor(call.degraded, error));
    if (sent !== undefined) return withoutText(sent);
    spendCall(call.callBudget);
    const response = answerOf(answer, call.requestId);
    if (answer.ageSeconds === undefined) return response;
    recordStaleRead(call.degraded, answer.ageSeconds);
    return { ...response, staleAgeSeconds: answer.ageSeconds };
  }

  return (call, request) => {
    const cache = responseCache?.isCacheable(request.path) === true ? responseCache : undefined;
    const send = (): Promise<UpstreamResponse> =>
      cache === undefined ? sendTraced(call, request).then(withoutText) : readCached(cache, call, request);
    const shared = call.readCache;
    // Read past the held answers (a path never kept, or one event's shared reads): none stands for it.
    if (call.answerSources !== undefined && (cache === undefined || shared !== undefined)) {
      call.answerSources.complete = false;
    }
    if (shared === undefined) return send();
    const key = `${request.path}${toQueryString(request.query)}`;
    const held = shared.get(key);
    if (held !== undefined) {
      spendCall(call.callBudget);
      return call.degraded === undefined ? held : notingOutage(held, call.degraded);
    }
    const sending = send();
    shared.set(key, sending);
    // A failure may be the first operation's own (its deadline): the next one reads for itself.
    sending.catch(() => {
      if (shared.get(key) === sending) shared.delete(key);
    });
    return sending;
  };
}

/**
 * `held`, another operation's read, as this operation's: what it met of an outage (an answer
 * served stale, a failure for the upstream) is recorded in this operation's `degraded` too.
 */
function notingOutage(held: Promise<UpstreamResponse>, degraded: DegradedReads): Promise<UpstreamResponse> {
  return held.then(
    (response) => {
      if (response.staleAgeSeconds !== undefined) recordStaleRead(degraded, response.staleAgeSeconds);
      return response;
    },
    (error: unknown) => failedFor(degraded, error),
  );
}

/** Records in `degraded` a read that failed with `error` for the upstream, then throws it. */
function failedFor(degraded: DegradedReads | undefined, error: unknown): never {
  if (degraded !== undefined && isUpstreamOutage(error)) degraded.failed = true;
  throw error;
}

/** A response as the caller gets it: without the body's text the response cache keeps. */
export function withoutText({ text: _text, ...response }: SentResponse): UpstreamResponse {
  return response;
}

/**
 * A held answer as a response of its own: its frozen parsed body, shared by every caller (none can
 * change it), or, for an answer held as text, the text parsed anew.
 */
function answerOf(answer: CachedAnswer, requestId: string): UpstreamResponse {
  const body = 'body' in answer ? answer.body : parseJsonBody(answer.text, requestId);
  return { status: answer.status, body, replayed: false };
}
