/**
 * The commands README.md, docs/ and examples/web/README.md show, run as written, so the documents
 * cannot drift from what the code does. Every shell block (```sh, ```bash, ```shell, ```console) is
 * preceded by a marker, an HTML comment (blank lines between are fine); a block without one fails
 * this test:
 *
 * - `<!-- runnable -->`: the block runs to completion with bash (`-eo pipefail`) and must exit 0;
 *   a line `# {json}` (or `# data: {json}`, an SSE message) after a command is an answer the block
 *   must print (compared as JSON; an SSE `data:` line it prints counts as its JSON);
 * - `<!-- runnable: background, ready <url> -->` or `ready output "<text>"`: a server (or a
 *   listener); it keeps running for the rest of the document's blocks once `<url>` answers or its
 *   output holds `<text>`. Its answers are awaited until the document's last block has run;
 * - `<!-- not runnable: <the reason> -->`: shown, not run (a placeholder to fill in, a second
 *   terminal, a tool this machine lacks); the reason is required.
 *
 * The blocks of one document run in order as in one terminal: a variable one block sets (`TOKEN`)
 * is set in the blocks after it. They run in a network and process namespace of their own
 * (`unshare`), so the fixed ports the documents name (4000, 4100, 6390) never meet another test's,
 * and everything a block started, daemons included, ends with the session. Where unshare is not
 * allowed, they run on the host's network instead. The one command not run for real is `npm ci`:
 * the test run installed the dependencies, and reinstalling them under the running suite would pull
 * them from under it. The PATH is the user's (no node_modules/.bin first), so the commands get
 * Node 24 the way the documents say: through npm.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stopProcess, useProcesses } from '../support/processes.ts';
import { DOCUMENTS, ROOT } from './documents.ts';

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

/** What a document's shell blocks are: those to run, and those with no marker (each a failure). */
interface DocumentBlocks {
  runnable: RunnableBlock[];
  /** `README.md:71` for each shell block that says neither runnable nor why not. */
  unmarked: string[];
}

const RUNNABLE = /^<!-- runnable(?::\s*(.*?))?\s*-->$/;
const NOT_RUNNABLE = /^<!-- not runnable: \S.*-->$/;
/** The fences a reader takes for commands to paste into a shell. */
const SHELL_FENCE = /^```(sh|bash|shell|console|zsh)\s*$/;

/** A line a block printed, or an answer it documents (`# ` taken off), as JSON; an SSE `data:` line's data. */
function jsonOf(line: string): string | undefined {
  const text = line.trim().replace(/^data: /, '');
  return /^[{[]/.test(text) ? text : undefined;
}

/** The shell blocks of a markdown document, in order. */
function shellBlocks(path: string, markdown: string): DocumentBlocks {
  const lines = markdown.split('\n');
  const runnable: RunnableBlock[] = [];
  const unmarked: string[] = [];
  for (let open = 0; open < lines.length; open += 1) {
    const fence = lines[open]!.trim();
    if (!fence.startsWith('```')) continue;
    const close = lines.findIndex((line, at) => at > open && line.trim() === '```');
    if (close === -1) throw new Error(`${path}:${open + 1}: the block never closes`);
    let before = open - 1;
    while (before >= 0 && lines[before]!.trim() === '') before -= 1;
    const markerLine = before >= 0 ? lines[before]!.trim() : '';
    const marker = RUNNABLE.exec(markerLine);
    const isShell = SHELL_FENCE.test(fence);
    if (marker !== null && !isShell)
      throw new Error(`${path}:${before + 1}: a runnable marker must precede a \`\`\`sh block`);
    if (isShell && marker === null && !NOT_RUNNABLE.test(markerLine)) unmarked.push(`${path}:${open + 1}`);
    if (marker !== null) {
      const script = lines.slice(open + 1, close).join('\n');
      const options = marker[1] ?? '';
      const url = /ready (https?:\/\/\S+)/.exec(options)?.[1];
      const output = /ready output "([^"]+)"/.exec(options)?.[1];
      const background = options.startsWith('background');
      if (background && url === undefined && output === undefined)
        throw new Error(
          `${path}:${before + 1}: a background block needs "ready <url>" or "ready output "<text>""`,
        );
      runnable.push({
        at: `${path}:${open + 1}`,
        background,
        ...(url !== undefined ? { ready: { url } } : output !== undefined ? { ready: { output } } : {}),
        script,
        expected: script
          .split('\n')
          .filter((line) => line.trim().startsWith('# '))
          .map((line) => jsonOf(line.trim().slice(2)))
          .filter((json) => json !== undefined)
          .map((json) => JSON.parse(json) as unknown),
      });
    }
    open = close;
  }
  return { runnable, unmarked };
}

/** Whether this machine lets an unprivileged process make its own network and process namespaces. */
function namespacesAllowed(): boolean {
  return spawnSync('unshare', ['-r', '-n', '-p', '-f', '-m', '--mount-proc', 'true']).status === 0;
}

