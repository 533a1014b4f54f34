import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, print, Source } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  composeSupergraph,
  loadRepositorySubgraphs,
  SupergraphCompositionError,
  type SubgraphSource,
} from '../../scripts/compose-supergraph.ts';

const run = promisify(execFile);

function withSupportNotesSdl(edit: (sdl: string) => string): SubgraphSource[] {
  const [facade, supportNotes] = loadRepositorySubgraphs();
  const sdl = print(supportNotes!.typeDefs as ReturnType<typeof parse>);
  return [
    facade!,
    {
      ...supportNotes!,
      typeDefs: parse(new Source(edit(sdl), 'examples/support-notes/schema.graphql')),
    },
  ];
}

describe('composing the supergraph', () => {
  test('composes the facade and the support-notes subgraph without errors or hints', () => {
    const { supergraphSdl, hints } = composeSupergraph(
      loadRepositorySubgraphs({
        facadeUrl: 'http://platform.test/graphql',
        supportNotesUrl: 'http://notes.test/graphql',
      }),
    );
    expect(hints).toEqual([]);
    expect(supergraphSdl).toContain(
      'PLATFORM @join__graph(name: "platform", url: "http://platform.test/graphql")',
    );
    expect(supergraphSdl).toContain(
      'SUPPORT_NOTES @join__graph(name: "support-notes", url: "http://notes.test/graphql")',
    );
    // Each entity keeps the facade's key, and the example's Account stub stays unresolvable there.
    expect(supergraphSdl).toMatch(/type Customer\s[^{]*@join__type\(graph: PLATFORM, key: "id"\)/);
    expect(supergraphSdl).toMatch(/type Customer\s[^{]*@join__type\(graph: SUPPORT_NOTES, key: "id"\)/);
    expect(supergraphSdl).toMatch(/type Account\s[^{]*@join__type\(graph: PLATFORM, key: "customerId id"\)/);
    expect(supergraphSdl).toMatch(
      /type Account\s[^{]*@join__type\(graph: SUPPORT_NOTES, key: "customerId id", resolvable: false\)/,
    );
  });

  test('reports every composition error with its code and the file and line of each location', () => {
    const broken = withSupportNotesSdl((sdl) =>
      sdl.replace(/(type Account[^{]*\{\s*customerId: )ID!/, '$1String!'),
    );
    let error: unknown;
    try {
      composeSupergraph(broken);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(SupergraphCompositionError);
    const { problems, message } = error as SupergraphCompositionError;
    expect(problems).toHaveLength(1);
    expect(problems[0]!.code).toBe('FIELD_TYPE_MISMATCH');
    expect(problems[0]!.message).toContain('"Account.customerId"');
    expect(problems[0]!.locations).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^schema\/graph\/accounts\.graphql:\d+:\d+$/),
        expect.stringMatching(/^examples\/support-notes\/schema\.graphql:\d+:\d+$/),
      ]),
    );
    expect(message).toMatch(/^The subgraphs do not compose \(1 error\):\n\[FIELD_TYPE_MISMATCH\] /);
    expect(message).toMatch(/\n {4}at examples\/support-notes\/schema\.graphql:\d+:\d+/);
  });

  test('refuses a field both subgraphs resolve without @shareable', () => {
    const clashing = withSupportNotesSdl((sdl) =>
      sdl.replace('openSupportNoteCount: Int!', 'openSupportNoteCount: Int!\n  displayName: String'),
    );
    expect(() => composeSupergraph(clashing)).toThrow(/\[INVALID_FIELD_SHARING\] .*"Customer.displayName"/);
  });

  describe('npm run supergraph', () => {
    let directory = '';
    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), 'supergraph-'));
    });
    afterAll(async () => {
      await rm(directory, { recursive: true, force: true });
    });

    test('writes the composed supergraph with the routing URLs it is given and exits 0', async () => {
      const out = join(directory, 'supergraph.graphql');
      const { stdout, stderr } = await run(process.execPath, [
        'scripts/compose-supergraph.ts',
        '--out',
        out,
        '--facade-url',
        'http://facade.internal:4000/graphql',
      ]);
      expect(stderr).toBe('');
      // A path outside the working directory is shown as given, not as ../../tmp/...
      expect(stdout).toContain(`Wrote the supergraph to ${out}\n`);
      const written = await readFile(out, 'utf8');
      const { supergraphSdl } = composeSupergraph(
        loadRepositorySubgraphs({ facadeUrl: 'http://facade.internal:4000/graphql' }),
      );
      expect(written).toBe(`${supergraphSdl}\n`);
      expect(written).toContain('url: "http://localhost:4001/graphql"');
    });
  });
});
