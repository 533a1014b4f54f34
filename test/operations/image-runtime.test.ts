/**
 * The image's runtime stage, run as it ships, with no image builder (scripts/image-file-set.ts):
 * the Dockerfile's `runtime` stage is read (WORKDIR, ENV, COPY, RUN, USER, CMD), exactly the files
 * its COPY lines bring in are assembled in a root file system of its own (from the build context,
 * .dockerignore applied; `--from=build` from the build stage's steps after it copies the context),
 * its RUN installs the production dependencies there, the image's `node` (Node 24) is copied in,
 * and its CMD starts there with the image's environment, as the image's user when the test runs as
 * root, and a read-only tree otherwise. Nothing is run from the checkout, so the test passes
 * wherever the clone sits (under a folder the image's user cannot enter too). A module the start
 * script reaches but no COPY brings in fails here as it fails in the image; a package it imports
 * that `--omit=dev` leaves out fails here too.
 *
 * Every process started here comes through test/support/processes.ts: a process group of its own,
 * stopped whole after its test however it ended, its waits stretched by the machine's load.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build, stop as stopEsbuild, type BuildFailure, type Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { readComposeFile } from '../../scripts/compose-twin.ts';
import {
  assembleImageFileSet,
  readRuntimeStage,
  readStages,
  type ImageFileSet,
} from '../../scripts/image-file-set.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { connectLive, type LiveClient } from '../support/harness/live-client.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useProcesses, waitUntilReady } from '../support/processes.ts';
import { scrape, valueOf } from '../support/metrics.ts';
import { issuerEnv, tokenFor } from '../support/tokens.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Assembling and installing the tree: a production `npm ci` from the cache, on a busy machine. */
const ASSEMBLY_BUDGET_MS = 600_000;

// ---------------------------------------------------------------------------------------------
// Processes: each through test/support/processes.ts, in a group of its own, stopped after its test
// (or, started by the `beforeAll`, after the file) however it ended.

const processes = useProcesses();

// ---------------------------------------------------------------------------------------------
// The tree the image's files make (scripts/image-file-set.ts), and its command started there.

