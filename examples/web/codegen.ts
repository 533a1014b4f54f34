/**
 * Types the example web app's operations (`src/operations/*.graphql`) with graphql-codegen's client
 * preset, and writes the persisted-document manifest (`src/gql/persisted-documents.json`) that the
 * facade's `TRUSTED_DOCUMENTS` loads. `__typename` is added to every selection first, as Apollo
 * Client's cache adds it, so the listed bodies are the documents the app runs.
 * Run `npm run codegen:web`; `npm run codegen:check` fails when the output drifts.
 */
import type { CodegenConfig } from '@graphql-codegen/cli';
import { addTypenameSelectionDocumentTransform } from '@graphql-codegen/client-preset';

const config: CodegenConfig = {
  overwrite: true,
  schema: 'schema/graph/*.graphql',
  documents: 'examples/web/src/operations/*.graphql',
  generates: {
    'examples/web/src/gql/': {
      preset: 'client',
      presetConfig: {
        // Documents are used as values (`DashboardDocument`), not through the `graphql()` tag.
        fragmentMasking: false,
        persistedDocuments: { hashAlgorithm: 'sha256' },
      },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { DateTime: 'string', Decimal: 'string' },
      },
      documentTransforms: [addTypenameSelectionDocumentTransform],
    },
  },
};

export default config;
