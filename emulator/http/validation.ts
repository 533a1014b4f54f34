/**
 * Validation against the contract: each operation's query, headers and body checked by its JSON
 * Schemas (ajv), every failure reported as a 400 `validation_error` with a pointer to the field.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';
import type { Contract, ContractParameter, JsonSchema } from './contract.ts';
import type { FieldError, FieldErrorCode } from './problem.ts';
import { validationError } from './problem.ts';
import type { ListQuery } from './types.ts';
import { DEFAULT_PAGE_SIZE } from './pagination.ts';

/** Validated inputs outside the body. */
export type ValidatedParameters = { query: ListQuery; idempotencyKey?: string };

/** The raw inputs of one request, as the HTTP layer received them. */
export type RawParameters = {
  params: Record<string, string>;
  query: URLSearchParams;
  header(name: string): string | undefined;
};

/** Checks one operation's parameters and body against the contract, throwing 400 `validation_error`. */
export type OperationValidator = {
  parameters(raw: RawParameters): ValidatedParameters;
  /** Present when the operation takes a JSON body. */
  body?: (body: unknown) => void;
};

const CONTRACT_ID = 'https://contract.platform.test/v3/openapi.json';

// `x-pattern-error-code` picks the field error code of a failed `pattern` (e.g. `invalid_characters`
// for the text-field rule); the other x- keywords are documentation for readers of the contract.
const CONTRACT_KEYWORDS = ['x-pattern-error-code', 'x-spec'];

/** Compiles a validator for each operation of the contract, once. */
export function createValidators(contract: Contract): Map<string, OperationValidator> {
  const ajv = new Ajv2020({
    allErrors: true,
    verbose: true,
    strict: true,
    // `required` inside `if`/`then` names properties declared one level up, which strict mode rejects.
    strictRequired: false,
    keywords: CONTRACT_KEYWORDS,
  });
  addFormatsPlugin.default(ajv);
  ajv.addSchema({ $id: CONTRACT_ID, $defs: toDefs(contract.schemas) });

  const parameterValidators = new Map<string, ValidateFunction>();
  const parameterValidator = (schema: JsonSchema): ValidateFunction => {
    const key = JSON.stringify(schema);
    let validate = parameterValidators.get(key);
    if (!validate) {
      validate = ajv.compile(toDefs(schema));
      parameterValidators.set(key, validate);
    }
    return validate;
  };

  const validators = new Map<string, OperationValidator>();
  for (const operation of contract.operations) {
    const checks = operation.parameters
      // The request id is never rejected: an unusable one is replaced by a generated one.
      .filter((parameter) => parameter.name !== 'X-Request-Id')
      .map((parameter) => ({ parameter, validate: parameterValidator(parameter.schema) }));
    const bodyValidate = operation.requestBodySchema
      ? ajv.compile({ $ref: `${CONTRACT_ID}#/$defs/${operation.requestBodySchema}` })
      : undefined;
    validators.set(operation.operationId, {
      parameters: (raw) => validateParameters(checks, raw),
      ...(bodyValidate
        ? {
            body: (body: unknown) => {
              if (!bodyValidate(body))
                throw validationError(toFieldErrors(bodyValidate.errors ?? [], 'pointer'));
            },
          }
        : {}),
    });
  }
  return validators;
}

function validateParameters(
  checks: { parameter: ContractParameter; validate: ValidateFunction }[],
  raw: RawParameters,
): ValidatedParameters {
  const errors: FieldError[] = [];
  const values: Record<string, unknown> = {};
  for (const { parameter, validate } of checks) {
    if (parameter.in === 'query' && raw.query.getAll(parameter.name).length > 1) {
      // Picking one of `?limit=1&limit=2` silently would hide a bug in the caller.
      errors.push({
        parameter: parameter.name,
        code: 'invalid_value',
        message: `${parameter.name} must be given at most once.`,
      });
      continue;
    }
    const value = rawValue(parameter, raw);
    if (value === undefined) {
      if (parameter.required) {
        errors.push({
          parameter: parameter.name,
          code: 'required',
          message: `${parameter.name} is required.`,
        });
      }
      continue;
    }
    if (validate(value)) values[parameter.name] = value;
    else errors.push(...toFieldErrors(validate.errors ?? [], 'parameter', parameter.name));
  }
  if (errors.length > 0) throw validationError(errors);

  const query: ListQuery = { limit: typeof values.limit === 'number' ? values.limit : DEFAULT_PAGE_SIZE };
  if (typeof values.cursor === 'string') query.cursor = values.cursor;
  if (typeof values.updatedSince === 'string') query.updatedSince = values.updatedSince;
  const idempotencyKey = values['Idempotency-Key'];
  return typeof idempotencyKey === 'string' ? { query, idempotencyKey } : { query };
}

function rawValue(parameter: ContractParameter, raw: RawParameters): unknown {
  let value: string | undefined;
  if (parameter.in === 'path') value = raw.params[parameter.name];
  else if (parameter.in === 'header') value = raw.header(parameter.name.toLowerCase());
  else value = raw.query.get(parameter.name) ?? undefined;
  if (value === undefined) return undefined;
  // Query strings carry text only; integers are read as such so that `limit=abc` is a type error.
  if (parameter.schema.type === 'integer' && /^-?\d{1,15}$/.test(value)) return Number(value);
  return value;
}

