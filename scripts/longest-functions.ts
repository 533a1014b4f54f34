/**
 * Lists the longest functions of `src/` (generated code aside), longest first: every function
 * declaration, method, accessor, constructor, function expression and arrow function, measured in
 * lines from its first line to its last (a nested function counts in its own row and in its
 * parent's). A function that outgrows a screen or two usually holds several steps that want names.
 *
 *   node scripts/longest-functions.ts        # the 5 longest
 *   node scripts/longest-functions.ts 20     # the 20 longest
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SKIPPED = new Set(['generated']);

interface FunctionLength {
  where: string;
  name: string;
  lines: number;
}

function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((item) => {
    const path = join(directory, item.name);
    if (item.isDirectory()) return SKIPPED.has(item.name) ? [] : typeScriptFiles(path);
    return item.name.endsWith('.ts') && !item.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The name a reader would look for: the declaration's own, or what it is assigned to. */
function nameOf(node: ts.FunctionLikeDeclaration): string {
  if (node.name !== undefined && !ts.isComputedPropertyName(node.name)) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (ts.isCallExpression(parent)) return `(argument of ${parent.expression.getText().slice(0, 40)})`;
  return '(anonymous)';
}

function functionsOf(path: string): FunctionLength[] {
  const text = readFileSync(path, 'utf8');
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: FunctionLength[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const declaration = node;
      const first = source.getLineAndCharacterOfPosition(declaration.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(declaration.getEnd()).line;
      found.push({
        where: `${relative(ROOT, path)}:${first + 1}`,
        name: nameOf(declaration),
        lines: last - first + 1,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const most = Number(process.argv[2] ?? 5);
const all = typeScriptFiles(join(ROOT, 'src'))
  .flatMap(functionsOf)
  .sort((a, b) => b.lines - a.lines);
for (const { lines, name, where } of all.slice(0, most)) {
  console.log(`${String(lines).padStart(5)}  ${name}  ${where}`);
}
