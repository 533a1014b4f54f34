/**
 * `npm run bench:webhooks`: what stalled webhook deliveries make the facade hold. 200 connections
 * each declare a body and send all of it but its last byte, then stall, against two receivers in
 * the same process, one after the other:
 * - the baseline: the body read the way any express route reads it (`express.raw`, 1 MiB limit),
 *   before anything is checked, as the webhook route did before its intake limits;
 * - the webhook route as it is (`createWebhookRouter`: headers first, 64 KiB cap, reading slots),
 *   once with the bodies of 1 MiB an attacker would send, once with bodies just under its cap.
 * Reported: the growth of Node's external memory (where bodies live) while the connections stall,
 * how many the server has answered, and the ratio of each growth to the baseline's.
 */
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import express from 'express';
import { createMemoryEventLog } from '../src/events/log/memory-event-log.ts';
import { createMemoryEventDeduplicator } from '../src/events/dedup/memory-event-dedup.ts';
import { createWebhookRouter } from '../src/events/receiving/webhook-route.ts';
import { createLogger } from '../src/logger.ts';

const CONNECTIONS = 200;
const MIB = 1024 * 1024;

interface Flood {
  name: string;
  externalGrowthMiB: number;
  answered: number;
}

/** External memory once what can be freed is freed (run with --expose-gc, as the npm script does). */
async function externalBytes(): Promise<number> {
  for (let round = 0; round < 3; round += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    globalThis.gc?.();
  }
  const usage = process.memoryUsage();
  return usage.external + usage.arrayBuffers;
}

async function flood(name: string, app: express.Express, declared: number): Promise<Flood> {
  const server = http.createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const before = await externalBytes();
  let answered = 0;
  const sockets = await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, index) => {
      // Spread over 50 loopback addresses, as a flood from several machines would be.
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: `127.0.2.${1 + (index % 50)}` });
      socket.on('error', () => undefined);
      socket.once('data', () => (answered += 1));
      await once(socket, 'connect');
      const timestamp = Math.floor(Date.now() / 1000);
      socket.write(
        `POST /webhooks/platform HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${declared}\r\nwebhook-id: evt_${index}\r\nwebhook-timestamp: ${timestamp}\r\n` +
          `webhook-signature: v1,${Buffer.alloc(32, 1).toString('base64')}\r\n\r\n`,
      );
      socket.write(Buffer.alloc(declared - 1, 0x20));
      return socket;
    }),
  );
  // Let the server take what it will take of the bodies.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const growth = (await externalBytes()) - before;
  for (const socket of sockets) socket.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  // What this flood held is released before the next one measures its own.
  await externalBytes();
  return { name, externalGrowthMiB: growth / MIB, answered };
}

function baselineApp(): express.Express {
  const app = express();
  app.post('/webhooks/platform', express.raw({ type: () => true, limit: MIB }), (_req, res) => {
    res.status(401).end();
  });
  // The flood's connections are cut at the end: their aborted reads are expected.
  app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.destroy();
  });
  return app;
}

function intakeApp(): express.Express {
  const logger = createLogger({ level: 'silent' });
  const webhooks = createWebhookRouter({
    secrets: () => ['whsec_' + Buffer.alloc(24, 2).toString('base64')],
    dedup: createMemoryEventDeduplicator(),
    log: createMemoryEventLog({ logger }),
    logger,
    // The flood must stall, not be cut, while it is measured.
    bodyLimits: { receiveTimeoutMs: 60_000 },
  });
  const app = express();
  app.use('/webhooks/platform', webhooks.router);
  return app;
}

const baseline = await flood('baseline: express.raw, 1 MiB bodies', baselineApp(), MIB);
const attackerSized = await flood('webhook route, 1 MiB bodies', intakeApp(), MIB);
const capSized = await flood('webhook route, bodies of 64 KiB', intakeApp(), 64 * 1024);

console.log(`${CONNECTIONS} stalled connections, each one byte short of its declared body`);
for (const row of [baseline, attackerSized, capSized]) {
  const ratio =
    baseline.externalGrowthMiB > 0 ? row.externalGrowthMiB / baseline.externalGrowthMiB : Number.NaN;
  console.log(
    `${row.name.padEnd(40)} external memory +${row.externalGrowthMiB.toFixed(1).padStart(6)} MiB` +
      `  (${ratio.toFixed(3)} × baseline)  answered at once: ${row.answered}/${CONNECTIONS}`,
  );
}
