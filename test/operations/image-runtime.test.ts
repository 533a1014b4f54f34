/**
 * The image's runtime stage, run as it ships, with no image builder: the Dockerfile's `runtime`
 * stage is read (WORKDIR, ENV, COPY, RUN, USER, CMD), exactly the files its COPY lines bring in are
 * assembled in a temporary directory (from the build context, .dockerignore applied; `--from=build`
 * from the build stage's steps after it copies the context), its RUN installs the production
 * dependencies there, and its CMD starts there with the image's environment under Node 24 (the
 * image's `node`), as the image's user when the test runs as root, and a read-only tree otherwise.
 * A module the start script reaches but no COPY brings in fails here as it fails in the image; a
 * package it imports that `--omit=dev` leaves out fails here too.
 *
 * Every process started here comes through test/support/processes.ts: a process group of its own,
 * stopped whole after its test however it ended, its waits stretched by the machine's load.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build, type BuildFailure, type Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { readComposeFile } from '../../scripts/compose-twin.ts';
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
// The Dockerfile, read as a builder reads it.

interface Instruction {
  keyword: string;
  args: string;
}

interface Stage {
  name: string;
  instructions: Instruction[];
}

/** The Dockerfile's stages: comments and blank lines dropped, continuation lines joined. */
function readStages(text: string): Stage[] {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#') || (line === '' && pending === '')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(pending + line);
    pending = '';
  }
  if (pending !== '') logical.push(pending);
  const stages: Stage[] = [];
  for (const line of logical) {
    if (line === '') continue;
    const [, keyword, args] = /^(\S+)\s*(.*)$/.exec(line)!;
    if (keyword!.toUpperCase() === 'FROM') {
      const name = /\sAS\s+(\S+)$/i.exec(args!)?.[1] ?? String(stages.length);
      stages.push({ name, instructions: [] });
    } else {
      stages.at(-1)!.instructions.push({ keyword: keyword!.toUpperCase(), args: args!.trim() });
    }
  }
  return stages;
}

/** `KEY=value` pairs of an ENV instruction (double-quoted values allowed). */
function envPairs(args: string): [string, string][] {
  return [...args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)].map(([, key, value]) => [
    key!,
    value!.startsWith('"') ? (JSON.parse(value!) as string) : value!,
  ]);
}

/** An instruction's leading `--flag=value` options, and the words after them. */
function flagsAndWords(args: string): { flags: Map<string, string>; words: string[] } {
  const flags = new Map<string, string>();
  const words = args.split(/\s+/).filter((word) => word !== '');
  while (words[0]?.startsWith('--')) {
    const [flag, value = ''] = words.shift()!.slice(2).split(/=(.*)/s);
    flags.set(flag!, value);
  }
  return { flags, words };
}

/** What a container of the runtime stage is: its files' origins, environment, user and command. */
interface RuntimeStage {
  workdir: string;
  env: Record<string, string>;
  copies: { from: string | undefined; sources: string[]; destination: string }[];
  runs: string[];
  user: string | undefined;
  command: string[];
}

function readRuntimeStage(stages: Stage[]): RuntimeStage {
  const stage = stages.find((candidate) => candidate.name === 'runtime');
  if (stage === undefined) throw new Error('the Dockerfile has no `runtime` stage');
  const runtime: RuntimeStage = { workdir: '/', env: {}, copies: [], runs: [], user: undefined, command: [] };
  for (const { keyword, args } of stage.instructions) {
    switch (keyword) {
      case 'WORKDIR':
        runtime.workdir = path.posix.resolve(runtime.workdir, args);
        break;
      case 'ENV':
        Object.assign(runtime.env, Object.fromEntries(envPairs(args)));
        break;
      case 'COPY': {
        if (args.startsWith('[')) throw new Error(`COPY in JSON form is not read here: ${args}`);
        const { flags, words } = flagsAndWords(args);
        const destination = words.pop()!;
        runtime.copies.push({
          from: flags.get('from'),
          sources: words,
          destination: path.posix.resolve(runtime.workdir, destination),
        });
        break;
      }
      case 'RUN':
        // A build cache mount (`--mount=type=cache,...`) changes where npm keeps its cache, not what
        // the step installs.
        runtime.runs.push(flagsAndWords(args).words.join(' '));
        break;
      case 'USER':
        runtime.user = args;
        break;
      case 'CMD':
        if (!args.startsWith('[')) throw new Error(`CMD in shell form is not read here: ${args}`);
        runtime.command = JSON.parse(args) as string[];
        break;
      case 'EXPOSE':
      case 'HEALTHCHECK':
        break;
      default:
        // An instruction this reading does not know would be ignored silently: teach it instead.
        throw new Error(`the runtime stage has ${keyword}, which this test does not reproduce`);
    }
  }
  return runtime;
}

