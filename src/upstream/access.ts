/**
 * The caller's right to each upstream request, checked in one place just before the request would
 * be sent (`client.send`), so no resolver, loader, entity lookup or event read can reach a
 * customer the caller may not act for, and no future upstream function goes out unchecked: a path
 * without a rule here is refused for everyone. The rules judge the path as the upstream will act on
 * it, even behind a proxy that decodes and normalises paths, so the two can never disagree.
 *
 * The table in docs/security.md is this file told per GraphQL field; keep both in step.
 */
import type { CustomerScope } from '../auth/caller.ts';
import type { HttpMethod, UpstreamRequest } from './types.ts';
import { UpstreamAccessDeniedError, UpstreamProblemError } from './errors.ts';
import { memoizeByPath } from './path-memo.ts';

/** What one operation's upstream requests may touch: the caller's roles and customers. */
export interface UpstreamScope {
  /** False only for an anonymous request (e.g. a gateway reading `_service`): it may reach nothing. */
  readonly authenticated: boolean;
  /** Sees every customer and manages platform-wide resources (webhook endpoints, sandbox forcing). */
  readonly operator: boolean;
  readonly customers: CustomerScope;
}

/** The scope of the facade's own work (webhook registration, readiness) and of `AUTH_MODE=none`. */
export const PLATFORM_SCOPE: UpstreamScope = Object.freeze({
  authenticated: true,
  operator: true,
  customers: Object.freeze({ kind: 'all' }),
});

/** The scope of an anonymous request: no upstream request at all. */
export const ANONYMOUS_SCOPE: UpstreamScope = Object.freeze({
  authenticated: false,
  operator: false,
  customers: Object.freeze({ kind: 'customers', customerIds: new Set<string>() }),
});

/** The upstream scope of an authenticated caller. */
export function scopeOf(caller: { operator: boolean; scope: CustomerScope }): UpstreamScope {
  return { authenticated: true, operator: caller.operator, customers: caller.scope };
}

/** Who may send a request that matches a rule. */
type Access =
  /** Any authenticated caller (discovery, institutions). */
  | 'any-caller'
  /** Operators only. */
  | 'operator'
  /** Callers who may act for the customer the path names (its first group). */
  | 'path-customer'
  /**
   * Callers who may act for the customer the request declares in `actingFor`: the path names a
   * resource of that customer without the customer (the sandbox top-up names only an account), so
   * the upstream function that builds it must have read the resource under the customer first.
   */
  | 'proven-customer';

interface Rule {
  readonly methods: readonly HttpMethod[];
  /** Matched against the path as the upstream sees it ({@link pathAsUpstreamSees}). */
  readonly pattern: RegExp;
  readonly access: Access;
}

const ANY: readonly HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const GET: readonly HttpMethod[] = ['GET'];

/**
 * Every upstream path the facade calls, and who may call it. The first matching rule decides.
 * Listing customers is operator-only: a scoped caller's `customers` reads each of its own by id.
 * Creating a customer is operator-only too: the new customer would not be in the creator's scope.
 */
const RULES: readonly Rule[] = [
  { methods: ANY, pattern: /^\/v3\/customers$/, access: 'operator' },
  { methods: ANY, pattern: /^\/v3\/customers\/(?<customerId>[^/]+)(?:\/.*)?$/, access: 'path-customer' },
  { methods: GET, pattern: /^\/v3\/capabilities$/, access: 'any-caller' },
  { methods: GET, pattern: /^\/v3\/institutions(?:\/[^/]+)?$/, access: 'any-caller' },
  { methods: ANY, pattern: /^\/v3\/webhooks(?:\/[^/]+)?$/, access: 'operator' },
  { methods: ['POST'], pattern: /^\/v3\/sandbox\/accounts\/[^/]+\/topup$/, access: 'proven-customer' },
  {
    methods: ['POST'],
    pattern: /^\/v3\/sandbox\/customers\/[^/]+\/capabilities\/[^/]+\/status$/,
    access: 'operator',
  },
];

/** Options of {@link authorizeUpstreamRequest}. */
export interface AuthorizeOptions {
  /** The request id of the operation: the `correlationId` of a refusal that answers like a 404. */
  requestId: string;
  /** `{docs_url}` of problem types, so a refusal reads exactly like the upstream's own 404. */
  problemDocsUrl: string;
}

/**
 * Throws unless `scope` may send `request`. Nothing is sent and no call budget is spent for a
 * refused request.
 *
 * A customer outside the scope is answered as the upstream answers a customer that does not exist
 * (404, the same code, title and detail), so a caller cannot tell another customer's id from an
 * unknown one. A platform-wide request by a non-operator is {@link UpstreamAccessDeniedError}.
 */
