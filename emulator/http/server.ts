/**
 * The emulator's HTTP side: one request listener that takes every `/v3` request through the same
 * steps (request id, counting, authentication, routing, body, validation, idempotency, faults,
 * handler) and serves the test controls.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Authenticator } from './auth.ts';
import { createAuthenticator, DEFAULT_API_KEYS } from './auth.ts';
import { isJsonContentType, parseJsonBody, readBody } from './body.ts';
import type { Contract, ContractOperation } from './contract.ts';
import { loadContract } from './contract.ts';
import { CONTROLS_PREFIX, createControls } from './controls.ts';
import type { FaultInjector } from './faults.ts';
import { createFaultInjector } from './faults.ts';
import type { IdempotencyClaim, IdempotencyStore, StoredResponse } from './idempotency.ts';
import { createIdempotencyStore } from './idempotency.ts';
import type { FieldError } from './problem.ts';
import { buildProblem, DEFAULT_DOCS_URL, ProblemError, validationError } from './problem.ts';
import type { RequestLog } from './request-log.ts';
import { createRequestLog } from './request-log.ts';
import { asProblemError, JSON_TYPE, PROBLEM_TYPE, sendPayload, sendProblem } from './respond.ts';
import type { Router } from './router.ts';
import { createRouter } from './router.ts';
import type { OperationValidator, ValidatedParameters } from './validation.ts';
import { createValidators } from './validation.ts';
import type {
  ApiKeyConfig,
  EmulatorBackend,
  EmulatorLogger,
  EmulatorRequest,
  EmulatorResponse,
} from './types.ts';

/** Options of {@link createEmulatorHttp}. */
export type EmulatorHttpOptions = {
  /** The handlers and hooks behind the HTTP core. */
  backend: EmulatorBackend;
  /** Accepted keys. Default: {@link DEFAULT_API_KEYS}. */
  apiKeys?: readonly ApiKeyConfig[];
  /** `{docs_url}` of problem `type`s. Default `https://docs.platform.test/v3`. */
  docsUrl?: string;
  /** How long a completed idempotent response is replayed. Default 24 h. */
  idempotencyRetentionMs?: number;
  /** Told about unexpected errors (500s). Never given keys, secrets or bodies. */
  logger?: EmulatorLogger;
};

/** The request listener plus the state the test controls act on. */
export type EmulatorHttp = {
  listener: RequestListener;
  /** For the server's `clientError` event: a request Node could not parse, answered as a problem. */
  clientError: (error: NodeJS.ErrnoException, socket: Duplex) => void;
  requestLog: RequestLog;
  faults: FaultInjector;
  idempotency: IdempotencyStore;
};

type CompiledContract = { contract: Contract; router: Router; validators: Map<string, OperationValidator> };

let compiled: CompiledContract | undefined;

/** Loads and compiles the contract once per process: every emulator instance shares it. */
function compiledContract(): CompiledContract {
  if (!compiled) {
    const contract = loadContract();
    compiled = {
      contract,
      router: createRouter(contract.operations),
      validators: createValidators(contract),
    };
  }
  return compiled;
}

const REQUEST_ID = /^[\x21-\x7E]{1,200}$/;

/**
 * Builds the emulator's request listener. Every `/v3` request goes through the same steps:
 * request id, counting, authentication, routing, body reading, validation against the contract,
 * idempotency, injected latency and faults, then the operation's handler. Every failure on the
 * way is a problem response; nothing a client sends can crash the process.
 */
export function createEmulatorHttp(options: EmulatorHttpOptions): EmulatorHttp {
  const { contract, router, validators } = compiledContract();
  const docsUrl = options.docsUrl ?? DEFAULT_DOCS_URL;
  const authenticator = createAuthenticator(options.apiKeys ?? DEFAULT_API_KEYS);
  const requestLog = createRequestLog();
  const faults = createFaultInjector();
  const idempotency = createIdempotencyStore(options.idempotencyRetentionMs);
  const controls = createControls({
    backend: options.backend,
    requestLog,
    faults,
    idempotency,
    authenticator,
  });
  const logger = options.logger;

  const known = new Set(contract.operations.map((operation) => operation.operationId));
  for (const operationId of Object.keys(options.backend.handlers)) {
    if (!known.has(operationId as ContractOperation['operationId'])) {
      throw new Error(
        `A handler is registered for "${operationId}", which is not an operation of the contract.`,
      );
    }
  }

  const context = {
    authenticator,
    router,
    validators,
    requestLog,
    faults,
    idempotency,
    docsUrl,
    backend: options.backend,
  };

  const listener: RequestListener = (request, response) => {
    const requestId = acceptedRequestId(request.headers['x-request-id']) ?? generateRequestId();
    response.setHeader('X-Request-Id', requestId);
    const [path = '/', search = ''] = (request.url ?? '/').split('?', 2);
    const method = request.method ?? 'GET';

    const done = path.startsWith(CONTROLS_PREFIX)
      ? handleControl(controls(method, path), request, response, requestId, docsUrl)
      : handleApi(context, { request, response, requestId, method, path, search });

    done.catch((error: unknown) => {
      logger?.error('emulator request failed', { requestId, method, path, error: describeError(error) });
      sendProblem(response, asProblemError(error), { requestId, docsUrl });
    });
  };

  const clientError = (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable) return void socket.destroy();
    socket.end(clientErrorResponse(error, docsUrl));
  };

  return { listener, clientError, requestLog, faults, idempotency };
}

