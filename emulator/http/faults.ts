/**
 * Injected latency and failures for `/v3` operations, set through `PUT /_emulator/faults`: a rule
 * per route (or all of them), applied at a rate and at most a number of times, answering a problem,
 * resetting the connection or stalling.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { validationError } from './problem.ts';
import { toFieldErrors } from './validation.ts';

/**
 * - `internal_error`: 500 `internal_error` problem.
 * - `request_failed`: 502 `request_failed` problem.
 * - `reset`: the connection is destroyed without a response.
 * - `stall`: no response at all, until the client gives up or the emulator closes.
 * - `delay`: the request is answered as usual, `delayMs` later (a slow route among fast ones).
 */
export type FaultKind = 'internal_error' | 'request_failed' | 'reset' | 'stall' | 'delay';

export type FaultRule = {
  /** `METHOD /path/{template}` or an operationId; every `/v3` operation when absent. */
  route?: string;
  kind: FaultKind;
  /** Probability from 0 to 1 that a matching request gets the fault. */
  rate: number;
  /** Stops after injecting this many faults; unlimited when absent. */
  times?: number;
  /** For `delay`: how long the answer is held back, in milliseconds. */
  delayMs?: number;
};

export type FaultConfig = {
  latency: { fixedMs: number; jitterMs: number };
  rules: FaultRule[];
};

/** Latency and failure injection for `/v3` operations (`PUT /_emulator/faults`). */
export type FaultInjector = {
  current(): FaultConfig;
  configure(config: FaultConfig): void;
  clear(): void;
  /** Added latency for one request: `fixedMs` plus a uniform share of `jitterMs`. */
  latencyMs(): number;
  /** The fault to inject into this request, if any (never `delay`); consumes one of the rule's `times`. */
  pick(route: string, operationId: string): Exclude<FaultKind, 'delay'> | undefined;
  /** The delay of the first `delay` rule that fires for this request (0 when none); consumes one of its `times`. */
  delayMs(route: string, operationId: string): number;
};

const NO_FAULTS: FaultConfig = { latency: { fixedMs: 0, jitterMs: 0 }, rules: [] };

/** Creates an injector with no faults configured. `random` is injectable for deterministic tests. */
export function createFaultInjector(random: () => number = Math.random): FaultInjector {
  let config = structuredClone(NO_FAULTS);
  return {
    current: () => structuredClone(config),
    configure(next) {
      config = structuredClone(next);
    },
    clear() {
      config = structuredClone(NO_FAULTS);
    },
    latencyMs() {
      const { fixedMs, jitterMs } = config.latency;
      return fixedMs + (jitterMs > 0 ? Math.floor(random() * (jitterMs + 1)) : 0);
    },
    pick(route, operationId) {
      const rule = fire(config.rules, route, operationId, (kind) => kind !== 'delay', random);
      return rule === undefined || rule.kind === 'delay' ? undefined : rule.kind;
    },
    delayMs(route, operationId) {
      return fire(config.rules, route, operationId, (kind) => kind === 'delay', random)?.delayMs ?? 0;
    },
  };
}

/** The first rule of a kind `wanted` accepts that matches the request and fires; consumes one of its `times`. */
function fire(
  rules: FaultRule[],
  route: string,
  operationId: string,
  wanted: (kind: FaultKind) => boolean,
  random: () => number,
): FaultRule | undefined {
  for (const rule of rules) {
    if (!wanted(rule.kind) || rule.times === 0) continue;
    if (rule.route !== undefined && rule.route !== route && rule.route !== operationId) continue;
    if (rule.rate < 1 && random() >= rule.rate) continue;
    if (rule.times !== undefined) rule.times--;
    return rule;
  }
  return undefined;
}

const faultConfigSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    latency: {
      type: 'object',
      additionalProperties: false,
      properties: {
        fixedMs: { type: 'integer', minimum: 0, maximum: 600_000 },
        jitterMs: { type: 'integer', minimum: 0, maximum: 600_000 },
      },
    },
    rules: {
      type: 'array',
      maxItems: 100,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['kind'],
        properties: {
          route: { type: 'string', minLength: 1, maxLength: 300 },
          kind: { type: 'string', enum: ['internal_error', 'request_failed', 'reset', 'stall', 'delay'] },
          rate: { type: 'number', minimum: 0, maximum: 1 },
          times: { type: 'integer', minimum: 1 },
          delayMs: { type: 'integer', minimum: 1, maximum: 600_000 },
        },
        // A delay says how long (that no other kind takes one is checked in parseFaultConfig).
        if: { properties: { kind: { const: 'delay' } } },
        then: { required: ['delayMs'] },
      },
    },
  },
};

let validateFaultConfig: ReturnType<Ajv2020['compile']> | undefined;

/** Reads a `PUT /_emulator/faults` body (missing members default to none), or throws 400. */
export function parseFaultConfig(body: unknown): FaultConfig {
  validateFaultConfig ??= new Ajv2020({ allErrors: true, verbose: true }).compile(faultConfigSchema);
  if (!validateFaultConfig(body))
    throw validationError(toFieldErrors(validateFaultConfig.errors ?? [], 'pointer'));
  const input = body as {
    latency?: Partial<FaultConfig['latency']>;
    rules?: (Omit<FaultRule, 'rate'> & { rate?: number })[];
  };
  const misplacedDelays = (input.rules ?? []).flatMap((rule, index) =>
    rule.kind !== 'delay' && rule.delayMs !== undefined
      ? [
          {
            pointer: `/rules/${index}/delayMs`,
            code: 'invalid_value' as const,
            message: 'Only a delay rule takes delayMs.',
          },
        ]
      : [],
  );
  if (misplacedDelays.length > 0) throw validationError(misplacedDelays);
  return {
    latency: { fixedMs: input.latency?.fixedMs ?? 0, jitterMs: input.latency?.jitterMs ?? 0 },
    rules: (input.rules ?? []).map((rule) => ({ ...rule, rate: rule.rate ?? 1 })),
  };
}