const runtime = readRuntimeStage(readStages(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')));
let fileSet: ImageFileSet | undefined;
/** The runtime stage's WORKDIR inside the assembled tree. */
let appDir = '';

interface Started {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  logged(msg: string): Record<string, unknown>[];
  stderr(): string;
  exited: Promise<number | null>;
}

/** The runtime stage's CMD in the assembled tree, with the image's ENV and `deployment` over it. */
function startCommand(deployment: Record<string, string>): Started {
  const { file, args, options } = fileSet!.command(deployment);
  const child = processes.spawn(file, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      lines.push({ msg: line });
    }
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    lines,
    logged: (msg) => lines.filter((entry) => entry.msg === msg),
    stderr: () => stderr,
    exited,
  };
}

beforeAll(async () => {
  fileSet = await assembleImageFileSet({ spawn: processes.spawn });
  appDir = fileSet.appDir;
}, ASSEMBLY_BUDGET_MS);

afterAll(() => {
  fileSet?.remove();
});

// ---------------------------------------------------------------------------------------------

describe("the runtime stage's files", () => {
  // esbuild keeps a service process for its next build: ended with the file's builds.
  afterAll(async () => {
    await stopEsbuild();
  });

  test('hold every module its command and compose.yaml’s commands on the image reach, and every package they import', async () => {
    // The entries: the image's CMD, and each command compose.yaml runs on the runtime image
    // (`npm run <script>` read from package.json, as npm would).
    const scripts = (
      JSON.parse(readFileSync(path.join(appDir, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>;
      }
    ).scripts;
    const entryOf = (command: string[]): string => {
      // `node [flags] <file>`: the first argument that is not a flag.
      if (command[0] === 'node') return command.slice(1).find((arg) => !arg.startsWith('-'))!;
      expect(command.slice(0, 2)).toEqual(['npm', 'run']);
      const script = scripts[command[2]!];
      const file = /(?:^|\s)node\s+(\S+\.ts)\b/.exec(script ?? '')?.[1];
      if (file === undefined) throw new Error(`npm run ${command[2]}: no node <file>.ts in ${script}`);
      return file;
    };
    const onImage = Object.entries(readComposeFile().services).filter(
      ([, service]) => (service as { build?: { target?: string } }).build?.target === 'runtime',
    );
    expect(onImage.map(([name]) => name).sort()).toEqual([
      'emulator',
      'facade-a',
      'facade-b',
      'support-notes',
    ]);
    const entries = new Set([
      entryOf(runtime.command),
      ...onImage.map(([, service]) => entryOf((service as { command: string[] }).command)),
    ]);
    expect([...entries].sort()).toEqual([
      'emulator/main.ts',
      'examples/support-notes/main.ts',
      'scripts/start.ts',
    ]);

    // esbuild follows every import, static and dynamic, type-only ones erased, inside the tree. An
    // import it cannot resolve fails the build, or, guarded by a try block, stays in the metafile as
    // an external relative path.
    let metafile: Metafile | undefined;
    let failures: string[] = [];
    try {
      ({ metafile } = await build({
        absWorkingDir: appDir,
        entryPoints: [...entries],
        bundle: true,
        write: false,
        metafile: true,
        platform: 'node',
        format: 'esm',
        outdir: 'out',
        packages: 'external',
        logLevel: 'silent',
      }));
    } catch (error) {
      failures = (error as BuildFailure).errors.map(
        (message) => `${message.location?.file ?? '?'}: ${message.text}`,
      );
    }
    expect(failures).toEqual([]);
    const imports = Object.entries(metafile!.inputs).flatMap(([file, input]) =>
      input.imports.map((imported) => ({ file, ...imported })),
    );
    const unresolved = imports
      .filter((imported) => imported.external && /^\.{0,2}\//.test(imported.path))
      .map((imported) => `${imported.file} -> ${imported.path}`);
    // The modules left out on purpose, each a development dependency's: the demo OpenID provider
    // (oidc-provider), which the start script imports only for the demo it then refuses saying why
    // (the last describe below); and the explorer's builder (esbuild), which the image replaces by
    // the build it carries (EXPLORER=graphiql is served from it below).
    expect(unresolved.sort()).toEqual([
      'scripts/start.ts -> ../dev-issuer/index.ts',
      'src/http/explorer.ts -> ../../explorer/build.ts',
    ]);
    const inputs = Object.keys(metafile!.inputs);
    expect(inputs).toContain('src/main.ts');
    expect(inputs).toContain('src/demo-network-exposure.ts');
    expect(inputs).toContain('emulator/index.ts');

    const packages = new Set(
      imports
        .filter(
          (imported) => imported.external && !isBuiltin(imported.path) && !/^\.{0,2}\//.test(imported.path),
        )
        .map((imported) => {
          const parts = imported.path.split('/');
          return imported.path.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
        }),
    );
    expect(packages.size).toBeGreaterThan(10);
    const missing = [...packages].filter(
      (name) => !existsSync(path.join(appDir, 'node_modules', name, 'package.json')),
    );
    expect(missing).toEqual([]);
  });
});

describe("the runtime stage's command", () => {
  let emulator: RunningEmulator;
  const clients: LiveClient[] = [];

  beforeAll(async () => {
    emulator = await startEmulator();
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.dispose()));
    await emulator?.close();
  });

  test('starts as the image starts it, pointed at an upstream and an identity provider, and serves a query and a subscription', async () => {
    const started = startCommand({
      ...issuerEnv(),
      UPSTREAM_BASE_URL: emulator.url,
      UPSTREAM_API_KEY: SANDBOX_KEY,
      // Free ports: tests never take fixed ones. HOST stays the image's 0.0.0.0.
      PORT: '0',
      METRICS_PORT: '0',
      // The emulator posts its webhooks to the facade's own address (it runs on this machine).
      WEBHOOK_REGISTER: 'true',
      // GraphiQL from the files the build stage bundled (COPY --from=build).
      EXPLORER: 'graphiql',
    });
    await waitUntilReady(
      started.child,
      () => started.logged('facade listening').length === 1,
      'the facade to listen',
      {
        output: started.stderr,
      },
    );
    const listening = started.logged('facade listening')[0]!;
    const graphqlUrl = listening.url as string;
    const metricsUrl = listening.metrics as string;
    expect(new URL(graphqlUrl).hostname).toBe('localhost');

    const health = await fetch(new URL('/healthz', graphqlUrl));
    expect(health.status).toBe(200);
    // The CMD starts node with --expose-gc: the idle-time memory release can run.
    expect(valueOf(await scrape(metricsUrl), 'facade_memory_release_armed')).toBe(1);

    // No token: refused at the door, nothing asked of the upstream.
    await emulator.resetUpstreamCalls();
    const anonymous = await fetch(graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ customer(id: "cus_acme") { displayName } }' }),
    });
    expect(anonymous.status).toBe(401);
    expect((await emulator.upstreamCalls()).total).toBe(0);

    const acme = await tokenFor('acme');
    const query = await fetch(graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${acme}` },
      body: JSON.stringify({ query: '{ customer(id: "cus_acme") { displayName } }' }),
    });
    expect(query.status).toBe(200);
    expect(await query.json()).toEqual({ data: { customer: { displayName: 'Acme Robotics Ltd' } } });
    expect(await emulator.upstreamCalls()).toMatchObject({ total: 1 });

    // Another customer's record stays closed to acme's token, before any upstream call.
    await emulator.resetUpstreamCalls();
    const elsewhere = await fetch(graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${acme}` },
      body: JSON.stringify({ query: '{ customer(id: "cus_globex") { displayName } }' }),
    });
    const elsewhereBody = await elsewhere.text();
    expect(JSON.parse(elsewhereBody)).toMatchObject({ errors: [{ extensions: { code: 'NOT_FOUND' } }] });
    expect(elsewhereBody).not.toContain('Globex');
    expect((await emulator.upstreamCalls()).total).toBe(0);

    const explorer = await fetch(new URL('/explorer/graphiql.js', graphqlUrl));
    expect(explorer.status).toBe(200);
    expect(explorer.headers.get('content-type')).toMatch(/^text\/javascript/);
    await explorer.arrayBuffer();

    const client = connectLive(graphqlUrl.replace(/^http/, 'ws'), { Authorization: `Bearer ${acme}` });
    clients.push(client);
    const received = client.subscribe(`subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { type account { id } }
      }`);
    let subscriptions = 0;
    await waitFor(
      () => subscriptions === 1,
      'the subscription to start',
      undefined,
      async () => {
        subscriptions = valueOf(await scrape(metricsUrl), 'facade_graphql_ws_subscriptions');
      },
    );
    const topUp = await emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '2.00', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);
    await waitFor(() => received.data.length === 1, 'the event over graphql-ws');
    expect(received.data[0]).toEqual({
      accountChanged: { type: 'account.updated', account: { id: 'acc_acme_eth' } },
    });
    expect(received.errors).toEqual([]);

    // SIGTERM, as a container runtime stops it: an ordered shutdown, exit 0.
    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(0);
  });
});

describe("the runtime stage's command without an upstream or an identity provider", () => {
  test('refuses the demo on the network, as the image’s HOST=0.0.0.0 would expose it', async () => {
    expect(runtime.env.HOST).toBe('0.0.0.0');
    expect(runtime.env).not.toHaveProperty('DEMO_ALLOW_NETWORK');
    const started = startCommand({ PORT: '0' });
    expect(await started.exited).toBe(1);
    expect(started.stderr()).toContain('Refusing to start: HOST=0.0.0.0 listens beyond loopback');
    expect(started.logged('facade listening')).toEqual([]);
  });

  test('with DEMO_ALLOW_NETWORK=true, says the demo needs the development dependencies the image leaves out', async () => {
    const started = startCommand({ PORT: '0', DEMO_ALLOW_NETWORK: 'true' });
    expect(await started.exited).toBe(1);
    expect(started.stderr()).toContain(
      'The demo OpenID provider needs the development dependencies (npm ci, without --omit=dev).',
    );
    expect(started.stderr()).not.toMatch(/ERR_MODULE_NOT_FOUND|at .*\.ts:\d+/);
    expect(started.logged('facade listening')).toEqual([]);
  });
});
