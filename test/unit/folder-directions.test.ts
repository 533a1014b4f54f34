/**
 * The folders of `src/` point one way: no two folders import each other's code (type-only imports
 * carry no value and are left out). A pair that imports both ways is one change that has to be
 * made in two places at once; the test names every import of such a pair. The rules that keep the
 * layers in order as they are written (events/ never reads graph/, errors/ reads neither graph/ nor
 * events/, upstream/ reads none of the layers above it, and no folder but graph/ reads values of
 * events/) are eslint's `no-restricted-imports`, per folder, in eslint.config.js. Within and across
 * folders, no file reaches itself through its imports, type-only ones included.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((item) => {
    const path = join(directory, item.name);
    if (item.isDirectory()) return item.name === 'generated' ? [] : sourceFiles(path);
    return item.name.endsWith('.ts') ? [path] : [];
  });
}

/** The folder of `src/` a file belongs to; a file directly in `src/` is a folder of its own. */
function folderOf(file: string): string {
  const [first = ''] = relative(SRC, file).split('/');
  return first.replace(/\.ts$/, '');
}

/** Whether an import or re-export brings a value (not only types) into the module. */
function carriesValue(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isImportDeclaration(node)) {
    const clause = node.importClause;
    if (clause === undefined) return true;
    if (clause.isTypeOnly) return false;
    if (clause.name !== undefined) return true;
    const bindings = clause.namedBindings;
    if (bindings === undefined || ts.isNamespaceImport(bindings)) return true;
    return bindings.elements.length === 0 || bindings.elements.some((element) => !element.isTypeOnly);
  }
  if (node.isTypeOnly) return false;
  const clause = node.exportClause;
  if (clause === undefined || !ts.isNamedExports(clause)) return true;
  return clause.elements.some((element) => !element.isTypeOnly);
}

/** Every relative import of each file of `src/` (`generated/` aside): the file it names, and whether it brings a value. */
function fileImports(): Map<string, { target: string; value: boolean }[]> {
  const imports = new Map<string, { target: string; value: boolean }[]>();
  for (const file of sourceFiles(SRC)) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
    const named: { target: string; value: boolean }[] = [];
    for (const statement of source.statements) {
      if (!ts.isImportDeclaration(statement) && !ts.isExportDeclaration(statement)) continue;
      const specifier = statement.moduleSpecifier;
      if (specifier === undefined || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.'))
        continue;
      named.push({ target: resolve(dirname(file), specifier.text), value: carriesValue(statement) });
    }
    imports.set(file, named);
  }
  return imports;
}

/** Every value import between two folders: `from -> to` with the files that make it. */
function folderImports(): Map<string, string[]> {
  const edges = new Map<string, string[]>();
  for (const [file, named] of fileImports()) {
    for (const { target, value } of named) {
      const [from, to] = [folderOf(file), folderOf(target)];
      if (!value || !target.startsWith(SRC) || from === to) continue;
      const key = `${from} -> ${to}`;
      edges.set(key, [...(edges.get(key) ?? []), `${relative(SRC, file)} -> ${relative(SRC, target)}`]);
    }
  }
  return edges;
}

it('no two folders of src/ import values from each other', () => {
  const edges = folderImports();
  const twoWay: string[] = [];
  for (const [key, files] of edges) {
    const [from = '', to = ''] = key.split(' -> ');
    const back = edges.get(`${to} -> ${from}`);
    if (from < to && back !== undefined) twoWay.push(`${from} <-> ${to}: ${[...files, ...back].join(', ')}`);
  }
  expect(twoWay).toEqual([]);
});

it('sees the imports it judges: graph/ reads events/, and events/ does not read graph/', () => {
  const edges = folderImports();
  expect(edges.get('graph -> events')).toBeDefined();
  expect(edges.get('events -> graph')).toBeUndefined();
  expect(edges.get('errors -> graph')).toBeUndefined();
  expect(edges.get('errors -> events')).toBeUndefined();
});

it('among the folders of src/, only graph/ imports values from events/', () => {
  // A file directly in src/ (app.ts, environments.ts, config.ts ...) composes the folders and is
  // not judged here.
  const folders = new Set(
    readdirSync(SRC, { withFileTypes: true })
      .filter((item) => item.isDirectory())
      .map((item) => item.name),
  );
  const readers = [...folderImports()]
    .filter(([key]) => key.endsWith(' -> events'))
    .filter(([key]) => {
      const [from = ''] = key.split(' -> ');
      return from !== 'graph' && folders.has(from);
    })
    .flatMap(([, files]) => files);
  expect(readers).toEqual([]);
});

it('no file of src/ reaches itself through its imports, type-only imports included', () => {
  // A circle of types alone still ties its files into one unit that no part can be read without.
  const imports = fileImports();
  const circles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const visit = (file: string, path: readonly string[]): void => {
    state.set(file, 'open');
    for (const { target } of imports.get(file) ?? []) {
      if (state.get(target) === 'open') {
        circles.push([...path.slice(path.indexOf(target)), target].map((f) => relative(SRC, f)).join(' -> '));
      } else if (!state.has(target) && imports.has(target)) visit(target, [...path, target]);
    }
    state.set(file, 'done');
  };
  for (const file of imports.keys()) if (!state.has(file)) visit(file, [file]);
  expect(circles).toEqual([]);
});
