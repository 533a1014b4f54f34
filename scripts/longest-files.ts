/**
 * Lists the files of `src/` (generated code aside) longer than a limit, longest first, each with
 * whether its first lines say why it is that long: the habit beside the one for functions
 * (`longest-functions.ts`) is a file under 400 lines, or a header that says why it is longer than
 * 400 lines (the words "400 lines" in its first comment). Exits 1 when a listed file gives no
 * reason, so a folder can be held to it.
 *
 *   node scripts/longest-files.ts                       # every file of src/ over 400 lines
 *   node scripts/longest-files.ts src/edge src/app.ts   # only these folders and files
 *   node scripts/longest-files.ts --over 250 src/edge/door
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** A file's length, and whether its header says why it is over the limit. */
export interface FileLength {
  readonly path: string;
  readonly lines: number;
  readonly saysWhy: boolean;
}

function typeScriptFiles(path: string): string[] {
  if (!statSync(path).isDirectory()) return path.endsWith('.ts') ? [path] : [];
  return readdirSync(path, { withFileTypes: true }).flatMap((item) =>
    item.isDirectory() && item.name === 'generated' ? [] : typeScriptFiles(join(path, item.name)),
  );
}

/** Whether the file's first comment names its length: "… longer than 400 lines because …". */
function headerSaysWhy(text: string): boolean {
  const header = /^\s*\/\*\*([\s\S]*?)\*\//.exec(text)?.[1] ?? '';
  return /\b400 lines\b/.test(header.replace(/\s*\*\s*/g, ' '));
}

/** The files under `paths` (relative to the repository) longer than `over` lines, longest first. */
export function longFiles(paths: readonly string[], over = 400): FileLength[] {
  return paths
    .flatMap((path) => typeScriptFiles(resolve(ROOT, path)))
    .map((file) => {
      const text = readFileSync(file, 'utf8');
      const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      return { path: relative(ROOT, file), lines, saysWhy: headerSaysWhy(text) };
    })
    .filter((file) => file.lines > over)
    .sort((a, b) => b.lines - a.lines);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const overAt = args.indexOf('--over');
  const over = overAt === -1 ? 400 : Number(args[overAt + 1]);
  const paths = args.filter((_arg, index) => overAt === -1 || (index !== overAt && index !== overAt + 1));
  const found = longFiles(paths.length === 0 ? ['src'] : paths, over);
  for (const file of found) {
    console.log(
      `${String(file.lines).padStart(5)}  ${file.path}${file.saysWhy ? '' : '  (no reason in its first lines)'}`,
    );
  }
  console.log(
    `${found.length} over ${over} lines, ${found.filter((file) => !file.saysWhy).length} giving no reason`,
  );
  if (found.some((file) => !file.saysWhy)) process.exitCode = 1;
}
