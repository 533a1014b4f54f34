/**
 * The faults of the game day, in the order the full schedule injects them. Each `inject` does the
 * fault and what undoes it (the kubelet restarting a process, the outage ending, an operator
 * installing a new key) and resolves once the topology is whole again; what it saw goes into the
 * report's notes. The window between the injection and that moment is the fault's "during".
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { addEmulatorKey, revokeEmulatorKey } from '../../scripts/key-rotation.ts';
import { GAMEDAY_DOCUMENTS } from './load-protocol.ts';
import { shippedTrustedDocuments } from './shipped.ts';
import {
  CRASH_RESTART_DELAY_MS,
  FACADE_KEYS,
  type Environment,
  type Pod,
  type Topology,
} from './topology.ts';

export interface FaultContext {
  topology: Topology;
  /** How long a fault that lasts is held (an outage, a slow upstream, a revoked key). */
  holdMs: number;
  /** Adds a line to the fault's notes in the report. */
  note: (line: string) => void;
}

export interface Fault {
  name: string;
  /** One line: what is done. */
  what: string;
  inject(context: FaultContext): Promise<void>;
}

/** `PUT /_emulator/faults` (or `DELETE` with `undefined`). */
async function upstreamFaults(emulatorUrl: string, faults: unknown): Promise<void> {
  const response = await fetch(`${emulatorUrl}/_emulator/faults`, {
    method: faults === undefined ? 'DELETE' : 'PUT',
    headers: { 'content-type': 'application/json' },
    ...(faults === undefined ? {} : { body: JSON.stringify(faults) }),
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`the emulator's faults answered ${response.status}`);
}

/** How many lines `message` each running replica has logged. */
function countsOf(topology: Topology, message: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const replica of topology.replicas) {
    const child = replica.child();
    if (child?.running() === true) counts.set(replica.name, child.messages.get(message) ?? 0);
  }
  return counts;
}

/** Resolves once every replica counted in `before` logged `message` once more; how long that took. */
async function everyReplicaLogs(
  topology: Topology,
  message: string,
  before: Map<string, number>,
  timeoutMs = 90_000,
): Promise<{ ms: number; missing: string[] }> {
  const started = Date.now();
  for (;;) {
    const now = countsOf(topology, message);
    const missing = [...before]
      .filter(([name, count]) => (now.get(name) ?? 0) <= count)
      .map(([name]) => name);
    if (missing.length === 0 || Date.now() - started > timeoutMs)
      return { ms: Date.now() - started, missing };
    await sleep(100);
  }
}

/** A key file replaced as the kubelet replaces a Secret, with the rotation line of every replica awaited. */
async function installKey(
  context: FaultContext,
  environment: Environment,
  key: string,
): Promise<{ ms: number; missing: string[] }> {
  const message = `info: UPSTREAM_API_KEY_${environment.toUpperCase()}: rotated: upstream calls use the new key from now on`;
  const before = countsOf(context.topology, message);
  context.topology.secrets[environment].replace(`${key}\n`);
  return everyReplicaLogs(context.topology, message, before);
}

/** Each pod in turn: terminated as the kubelet does it, started again, ready before the next. */
async function rollingRestartOf(pods: readonly Pod[], note: (line: string) => void): Promise<void> {
  for (const pod of pods) {
    const { drainMs, exit } = await pod.terminate();
    const readyMs = await pod.start();
    note(
      `${pod.name}: exited ${String(exit)} ${drainMs} ms after SIGTERM, ready ${readyMs} ms after its start`,
    );
  }
}

const replicaKill: Fault = {
  name: 'replica-kill',
  what: '`kill -9` of a facade replica; the kubelet starts it again after 1 s',
  async inject({ topology, note }) {
    const replica = topology.replicas[1]!;
    await replica.kill();
    await sleep(CRASH_RESTART_DELAY_MS);
    const readyMs = await replica.start();
    note(`${replica.name} killed; restarted, in the Service's endpoints ${readyMs} ms after its start`);
  },
};

const rollingRestart: Fault = {
  name: 'rolling-restart',
  what: 'each replica in turn: out of the endpoints, preStop, SIGTERM, drained, started, ready',
  inject: ({ topology, note }) => rollingRestartOf(topology.replicas, note),
};

const redisFailover: Fault = {
  name: 'redis-failover',
  what: '`kill -9` of the Redis primary',
  async inject({ topology, note }) {
    note((await topology.redis.killPrimary()).summary);
  },
};

const redisRestart: Fault = {
  name: 'redis-restart',
  what: 'every Redis data node stopped and started again from its append-only file',
  async inject({ topology, note }) {
    note((await topology.redis.restartFromPersistence()).summary);
  },
};

/** A fault of the platform's: the emulator's `rules` for the hold, then none. */
function upstreamFault(name: string, what: string, rules: readonly object[]): Fault {
  return {
    name,
    what,
    async inject({ topology, holdMs }) {
      await upstreamFaults(topology.emulatorUrl, { rules });
      await sleep(holdMs);
      await upstreamFaults(topology.emulatorUrl, undefined);
    },
  };
}

