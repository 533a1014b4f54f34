/**
 * The contract (`schema/upstream/openapi.yaml`) loaded for routing and validation: its operations
 * with their parameters resolved, and its component schemas.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { OperationId } from './types.ts';

/** Where the emulator reads its contract: the same file the facade generates its types from. */
export const CONTRACT_URL = new URL('../../schema/upstream/openapi.yaml', import.meta.url);

/** A JSON Schema as the contract writes it (OpenAPI 3.1 = JSON Schema 2020-12). */
export type JsonSchema = Record<string, unknown>;

/** A query, header or path parameter of an operation. */
export type ContractParameter = {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: JsonSchema;
};

/** One operation of the contract, with every `$ref` to a parameter resolved. */
export type ContractOperation = {
  operationId: OperationId;
  method: string;
  /** E.g. `/v3/customers/{customerId}`. */
  pathTemplate: string;
  /** `${method} ${pathTemplate}`, the key of request counts and fault rules. */
  route: string;
  parameters: ContractParameter[];
  /** The name of the request body's component schema, when the operation takes a body. */
  requestBodySchema?: string;
  /** Whether `Idempotency-Key` is a parameter (required or optional) of the operation. */
  idempotent: boolean;
};

/** The parsed contract: its operations and its component schemas. */
export type Contract = {
  operations: ContractOperation[];
  schemas: Record<string, JsonSchema>;
};

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** Reads and indexes the contract. Throws with a clear message when the file is not what it should be. */
export function loadContract(url: URL = CONTRACT_URL): Contract {
  const document = parse(readFileSync(url, 'utf8')) as OpenApiDocument;
  const parameters = document.components?.parameters ?? {};
  const operations: ContractOperation[] = [];

  for (const [pathTemplate, pathItem] of Object.entries(document.paths ?? {})) {
    for (const method of METHODS) {
      const operation = pathItem[method];
      if (!operation) continue;
      const resolved = (operation.parameters ?? []).map((parameter) =>
        resolveParameter(parameter, parameters),
      );
      const bodySchemaRef = operation.requestBody?.content?.['application/json']?.schema?.$ref;
      operations.push({
        operationId: operation.operationId as OperationId,
        method: method.toUpperCase(),
        pathTemplate,
        route: `${method.toUpperCase()} ${pathTemplate}`,
        parameters: resolved,
        ...(bodySchemaRef ? { requestBodySchema: schemaName(bodySchemaRef) } : {}),
        idempotent: resolved.some(
          (parameter) => parameter.in === 'header' && parameter.name === 'Idempotency-Key',
        ),
      });
    }
  }
  return { operations, schemas: document.components?.schemas ?? {} };
}

function resolveParameter(
  parameter: ParameterObject | { $ref: string },
  components: Record<string, ParameterObject>,
): ContractParameter {
  const object =
    '$ref' in parameter ? components[parameter.$ref.replace('#/components/parameters/', '')] : parameter;
  if (!object) throw new Error(`The contract refers to an undefined parameter: ${JSON.stringify(parameter)}`);
  return {
    name: object.name,
    in: object.in,
    required: object.required ?? false,
    schema: object.schema ?? {},
  };
}

function schemaName(ref: string): string {
  const prefix = '#/components/schemas/';
  if (!ref.startsWith(prefix)) throw new Error(`Request bodies must refer to a component schema, got ${ref}`);
  return ref.slice(prefix.length);
}

type ParameterObject = {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema?: JsonSchema;
};

type OpenApiDocument = {
  paths?: Record<
    string,
    Partial<
      Record<
        (typeof METHODS)[number],
        {
          operationId: string;
          parameters?: (ParameterObject | { $ref: string })[];
          requestBody?: { content?: Record<string, { schema?: { $ref?: string } }> };
        }
      >
    >
  >;
  components?: { parameters?: Record<string, ParameterObject>; schemas?: Record<string, JsonSchema> };
};
