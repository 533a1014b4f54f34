/**
 * An HTTP request to `/graphql` read as the door needs it: the operation it names, exactly as
 * Apollo Server, its executor, reads the same request (a POST's JSON object body, or a GET's URL
 * parameters, each named once), so the door admits the very operation Apollo would run; the
 * request's own text for the rule on anonymous callers; and whether a browser asks for the landing
 * page. What Apollo would refuse as it reads the request (another method, a parameter given twice,
 * a body that is no object) names no operation here: Apollo answers it, and runs nothing the door
 * did not admit. A batch (a POST of a JSON array) is read element by element, each as a POST body.
 */
import type { Request } from 'express';
import type { OperationRequest } from './door/door.ts';
import type { BatchToAdmit, RequestToAdmit } from './door/requests.ts';

/**
 * The request as the door's `admitRequest` takes it (who is calling is read beside it); for a
 * batch (a POST whose body is a JSON array), each of its operations as `admitBatch` takes them.
 */
export type HttpAsk = Pick<RequestToAdmit, 'request' | 'ownQuery' | 'page'> & {
  batch?: BatchToAdmit['operations'];
};

/**
 * Reads `req`. `persistedQuery(hash)` is the text Apollo's cache of automatic persisted queries
 * holds for a hash, which a request naming only the hash runs.
 */
export async function readHttpRequest(
  req: Request,
  landingPage: boolean,
  persistedQuery: (sha256Hash: string) => Promise<string | undefined>,
): Promise<HttpAsk> {
  const body: unknown = req.body;
  if (req.method === 'POST' && Array.isArray(body)) {
    const batch = await Promise.all(body.map((element: unknown) => readOperation(element, persistedQuery)));
    return { request: undefined, batch };
  }
  const fromUrl = req.method === 'GET';
  const params = searchParamsOf(req.url);
  // The anonymous rule reads the request's own text, never a stored one: a hash alone is no document.
  const ownQuery = fromUrl ? onlyValue(params.getAll('query')) : isRecord(body) ? body['query'] : undefined;
  const page = isLandingPageRequest(req, landingPage, params);
  const read = fromUrl
    ? operationFromUrl(params)
    : req.method === 'POST'
      ? operationFromBody(body)
      : undefined;
  if (read === undefined || !namesAnOperation(read)) return { request: undefined, ownQuery, page };
  return { request: await withPersistedQuery(read, persistedQuery), ownQuery, page };
}

/**
 * One operation of a batch, read as a POST body is: an element that names no operation is asked
 * as an empty one, which the door refuses for that element alone.
 */
async function readOperation(
  element: unknown,
  persistedQuery: (sha256Hash: string) => Promise<string | undefined>,
): Promise<BatchToAdmit['operations'][number]> {
  const ownQuery = isRecord(element) ? element['query'] : undefined;
  const read = operationFromBody(element);
  if (read === undefined || !namesAnOperation(read)) return { request: {}, ownQuery };
  return { request: await withPersistedQuery(read, persistedQuery), ownQuery };
}

/** `read` with the text Apollo holds for the automatic persisted query it names, if any. */
async function withPersistedQuery(
  read: OperationRequest,
  persistedQuery: (sha256Hash: string) => Promise<string | undefined>,
): Promise<OperationRequest> {
  const hash = persistedHashOf(read.extensions);
  const stored =
    typeof read.query === 'string' || hash === undefined ? undefined : await persistedQuery(hash);
  return stored === undefined ? read : { ...read, persistedQuery: stored };
}

/**
 * Puts the text trusted documents gave for a request's id into the request (the POST body or the
 * GET URL; the `index`th element of a batch), so Apollo runs the very text the door admitted.
 */
export function withListedQuery(req: Request, query: string, index?: number): void {
  const body: unknown = req.body;
  const operation: unknown = index === undefined ? body : Array.isArray(body) ? body[index] : undefined;
  if (req.method === 'GET') {
    const parsed = new URL(req.url, 'http://facade.invalid');
    parsed.searchParams.set('query', query);
    req.url = `${parsed.pathname}${parsed.search}`;
  } else if (isRecord(operation)) {
    operation['query'] = query;
  }
}

