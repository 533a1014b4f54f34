/**
 * The commands README.md and docs/ mark as runnable, run as written, so the documents cannot drift
 * from what the code does. A marker is an HTML comment right before a ```sh block:
 *
 * - `<!-- runnable -->`: the block runs to completion with bash (`-eo pipefail`) and must exit 0;
 *   a line `# {json}` after a command is an answer the block must print (compared as JSON);
 * - `<!-- runnable: background, ready <url> -->` or `ready output "<text>"`: a server; it keeps
 *   running for the rest of the document's blocks once `<url>` answers or its output holds `<text>`.
 *
 * The blocks of one document run in order in one shell session, in a network and process namespace
 * of their own (`unshare`), so the fixed ports the documents name (4000, 4100, 6390) never meet
 * another test's, and everything a block started, daemons included, ends with the session. Where
 * unshare is not allowed, they run on the host's network instead. The one command not run for real
 * is `npm ci`: the test run installed the dependencies, and reinstalling them under the running
 * suite would pull them from under it. The PATH is the user's (no node_modules/.bin first), so the
 * commands get Node 24 the way the documents say: through npm.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stopProcess, useProcesses } from '../support/processes.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DOCUMENTS = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((name) => `docs/${name}`)].filter(
  (path) => path.endsWith('.md'),
);

/** Longest a block may run, or a server take to be ready. */
const BLOCK_TIMEOUT_SECONDS = 150;

/** A fenced block marked runnable. */
interface RunnableBlock {
  /** Where it is: `README.md:23`. */
  at: string;
  background: boolean;
  /** For a server: the URL that answers, or the text its output holds, once it is ready. */
  ready?: { url: string } | { output: string };
  /** The block's text. */
  script: string;
  /** The answers (`# {json}` lines) it must print. */
  expected: unknown[];
}

const MARKER = /^<!-- runnable(?::\s*(.*?))?\s*-->$/;

/** The runnable blocks of a markdown document, in order. */
function runnableBlocks(path: string, markdown: string): RunnableBlock[] {
  const lines = markdown.split('\n');
  const blocks: RunnableBlock[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    const marker = MARKER.exec(lines[index]!.trim());
    if (marker === null) continue;
    let open = index + 1;
    while (lines[open]?.trim() === '') open += 1;
    if (lines[open]?.trim() !== '```sh')
      throw new Error(`${path}:${index + 1}: a runnable marker must precede a \`\`\`sh block`);
    const close = lines.findIndex((line, at) => at > open && line.trim() === '```');
    if (close === -1) throw new Error(`${path}:${open + 1}: the block never closes`);
    const script = lines.slice(open + 1, close).join('\n');
    const options = marker[1] ?? '';
    const url = /ready (https?:\/\/\S+)/.exec(options)?.[1];
    const output = /ready output "([^"]+)"/.exec(options)?.[1];
    const background = options.startsWith('background');
    if (background && url === undefined && output === undefined)
      throw new Error(
        `${path}:${index + 1}: a background block needs "ready <url>" or "ready output "<text>""`,
      );
    blocks.push({
      at: `${path}:${open + 1}`,
      background,
      ...(url !== undefined ? { ready: { url } } : output !== undefined ? { ready: { output } } : {}),
      script,
      expected: script
        .split('\n')
        .filter((line) => /^# [{[]/.test(line.trim()))
        .map((line) => JSON.parse(line.trim().slice(2)) as unknown),
    });
    index = close;
  }
  return blocks;
}

/** Whether this machine lets an unprivileged process make its own network and process namespaces. */
function namespacesAllowed(): boolean {
  return spawnSync('unshare', ['-r', '-n', '-p', '-f', '-m', '--mount-proc', 'true']).status === 0;
}