export function authorizeUpstreamRequest(
  scope: UpstreamScope,
  request: Pick<UpstreamRequest, 'method' | 'path' | 'actingFor'>,
  options: AuthorizeOptions,
): void {
  const judged = judgePath(`${request.method} ${request.path}`);
  if ('refused' in judged) throw new UpstreamAccessDeniedError(judged.refused);
  const { rule, customerId, path } = judged;
  if (!scope.authenticated) throw new UpstreamAccessDeniedError('anonymous');
  switch (rule.access) {
    case 'any-caller':
      return;
    case 'operator':
      if (!scope.operator) throw new UpstreamAccessDeniedError('operator_only');
      return;
    case 'path-customer': {
      if (!inScope(scope, customerId)) throw missingCustomer(customerId, path, options);
      return;
    }
    case 'proven-customer':
      if (scope.operator) return;
      if (request.actingFor === undefined || !inScope(scope, request.actingFor)) {
        throw new UpstreamAccessDeniedError('unproven_customer');
      }
      return;
  }
}

/** What a method and path alone decide: refused, or the rule that judges the caller (and its customer). */
type PathJudgement =
  | { readonly refused: 'unsafe_path' | 'no_rule' }
  | { readonly rule: Rule; readonly customerId: string; readonly path: string };

/**
 * Judges `${method} ${path}` without the caller: the same for every call of that method and path,
 * so it is computed once per path (`path-memo.ts`); the scope is checked per call.
 */
const judgePath = memoizeByPath((methodAndPath: string): PathJudgement => {
  const space = methodAndPath.indexOf(' ');
  const method = methodAndPath.slice(0, space) as HttpMethod;
  const sent = methodAndPath.slice(space + 1);
  // The rules judge the path the upstream will act on. A path that a proxy could read differently
  // from the way it is sent is refused, so the judged path and the served one are always the same.
  const path = pathAsUpstreamSees(sent);
  if (path !== sent || !path.split('/').slice(1).every(isPlainSegment)) return { refused: 'unsafe_path' };
  const rule = RULES.find((candidate) => candidate.methods.includes(method) && candidate.pattern.test(path));
  if (rule === undefined) return { refused: 'no_rule' };
  const customerId =
    rule.access === 'path-customer' ? (rule.pattern.exec(path)?.groups?.customerId ?? '') : '';
  return { rule, customerId, path };
});

/** True when `scope` covers `customerId`. */
export function inScope(scope: UpstreamScope, customerId: string): boolean {
  return scope.customers.kind === 'all' || scope.customers.customerIds.has(customerId);
}

/**
 * Collections whose unknown parent customer the contract answers with `customer_not_found`; every
 * other customer path answers `not_found` (see the contract's 404 descriptions).
 */
const CUSTOMER_NOT_FOUND_COLLECTIONS = /^\/v3\/customers\/[^/]+\/(?:related-parties|documents)(?:\/|$)/;

/** The upstream's own answer for a customer that does not exist, on `path`. */
function missingCustomer(customerId: string, path: string, options: AuthorizeOptions): UpstreamProblemError {
  const code = CUSTOMER_NOT_FOUND_COLLECTIONS.test(path) ? 'customer_not_found' : 'not_found';
  return new UpstreamProblemError({
    type: `${options.problemDocsUrl}/errors/${code.replaceAll('_', '-')}`,
    title: code === 'customer_not_found' ? 'Customer Not Found' : 'Not Found',
    status: 404,
    code,
    detail: `No customer with id ${customerId} exists.`,
    correlationId: options.requestId,
  });
}

/** Percent-decodings a chain of proxies might apply; a path still changing after them is refused. */
const MAX_DECODINGS = 4;

/**
 * `path` as an upstream behind path-normalising proxies would act on it: percent-escapes decoded
 * (as often as a chain of proxies might), `\` read as `/`, `;` parameters dropped, repeated slashes
 * merged and dot segments resolved (RFC 3986, 5.2.4). Undefined when the escapes are malformed or
 * never settle.
 */
export function pathAsUpstreamSees(path: string): string | undefined {
  let decoded = path;
  for (let round = 0; ; round += 1) {
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return undefined;
    }
    if (next === decoded) break;
    if (round === MAX_DECODINGS) return undefined;
    decoded = next;
  }
  const segments: string[] = [];
  for (const raw of decoded.replaceAll('\\', '/').split('/')) {
    const segment = raw.split(';', 1)[0]!;
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/** A segment no decoding or normalisation changes: the plain form of ids and route words. */
function isPlainSegment(segment: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(segment);
}
