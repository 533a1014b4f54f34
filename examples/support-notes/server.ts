import { readFileSync } from 'node:fs';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import type { GraphQLSchema } from 'graphql';
import { parse } from 'graphql';
import { createSupportNoteStore, type SupportNote } from './notes.ts';
import { createResolvers } from './resolvers.ts';

/** The subgraph's SDL, as written in `schema.graphql` (federation `@link` included). */
export const supportNotesTypeDefs = readFileSync(new URL('./schema.graphql', import.meta.url), 'utf8');

/** Options of {@link createSupportNotesServer}. */
export type SupportNotesServerOptions = {
  /** The notes to serve; the deterministic demo notes when omitted. */
  notes?: readonly SupportNote[];
};

/** A support-notes subgraph, built but not yet listening. */
export type SupportNotesServer = {
  /** The subgraph schema (with `_service` and `_entities`). */
  schema: GraphQLSchema;
  /**
   * Starts serving GraphQL over HTTP. Port 0 picks a free port; the answer's `url` names the one
   * taken. Rejects when the port cannot be bound. Call at most once.
   */
  listen(port?: number, host?: string): Promise<{ url: string }>;
  /** Stops accepting requests and waits for the ones in flight. Safe to call when not listening. */
  close(): Promise<void>;
};

/** Builds the subgraph schema of the support-notes example over the given notes. */
export function createSupportNotesSchema(notes?: readonly SupportNote[]): GraphQLSchema {
  return buildSubgraphSchema([
    { typeDefs: parse(supportNotesTypeDefs), resolvers: createResolvers(createSupportNoteStore(notes)) },
  ]);
}

/**
 * Builds the support-notes example subgraph: a real Apollo Server that extends the facade's
 * `Customer` by its key and points at the facade's `Account`s by theirs.
 */
export function createSupportNotesServer(options: SupportNotesServerOptions = {}): SupportNotesServer {
  const schema = createSupportNotesSchema(options.notes);
  // Inline tracing is on by default for subgraphs and only matters with Apollo's usage reporting.
  const server = new ApolloServer({
    schema,
    plugins: [ApolloServerPluginInlineTraceDisabled()],
    // main.ts owns SIGINT/SIGTERM; Apollo's own handler would re-raise the signal and kill the process.
    stopOnTerminationSignals: false,
  });
  let started = false;
  return {
    schema,
    async listen(port = 0, host = '127.0.0.1') {
      started = true;
      const { url } = await startStandaloneServer(server, { listen: { port, host } });
      // The standalone server answers on every path; `/graphql` is the conventional one to publish.
      return { url: new URL('/graphql', url).toString() };
    },
    async close() {
      if (started) await server.stop();
    },
  };
}
