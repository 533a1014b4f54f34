/**
 * The test controls under `/_emulator/`: health, the log of requests received, injected faults,
 * reset, and the webhook deliveries made, for tests and benchmarks to set up and observe the
 * emulator.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType, parseJsonBody, readBody } from './body.ts';
import type { FaultInjector } from './faults.ts';
import { parseFaultConfig } from './faults.ts';
import type { Authenticator } from './auth.ts';
import type { IdempotencyStore } from './idempotency.ts';
import { ProblemError, validationError, type FieldError } from './problem.ts';
import type { RequestLog } from './request-log.ts';
import { sendJson } from './respond.ts';
import type { DataSet, EmulatorBackend } from './types.ts';

/** What the `/_emulator/*` test controls act on. */
export type ControlTargets = {
  backend: EmulatorBackend;
  requestLog: RequestLog;
  faults: FaultInjector;
  idempotency: IdempotencyStore;
  authenticator: Authenticator;
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
    '/_emulator/requests/by-key': {
      GET: (_request, response) => sendJson(response, 200, { byKeyId: targets.requestLog.byKeyId() }),
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
    // Keys at runtime, for rotations: a new key of an identity is accepted beside the old one
    // until the old one is revoked. Keys travel in bodies, never in paths, and are never answered.
    '/_emulator/keys': {
      GET: (_request, response) => sendJson(response, 200, { data: targets.authenticator.summaries() }),
      POST: async (request, response) => {
        const input = readNewKey(await readJson(request));
        sendJson(response, 201, { data: targets.authenticator.addKey(input) });
      },
    },
    '/_emulator/keys/revoke': {
      POST: async (request, response) => {
        const { key } = readKeyBody(await readJson(request));
        sendJson(response, 200, { data: targets.authenticator.revokeKey(key) });
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

/** `{key}`: a key of visible ASCII, 1 to 255 characters. */
function readKeyBody(body: unknown): { key: string } {
  const key = typeof body === 'object' && body !== null ? (body as { key?: unknown }).key : undefined;
  if (typeof key !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw validationError([
      {
        pointer: '/key',
        code: key === undefined ? 'required' : 'invalid_value',
        message: 'A key of 1 to 255 visible ASCII characters.',
      },
    ]);
  }
  return { key };
}

/** `{key, id, environment?, scope?}` of `POST /_emulator/keys`. */
function readNewKey(body: unknown): Parameters<Authenticator['addKey']>[0] {
  const { key } = readKeyBody(body);
  const fields = body as { id?: unknown; environment?: unknown; scope?: unknown };
  const errors: FieldError[] = [];
  if (typeof fields.id !== 'string' || fields.id.length === 0 || fields.id.length > 100) {
    errors.push({
      pointer: '/id',
      code: fields.id === undefined ? 'required' : 'invalid_value',
      message: 'The id of the identity the key belongs to (1 to 100 characters).',
    });
  }
  if (fields.environment !== undefined && fields.environment !== 'sandbox' && fields.environment !== 'live') {
    errors.push({
      pointer: '/environment',
      code: 'invalid_value',
      message: 'Must be one of: sandbox, live.',
    });
  }
  if (fields.scope !== undefined && fields.scope !== 'read_write' && fields.scope !== 'read_only') {
    errors.push({
      pointer: '/scope',
      code: 'invalid_value',
      message: 'Must be one of: read_write, read_only.',
    });
  }
  if (errors.length > 0) throw validationError(errors);
  return {
    key,
    id: fields.id as string,
    ...(fields.environment === undefined ? {} : { environment: fields.environment as 'sandbox' | 'live' }),
    ...(fields.scope === undefined ? {} : { scope: fields.scope as 'read_write' | 'read_only' }),
  };
}