/** Rewrites `#/components/schemas/X` references to the `$defs` of the registered contract schema. */
function toDefs<T>(value: T): T {
  if (Array.isArray(value)) return value.map(toDefs) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    out[key] =
      key === '$ref' && typeof child === 'string'
        ? child.replace('#/components/schemas/', `${CONTRACT_ID}#/$defs/`)
        : toDefs(child);
  }
  return out as T;
}

/** Keywords whose failure says nothing by itself: their sub-schemas' errors name the field. */
const COMBINATOR_KEYWORDS = new Set(['if', 'then', 'else', 'allOf', 'anyOf', 'oneOf', 'not', '$ref']);

/** When one field fails several ways, the most fundamental failure is reported. */
const PRIORITY: Record<FieldErrorCode, number> = {
  invalid_type: 0,
  required: 1,
  unknown_field: 1,
  invalid_length: 2,
  invalid_characters: 3,
  invalid_format: 3,
  invalid_value: 3,
  out_of_range: 3,
  not_found: 4,
};

/**
 * Turns ajv errors into the field errors of the assumptions doc: one per field (the most
 * fundamental), `pointer` for body fields and `parameter` for query parameters and headers.
 */
export function toFieldErrors(
  errors: readonly ErrorObject[],
  kind: 'pointer' | 'parameter',
  parameterName = '',
): FieldError[] {
  const byLocation = new Map<string, FieldError>();
  for (const error of errors) {
    if (COMBINATOR_KEYWORDS.has(error.keyword)) continue;
    const { code, message, pointer } = describe(error);
    const location = kind === 'pointer' ? pointer : parameterName;
    const fieldError: FieldError =
      kind === 'pointer' ? { pointer: location, code, message } : { parameter: location, code, message };
    const current = byLocation.get(location);
    if (!current || PRIORITY[code] < PRIORITY[current.code]) byLocation.set(location, fieldError);
  }
  return [...byLocation.values()];
}

function describe(error: ErrorObject): { code: FieldErrorCode; message: string; pointer: string } {
  const schema = (error.parentSchema ?? {}) as Record<string, unknown>;
  const params = error.params as Record<string, unknown>;
  const at = error.instancePath;
  switch (error.keyword) {
    case 'required':
      return {
        code: 'required',
        pointer: `${at}/${escapePointer(String(params.missingProperty))}`,
        message: 'This field is required.',
      };
    case 'additionalProperties':
      return {
        code: 'unknown_field',
        pointer: `${at}/${escapePointer(String(params.additionalProperty))}`,
        message: 'This field is not part of the request; remove it.',
      };
    case 'minProperties':
      return { code: 'required', pointer: at, message: 'At least one field must be given.' };
    case 'type':
      return { code: 'invalid_type', pointer: at, message: `Must be ${describeType(params.type)}.` };
    case 'minLength':
    case 'maxLength':
      return {
        code: 'invalid_length',
        pointer: at,
        message: lengthMessage(schema, 'minLength', 'maxLength', 'characters'),
      };
    case 'minItems':
    case 'maxItems':
      return {
        code: 'invalid_length',
        pointer: at,
        message: lengthMessage(schema, 'minItems', 'maxItems', 'items'),
      };
    case 'pattern': {
      const code = (schema['x-pattern-error-code'] as FieldErrorCode | undefined) ?? 'invalid_format';
      return {
        code,
        pointer: at,
        message:
          code === 'invalid_characters'
            ? 'Must not start or end with whitespace or contain control characters.'
            : `Must match the pattern ${String(params.pattern)}.`,
      };
    }
    case 'format':
      return { code: 'invalid_format', pointer: at, message: `Must be a valid ${String(params.format)}.` };
    case 'enum':
      return {
        code: 'invalid_value',
        pointer: at,
        message: `Must be one of: ${(params.allowedValues as unknown[]).map(String).join(', ')}.`,
      };
    case 'const':
      return {
        code: 'invalid_value',
        pointer: at,
        message: `Must be ${JSON.stringify(params.allowedValue)}.`,
      };
    case 'uniqueItems':
      return { code: 'invalid_value', pointer: at, message: 'Items must not repeat.' };
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return { code: 'out_of_range', pointer: at, message: rangeMessage(schema) };
    default:
      return { code: 'invalid_value', pointer: at, message: error.message ?? 'Invalid value.' };
  }
}

function describeType(type: unknown): string {
  const names = String(type).split(',');
  const article = (name: string) =>
    name === 'null' ? 'null' : /^[aeiou]/.test(name) ? `an ${name}` : `a ${name}`;
  return names.map(article).join(' or ');
}

function lengthMessage(
  schema: Record<string, unknown>,
  minKey: string,
  maxKey: string,
  unit: string,
): string {
  const min = schema[minKey];
  const max = schema[maxKey];
  if (typeof min === 'number' && typeof max === 'number') return `Must be ${min} to ${max} ${unit} long.`;
  if (typeof min === 'number') return `Must be at least ${min} ${unit} long.`;
  return `Must be at most ${String(max)} ${unit} long.`;
}

function rangeMessage(schema: Record<string, unknown>): string {
  const { minimum, maximum } = schema;
  if (typeof minimum === 'number' && typeof maximum === 'number')
    return `Must be from ${minimum} to ${maximum}.`;
  if (typeof minimum === 'number') return `Must be at least ${minimum}.`;
  return `Must be at most ${String(maximum)}.`;
}

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}
