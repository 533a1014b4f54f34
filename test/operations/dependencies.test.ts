/**
 * The locked dependency tree meets every peer range, and every package's `engines` accepts the
 * Node the project runs on (Node 24 from the `node` package: this test's own Node), checked by npm
 * itself. npm only warns of either during an install, and the project's `.npmrc` keeps npm to its
 * errors (README, "Which Node"): this is where a peer conflict or a package that needs a newer Node
 * fails instead.
 */
import { execFile } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, test } from 'vitest';
import { loadScaledMs } from '../support/load-budget.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const run = promisify(execFile);

/** npm's own script: the one running this test (`npm test`, `npx vitest`), else the `npm` on PATH. */
function npmCli(): string {
  if (process.env.npm_execpath?.endsWith('npm-cli.js')) return process.env.npm_execpath;
  for (const directory of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(directory, 'npm');
    if (directory !== '' && existsSync(candidate)) {
      return join(dirname(realpathSync(candidate)), 'npm-cli.js');
    }
  }
  throw new Error('npm is not on PATH');
}

describe('the locked dependencies', () => {
  test(
    'resolve with strict peers and strict engines under the project’s Node',
    async () => {
      expect(process.version).toMatch(/^v24\./);
      // A dry run builds the tree from package-lock.json, as `npm ci` does, and changes nothing.
      const { stdout, stderr } = await run(
        process.execPath,
        [
          npmCli(),
          'install',
          '--dry-run',
          '--strict-peer-deps',
          '--engine-strict',
          '--ignore-scripts',
          '--offline',
          '--no-audit',
          '--no-fund',
          '--loglevel=warn',
        ],
        { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } },
      ).catch((error: { stdout?: string; stderr?: string }) => {
        throw new Error(`npm refused the locked tree:\n${error.stderr ?? ''}${error.stdout ?? ''}`);
      });
      // Not even as a warning (npm overrides a conflicting peer with a warning without --strict-peer-deps).
      expect(`${stderr}${stdout}`).not.toMatch(/ERESOLVE|EBADENGINE/);
    },
    loadScaledMs(30_000),
  );
});
