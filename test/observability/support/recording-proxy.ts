/**
 * A pass-through HTTP proxy in front of the emulator that remembers the `traceparent` header of
 * every request it forwards: the emulator's request log does not keep headers.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ForwardedRequest {
  method: string;
  path: string;
  traceparent: string | undefined;
}

export interface RecordingProxy {
  readonly url: string;
  readonly requests: ForwardedRequest[];
  close(): Promise<void>;
}

export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const requests: ForwardedRequest[] = [];
  const upstream = new URL(target);
  const server = http.createServer((request, response) => {
    const traceparent = request.headers.traceparent;
    requests.push({
      method: request.method ?? '',
      path: request.url ?? '',
      traceparent: Array.isArray(traceparent) ? traceparent[0] : traceparent,
    });
    const forwarded = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: request.method,
        path: request.url,
        headers: { ...request.headers, host: upstream.host },
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forwarded.on('error', () => response.destroy());
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
