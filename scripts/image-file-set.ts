/**
 * The image's runtime stage, assembled with no image builder: the Dockerfile's `runtime` stage is
 * read (WORKDIR, ENV, COPY, RUN, USER, CMD), exactly the files its COPY lines bring in are copied
 * into a root file system of its own (from the build context, .dockerignore applied; `--from=build`
 * from the build stage's steps after it copies the context), its RUN steps install the production
 * dependencies there, and the image's `node` (the Node 24 running this process) is copied to
 * `/usr/local/bin/node` inside it, where the official image has it. {@link ImageFileSet.command} is
 * the CMD as the image runs it: that node, the WORKDIR, the image's ENV under the deployment's, and
 * the image's user when this process is root.
 *
 * Nothing of the checkout is reached at run time, so the assembly runs wherever the checkout sits:
 * a clone under a folder only root may traverse (`mktemp -d` makes one 0700) holds a node binary the
 * image's user cannot execute, and the root file system is made under a folder that user can
 * traverse ({@link traversableBase}).
 *
 * test/operations/image-runtime.test.ts checks the file set and starts its CMD; bench/gameday.ts runs
 * its facade replicas (and the emulator) from it.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  constants as fsConstants,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout this module belongs to: the build context. */
export const CHECKOUT = fileURLToPath(new URL('..', import.meta.url));

/** Where the official Node images keep `node` (first on their PATH). */
const IMAGE_NODE_DIR = '/usr/local/bin';

/** The image's user: `node` is uid and gid 1000 in the official Node images. */
const IMAGE_USERS: Record<string, { uid: number; gid: number }> = { node: { uid: 1000, gid: 1000 } };

// ---------------------------------------------------------------------------------------------
// The Dockerfile, read as a builder reads it.

interface Instruction {
  keyword: string;
  args: string;
}

/** One `FROM ... AS name` stage and its instructions, in order. */
export interface Stage {
  name: string;
  instructions: Instruction[];
}

/** The Dockerfile's stages: comments and blank lines dropped, continuation lines joined. */
export function readStages(text: string): Stage[] {
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
export interface RuntimeStage {
  workdir: string;
  env: Record<string, string>;
  copies: { from: string | undefined; sources: string[]; destination: string }[];
  runs: string[];
  user: string | undefined;
  command: string[];
}

/** The `runtime` stage of `stages`, as far as a container of it differs from its base image. */
export function readRuntimeStage(stages: Stage[]): RuntimeStage {
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
        throw new Error(`the runtime stage has ${keyword}, which this assembly does not reproduce`);
    }
  }
  return runtime;
}

// ---------------------------------------------------------------------------------------------
// The build context, as a builder sends it: .dockerignore applied.

type IgnoreRule = { pattern: string; negated: boolean };

function readDockerignore(context: string): IgnoreRule[] {
  const file = path.join(context, '.dockerignore');
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
function ignoredByContext(relative: string, rules: IgnoreRule[]): boolean {
  const parts = relative.split(path.sep);
  const candidates = parts.map((_, index) => parts.slice(0, index + 1).join('/'));
  let ignored = false;
  for (const { pattern, negated } of rules) {
    if (candidates.some((candidate) => path.matchesGlob(candidate, pattern))) ignored = !negated;
  }
  return ignored;
}

// ---------------------------------------------------------------------------------------------
// Where the root file system goes: a folder the image's user can reach.

/** Whether `user` may enter `dir` and every folder above it (the search permission, `x`). */
export function traversableBy(dir: string, user: { uid: number; gid: number }): boolean {
  let current = path.resolve(dir);
  for (;;) {
    const { mode, uid, gid } = statSync(current);
    const allowed =
      uid === user.uid
        ? (mode & 0o100) !== 0
        : gid === user.gid
          ? (mode & 0o010) !== 0
          : (mode & 0o001) !== 0;
    if (!allowed) return false;
    const parent = path.dirname(current);
    if (parent === current) return true;
    current = parent;
  }
}

/**
 * The first of the temporary folder (`TMPDIR`), `/tmp` and `/var/tmp` that `user` can traverse, so
 * the tree made under it can be run as that user; the temporary folder when no user is switched to.
 *
 * @throws when `user` can traverse none of them, naming them.
 */
export function traversableBase(user: { uid: number; gid: number } | undefined): string {
  if (user === undefined) return tmpdir();
  const candidates = [...new Set([tmpdir(), '/tmp', '/var/tmp'])];
  const found = candidates.find((candidate) => existsSync(candidate) && traversableBy(candidate, user));
  if (found === undefined)
    throw new Error(
      `uid ${String(user.uid)} can traverse none of ${candidates.join(', ')}: set TMPDIR to a folder it can reach`,
    );
  return found;
}

// ---------------------------------------------------------------------------------------------
// The assembly.

/** Starts a process as `child_process.spawn` does (a test passes one that stops it after the test). */
export type Spawner = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess;

/** Runs one step (`sh -c command` in `cwd`) through `spawner`; rejects with its output when it fails. */
async function runStep(
  spawner: Spawner,
  command: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const child = spawner('sh', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += String(chunk)));
  child.stderr!.on('data', (chunk) => (output += String(chunk)));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`\`${command}\` failed (${String(code)}) in ${cwd}:\n${output}`);
}

