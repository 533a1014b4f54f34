/**
 * Turns an upstream path with ids in it (`/v3/customers/cus_acme/accounts`) back into the contract's
 * route template (`/v3/customers/{customerId}/accounts`), so metrics and the audit trail can name a
 * route without ids (a label per id would grow without bound) and the audit trail can still say
 * which ids a write touched. The templates are the `paths` of `schema/upstream/openapi.yaml`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { memoizeByPath } from './path-memo.ts';

/**
 * What a concrete path matched: its template and the ids bound to the template's parameters. The
 * same path gives the same (frozen) match, shared by every call that asks.
 */
export interface RouteMatch {
  /** E.g. `/v3/customers/{customerId}/accounts`; {@link UNKNOWN_ROUTE} when no template matches. */
  readonly template: string;
  /** Path parameters by name, decoded (`{ customerId: 'cus_acme' }`). */
  readonly params: Readonly<Record<string, string>>;
}

/** The template reported for a path the contract does not list. */
const UNKNOWN_ROUTE = 'other';

/** Matches paths against a fixed set of templates. */
export type RouteMatcher = (path: string) => RouteMatch;

const CONTRACT = resolve(import.meta.dirname, '../../schema/upstream/openapi.yaml');

let contractTemplates: readonly string[] | undefined;

/** The path templates of the upstream contract, read once. */
function contractRouteTemplates(): readonly string[] {
  contractTemplates ??= Object.keys(
    (parse(readFileSync(CONTRACT, 'utf8')) as { paths?: Record<string, unknown> }).paths ?? {},
  );
  return contractTemplates;
}

type Segment = { literal: string } | { param: string };

/**
 * Builds a matcher over `templates` (default: the contract's). A literal segment wins over a
 * parameter at the same place, so `/v3/customers/search` would never be read as a customer id.
 * The query string, if any, is ignored. A path's match is computed once (see `path-memo.ts`).
 */
export function createRouteMatcher(templates: readonly string[] = contractRouteTemplates()): RouteMatcher {
  const compiled = templates.map((template) => ({
    template,
    segments: template
      .split('/')
      .slice(1)
      .map((part): Segment => {
        const param = /^\{(\w+)\}$/.exec(part)?.[1];
        return param === undefined ? { literal: part } : { param };
      }),
  }));
  // Most literal segments first: the first template that matches is the most specific.
  compiled.sort(
    (a, b) =>
      b.segments.filter((segment) => 'literal' in segment).length -
      a.segments.filter((segment) => 'literal' in segment).length,
  );

  return memoizeByPath((path) => {
    const parts = path.split('?')[0]!.split('/').slice(1);
    for (const { template, segments } of compiled) {
      if (segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      const matches = segments.every((segment, index) => {
        const part = parts[index]!;
        if ('literal' in segment) return segment.literal === part;
        if (part === '') return false;
        params[segment.param] = safeDecode(part);
        return true;
      });
      if (matches) return Object.freeze({ template, params: Object.freeze(params) });
    }
    return UNKNOWN_MATCH;
  });
}

const UNKNOWN_MATCH: RouteMatch = Object.freeze({ template: UNKNOWN_ROUTE, params: Object.freeze({}) });

function safeDecode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