// ---------------------------------------------------------------------------------------------
// The build context, as a builder sends it: .dockerignore applied.

function readDockerignore(): { pattern: string; negated: boolean }[] {
  const file = path.join(ROOT, '.dockerignore');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const negated = line.startsWith('!');
      const pattern = path.posix.normalize((negated ? line.slice(1) : line).replace(/^\/+/, ''));
      return { pattern, negated };
    });
}

/** Whether the context path `relative` is left out (it or a folder above it matches, last rule wins). */
function ignoredByContext(relative: string, rules: { pattern: string; negated: boolean }[]): boolean {
  const parts = relative.split(path.sep);
  const candidates = parts.map((_, index) => parts.slice(0, index + 1).join('/'));
  let ignored = false;
  for (const { pattern, negated } of rules) {
    if (candidates.some((candidate) => path.matchesGlob(candidate, pattern))) ignored = !negated;
  }
  return ignored;
}

// ---------------------------------------------------------------------------------------------
// Processes: each through test/support/processes.ts, in a group of its own, stopped after its test
// (or, started by the `beforeAll`, after the file) however it ended.

const processes = useProcesses();

/** The Node 24 that runs this test: the `node` of the image. */
const NODE = process.execPath;

/** Runs `command` through sh in `cwd`; rejects with its output when it fails. */
async function runStep(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<void> {
  const child = processes.spawn('sh', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += String(chunk)));
  child.stderr!.on('data', (chunk) => (output += String(chunk)));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`\`${command}\` failed (${code}) in ${cwd}:\n${output}`);
}

/** Node 24 first on PATH, and npm answering from its cache where it can. */
function toolEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PATH: `${path.dirname(NODE)}${path.delimiter}${process.env.PATH ?? ''}`,
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
  };
}

// ---------------------------------------------------------------------------------------------
// The tree the image's files make, and its command started there.

const stages = readStages(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
const runtime = readRuntimeStage(stages);
let rootfs = '';
/** The runtime stage's WORKDIR inside the assembled tree. */
let appDir = '';

/**
 * The build stage's WORKDIR once its steps ran: the context (.dockerignore applied) in a temporary
 * folder, with this checkout's full install as its node_modules (the stage's `npm ci` of the same
 * lockfile), and the stage's steps after `COPY . .` run there. The checkout itself is left alone.
 */
async function buildStage(rules: { pattern: string; negated: boolean }[]): Promise<string> {
  const stage = stages.find((candidate) => candidate.name === 'build');
  if (stage === undefined) throw new Error('COPY --from=build, but the Dockerfile has no `build` stage');
  const copiesContext = stage.instructions.findIndex(
    ({ keyword, args }) => keyword === 'COPY' && args.split(/\s+/).join(' ') === '. .',
  );
  if (copiesContext === -1) throw new Error('the build stage does not copy the context (`COPY . .`)');
  const folder = path.join(rootfs, 'build-stage');
  cpSync(ROOT, folder, {
    recursive: true,
    filter: (file) => !ignoredByContext(path.relative(ROOT, file), rules),
  });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(folder, 'node_modules'));
  for (const { keyword, args } of stage.instructions.slice(copiesContext + 1)) {
    if (keyword !== 'RUN')
      throw new Error(`the build stage has ${keyword} after COPY . ., not reproduced here`);
    await runStep(flagsAndWords(args).words.join(' '), folder, toolEnv());
  }
  return folder;
}

