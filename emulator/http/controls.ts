/**
 * The test controls under `/_emulator/`: health, the log of requests received, injected faults,
 * reset, and the webhook deliveries made, for tests and benchmarks to set up and observe the
 * emulator.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType, parseJsonBody, readBody } from './body.ts';
import type { FaultInjector } from './faults.ts';
import { parseFaultConfig } from './faults.ts';
import type { IdempotencyStore } from './idempotency.ts';
import { ProblemError, validationError } from './problem.ts';
import type { RequestLog } from './request-log.ts';
import { sendJson } from './respond.ts';
import type { DataSet, EmulatorBackend } from './types.ts';

/** What the `/_emulator/*` test controls act on. */
export type ControlTargets = {
  backend: EmulatorBackend;
  requestLog: RequestLog;
  faults: FaultInjector;
  idempotency: IdempotencyStore;
};

/** The path prefix of the controls; no API key is needed there. */
export const CONTROLS_PREFIX = '/_emulator/';

type ControlHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void> | void;

/**
 * Builds the handler of the test controls. Each returns JSON; bad input gets the same problem
 * responses as `/v3` (thrown as `ProblemError`, written by the caller).
 */
export function createControls(
  targets: ControlTargets,
): (method: string, path: string) => ControlHandler | ProblemError {
  const routes: Record<string, Partial<Record<string, ControlHandler>>> = {
    '/_emulator/health': {
      GET: (_request, response) => sendJson(response, 200, { status: 'ok' }),
    },
    '/_emulator/requests': {
      GET: (_request, response) => sendJson(response, 200, targets.requestLog.snapshot()),
      DELETE: (_request, response) => {
        targets.requestLog.clear();
        sendJson(response, 204, undefined);
      },
    },
    '/_emulator/faults': {
      GET: (_request, response) => sendJson(response, 200, { data: targets.faults.current() }),
      PUT: async (request, response) => {
        const config = parseFaultConfig(await readJson(request));
        targets.faults.configure(config);
        sendJson(response, 200, { data: config });
      },
      DELETE: (_request, response) => {
        targets.faults.clear();
        sendJson(response, 204, undefined);
      },
    },
    '/_emulator/reset': {
      POST: async (request, response) => {
        const data = readDataSet(await readJson(request, { optional: true }));
        targets.backend.reset(data);
        // Replaying a response about records that no longer exist would mislead.
        targets.idempotency.clear();
        sendJson(response, 200, { data: { data } });
      },
    },
    '/_emulator/webhook-deliveries': {
      GET: (_request, response) => sendJson(response, 200, { data: targets.backend.webhookDeliveries() }),
    },
  };

  return (method, path) => {
    const byMethod = routes[path];
    if (!byMethod) return new ProblemError(404, 'not_found', `No emulator control at ${path}.`);
    const handler = byMethod[method];
    if (!handler) {
      return new ProblemError(
        405,
        'method_not_allowed',
        `${path} accepts ${Object.keys(byMethod).join(', ')}.`,
      );
    }
    return handler;
  };
}

async function readJson(request: IncomingMessage, { optional = false } = {}): Promise<unknown> {
  const raw = await readBody(request);
  if (raw.length === 0) {
    if (optional) return {};
    throw validationError([{ pointer: '', code: 'required', message: 'A JSON body is required.' }]);
  }
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new ProblemError(415, 'unsupported_media_type', 'Send the body as application/json.');
  }
  return parseJsonBody(raw);
}

function readDataSet(body: unknown): DataSet {
  const data = typeof body === 'object' && body !== null ? (body as { data?: unknown }).data : undefined;
  if (data === undefined) return 'demo';
  if (data === 'demo' || data === 'empty') return data;
  throw validationError([
    { pointer: '/data', code: 'invalid_value', message: 'Must be one of: demo, empty.' },
  ]);
}