const upstreamOutage = upstreamFault(
  'upstream-outage',
  "every upstream request answered 502 (the emulator's `request_failed`) for the hold",
  [{ kind: 'request_failed' }],
);

const upstreamSlow = upstreamFault(
  'upstream-slow',
  'one upstream request in 20 answered 2 s late (p99 2 s) for the hold',
  [{ kind: 'delay', delayMs: 2_000, rate: 0.05 }],
);

const upstreamStall = upstreamFault(
  'upstream-stall',
  "every upstream request held unanswered on its open connection (the emulator's `stall`) for the hold",
  [{ kind: 'stall' }],
);

const keyRotation: Fault = {
  name: 'key-rotation',
  what: 'the sandbox key rotated through its mounted file: new key added, file swapped, old key revoked after 10 s',
  async inject(context) {
    const { topology, note } = context;
    const next = `sk_sandbox_gameday_${Date.now()}`;
    await addEmulatorKey(topology.emulatorUrl, next, FACADE_KEYS.sandbox.identity);
    const taken = await installKey(context, 'sandbox', next);
    note(
      `new sandbox key taken by every replica ${taken.ms} ms after the file swap${taken.missing.length > 0 ? `; never by ${taken.missing.join(', ')}` : ''}`,
    );
    // The rotation window: calls already on their way finish with the old key.
    await sleep(10_000);
    await revokeEmulatorKey(topology.emulatorUrl, topology.keys.sandbox);
    topology.keys.sandbox = next;
  },
};

const liveKeyRevoked: Fault = {
  name: 'live-key-revoked',
  what: 'the live key revoked at the upstream; after the hold an operator installs a new one through the mounted file',
  async inject(context) {
    const { topology, holdMs, note } = context;
    await revokeEmulatorKey(topology.emulatorUrl, topology.keys.live);
    await sleep(holdMs);
    const next = `sk_live_gameday_${Date.now()}`;
    await addEmulatorKey(topology.emulatorUrl, next, FACADE_KEYS.live.identity);
    const taken = await installKey(context, 'live', next);
    topology.keys.live = next;
    note(
      `new live key written at +${(holdMs / 1000).toFixed(0)} s; taken by every replica ${taken.ms} ms later${taken.missing.length > 0 ? `; never by ${taken.missing.join(', ')}` : ''}`,
    );
  },
};

/** The manifest of the rollout: the shipped one plus every document the game day sends. */
function rolledOutManifest(): Record<string, string> {
  const manifest = { ...shippedTrustedDocuments() };
  for (const body of GAMEDAY_DOCUMENTS)
    manifest[`sha256:${createHash('sha256').update(body).digest('hex')}`] = body;
  return manifest;
}

const trustedDocuments: Fault = {
  name: 'trusted-documents',
  what: 'a half-written manifest and SIGHUP (kept the old one), then the new manifest and SIGHUP',
  async inject({ topology, note }) {
    const path = topology.trustedDocumentsPath;
    const full = JSON.stringify(rolledOutManifest(), null, 2);
    const refused = 'error: trusted documents not reloaded: the previous manifest stays in use';
    const reloaded = 'info: trusted documents reloaded';
    const refusedBefore = countsOf(topology, refused);
    writeFileSync(path, full.slice(0, Math.floor(full.length / 2)));
    topology.signalReplicas('SIGHUP');
    const kept = await everyReplicaLogs(topology, refused, refusedBefore, 10_000);
    note(
      `half-written manifest: ${kept.missing.length === 0 ? 'refused by every replica' : `no refusal logged by ${kept.missing.join(', ')}`}`,
    );
    const reloadedBefore = countsOf(topology, reloaded);
    writeFileSync(path, full);
    topology.signalReplicas('SIGHUP');
    const taken = await everyReplicaLogs(topology, reloaded, reloadedBefore, 10_000);
    note(
      `new manifest (${Object.keys(rolledOutManifest()).length} operations): ${taken.missing.length === 0 ? `reloaded by every replica within ${taken.ms} ms` : `not reloaded by ${taken.missing.join(', ')}`}`,
    );
  },
};

const gatewayRestart: Fault = {
  name: 'gateway-restart',
  what: 'each Hive Gateway CLI in turn: out of its Service, preStop, SIGTERM, started again, ready',
  inject: ({ topology, note }) => rollingRestartOf(topology.gateways, note),
};

/** Every fault, in the order of the full schedule. */
export const FAULTS: readonly Fault[] = [
  replicaKill,
  rollingRestart,
  redisFailover,
  redisRestart,
  upstreamOutage,
  upstreamSlow,
  upstreamStall,
  keyRotation,
  liveKeyRevoked,
  trustedDocuments,
  gatewayRestart,
];