async function assembleTree(): Promise<void> {
  rootfs = mkdtempSync(path.join(tmpdir(), 'image-runtime-'));
  chmodSync(rootfs, 0o755);
  appDir = path.join(rootfs, runtime.workdir);
  mkdirSync(appDir, { recursive: true });
  const rules = readDockerignore();
  const buildWorkdir = stages
    .find((stage) => stage.name === 'build')
    ?.instructions.filter(({ keyword }) => keyword === 'WORKDIR')
    .reduce((dir, { args }) => path.posix.resolve(dir, args), '/');
  let buildStageFolder: string | undefined;
  for (const copy of runtime.copies) {
    const destination = path.join(rootfs, copy.destination);
    const toFolder = copy.sources.length > 1 || copy.destination.endsWith('/');
    for (const source of copy.sources) {
      let from: string;
      if (copy.from === undefined) {
        from = path.join(ROOT, source);
        if (ignoredByContext(path.relative(ROOT, from), rules)) {
          throw new Error(`COPY ${source}: .dockerignore leaves it out of the context`);
        }
      } else if (copy.from === 'build' && buildWorkdir !== undefined) {
        buildStageFolder ??= await buildStage(rules);
        // The build stage's WORKDIR holds the context after `COPY . .` and its steps' output.
        from = path.join(
          buildStageFolder,
          path.posix.relative(buildWorkdir, path.posix.resolve(buildWorkdir, source)),
        );
      } else {
        throw new Error(`COPY --from=${copy.from} is not reproduced here`);
      }
      if (!existsSync(from)) throw new Error(`COPY ${source}: no such file in the context`);
      const target = toFolder ? path.join(destination, path.basename(from)) : destination;
      cpSync(from, target, {
        recursive: true,
        // --from=build copies what the stage holds, ignored or not; the context is filtered.
        filter: (file) => copy.from !== undefined || !ignoredByContext(path.relative(ROOT, file), rules),
      });
    }
  }
  if (buildStageFolder !== undefined) rmSync(buildStageFolder, { recursive: true, force: true });
  for (const step of runtime.runs) {
    // The shared npm cache is this machine's: a step that empties it does not run here.
    if (/\bnpm\s+cache\s+clean\b/.test(step)) {
      throw new Error(`the runtime stage empties npm's cache (\`${step}\`): use the cache mount instead`);
    }
    await runStep(step, appDir, toolEnv());
  }
  if (process.getuid?.() !== 0) spawnSync('chmod', ['-R', 'a-w', appDir]);
}

/** The image's user: `node` is uid and gid 1000 in the official Node images. */
function imageUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0 || runtime.user === undefined) return undefined;
  if (runtime.user !== 'node')
    throw new Error(`USER ${runtime.user}: only the image's node user is known here`);
  return { uid: 1000, gid: 1000 };
}

interface Started {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  logged(msg: string): Record<string, unknown>[];
  stderr(): string;
  exited: Promise<number | null>;
}

/** The runtime stage's CMD in the assembled tree, with the image's ENV and `deployment` over it. */
function startCommand(deployment: Record<string, string>): Started {
  const [program, ...args] = runtime.command;
  if (program !== 'node') throw new Error(`CMD runs ${program}: only the image's node is known here`);
  const child = processes.spawn(NODE, args, {
    cwd: appDir,
    // The image's environment only: its PATH (the image's node first), its home, its ENV.
    env: {
      PATH: `${path.dirname(NODE)}:/usr/local/bin:/usr/bin:/bin`,
      HOME: '/home/node',
      ...runtime.env,
      ...deployment,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...imageUser(),
  });
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
  await assembleTree();
}, ASSEMBLY_BUDGET_MS);

afterAll(() => {
  if (rootfs !== '') {
    spawnSync('chmod', ['-R', 'u+w', rootfs]);
    rmSync(rootfs, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------

describe("the runtime stage's files", () => {
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
