/**
 * The shipped gateway configuration (deploy/gateway.config.ts) with one change: subscriptions go
 * to the facade over Apollo's HTTP callback protocol (`@graphql-mesh/transport-http-callback`,
 * which the Hive Gateway image ships) instead of graphql-ws. The gateway POSTs each subscription to
 * the facade's `/graphql` with the caller's token, as it sends a query, and names its own callback
 * endpoint, where the facade then POSTs every result. docs/federation.md shows this change for the
 * shipped file.
 *
 * - `GATEWAY_CALLBACK_PUBLIC_URL`: where the facade reaches this gateway's callback endpoint
 *   (`http://gateway:4000/callback`); the facade's `SUBSCRIPTION_CALLBACK_ALLOWED_URLS` must hold it.
 * - `GATEWAY_CALLBACK_HEARTBEAT_MS`: the heartbeat interval the gateway asks for; a subscription
 *   that hears nothing from the facade for that long ends at the gateway (default 5000).
 *
 * A callback reaches the gateway replica that holds the subscription only through the gateway's
 * pubsub: one replica here (`MemPubSub`); several need a shared one (`RedisPubSub`).
 */
import { MemPubSub } from '@graphql-hive/gateway';
import { createGatewayConfig, edgeOptionsFromEnv } from '../../../deploy/gateway.config.ts';

const shipped = createGatewayConfig(edgeOptionsFromEnv(process.env));

export const gatewayConfig = {
  ...shipped,
  // The callback endpoint: a POST to the path of a subscription it holds is handed to that subscription.
  webhooks: true,
  pubsub: new MemPubSub(),
  transportEntries: {
    platform: {
      options: {
        subscriptions: {
          kind: 'http-callback',
          location: '/graphql',
          options: {
            public_url: process.env['GATEWAY_CALLBACK_PUBLIC_URL'],
            heartbeat_interval: Number(process.env['GATEWAY_CALLBACK_HEARTBEAT_MS'] ?? 5_000),
          },
        },
      },
    },
  },
};
