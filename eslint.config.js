// @ts-check
/**
 * The lint half of `npm run check`. Everything that runs (the service, the emulator, the dev
 * issuer, scripts, bench, examples, deploy files) gets typescript-eslint's `strictTypeChecked` and
 * `stylisticTypeChecked` sets, which read the types to find floating promises, conditions that can
 * never change, assertions that assert nothing and throws of non-errors. Tests keep the syntactic
 * `strict` set plus the type-aware rules that catch real test bugs: a promise neither awaited nor
 * returned lets a test pass before its assertion runs.
 *
 * `npm run lint` caches results in node_modules/.cache/eslint/ (a fresh clone, as in CI, lints
 * everything). The cache keys on each file's own content, while a type-aware finding may come from
 * a type declared in another file: after changing such a type, `npm run lint -- --no-cache`.
 */
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const typeCheckedFiles = [
  'src/**/*.ts',
  'emulator/**/*.ts',
  'dev-issuer/**/*.ts',
  'scripts/**/*.ts',
  'bench/**/*.ts',
  'examples/**/*.ts',
  'examples/**/*.tsx',
  'explorer/**/*.ts',
  'explorer/**/*.tsx',
  'deploy/**/*.ts',
  '*.ts',
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'src/generated/**',
      'examples/web/src/gql/**',
      'examples/web/dist/**',
      'explorer/dist/**',
      'coverage/**',
      'bench/results/**',
      'test-results/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
  },
  {
    files: typeCheckedFiles,
    extends: [tseslint.configs.strictTypeChecked, tseslint.configs.stylisticTypeChecked],
    rules: {
      // Numbers (ports, counts, indexes, limits) read well in messages; other non-strings must say
      // how they print. The rule's own defaults allow more, so every option is spelled out.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        {
          allowNumber: true,
          allowAny: false,
          allowBoolean: false,
          allowNullish: false,
          allowRegExp: false,
          allowNever: false,
        },
      ],
      // `() => server.close()` passes a callback's result on where it is ignored anyway; the rule
      // still catches a void result used as a value or returned from a block.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // Brackets mark a read of an open record (parsed JSON, process.env, token claims) whose key
      // may be absent; dots stay required for declared properties.
      '@typescript-eslint/dot-notation': ['error', { allowIndexSignaturePropertyAccess: true }],
      // Both `interface` and `type` object shapes are in use; rewriting one into the other catches no bug.
      '@typescript-eslint/consistent-type-definitions': 'off',
      // `async` without `await` implements promise-returning contracts (Apollo plugin hooks, the
      // dedup and limiter interfaces, oidc-provider's adapter) and turns a throw into a rejection;
      // dropping it would change what callers see.
      '@typescript-eslint/require-await': 'off',
    },
  },
  // The folders of src/ point one way (test/unit/folder-directions.test.ts measures it): each
  // layer below reads no code of a layer above it. Type-only imports carry no value and stay allowed.
  // Only graph/ reads values of events/ (the top-level composition files, app.ts and the like,
  // compose everything): another folder is given what it needs of the pipeline, as the live
  // transports are given `execute`. The entries below repeat `events` where they apply, as a later
  // entry's options replace this one's.
  {
    files: ['src/*/**/*.ts'],
    ignores: ['src/graph/**', 'src/events/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+events/',
              allowTypeImports: true,
              message:
                'Only src/graph/ (and the composition files in src/) read values of src/events/: pass it in, or move what both need to a neutral module.',
            },
          ],
        },
      ],
    },
  },
  ...[
    { folder: 'events', above: ['graph', 'edge', 'http'] },
    { folder: 'errors', above: ['graph', 'events', 'edge', 'http', 'loaders'] },
    { folder: 'loaders', above: ['graph', 'events', 'edge', 'http'] },
    { folder: 'upstream', above: ['graph', 'events', 'edge', 'http', 'loaders', 'errors'] },
  ].map(({ folder, above }) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^(\\.\\./)+(${above.join('|')})/`,
              allowTypeImports: true,
              message: `src/${folder}/ is below ${above.join(', ')}: move what both need down, or pass it in.`,
            },
          ],
        },
      ],
    },
  })),
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    rules: {
      'no-console': 'off',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
