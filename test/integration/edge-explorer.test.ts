/**
 * The GraphiQL explorer's routes (EXPLORER=graphiql) over real HTTP, without a browser: the page goes to a
 * browser opening `/graphql` and to nobody else, its files are plain files of the build and nothing
 * beside them, and a facade without a build refuses to start, naming the command. (The page itself
 * runs in Chromium in test/browser/explorer.test.ts.)
 */
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createExplorerRoutes,
  EXPLORER_CONTENT_SECURITY_POLICY,
  ExplorerNotBuiltError,
  prepareExplorer,
} from '../../src/http/explorer.ts';

/** Minutes on a loaded machine: Monaco and GraphiQL are a few megabytes to bundle. */
const BUILD_TIMEOUT_MS = 240_000;

/** What loading the builder meets in a production install: no esbuild, no explorer/. */
const noBuilder = (): Promise<never> =>
  Promise.reject(Object.assign(new Error('Cannot find package esbuild'), { code: 'ERR_MODULE_NOT_FOUND' }));

describe('prepareExplorer: EXPLORER=graphiql needs no step first', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'explorer-prepare-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test(
    'a missing build is built with esbuild, then served as it is until its sources change',
    async () => {
      const directory = path.join(dir, 'fresh-clone', 'dist');
      expect(await prepareExplorer({ directory })).toBe('built');
      for (const file of ['graphiql.js', 'graphiql.css', 'editor.worker.js', 'graphql.worker.js'])
        expect((await stat(path.join(directory, file))).size, file).toBeGreaterThan(1000);
      // Nothing left beside it from the staging.
      expect(await readdir(path.dirname(directory))).toEqual(['dist']);
      expect(await prepareExplorer({ directory })).toBe('ready');
    },
    BUILD_TIMEOUT_MS,
  );

  test('a build older than a source is made again; without a builder, an old build is kept', async () => {
    const directory = path.join(dir, 'stale', 'dist');
    await mkdir(directory, { recursive: true });
    await writeFile(path.join(directory, 'graphiql.js'), '/* old */\n');
    const source = path.join(dir, 'main.tsx');
    await writeFile(source, '// changed since\n');
    await utimes(path.join(directory, 'graphiql.js'), new Date(2000, 0, 1), new Date(2000, 0, 1));
    const builds: string[] = [];
    const builder = async (outdir: string) => {
      builds.push(outdir);
      await mkdir(outdir, { recursive: true });
      await writeFile(path.join(outdir, 'graphiql.js'), '/* new */\n');
    };
    // A production install cannot rebuild: the build it carries is served.
    expect(await prepareExplorer({ directory, sources: [source], loadBuilder: noBuilder })).toBe('ready');
    expect(await readFile(path.join(directory, 'graphiql.js'), 'utf8')).toBe('/* old */\n');

    expect(
      await prepareExplorer({ directory, sources: [source], loadBuilder: () => Promise.resolve(builder) }),
    ).toBe('built');
    expect(builds).toEqual([`${directory}.building-${process.pid}`]);
    expect(await readFile(path.join(directory, 'graphiql.js'), 'utf8')).toBe('/* new */\n');
    expect(
      await prepareExplorer({ directory, sources: [source], loadBuilder: () => Promise.resolve(builder) }),
    ).toBe('ready');
    expect(builds).toHaveLength(1);
  });

  test('no build and no builder (a production install without explorer/dist/) is refused, saying what to ship', async () => {
    const directory = path.join(dir, 'none', 'dist');
    await expect(prepareExplorer({ directory, loadBuilder: noBuilder })).rejects.toThrow(
      ExplorerNotBuiltError,
    );
    await expect(prepareExplorer({ directory, loadBuilder: noBuilder })).rejects.toThrow(
      /ship explorer\/dist\//,
    );
  });
});

