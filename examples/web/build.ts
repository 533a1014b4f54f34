/**
 * Builds the example web app with esbuild, from npm packages only (no CDN): one ES module bundle and
 * its stylesheet under `<outdir>/assets/`, and `index.html` beside them.
 */
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Where `npm run example:web` builds to (git ignores it). */
export const DEFAULT_WEB_OUTDIR = path.join(here, 'dist');

/** Builds the app into `outdir`; resolves once every file is written. */
export async function buildWebExample(outdir: string = DEFAULT_WEB_OUTDIR): Promise<void> {
  await mkdir(path.join(outdir, 'assets'), { recursive: true });
  await build({
    entryPoints: { main: path.join(here, 'src/main.tsx') },
    outdir: path.join(outdir, 'assets'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    jsx: 'automatic',
    minify: true,
    sourcemap: true,
    // React and graphql read it to leave their development checks out.
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
  });
  await copyFile(path.join(here, 'index.html'), path.join(outdir, 'index.html'));
}