/**
 * The raw HTTP answer to a request that never reached the listener (a malformed request line or
 * method, oversized headers): still a problem with a correlation id, then the connection closes.
 */
function clientErrorResponse(error: NodeJS.ErrnoException, docsUrl: string): string {
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const problem = tooLarge
    ? new ProblemError(431, 'request_header_fields_too_large', 'The request headers are too large.')
    : new ProblemError(
        400,
        'validation_error',
        'The request is not valid HTTP/1.1 (request line, method or headers).',
      );
  const requestId = generateRequestId();
  const payload = JSON.stringify(buildProblem(problem, { requestId, docsUrl }));
  return [
    `HTTP/1.1 ${tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request'}`,
    `Content-Type: ${PROBLEM_TYPE}`,
    `Content-Length: ${Buffer.byteLength(payload)}`,
    `X-Request-Id: ${requestId}`,
    'Connection: close',
    '',
    payload,
  ].join('\r\n');
}

async function handleControl(
  handler: ReturnType<ReturnType<typeof createControls>>,
  request: IncomingMessage,
  response: ServerResponse,
  requestId: string,
  docsUrl: string,
): Promise<void> {
  try {
    if (handler instanceof ProblemError) throw handler;
    await handler(request, response);
  } catch (error) {
    if (!(error instanceof ProblemError)) throw error;
    sendProblem(response, error, { requestId, docsUrl }, error.status === 413 ? { Connection: 'close' } : {});
  }
}

type ApiContext = {
  authenticator: Authenticator;
  router: Router;
  validators: Map<string, OperationValidator>;
  requestLog: RequestLog;
  faults: FaultInjector;
  idempotency: IdempotencyStore;
  docsUrl: string;
  backend: EmulatorBackend;
};

type Exchange = {
  request: IncomingMessage;
  response: ServerResponse;
  requestId: string;
  method: string;
  path: string;
  search: string;
};

async function handleApi(context: ApiContext, exchange: Exchange): Promise<void> {
  const { request, response, requestId, method, path } = exchange;
  const match = context.router.match(method, path);
  const route = match.kind === 'found' ? match.operation.route : `${method} (unmatched)`;
  const entry = context.requestLog.record({ method, route, path, requestId });
  response.once('finish', () => {
    entry.status = response.statusCode;
  });

  let claim: IdempotencyClaim | undefined;
  try {
    const apiKey = context.authenticator.authenticate(request.headers['x-api-key'], method, path);
    context.requestLog.countKey(apiKey.id);
    if (match.kind === 'malformed_path') {
      throw new ProblemError(
        400,
        'validation_error',
        `The path segment "${match.segment}" is not valid percent-encoded UTF-8.`,
      );
    }
    if (match.kind === 'not_found') {
      throw new ProblemError(404, 'not_found', `No operation exists at ${method} ${path}.`);
    }
    if (match.kind === 'method_not_allowed') {
      throw new ProblemError(
        405,
        'method_not_allowed',
        `${path} accepts ${match.allowed.join(', ')}, not ${method}.`,
        {},
      );
    }
    const { operation, params } = match;
    const validator = context.validators.get(operation.operationId)!;

    const rawBody = await readBody(request);
    const validated = validateRequest(validator, request, rawBody, params, exchange.search);

    const { query, idempotencyKey } = validated;
    if (operation.idempotent && idempotencyKey !== undefined) {
      const outcome = context.idempotency.begin({
        scope: apiKey.id,
        key: idempotencyKey,
        method,
        path,
        rawBody,
      });
      if (outcome.kind === 'replay') {
        replay(response, outcome.response, requestId);
        return;
      }
      claim = outcome.claim;
    }

    const interrupted = await injectFaults(context.faults, operation, request);
    if (interrupted) {
      // The request never completed, so the identical retry must run again.
      claim?.release();
      return;
    }

    const handler = context.backend.handlers[operation.operationId];
    if (!handler) {
      throw new ProblemError(
        501,
        'not_implemented',
        `The emulator does not implement ${operation.operationId} yet.`,
      );
    }
    const emulatorRequest: EmulatorRequest = {
      operationId: operation.operationId,
      route: operation.route,
      method,
      path,
      params,
      query,
      body: validated.body,
      environment: apiKey.environment,
      apiKey,
      requestId,
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
    };
    const result: EmulatorResponse = await handler(emulatorRequest);
    const headers = { ...result.headers };
    const payload = result.body === undefined ? undefined : JSON.stringify(result.body);
    claim?.complete({ status: result.status, payload, headers, isProblem: false });
    sendPayload(response, result.status, payload, headers, JSON_TYPE);
  } catch (error) {
    if (!(error instanceof ProblemError)) {
      claim?.release();
      throw error;
    }
    const payload = JSON.stringify(buildProblem(error, { requestId, docsUrl: context.docsUrl }));
    const headers = problemHeaders(error, match);
    claim?.complete({ status: error.status, payload, headers: {}, isProblem: true });
    sendPayload(response, error.status, payload, headers, PROBLEM_TYPE);
  }
}

