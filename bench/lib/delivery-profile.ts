/**
 * The steps of one delivery (an event's result reaching one subscriber), for reading a facade's CPU
 * profile over a fan-out (`lib/cpu-profile.ts`): the first pattern that matches a function's file
 * names its step; a native function without a file is charged by its name where it is one of
 * {@link NATIVE_DELIVERY_STEPS}, else to its nearest caller's file.
 */
import type { ProfileSteps } from './cpu-profile.ts';

export const DELIVERY_STEPS: ProfileSteps = [
  ['tracing hooks (OpenTelemetry)', /node_modules\/@opentelemetry\//],
  ['logging, metrics', /src\/(logger\.ts|observability\/)|node_modules\/(prom-client|pino)\//],
  ['graphql-ws protocol (its server)', /node_modules\/graphql-ws\//],
  [
    'socket writes (ws frames, net, streams)',
    /node_modules\/ws\/|node:net|node:internal\/(stream_base_commons|streams|net)|node:stream/,
  ],
  ['live transports, framing (src/edge)', /src\/edge\//],
  ['delivery path (queues, sessions, feeds)', /src\/events\/|src\/graph\/(resource-feeds|events)\.ts/],
  [
    'reads (loaders, upstream client, cache)',
    /src\/(loaders|upstream)\/|node_modules\/(dataloader|undici)\/|node:internal\/deps\/undici/,
  ],
  ['execution (graphql-js, resolvers)', /node_modules\/graphql\/|src\/graph\//],
  [
    'HTTP layer (webhook intake)',
    /src\/http\/|src\/app\.ts|node_modules\/(express|router|body-parser|raw-body)\/|node:_http|node:http/,
  ],
  [
    'async hooks, promises, timers (node)',
    /node:internal\/(async_hooks|process\/task_queues|timers|async_context)|node:timers/,
  ],
];

/** Native functions charged by name: serialisation and the socket writes themselves. */
export const NATIVE_DELIVERY_STEPS: Readonly<Record<string, string>> = {
  stringify: 'serialisation (JSON.stringify)',
  writev: 'socket writes (ws frames, net, streams)',
  writeUtf8String: 'socket writes (ws frames, net, streams)',
  writeLatin1String: 'socket writes (ws frames, net, streams)',
  writeBuffer: 'socket writes (ws frames, net, streams)',
  writeAsciiString: 'socket writes (ws frames, net, streams)',
};
