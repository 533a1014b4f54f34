/**
 * Builds the self-hosted explorer (GraphiQL and Monaco's workers) from npm packages with esbuild, into
 * `explorer/dist/` (git ignores it): the facade serves it when `EXPLORER=graphiql`. Run by
 * `npm run build:explorer`; nothing is fetched at run time.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Where the facade looks for the explorer's files (`src/http/explorer.ts`). */
export const EXPLORER_DIST = path.join(here, 'dist');

/** The explorer's script; Monaco's workers and the stylesheet sit beside it. */
export const EXPLORER_ENTRY = 'graphiql.js';

/** Builds the explorer into `outdir`, replacing what was there; resolves once every file is written. */
export async function buildExplorer(outdir: string = EXPLORER_DIST): Promise<void> {
  await rm(outdir, { recursive: true, force: true });
  await mkdir(outdir, { recursive: true });
  const shared = {
    bundle: true,
    platform: 'browser',
    target: 'es2022',
    minify: true,
    outdir,
    // React and graphql read it to leave their development checks out.
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
  } as const;
  await Promise.all([
    build({
      ...shared,
      entryPoints: { graphiql: path.join(here, 'src/main.tsx') },
      format: 'esm',
      jsx: 'automatic',
      // Monaco's icon font.
      loader: { '.ttf': 'file' },
      assetNames: '[name]-[hash]',
    }),
    build({
      ...shared,
      entryPoints: {
        'editor.worker': 'monaco-editor/esm/vs/editor/editor.worker.js',
        'json.worker': 'monaco-editor/esm/vs/language/json/json.worker.js',
        'graphql.worker': 'monaco-graphql/esm/graphql.worker.js',
      },
      // Classic workers: `new Worker(url)` without `type: 'module'` works in every browser.
      format: 'iife',
    }),
  ]);
}

// `npm run build:explorer`
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  await buildExplorer();
  console.log(
    `Explorer built into ${path.relative(process.cwd(), EXPLORER_DIST)} in ${Date.now() - started} ms`,
  );
}