const quote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`;

/**
 * What runs before a block: the variables the blocks before it set, and (for a block that runs to
 * its end) a trap that keeps the ones it sets for the blocks after it, as one terminal would.
 */
function blockPrelude(dir: string, keepVariables: boolean): string {
  const variables = quote(join(dir, 'variables.sh'));
  const lines = ['set -eo pipefail', `if [ -f ${variables} ]; then source ${variables}; fi`];
  if (keepVariables)
    lines.push(
      '__before=$(compgen -v | sort)',
      // Bash's own variables change by themselves and some cannot be assigned: not a block's.
      `__keep() { comm -13 <(printf '%s\\n' "$__before") <(compgen -v | sort) | grep -Ev '^(__.*|_|BASH.*|PIPESTATUS|FUNCNAME|LINENO|RANDOM|SECONDS|COLUMNS|LINES|OPT.*|REPLY|MAPFILE)$' | while read -r name; do declare -p "$name"; done >> ${variables} || true; }`,
      'trap __keep EXIT',
    );
  return `${lines.join('\n')}\n`;
}

/** One bash session running `blocks` in order, each block's output in `<dir>/<n>.out`. */
function sessionScript(blocks: readonly RunnableBlock[], dir: string, isolated: boolean): string {
  const lines = [
    'set -u',
    `cd ${quote(ROOT)}`,
    isolated ? 'ip link set lo up' : ':',
    // The test run installed the dependencies; `npm ci` here would replace them under the suite.
    'npm() { if [ "${1:-}" = ci ]; then echo "npm ci: installed by the test run"; return 0; fi; command npm "$@"; }',
    'export -f npm',
    // Whether the JSON answers listed in file $2 (one a line) are all in output $1 (as jq -cS prints them).
    'answered() { local have; have=$(sed -n \'s/^data: //; /^[{[]/p\' "$1" | jq -cSR \'fromjson? // empty\' 2>/dev/null); while IFS= read -r answer; do grep -qxF -- "$answer" <<< "$have" || return 1; done < "$2"; }',
  ];
  const awaited: string[] = [];
  blocks.forEach((block, n) => {
    const out = quote(join(dir, `${n}.out`));
    const file = quote(join(dir, `${n}.sh`));
    writeFileSync(join(dir, `${n}.sh`), `${blockPrelude(dir, !block.background)}${block.script}\n`);
    if (!block.background) {
      lines.push(`timeout ${BLOCK_TIMEOUT_SECONDS} bash ${file} > ${out} 2>&1; echo "block ${n} exit $?"`);
      return;
    }
    lines.push(`setsid bash ${file} > ${out} 2>&1 < /dev/null & server_${n}=$!`);
    const check =
      block.ready !== undefined && 'url' in block.ready
        ? `curl -s -o /dev/null ${quote(block.ready.url)}`
        : `grep -qF ${quote((block.ready as { output: string }).output)} ${out}`;
    lines.push(
      // A server that exited is not waited for.
      `ready=no; for i in $(seq 1 ${BLOCK_TIMEOUT_SECONDS * 4}); do if ${check}; then ready=yes; break; fi; kill -0 $server_${n} 2>/dev/null || break; sleep 0.25; done`,
      `echo "block ${n} ready $ready"`,
    );
    if (block.expected.length > 0) {
      const answers = join(dir, `${n}.answers`);
      writeFileSync(answers, `${block.expected.map((answer) => JSON.stringify(answer)).join('\n')}\n`);
      // The same answers as jq prints them (keys sorted), to find them in the output.
      lines.push(`jq -cS . ${quote(answers)} > ${quote(`${answers}.sorted`)}`);
      awaited.push(
        `for i in $(seq 1 ${BLOCK_TIMEOUT_SECONDS * 4}); do answered ${out} ${quote(`${answers}.sorted`)} && break; kill -0 $server_${n} 2>/dev/null || break; sleep 0.25; done`,
      );
    }
  });
  // A listener's answers come after the blocks that cause them: the session waits for them.
  lines.push(...awaited);
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
  const all = DOCUMENTS.map((path) => ({
    path,
    ...shellBlocks(path, readFileSync(join(ROOT, path), 'utf8')),
  }));
  const documents = all
    .filter(({ runnable }) => runnable.length > 0)
    .map(({ path, runnable }) => ({ path, blocks: runnable }));

  it('are each marked runnable, or not runnable with the reason', () => {
    expect(all.flatMap(({ unmarked }) => unmarked)).toEqual([]);
  });

  it('finds a shell block with no marker, or marked not runnable without a reason', () => {
    const markdown = [
      '<!-- runnable -->',
      '```sh',
      'true',
      '```',
      '```bash',
      'ls',
      '```',
      '<!-- not runnable: -->',
      '```shell',
      'ls',
      '```',
      '<!-- not runnable: a placeholder to fill in -->',
      '',
      '```console',
      'ls',
      '```',
      '```ts',
      'const a = 1;',
      '```',
    ].join('\n');
    expect(shellBlocks('x.md', markdown)).toMatchObject({
      runnable: [{ at: 'x.md:2', script: 'true' }],
      unmarked: ['x.md:5', 'x.md:9'],
    });
  });

  it('are marked runnable in the documents that show commands to run', () => {
    expect(documents.map(({ path }) => path)).toEqual([
      'README.md',
      'docs/events.md',
      'docs/federation.md',
      'docs/mcp.md',
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
          .map(jsonOf)
          .filter((json) => json !== undefined)
          .map((json) => {
            try {
              return JSON.parse(json) as unknown;
            } catch {
              return json;
            }
          });
        for (const answer of block.expected) expect(printed, what).toContainEqual(answer);
      });
    },
    (BLOCK_TIMEOUT_SECONDS + 60) * 4 * 1000,
  );
});