describe('createExplorerRoutes', () => {
  let empty: string;
  beforeAll(async () => {
    empty = await mkdtemp(path.join(os.tmpdir(), 'no-explorer-'));
  });
  afterAll(async () => {
    await rm(empty, { recursive: true, force: true });
  });

  test('EXPLORER=graphiql without a build is refused, naming the command', () => {
    expect(() => createExplorerRoutes('graphiql', empty)).toThrow(ExplorerNotBuiltError);
    expect(() => createExplorerRoutes('graphiql', empty)).toThrow(/`npm run build:explorer`/);
  });

  test('the other modes need no build and route nothing', () => {
    expect(createExplorerRoutes('sandbox', empty).stack).toHaveLength(0);
    expect(createExplorerRoutes('off', empty).stack).toHaveLength(0);
  });
});

describe('EXPLORER=graphiql over HTTP', () => {
  // The routes over a build of their own (a stand-in file), and a stand-in for the API behind them.
  let build: string;
  let server: http.Server;
  let base: string;
  let apiRequests = 0;
  beforeAll(async () => {
    build = await mkdtemp(path.join(os.tmpdir(), 'explorer-build-'));
    await writeFile(path.join(build, 'graphiql.js'), '/* stand-in build */\n');
    await writeFile(path.join(build, '.env'), 'SECRET=1\n');
    await writeFile(path.join(path.dirname(build), 'beside-the-build.txt'), 'outside\n');
    const app = express();
    app.use(createExplorerRoutes('graphiql', build));
    app.all('/graphql', (_req, res) => {
      apiRequests += 1;
      res.json({ api: true });
    });
    server = http.createServer(app);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(build, { recursive: true, force: true });
    await rm(path.join(path.dirname(build), 'beside-the-build.txt'), { force: true });
  });

  test('a browser opening /graphql gets the page, under its policy, with nothing from elsewhere', async () => {
    const response = await fetch(`${base}/graphql`, {
      headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(response.headers.get('content-security-policy')).toBe(EXPLORER_CONTENT_SECURITY_POLICY);
    expect(EXPLORER_CONTENT_SECURITY_POLICY).toContain("frame-ancestors 'none'");
    expect(EXPLORER_CONTENT_SECURITY_POLICY).toContain("connect-src 'self'");
    const html = await response.text();
    expect(html).toContain('<script type="module" src="explorer/graphiql.js"></script>');
    expect(html).not.toMatch(/https?:\/\//);
    expect(apiRequests).toBe(0);
  });

  test('a GET naming an operation, a client preferring JSON, and every POST reach the API instead', async () => {
    apiRequests = 0;
    const requests = [
      fetch(`${base}/graphql?query=${encodeURIComponent('{ __typename }')}`, {
        headers: { accept: 'text/html' },
      }),
      fetch(`${base}/graphql?extensions=%7B%7D`, { headers: { accept: 'text/html' } }),
      fetch(`${base}/graphql`, { headers: { accept: '*/*' } }),
      fetch(`${base}/graphql`, { headers: { accept: 'application/json, text/html' } }),
      fetch(`${base}/graphql`, { method: 'POST', headers: { accept: 'text/html' } }),
    ];
    for (const response of await Promise.all(requests)) expect(await response.json()).toEqual({ api: true });
    expect(apiRequests).toBe(5);
  });

  test('its files are the build and nothing beside it', async () => {
    const script = await fetch(`${base}/explorer/graphiql.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(script.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await script.text()).toBe('/* stand-in build */\n');
    for (const probe of [
      '/explorer/',
      '/explorer/.env',
      '/explorer/..%2fbeside-the-build.txt',
      '/explorer/%2e%2e/beside-the-build.txt',
      '/explorer/missing.js',
    ]) {
      const response = await fetch(`${base}${probe}`);
      // Not found, or refused by express.static as malicious: never a file from outside the build.
      expect([403, 404], probe).toContain(response.status);
      expect(await response.text()).not.toMatch(/outside|SECRET/);
    }
  });
});
