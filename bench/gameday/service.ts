/**
 * A Kubernetes Service in miniature, with its endpoints controller: a TCP port on loopback that
 * sends each new connection to the next ready endpoint (round robin, as kube-proxy does), and a
 * readiness probe per replica as the Deployment declares it (path, period, timeout, failures before
 * not ready). An endpoint leaves at once when its process exits or its termination starts (the
 * kubelet knows both without probing), and joins after one successful probe. Connections already
 * open stay with their endpoint until one side closes them, as through kube-proxy's NAT.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { startTcpBalancer } from '../lib/tcp-balancer.ts';

/** The Deployment's readiness probe (deploy/kubernetes/facade-deployment.yaml). */
export interface ReadinessProbe {
  path: string;
  periodMs: number;
  timeoutMs: number;
  failureThreshold: number;
}

/** A replica behind the Service, as the controller sees it. */
export interface Endpoint {
  readonly name: string;
  readonly port: number;
  /** The process runs and its termination has not started. */
  serving: boolean;
  /** Its last probes passed (reset by `serving` going false). */
  ready: boolean;
}

/** The Service and its controller. */
export interface Service {
  readonly port: number;
  readonly url: string;
  /** Registers a replica (not serving until {@link markServing}). */
  add(name: string, port: number): void;
  /** The replica's process runs (true) or has exited or started terminating (false). */
  markServing(name: string, serving: boolean): void;
  /** Names of the replicas in the endpoints now. */
  ready(): string[];
  /** Resolves once `name` is in the endpoints (or rejects after `timeoutMs`). */
  waitReady(name: string, timeoutMs?: number): Promise<void>;
  /** Wall-clock spans during which no endpoint was ready. */
  readonly emptySpans: { from: number; to: number | undefined }[];
  /** How long, between `from` and `to`, no endpoint was ready (ms). */
  emptyWithin(from: number, to: number): number;
  close(): Promise<void>;
}

/** Starts the Service on a free loopback port, probing each replica with `probe`. */
export async function startService(probe: ReadinessProbe): Promise<Service> {
  const endpoints = new Map<string, Endpoint & { failures: number }>();
  const emptySpans: { from: number; to: number | undefined }[] = [];
  let stopped = false;
  let next = 0;
  const readyNames = (): string[] =>
    [...endpoints.values()].filter((endpoint) => endpoint.serving && endpoint.ready).map(({ name }) => name);
  const noteEmptiness = (): void => {
    const empty = readyNames().length === 0;
    const open = emptySpans.at(-1);
    if (empty && (open === undefined || open.to !== undefined))
      emptySpans.push({ from: Date.now(), to: undefined });
    if (!empty && open !== undefined && open.to === undefined) open.to = Date.now();
  };

  const balancer = await startTcpBalancer(() => {
    const names = readyNames();
    return names.length === 0 ? undefined : endpoints.get(names[next++ % names.length]!)!.port;
  });
  const port = balancer.port;

  const probeOnce = async (endpoint: Endpoint): Promise<boolean> => {
    try {
      const response = await fetch(`http://127.0.0.1:${endpoint.port}${probe.path}`, {
        signal: AbortSignal.timeout(probe.timeoutMs),
      });
      await response.body?.cancel();
      return response.status >= 200 && response.status < 400;
    } catch {
      return false;
    }
  };
  const controller = async (endpoint: Endpoint & { failures: number }): Promise<void> => {
    while (!stopped) {
      if (endpoint.serving) {
        const passed = await probeOnce(endpoint);
        if (passed) {
          endpoint.failures = 0;
          endpoint.ready = endpoint.serving;
        } else {
          endpoint.failures += 1;
          if (endpoint.failures >= probe.failureThreshold) endpoint.ready = false;
        }
        noteEmptiness();
      }
      await sleep(probe.periodMs);
    }
  };
  noteEmptiness();

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    add(name, endpointPort) {
      const endpoint = { name, port: endpointPort, serving: false, ready: false, failures: 0 };
      endpoints.set(name, endpoint);
      void controller(endpoint);
    },
    markServing(name, serving) {
      const endpoint = endpoints.get(name);
      if (endpoint === undefined) throw new Error(`the Service has no endpoint ${name}`);
      endpoint.serving = serving;
      if (!serving) {
        endpoint.ready = false;
        endpoint.failures = 0;
      }
      noteEmptiness();
    },
    ready: readyNames,
    async waitReady(name, timeoutMs = 180_000) {
      const deadline = Date.now() + timeoutMs;
      while (!readyNames().includes(name)) {
        if (Date.now() > deadline) throw new Error(`${name} did not join the Service within ${timeoutMs} ms`);
        await sleep(100);
      }
    },
    emptySpans,
    emptyWithin: (from, to) =>
      emptySpans.reduce(
        (sum, span) => sum + Math.max(0, Math.min(to, span.to ?? to) - Math.max(from, span.from)),
        0,
      ),
    async close() {
      stopped = true;
      await balancer.close();
    },
  };
}
