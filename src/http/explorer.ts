/**
 * The self-hosted explorer (`EXPLORER=graphiql`): GraphiQL, bundled from npm packages (esbuild writes
 * `explorer/dist/`: the image's build stage, `npm run build:explorer`, or `prepareExplorer` at start
 * from a source tree), served by the facade itself, so it works where
 * Apollo Sandbox's CDN cannot be reached (air-gapped networks, strict proxies). A browser opening
 * `/graphql` gets the page; its script, stylesheet and Monaco's workers come from `/explorer/`. The
 * page is same-origin with the API, so CORS and the WebSocket origin check are unchanged by it, and
 * it holds no data: every operation it runs carries the user's own token through the usual door.
 * See docs/operations.md.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type Request, type Router } from 'express';

/** What a browser opening `/graphql` gets: Apollo Sandbox (CDN), GraphiQL (served here), or nothing. */
export const EXPLORER_MODES = ['sandbox', 'graphiql', 'off'] as const;

export type ExplorerMode = (typeof EXPLORER_MODES)[number];

/** Where `npm run build:explorer` writes the bundle (explorer/build.ts). */
const EXPLORER_BUILD_DIR = fileURLToPath(new URL('../../explorer/dist/', import.meta.url));

/** What the bundle is built from, in a source tree (an installed image carries the build only). */
const EXPLORER_SOURCES = [
  fileURLToPath(new URL('../../explorer/src/', import.meta.url)),
  fileURLToPath(new URL('../../explorer/build.ts', import.meta.url)),
  fileURLToPath(new URL('../../package-lock.json', import.meta.url)),
];

/** Thrown at start when `EXPLORER=graphiql` but the bundle was never built and cannot be. */
export class ExplorerNotBuiltError extends Error {
  constructor(directory: string) {
    super(
      `EXPLORER=graphiql needs the explorer's files in ${directory}, and they cannot be built here ` +
        '(esbuild and explorer/ come with the development dependencies): run `npm ci` and ' +
        '`npm run build:explorer` where they are, and ship explorer/dist/ (or choose EXPLORER=sandbox or off).',
    );
    this.name = 'ExplorerNotBuiltError';
  }
}

/** The builder of explorer/build.ts (esbuild: a development dependency). */
export type ExplorerBuilder = (outdir: string) => Promise<void>;

export interface PrepareExplorerOptions {
  /** Where the build is served from. */
  directory?: string;
  /** Files and folders the build is made from: a build older than any of them is made again. */
  sources?: readonly string[];
  /** Loads the builder; rejects with ERR_MODULE_NOT_FOUND where esbuild or explorer/ is absent. */
  loadBuilder?: () => Promise<ExplorerBuilder>;
}

/**
 * Makes the explorer's build ready before its routes are made, so `EXPLORER=graphiql npm start`
 * needs no step first: a fresh clone has no build, and one made before the sources last changed is
 * stale, so it is built here (a few seconds to a minute). It is built beside the served directory
 * and moved in whole, so a facade starting at the same time never serves half a build. Where the
 * builder cannot load (a production install: the image carries its build), a build that is there is
 * used as it is, and none at all is refused.
 *
 * @returns `built` when it built, `ready` when the build was there and current.
 * @throws {ExplorerNotBuiltError} when there is no build and none can be made here.
 */
export async function prepareExplorer(options: PrepareExplorerOptions = {}): Promise<'built' | 'ready'> {
  const directory = options.directory ?? EXPLORER_BUILD_DIR;
  const entry = path.join(directory, 'graphiql.js');
  const built = existsSync(entry);
  if (built && !newerThan(options.sources ?? EXPLORER_SOURCES, statSync(entry).mtimeMs)) return 'ready';
  let builder: ExplorerBuilder;
  try {
    // The import stays inside this try: a production install has neither explorer/build.ts nor
    // esbuild, which ERR_MODULE_NOT_FOUND tells below, and a bundler following the image's modules
    // (test/operations/image-runtime.test.ts) then sees an optional import, not a missing one.
    builder =
      options.loadBuilder === undefined
        ? (await import('../../explorer/build.ts')).buildExplorer
        : await options.loadBuilder();
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    if (built) return 'ready';
    throw new ExplorerNotBuiltError(directory);
  }
  const staging = `${directory.replace(/[\\/]+$/, '')}.building-${process.pid}`;
  try {
    await builder(staging);
    await rm(directory, { recursive: true, force: true });
    await rename(staging, directory);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return 'built';
}

/** Whether any file under `paths` (those that exist) changed after `time`. */
function newerThan(paths: readonly string[], time: number): boolean {
  return paths.some((entry) => {
    if (!existsSync(entry)) return false;
    const stats = statSync(entry);
    if (!stats.isDirectory()) return stats.mtimeMs > time;
    return newerThan(
      readdirSync(entry).map((name) => path.join(entry, name)),
      time,
    );
  });
}

/**
 * The page's policy: its own files only (Monaco's styles are inline, its icon font a file), calls
 * to its own origin only (`/graphql` over HTTP and WebSocket), never framed.
 */
export const EXPLORER_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "font-src 'self' data:",
  "img-src 'self' data:",
  "worker-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// Relative URLs: behind a proxy that mounts the facade under a prefix, the page still finds its files.
const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>GraphiQL · Platform GraphQL facade</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="explorer/graphiql.css" />
  </head>
  <body style="margin: 0">
    <div id="graphiql" style="height: 100vh"></div>
    <script type="module" src="explorer/graphiql.js"></script>
  </body>
</html>
`;

/**
 * Routes of the GraphiQL explorer, to mount before `/graphql`'s own handlers; an empty router for
 * any other mode (Apollo's plugin serves Sandbox).
 *
 * @throws {ExplorerNotBuiltError} when `mode` is `graphiql` and `directory` holds no build
 *   (`prepareExplorer` makes it first).
 */
export function createExplorerRoutes(mode: ExplorerMode, directory: string = EXPLORER_BUILD_DIR): Router {
  const routes = express.Router();
  if (mode !== 'graphiql') return routes;
  if (!existsSync(path.join(directory, 'graphiql.js'))) throw new ExplorerNotBuiltError(directory);
  routes.get('/graphql', (req, res, next) => {
    if (!isPageRequest(req)) {
      next();
      return;
    }
    res
      .status(200)
      .set({
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
        'content-security-policy': EXPLORER_CONTENT_SECURITY_POLICY,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      .send(PAGE);
  });
  routes.use(
    '/explorer',
    express.static(directory, {
      index: false,
      dotfiles: 'deny',
      fallthrough: false,
      setHeaders: (res) => {
        res.setHeader('x-content-type-options', 'nosniff');
        res.setHeader('cache-control', 'no-cache');
      },
    }),
  );
  return routes;
}

/**
 * A browser opening `/graphql`: a GET that prefers HTML to JSON and names no operation in its URL
 * (a GET query keeps going to Apollo, whatever its `Accept`).
 */
function isPageRequest(req: Request): boolean {
  if (req.accepts(['application/json', 'application/graphql-response+json', 'text/html']) !== 'text/html')
    return false;
  const params = new URL(req.originalUrl, 'http://facade.invalid').searchParams;
  return !params.has('query') && !params.has('extensions');
}
