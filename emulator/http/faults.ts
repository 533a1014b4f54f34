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
 */
export type FaultKind = 'internal_error' | 'request_failed' | 'reset' | 'stall';

export type FaultRule = {
  /** `METHOD /path/{template}` or an operationId; every `/v3` operation when absent. */
  route?: string;
  kind: FaultKind;
  /** Probability from 0 to 1 that a matching request gets the fault. */
  rate: number;
  /** Stops after injecting this many faults; unlimited when absent. */
  times?: number;
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
  /** The fault to inject into this request, if any; consumes one of the rule's `times`. */
  pick(route: string, operationId: string): FaultKind | undefined;
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
      for (const rule of config.rules) {
        if (rule.times === 0) continue;
        if (rule.route !== undefined && rule.route !== route && rule.route !== operationId) continue;
        if (rule.rate < 1 && random() >= rule.rate) continue;
        if (rule.times !== undefined) rule.times--;
        return rule.kind;
      }
      return undefined;
    },
  };
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
          kind: { type: 'string', enum: ['internal_error', 'request_failed', 'reset', 'stall'] },
          rate: { type: 'number', minimum: 0, maximum: 1 },
          times: { type: 'integer', minimum: 1 },
        },
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
  return {
    latency: { fixedMs: input.latency?.fixedMs ?? 0, jitterMs: input.latency?.jitterMs ?? 0 },
    rules: (input.rules ?? []).map((rule) => ({ ...rule, rate: rule.rate ?? 1 })),
  };
}