const quote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`;

/** One bash session running `blocks` in order, each block's output in `<dir>/<n>.out`. */
function sessionScript(blocks: readonly RunnableBlock[], dir: string, isolated: boolean): string {
  const lines = [
    'set -u',
    `cd ${quote(ROOT)}`,
    isolated ? 'ip link set lo up' : ':',
    // The test run installed the dependencies; `npm ci` here would replace them under the suite.
    'npm() { if [ "${1:-}" = ci ]; then echo "npm ci: installed by the test run"; return 0; fi; command npm "$@"; }',
    'export -f npm',
  ];
  blocks.forEach((block, n) => {
    const out = quote(join(dir, `${n}.out`));
    const file = quote(join(dir, `${n}.sh`));
    writeFileSync(join(dir, `${n}.sh`), `set -eo pipefail\n${block.script}\n`);
    if (!block.background) {
      lines.push(`timeout ${BLOCK_TIMEOUT_SECONDS} bash ${file} > ${out} 2>&1; echo "block ${n} exit $?"`);
      return;
    }
    lines.push(`setsid bash ${file} > ${out} 2>&1 < /dev/null & server=$!`);
    const check =
      block.ready !== undefined && 'url' in block.ready
        ? `curl -s -o /dev/null ${quote(block.ready.url)}`
        : `grep -qF ${quote((block.ready as { output: string }).output)} ${out}`;
    lines.push(
      // A server that exited is not waited for.
      `ready=no; for i in $(seq 1 ${BLOCK_TIMEOUT_SECONDS * 4}); do if ${check}; then ready=yes; break; fi; kill -0 $server 2>/dev/null || break; sleep 0.25; done`,
      `echo "block ${n} ready $ready"`,
    );
  });
  return `${lines.join('\n')}\n`;
}

/** The user's PATH: without this repository's node_modules/.bin, which npm puts first for a script. */
function userPath(): string {
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((entry) => !entry.includes(join(ROOT, 'node_modules')))
    .join(delimiter);
}

const workDirs: string[] = [];
afterAll(() => {
  for (const dir of workDirs) rmSync(dir, { recursive: true, force: true });
});

describe('runnable commands in README.md and docs/', () => {
  const processes = useProcesses();
  const isolated = namespacesAllowed();
  const documents = DOCUMENTS.map((path) => ({
    path,
    blocks: runnableBlocks(path, readFileSync(join(ROOT, path), 'utf8')),
  })).filter(({ blocks }) => blocks.length > 0);

  it('are marked in the documents that show commands to run', () => {
    expect(documents.map(({ path }) => path)).toEqual([
      'README.md',
      'docs/federation.md',
      'docs/operations.md',
    ]);
  });

  it.each(documents)(
    '$path: every runnable block succeeds as written',
    async ({ blocks }) => {
      const dir = mkdtempSync(join(tmpdir(), 'docs-commands-'));
      workDirs.push(dir);
      writeFileSync(join(dir, 'session.sh'), sessionScript(blocks, dir, isolated));
      const command = isolated
        ? ['unshare', '-r', '-n', '-p', '-f', '-m', '--mount-proc', 'bash', join(dir, 'session.sh')]
        : ['bash', join(dir, 'session.sh')];
      const session = processes.spawn(command[0]!, command.slice(1), {
        cwd: ROOT,
        env: { PATH: userPath(), HOME: process.env.HOME ?? tmpdir(), LANG: 'C.UTF-8' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let report = '';
      session.stdout!.on('data', (chunk) => (report += String(chunk)));
      session.stderr!.on('data', (chunk) => (report += String(chunk)));
      await once(session, 'exit');
      // The servers the blocks started in the background outlive the session's shell on the host's
      // network (in a namespace of its own they end with it): they carry its mark.
      await stopProcess(session);

      blocks.forEach((block, n) => {
        const output = (() => {
          try {
            return readFileSync(join(dir, `${n}.out`), 'utf8');
          } catch {
            return '';
          }
        })();
        const what = `${block.at}\n--- output\n${output.slice(-3000)}\n--- session\n${report}`;
        expect(report, what).toContain(block.background ? `block ${n} ready yes` : `block ${n} exit 0`);
        const printed = output
          .split('\n')
          .filter((line) => /^[{[]/.test(line.trim()))
          .map((line) => {
            try {
              return JSON.parse(line) as unknown;
            } catch {
              return line;
            }
          });
        for (const answer of block.expected) expect(printed, what).toContainEqual(answer);
      });
    },
    (BLOCK_TIMEOUT_SECONDS + 60) * 4 * 1000,
  );
});