/**
 * Validates parameters, headers and body against the contract. Field errors of all three are
 * reported together; a body that is not JSON at all (wrong media type, unparsable) stops first.
 */
function validateRequest(
  validator: OperationValidator,
  request: IncomingMessage,
  rawBody: Buffer,
  params: Record<string, string>,
  search: string,
): ValidatedParameters & { body: unknown } {
  let parameters: ValidatedParameters | undefined;
  const errors: FieldError[] = [];
  try {
    parameters = validator.parameters({
      params,
      query: new URLSearchParams(search),
      header: (name) => headerValue(request.headers[name]),
    });
  } catch (error) {
    if (!(error instanceof ProblemError) || !error.extras.errors) throw error;
    errors.push(...error.extras.errors);
  }

  let body: unknown;
  if (validator.body) {
    if (rawBody.length === 0) {
      errors.push({ pointer: '', code: 'required', message: 'This operation needs a JSON request body.' });
    } else {
      if (!isJsonContentType(request.headers['content-type'])) {
        throw new ProblemError(
          415,
          'unsupported_media_type',
          'Send the request body as application/json (Content-Type: application/json).',
        );
      }
      body = parseJsonBody(rawBody);
      try {
        validator.body(body);
      } catch (error) {
        if (!(error instanceof ProblemError) || !error.extras.errors) throw error;
        errors.push(...error.extras.errors);
      }
    }
  }
  if (errors.length > 0 || !parameters) throw validationError(errors);
  return { ...parameters, body };
}

/**
 * Applies configured latency and faults. Returns true when the request was deliberately left
 * without a response (reset or stall); throws for injected 5xx problems.
 */
async function injectFaults(
  faults: FaultInjector,
  operation: ContractOperation,
  request: IncomingMessage,
): Promise<boolean> {
  const latency = faults.latencyMs() + faults.delayMs(operation.route, operation.operationId);
  // Unreferenced, so a pending delay never keeps a closing process alive.
  if (latency > 0) await sleep(latency, undefined, { ref: false });
  switch (faults.pick(operation.route, operation.operationId)) {
    case undefined:
      return false;
    case 'internal_error':
      throw new ProblemError(
        500,
        'internal_error',
        'Injected fault: the request failed inside the service. Retry it.',
      );
    case 'request_failed':
      throw new ProblemError(
        502,
        'request_failed',
        'Injected fault: a request to a downstream provider failed. Retry it.',
      );
    case 'reset':
      request.socket.destroy();
      return true;
    case 'stall':
      // Never answer: the client times out, or closing the emulator destroys the connection.
      return true;
  }
}

function replay(response: ServerResponse, stored: StoredResponse, requestId: string): void {
  const headers = { ...stored.headers, 'Idempotency-Replayed': 'true' };
  if (stored.isProblem && stored.payload !== undefined) {
    const problem = { ...(JSON.parse(stored.payload) as object), correlationId: requestId };
    sendPayload(response, stored.status, JSON.stringify(problem), headers, PROBLEM_TYPE);
    return;
  }
  sendPayload(response, stored.status, stored.payload, headers, JSON_TYPE);
}

function problemHeaders(error: ProblemError, match: ReturnType<Router['match']>): Record<string, string> {
  if (error.status === 405 && match.kind === 'method_not_allowed') return { Allow: match.allowed.join(', ') };
  // The rest of an oversized body is not worth reading: close the connection after answering.
  if (error.status === 413) return { Connection: 'close' };
  return {};
}

function acceptedRequestId(value: string | string[] | undefined): string | undefined {
  const candidate = headerValue(value);
  return candidate !== undefined && REQUEST_ID.test(candidate) ? candidate : undefined;
}

function generateRequestId(): string {
  return `req_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function describeError(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
