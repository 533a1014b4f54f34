/**
 * Routing by the contract: every operation's path template compiled into a matcher, literal
 * segments before parameters, with 404 and 405 told apart.
 */
import type { ContractOperation } from './contract.ts';

/** The outcome of matching a request line against the contract's paths. */
export type RouteMatch =
  | { kind: 'found'; operation: ContractOperation; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: string[] }
  | { kind: 'not_found' }
  /** A segment's percent-encoding is broken or not UTF-8, so no id can be read from it. */
  | { kind: 'malformed_path'; segment: string };

type CompiledPath = {
  template: string;
  /** A literal segment, or null where a parameter goes. */
  segments: (string | null)[];
  parameterNames: string[];
  byMethod: Map<string, ContractOperation>;
};

/** Matches request paths to contract operations. Literal segments win over parameters. */
export type Router = { match(method: string, path: string): RouteMatch };

/** Compiles every operation's path template into a segment matcher, grouped by segment count. */
export function createRouter(operations: readonly ContractOperation[]): Router {
  const byTemplate = new Map<string, CompiledPath>();
  for (const operation of operations) {
    let compiled = byTemplate.get(operation.pathTemplate);
    if (!compiled) {
      const parts = operation.pathTemplate.split('/').slice(1);
      compiled = {
        template: operation.pathTemplate,
        segments: parts.map((part) => (part.startsWith('{') ? null : part)),
        parameterNames: parts.filter((part) => part.startsWith('{')).map((part) => part.slice(1, -1)),
        byMethod: new Map(),
      };
      byTemplate.set(operation.pathTemplate, compiled);
    }
    compiled.byMethod.set(operation.method, operation);
  }

  const byLength = new Map<number, CompiledPath[]>();
  for (const compiled of byTemplate.values()) {
    const list = byLength.get(compiled.segments.length) ?? [];
    list.push(compiled);
    byLength.set(compiled.segments.length, list);
  }
  // More literal segments first, so `/v3/webhooks/{id}` never shadows a literal sibling path.
  for (const list of byLength.values()) {
    list.sort((a, b) => b.segments.filter(Boolean).length - a.segments.filter(Boolean).length);
  }

  return {
    match(method, path) {
      const parts = path.split('/').slice(1);
      const malformed = parts.find((part) => decodeSegment(part) === undefined);
      if (malformed !== undefined) return { kind: 'malformed_path', segment: malformed };
      const allowed = new Set<string>();
      for (const compiled of byLength.get(parts.length) ?? []) {
        const values = matchSegments(compiled.segments, parts);
        if (!values) continue;
        const operation = compiled.byMethod.get(method);
        if (!operation) {
          for (const other of compiled.byMethod.keys()) allowed.add(other);
          continue;
        }
        const params: Record<string, string> = {};
        compiled.parameterNames.forEach((name, index) => (params[name] = values[index]!));
        return { kind: 'found', operation, params };
      }
      return allowed.size > 0 ? { kind: 'method_not_allowed', allowed: [...allowed] } : { kind: 'not_found' };
    },
  };
}

function matchSegments(segments: readonly (string | null)[], parts: readonly string[]): string[] | undefined {
  const values: string[] = [];
  for (let index = 0; index < segments.length; index++) {
    const segment = segments[index];
    const part = parts[index]!;
    if (segment === null) {
      if (part === '') return undefined;
      // Every segment decodes: `match` refused the path otherwise.
      values.push(decodeSegment(part)!);
    } else if (segment !== part) {
      return undefined;
    }
  }
  return values;
}

function decodeSegment(part: string): string | undefined {
  if (!part.includes('%')) return part;
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}
