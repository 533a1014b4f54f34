/**
 * Lists the exports of `src/` (generated code aside) that nothing needs exported: values no other
 * file imports (they can be module-private), and exports of any kind used nowhere at all, not even
 * in their own file (they can go). Every file of the repository that runs or tests something is a
 * reader; a module imported whole (`import * as`, `export *`, `import('…')`) counts as read.
 *
 *   node scripts/unused-exports.ts        # one line per export, then the counts; exit 1 when any
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const READERS = [
  'src',
  'test',
  'bench',
  'scripts',
  'emulator',
  'examples',
  'deploy',
  'dev-issuer',
  'explorer',
];
const SKIPPED = new Set(['node_modules', 'dist', 'generated', 'gql']);

function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((item) => {
    const path = join(directory, item.name);
    if (item.isDirectory()) return SKIPPED.has(item.name) ? [] : typeScriptFiles(path);
    return /\.tsx?$/.test(item.name) ? [path] : [];
  });
}

const files = [
  ...READERS.flatMap((folder) => typeScriptFiles(join(ROOT, folder))),
  ...readdirSync(ROOT)
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(ROOT, name)),
];

/** Per module: the names other files import from it; modules read whole. */
const imported = new Map<string, Set<string>>();
const readWhole = new Set<string>();
/** Names given as `<file>#<export>` (codegen's mappers). */
const byFileName = new Set<string>();
/** Per file of src/: its exports, and whether each is a value. */
const exported = new Map<string, Map<string, boolean>>();

function importedFrom(target: string): Set<string> {
  let names = imported.get(target);
  if (names === undefined) imported.set(target, (names = new Set()));
  return names;
}

for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const own = new Map<string, boolean>();
  for (const statement of source.statements) {
    const modifiers = ts.canHaveModifiers(statement) ? (ts.getModifiers(statement) ?? []) : [];
    if (modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword)) {
      const isValue = !ts.isInterfaceDeclaration(statement) && !ts.isTypeAliasDeclaration(statement);
      if (ts.isVariableStatement(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          own.set(declaration.name.getText(source), true);
        }
      } else if ('name' in statement && statement.name !== undefined) {
        own.set((statement.name as ts.Identifier).text, isValue);
      }
    }
    if (!ts.isImportDeclaration(statement) && !ts.isExportDeclaration(statement)) continue;
    const specifier = statement.moduleSpecifier;
    if (specifier === undefined || !ts.isStringLiteral(specifier)) {
      if (
        ts.isExportDeclaration(statement) &&
        statement.exportClause &&
        ts.isNamedExports(statement.exportClause)
      ) {
        for (const element of statement.exportClause.elements)
          own.set(element.name.text, !element.isTypeOnly);
      }
      continue;
    }
    if (!specifier.text.startsWith('.')) continue;
    const target = resolve(dirname(file), specifier.text);
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      const bindings = clause?.namedBindings;
      if (clause?.name !== undefined) importedFrom(target).add('default');
      if (bindings !== undefined && ts.isNamespaceImport(bindings)) readWhole.add(target);
      else
        for (const element of bindings?.elements ?? [])
          importedFrom(target).add((element.propertyName ?? element.name).text);
    } else if (statement.exportClause === undefined) {
      readWhole.add(target);
    } else if (ts.isNamedExports(statement.exportClause)) {
      for (const element of statement.exportClause.elements) {
        importedFrom(target).add((element.propertyName ?? element.name).text);
        own.set(element.name.text, !element.isTypeOnly && !statement.isTypeOnly);
      }
    }
  }
  // Codegen's mappers name a type by `<file>.ts#<Name>` or `${<a variable holding the file>}#<Name>`.
  for (const match of text.matchAll(/(?:([\w-]+\.ts)|\$\{\w+\})#(\w+)/g)) byFileName.add(match[2]!);
  for (const match of text.matchAll(/import\('(\.[^']+)'\)/g))
    readWhole.add(resolve(dirname(file), match[1]!));
  exported.set(file, own);
}

let privateValues = 0;
let unusedAnywhere = 0;
for (const [file, names] of exported) {
  if (!file.startsWith(join(ROOT, 'src/')) || readWhole.has(file)) continue;
  const text = readFileSync(file, 'utf8');
  const reads = imported.get(file) ?? new Set();
  for (const [name, isValue] of names) {
    if (reads.has(name) || byFileName.has(name)) continue;
    const uses = text.match(new RegExp(`\\b${name}\\b`, 'g'))?.length ?? 0;
    if (uses <= 1) {
      unusedAnywhere += 1;
      console.log(`${relative(ROOT, file)}: ${name} (used nowhere)`);
    } else if (isValue) {
      privateValues += 1;
      console.log(`${relative(ROOT, file)}: ${name} (a value only its own file uses)`);
    }
  }
}
console.log(`used nowhere: ${unusedAnywhere}; values only their own file uses: ${privateValues}`);
process.exitCode = unusedAnywhere + privateValues === 0 ? 0 : 1;