/**
 * A browser opening `/graphql`: Apollo answers it with the landing page, which holds no data. It
 * must name no operation as Apollo reads the URL (a `query`, or an `extensions` naming a persisted
 * query): Apollo runs a GET whose `Accept` does not prefer HTML, so a request let through here as a
 * page would otherwise run its operation without a caller.
 */
function isLandingPageRequest(req: Request, landingPage: boolean, params: URLSearchParams): boolean {
  if (!landingPage || req.method !== 'GET' || req.accepts(['text/html']) !== 'text/html') return false;
  return !params.has('query') && !params.has('extensions');
}

/**
 * A POST body as Apollo reads it: a JSON object with at least one key, `query` a string,
 * `variables` and `extensions` objects, `operationName` a string, each when present (null counts as
 * absent); anything else it refuses.
 */
function operationFromBody(body: unknown): OperationRequest | undefined {
  if (!isRecord(body) || Object.keys(body).length === 0) return undefined;
  const { query, operationName, variables, extensions, documentId, id } = body;
  // Apollo takes any falsy `query` for none (a persisted query's hash may then name the text).
  if (Boolean(query) && typeof query !== 'string') return undefined;
  if (!absentOr(variables, isRecord) || !absentOr(extensions, isRecord)) return undefined;
  if (!absentOr(operationName, (value) => typeof value === 'string')) return undefined;
  return {
    query: typeof query === 'string' ? query : undefined,
    operationName: typeof operationName === 'string' ? operationName : undefined,
    variables: isRecord(variables) ? variables : undefined,
    extensions: isRecord(extensions) ? extensions : undefined,
    documentId,
    id,
  };
}

/** A GET's URL parameters as Apollo reads them: each at most once, `variables` and `extensions` JSON objects. */
function operationFromUrl(params: URLSearchParams): OperationRequest | undefined {
  const one = (name: string): string | undefined | null => {
    const values = params.getAll(name);
    return values.length > 1 ? null : values[0];
  };
  const [query, operationName] = [one('query'), one('operationName')];
  const [variables, extensions] = [jsonObject(one('variables')), jsonObject(one('extensions'))];
  if (query === null || operationName === null || variables === null || extensions === null) return undefined;
  return {
    query,
    operationName,
    variables,
    extensions,
    documentId: params.get('documentId') ?? undefined,
    id: params.get('id') ?? undefined,
  };
}

/** A parameter's JSON object; null when Apollo refuses it (not JSON, not an object, given twice). */
function jsonObject(value: string | undefined | null): Record<string, unknown> | undefined | null {
  if (value === undefined || value === null) return value;
  try {
    const parsed: unknown = JSON.parse(value);
    return isRecord(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

function namesAnOperation(request: OperationRequest): boolean {
  return (
    request.query !== undefined ||
    request.documentId !== undefined ||
    request.id !== undefined ||
    (isRecord(request.extensions) && request.extensions['persistedQuery'] !== undefined)
  );
}

/** The hash of an automatic persisted query (version 1, the one Apollo reads). */
function persistedHashOf(extensions: unknown): string | undefined {
  const persisted = isRecord(extensions) ? extensions['persistedQuery'] : undefined;
  if (!isRecord(persisted) || persisted['version'] !== 1) return undefined;
  const hash = persisted['sha256Hash'];
  return typeof hash === 'string' ? hash : undefined;
}

/**
 * The URL's parameters read the way Apollo Server reads them (`URLSearchParams`, every key), not
 * through express's `req.query`, whose parser stops after 1000 keys: a `query` placed after 1000
 * others would be invisible here and run by Apollo.
 */
function searchParamsOf(url: string): URLSearchParams {
  const start = url.indexOf('?');
  return new URLSearchParams(start === -1 ? '' : url.slice(start + 1).split('#', 1)[0]);
}

function onlyValue(values: string[]): string | undefined {
  return values.length === 1 ? values[0] : undefined;
}

function absentOr(value: unknown, is: (value: unknown) => boolean): boolean {
  return value === undefined || value === null || is(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