export interface AssembleOptions {
  /** The build context (default: this checkout). Its `node_modules` stands for the build stage's install. */
  context?: string;
  /** Starts the RUN steps' shells (default: node's `spawn`). */
  spawn?: Spawner;
}

/** How to start a program of the image: pass these to `spawn(file, args, options)`. */
export interface ImageCommand {
  file: string;
  args: string[];
  options: { cwd: string; env: Record<string, string>; uid?: number; gid?: number };
}

/** The runtime stage's files, assembled; {@link ImageFileSet.remove} deletes them. */
export interface ImageFileSet {
  /** The Dockerfile's stages, as read. */
  stages: Stage[];
  runtime: RuntimeStage;
  /** The root file system made for it. */
  root: string;
  /** The runtime stage's WORKDIR inside {@link root}. */
  appDir: string;
  /** The image's `node`, copied into {@link root} (`/usr/local/bin/node` there). */
  node: string;
  /** The image's user, when this process is root and can switch to it; otherwise undefined. */
  user: { uid: number; gid: number } | undefined;
  /** The image's CMD with the image's environment only (its PATH, its home, its ENV) and `deployment` over it. */
  command(deployment: Record<string, string>): ImageCommand;
  /**
   * `node <args>` as the image would run another of its programs (compose.yaml's `npm run emulator`
   * is `node emulator/main.ts`), in the WORKDIR, with the same environment as {@link command}.
   */
  nodeCommand(args: string[], deployment: Record<string, string>): ImageCommand;
  /** Deletes the root file system. */
  remove(): void;
}

/** The Node 24 that runs this process: the image's `node`. */
const NODE = process.execPath;

/** Node 24 first on PATH, and npm answering from its cache where it can. */
function toolEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PATH: `${path.dirname(NODE)}${path.delimiter}${process.env.PATH ?? ''}`,
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
  };
}

/** The image's user, when this process runs as root (only root can start a process as another user). */
function imageUserOf(runtime: RuntimeStage): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0 || runtime.user === undefined) return undefined;
  const user = IMAGE_USERS[runtime.user];
  if (user === undefined) throw new Error(`USER ${runtime.user}: only the image's node user is known here`);
  return user;
}

/**
 * The build stage's WORKDIR once its steps ran: the context (.dockerignore applied) in `folder`,
 * with the context's full install as its node_modules (the stage's `npm ci` of the same lockfile),
 * and the stage's steps after `COPY . .` run there. The context itself is left alone.
 */
async function buildStage(
  stages: Stage[],
  context: string,
  rules: IgnoreRule[],
  folder: string,
  step: (command: string, cwd: string) => Promise<void>,
): Promise<string> {
  const stage = stages.find((candidate) => candidate.name === 'build');
  if (stage === undefined) throw new Error('COPY --from=build, but the Dockerfile has no `build` stage');
  const copiesContext = stage.instructions.findIndex(
    ({ keyword, args }) => keyword === 'COPY' && args.split(/\s+/).join(' ') === '. .',
  );
  if (copiesContext === -1) throw new Error('the build stage does not copy the context (`COPY . .`)');
  cpSync(context, folder, {
    recursive: true,
    filter: (file) => !ignoredByContext(path.relative(context, file), rules),
  });
  symlinkSync(path.join(context, 'node_modules'), path.join(folder, 'node_modules'));
  for (const { keyword, args } of stage.instructions.slice(copiesContext + 1)) {
    if (keyword !== 'RUN')
      throw new Error(`the build stage has ${keyword} after COPY . ., not reproduced here`);
    await step(flagsAndWords(args).words.join(' '), folder);
  }
  return folder;
}

/** Copies what each COPY of the runtime stage brings in, under `root`. */
async function copyRuntimeFiles(
  stages: Stage[],
  runtime: RuntimeStage,
  context: string,
  root: string,
  step: (command: string, cwd: string) => Promise<void>,
): Promise<void> {
  const rules = readDockerignore(context);
  const buildWorkdir = stages
    .find((stage) => stage.name === 'build')
    ?.instructions.filter(({ keyword }) => keyword === 'WORKDIR')
    .reduce((dir, { args }) => path.posix.resolve(dir, args), '/');
  let buildStageFolder: string | undefined;
  try {
    for (const copy of runtime.copies) {
      const destination = path.join(root, copy.destination);
      const toFolder = copy.sources.length > 1 || copy.destination.endsWith('/');
      for (const source of copy.sources) {
        let from: string;
        if (copy.from === undefined) {
          from = path.join(context, source);
          if (ignoredByContext(path.relative(context, from), rules)) {
            throw new Error(`COPY ${source}: .dockerignore leaves it out of the context`);
          }
        } else if (copy.from === 'build' && buildWorkdir !== undefined) {
          buildStageFolder ??= await buildStage(stages, context, rules, path.join(root, 'build-stage'), step);
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
          filter: (file) => copy.from !== undefined || !ignoredByContext(path.relative(context, file), rules),
        });
      }
    }
  } finally {
    if (buildStageFolder !== undefined) rmSync(buildStageFolder, { recursive: true, force: true });
  }
}

