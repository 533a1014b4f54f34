/**
 * The shipped gateway configuration (deploy/gateway.config.ts) with what docs/federation.md shows
 * how to switch on, each by a variable of the tests:
 *
 * - `GATEWAY_CALLBACK_PUBLIC_URL`: subscriptions go to the facade over Apollo's HTTP callback
 *   protocol (`@graphql-mesh/transport-http-callback`, which the Hive Gateway image ships) instead
 *   of graphql-ws. The gateway POSTs each subscription to the facade's `/graphql` with the caller's
 *   token, as it sends a query, naming its own callback endpoint at this URL
 *   (`http://gateway:4000/callback`), where the facade then POSTs every result; the facade's
 *   `SUBSCRIPTION_CALLBACK_ALLOWED_URLS` must hold it. `GATEWAY_CALLBACK_HEARTBEAT_MS`: the
 *   heartbeat interval the gateway asks for; a subscription that hears nothing from the facade for
 *   that long ends at the gateway (default 5000). A callback reaches the gateway replica that holds
 *   the subscription only through the gateway's pubsub: one replica here (`MemPubSub`); several
 *   need a shared one (`RedisPubSub`).
 * - `GATEWAY_BATCHING`: the most operations a client's batch (a JSON array, as Apollo Client's
 *   `BatchHttpLink` sends it) may hold at the gateway; unset, the gateway refuses batches.
 */
import { MemPubSub } from '@graphql-hive/gateway';
import { createGatewayConfig, edgeOptionsFromEnv } from '../../../deploy/gateway.config.ts';

const shipped = createGatewayConfig(edgeOptionsFromEnv(process.env));
const callbackUrl = process.env['GATEWAY_CALLBACK_PUBLIC_URL'];
const batching = Number(process.env['GATEWAY_BATCHING'] ?? 0);

export const gatewayConfig = {
  ...shipped,
  ...(batching > 0 ? { batching: { limit: batching } } : {}),
  ...(callbackUrl === undefined
    ? {}
    : {
        // The callback endpoint: a POST to the path of a subscription it holds is handed to it.
        webhooks: true,
        pubsub: new MemPubSub(),
        transportEntries: {
          platform: {
            options: {
              subscriptions: {
                kind: 'http-callback',
                location: '/graphql',
                options: {
                  public_url: callbackUrl,
                  heartbeat_interval: Number(process.env['GATEWAY_CALLBACK_HEARTBEAT_MS'] ?? 5_000),
                },
              },
            },
          },
        },
      }),
};
