import { createSupportNotesServer } from './server.ts';

// Runs the support-notes example subgraph on its own port: `npm run example:subgraph`.
const DEFAULT_PORT = 4001;

function readPort(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_PORT;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    console.error(`PORT must be an integer from 0 to 65535, got ${JSON.stringify(raw)}.`);
    process.exit(1);
  }
  return port;
}

const port = readPort(process.env.PORT);
const host = process.env.HOST ?? '127.0.0.1';
const server = createSupportNotesServer();
const { url } = await server.listen(port, host);
console.log(`Support notes subgraph ready at ${url}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void server.close().then(() => process.exit(0));
  });
}
