/**
 * An in-process OTLP/HTTP receiver for the trace tests: accepts `POST /v1/traces` in the JSON
 * encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) and keeps every span it was sent, flattened.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One received span, its attributes as plain values. */
export interface ReceivedSpan {
  /** The instrumentation scope that made it (`@opentelemetry/instrumentation-graphql`, …). */
  scope: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** The spans this one links to (trace and span ids). */
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, string | number | boolean>;
}

/** OTLP's numbers for the span kinds. */
export const OTLP_SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface OtlpReceiver {
  /** The base URL to give as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  close(): Promise<void>;
}

interface OtlpAnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
}

interface OtlpExport {
  resourceSpans?: {
    scopeSpans?: {
      scope?: { name?: string };
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        links?: { traceId: string; spanId: string }[];
        attributes?: { key: string; value: OtlpAnyValue }[];
      }[];
    }[];
  }[];
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        response.writeHead(404).end();
        return;
      }
      const payload = JSON.parse(body) as OtlpExport;
      for (const resourceSpans of payload.resourceSpans ?? []) {
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              scope: scopeSpans.scope?.name ?? '',
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === '' ? undefined : span.parentSpanId,
              name: span.name,
              kind: span.kind ?? 0,
              links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
              attributes: Object.fromEntries(
                (span.attributes ?? []).map(({ key, value }) => [key, plain(value)]),
              ),
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function plain(value: OtlpAnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return JSON.stringify(value);
}
