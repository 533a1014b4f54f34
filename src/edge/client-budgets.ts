/**
 * Budgets per client, and how a budget reads to the caller who spends it.
 *
 * `RATE_LIMIT_BY_CLIENT` names OAuth clients (the token's `client_id`, else its `azp`) and the
 * operations per window each may run: every token of such a client spends from that one budget,
 * on every replica (the counters live where the other budgets do, in Redis when it is
 * configured). Any other caller keeps its own `RATE_LIMIT_REQUESTS` budget per subject, and an
 * anonymous request the one of its address. Within a client's budget, each subject other than the
 * client itself (a tenant, a user) spends at most its share (`RATE_LIMIT_CLIENT_SUBJECT_SHARE`), and
 * is told of that share alone (`per-client-share`), never of what the client's other subjects spent.
 *
 * Whatever the budget, the caller can see it: the IETF RateLimit header fields
 * (draft-ietf-httpapi-ratelimit-headers: `RateLimit-Policy` states the quota and window,
 * `RateLimit` what is left and when the window ends, both Structured Field lists) on every HTTP
 * answer that spent from it, accepted or refused, and the same figures in the `rateLimit`
 * extension of a refusal on a live transport, which has no response headers per operation.
 */
/**
 * The name of the policy a budget follows, as the header fields and the extension name it:
 * `per-client-share` is one subject's share of its client's budget, all such a caller is told of.
 */
export type QuotaPolicyName = 'per-client' | 'per-client-share' | 'per-caller' | 'per-address';

/** A budget's size and what is left of it after one operation spent from it. */
export interface QuotaState {
  readonly policy: QuotaPolicyName;
  /** Operations per window (`q`). */
  readonly quota: number;
  /** The window's length in seconds (`w`). */
  readonly windowSeconds: number;
  /** Operations still allowed in the current window (`r`). */
  readonly remaining: number;
  /** Seconds until the current window ends and the budget is whole again (`t`). */
  readonly resetSeconds: number;
}

/** `RATE_LIMIT_BY_CLIENT` read: each client's operations per window. */
export type ClientBudgets = ReadonlyMap<string, number>;

/** The largest budget one client may be given (the same ceiling as `RATE_LIMIT_REQUESTS`). */
const MAX_CLIENT_BUDGET = 10_000_000;

/**
 * A client id as configured: what an authorization server issues (printable, no spaces, no `,`
 * or `=`, which separate the entries), at most 200 characters.
 */
const CLIENT_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * Reads `RATE_LIMIT_BY_CLIENT` (`batch-job=8,web-app=600`): the budgets, or one sentence naming
 * every bad entry. An empty value configures no client.
 */
export function parseClientBudgets(
  raw: string,
  unit: 'operations' | 'upstream calls' = 'operations',
): { budgets: ClientBudgets } | { problem: string } {
  const budgets = new Map<string, number>();
  const bad: string[] = [];
  const repeated: string[] = [];
  for (const entry of raw.split(',').map((part) => part.trim())) {
    if (entry === '') continue;
    const separator = entry.lastIndexOf('=');
    const clientId = entry.slice(0, separator).trim();
    const amount = entry.slice(separator + 1).trim();
    const operations = /^[0-9]{1,8}$/.test(amount) ? Number(amount) : Number.NaN;
    if (
      separator <= 0 ||
      !CLIENT_ID.test(clientId) ||
      clientId.includes('=') ||
      !Number.isInteger(operations) ||
      operations < 1 ||
      operations > MAX_CLIENT_BUDGET
    ) {
      bad.push(entry);
    } else if (budgets.has(clientId)) {
      repeated.push(clientId);
    } else {
      budgets.set(clientId, operations);
    }
  }
  if (bad.length > 0 || repeated.length > 0) {
    const problems = [
      ...(bad.length > 0
        ? [
            `each entry must be <client_id>=<${unit} per window> with ${unit} from 1 to ` +
              `${MAX_CLIENT_BUDGET}, e.g. batch-job=8,web-app=600; got ` +
              bad.map((entry) => JSON.stringify(entry.slice(0, 220))).join(', '),
          ]
        : []),
      ...(repeated.length > 0
        ? [`a client may be named once, got ${repeated.map((id) => JSON.stringify(id)).join(', ')} again`]
        : []),
    ];
    return { problem: problems.join('; ') };
  }
  return { budgets };
}

/**
 * The IETF RateLimit header fields of `state`, lower case:
 * `ratelimit-policy: "per-client";q=8;w=60` and `ratelimit: "per-client";r=7;t=42`.
 */
export function rateLimitHeaders(state: QuotaState): Record<'ratelimit-policy' | 'ratelimit', string> {
  // The policy names are fixed tokens of this module: nothing to escape in the sf-string.
  const policy = `"${state.policy}"`;
  return {
    'ratelimit-policy': `${policy};q=${state.quota};w=${state.windowSeconds}`,
    ratelimit: `${policy};r=${state.remaining};t=${state.resetSeconds}`,
  };
}

/**
 * The `rateLimit` extension of a refusal: the header fields' figures, for a live transport that
 * answers one operation with an error message and has no headers for it.
 */
export function rateLimitExtension(state: QuotaState): Record<keyof QuotaState, string | number> {
  return { ...state };
}
