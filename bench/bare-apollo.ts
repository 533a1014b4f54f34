/**
 * A bare Apollo Server 5 on express 5, as its documentation sets one up (defaults everywhere, a
 * one-field schema): the reference the benchmark holds the facade's fixed cost per operation to,
 * by asking both the trivial `{ __typename }` in the same run. Started as its own process by
 * `bench/run.ts`, on `PORT`.
 */
import http from 'node:http';
import { ApolloServer } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import express from 'express';

const port = Number(process.env.PORT);
if (!Number.isInteger(port) || port < 1)
  throw new Error(`PORT must be a port number; got "${String(process.env.PORT)}".`);

const app = express();
const httpServer = http.createServer(app);
const apollo = new ApolloServer({
  typeDefs: /* GraphQL */ `
    type Query {
      hello: String
    }
  `,
  resolvers: { Query: { hello: () => 'world' } },
});
await apollo.start();
app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
app.use('/graphql', express.json(), expressMiddleware(apollo));
httpServer.listen(port, '127.0.0.1');