/**
 * Assembles the runtime stage's files under a new folder that the image's user can traverse, runs
 * its RUN steps there, copies the image's `node` in, and (not as root) makes the WORKDIR read-only,
 * as the image's user finds it. Takes a minute or so: `npm ci --omit=dev` from npm's cache.
 *
 * @throws when the Dockerfile holds what this assembly does not reproduce, a COPY source is missing
 * or left out of the context, or a step fails (with its output).
 */
export async function assembleImageFileSet(options: AssembleOptions = {}): Promise<ImageFileSet> {
  const context = options.context ?? CHECKOUT;
  const spawner = options.spawn ?? spawn;
  const step = (command: string, cwd: string): Promise<void> => runStep(spawner, command, cwd, toolEnv());
  const stages = readStages(readFileSync(path.join(context, 'Dockerfile'), 'utf8'));
  const runtime = readRuntimeStage(stages);
  const user = imageUserOf(runtime);
  const root = mkdtempSync(path.join(traversableBase(user), 'image-runtime-'));
  const remove = (): void => removeTree(root);
  try {
    chmodSync(root, 0o755);
    const appDir = path.join(root, runtime.workdir);
    mkdirSync(appDir, { recursive: true });
    await copyRuntimeFiles(stages, runtime, context, root, step);
    for (const command of runtime.runs) {
      // The shared npm cache is this machine's: a step that empties it does not run here.
      if (/\bnpm\s+cache\s+clean\b/.test(command)) {
        throw new Error(
          `the runtime stage empties npm's cache (\`${command}\`): use the cache mount instead`,
        );
      }
      await step(command, appDir);
    }
    // The image's node inside the tree, not reached through the checkout (which may sit where the
    // image's user cannot go). A clone of the file where the file system allows one.
    const node = path.join(root, IMAGE_NODE_DIR, 'node');
    mkdirSync(path.dirname(node), { recursive: true });
    copyFileSync(NODE, node, fsConstants.COPYFILE_FICLONE);
    chmodSync(node, 0o755);
    if (process.getuid?.() !== 0) spawnSync('chmod', ['-R', 'a-w', appDir]);
    return fileSetAt(root, context);
  } catch (error) {
    remove();
    throw error;
  }
}

/** Deletes a tree made by {@link assembleImageFileSet}, read-only parts included. */
function removeTree(root: string): void {
  spawnSync('chmod', ['-R', 'u+w', root]);
  rmSync(root, { recursive: true, force: true });
}

/**
 * The file set {@link assembleImageFileSet} made at `root` earlier (in another process: a program
 * that assembles outside a network namespace and runs inside it), read again from the context's
 * Dockerfile.
 *
 * @throws when `root` holds no assembled WORKDIR or no image `node`.
 */
export function fileSetAt(root: string, context = CHECKOUT): ImageFileSet {
  const stages = readStages(readFileSync(path.join(context, 'Dockerfile'), 'utf8'));
  const runtime = readRuntimeStage(stages);
  const user = imageUserOf(runtime);
  const appDir = path.join(root, runtime.workdir);
  const nodeDir = path.join(root, IMAGE_NODE_DIR);
  const node = path.join(nodeDir, 'node');
  if (!existsSync(path.join(appDir, 'package.json')) || !existsSync(node))
    throw new Error(`${root} holds no assembled image file set`);
  const environment = (deployment: Record<string, string>): Record<string, string> => ({
    // The image's environment only: its PATH (the image's node first), its home, its ENV.
    PATH: `${nodeDir}:/usr/local/bin:/usr/bin:/bin`,
    HOME: '/home/node',
    ...runtime.env,
    ...deployment,
  });
  const nodeCommand = (args: string[], deployment: Record<string, string>): ImageCommand => ({
    file: node,
    args,
    options: { cwd: appDir, env: environment(deployment), ...user },
  });
  return {
    stages,
    runtime,
    root,
    appDir,
    node,
    user,
    command(deployment) {
      const [program, ...args] = runtime.command;
      if (program !== 'node')
        throw new Error(`CMD runs ${String(program)}: only the image's node is known here`);
      return nodeCommand(args, deployment);
    },
    nodeCommand,
    remove: () => removeTree(root),
  };
}
