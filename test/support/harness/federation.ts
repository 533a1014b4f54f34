/**
 * The federation test bed: the real stack (emulator + facade), the support-notes example subgraph,
 * both on port 0, and the supergraph composed from this repository's SDL with their real URLs.
 * Gateways (Apollo Gateway, Hive Gateway) are started over it by `gateways.ts`.
 */
import { createSupportNotesServer } from '../../../examples/support-notes/server.ts';
import {
  composeSupergraph,
  loadRepositorySubgraphs,
  withoutEdgeAuthorization,
} from '../../../scripts/compose-supergraph.ts';
import { bearer } from '../tokens.ts';
import { startStack, type Stack, type StackOptions } from './stack.ts';

export type FederationStack = {
  /** The emulator and the facade (the `platform` subgraph). */
  stack: Stack;
  /** The support-notes subgraph's GraphQL URL. */
  supportNotesUrl: string;
  /** The supergraph SDL, routing `platform` and `support-notes` to the servers above. */
  supergraphSdl: string;
  /** The same without the edge-authorization directives, which Apollo Gateway refuses. */
  apolloGatewaySupergraphSdl: string;
  close(): Promise<void>;
};

/**
 * Starts both subgraphs (the stack with `options`) and composes their supergraph. Always `close()`
 * it (afterAll).
 */
export async function startFederationStack(options: StackOptions = {}): Promise<FederationStack> {
  const stack = await startStack(options);
  const supportNotes = createSupportNotesServer();
  try {
    const { url: supportNotesUrl } = await supportNotes.listen(0);
    const subgraphs = loadRepositorySubgraphs({ facadeUrl: stack.graphqlUrl, supportNotesUrl });
    const { supergraphSdl } = composeSupergraph(subgraphs);
    const { supergraphSdl: apolloGatewaySupergraphSdl } = composeSupergraph(
      withoutEdgeAuthorization(subgraphs),
    );
    return {
      stack,
      supportNotesUrl,
      supergraphSdl,
      apolloGatewaySupergraphSdl,
      async close() {
        await supportNotes.close();
        await stack.close();
      },
    };
  } catch (error) {
    await supportNotes.close();
    await stack.close();
    throw error;
  }
}

/** A GraphQL response as a gateway sends it. */
export type GatewayResult = {
  status: number;
  body: {
    data?: Record<string, unknown> | null;
    errors?: {
      message: string;
      path?: (string | number)[];
      extensions?: Record<string, unknown> & { code?: string; problem?: Record<string, unknown> };
    }[];
  };
};

/**
 * POSTs a GraphQL request to `url` with real fetch and parses the JSON answer; as the operator (a
 * real token of the run's issuer, which the gateways forward) unless `headers` hold an
 * `authorization` of their own (an empty one sends none).
 */
export async function postGraphQL(
  url: string,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<GatewayResult> {
  const given = Object.keys(headers).find((name) => name.toLowerCase() === 'authorization');
  const { [given ?? 'authorization']: authorization, ...others } = headers;
  const credentials =
    given === undefined
      ? await bearer('operator')
      : authorization === ''
        ? {}
        : { authorization: authorization! };
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...others, ...credentials },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) as GatewayResult['body'] };
  } catch {
    throw new Error(`${url} answered ${response.status} with a non-JSON body: ${text.slice(0, 500)}`);
  }
}
