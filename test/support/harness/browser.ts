/**
 * A real browser for the tests: the machine's headless Chromium (Debian's `chromium`, installed by
 * scripts/test.sh) driven by puppeteer-core, with a fresh profile per launch and none of Chromium's
 * own background connections (they fail on a closed network and would only add noise). A page that
 * fails its test leaves a screenshot under `test-results/browser/` (git ignores it).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, onTestFailed } from 'vitest';

/** Where Chromium is looked for, in order; `CHROMIUM_PATH` first when set. */
const CHROMIUM_CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The Chromium executable to drive, or undefined when none is installed (the browser tests skip). */
export function findChromium(): string | undefined {
  const configured = process.env['CHROMIUM_PATH'];
  if (configured !== undefined && configured !== '') return existsSync(configured) ? configured : undefined;
  return CHROMIUM_CANDIDATES.find((candidate) => existsSync(candidate));
}

/** Why the browser tests are skipped, or undefined when they run. */
export function browserSkipReason(): string | undefined {
  return findChromium() === undefined
    ? `skipped: no Chromium at ${process.env['CHROMIUM_PATH'] ?? CHROMIUM_CANDIDATES.join(', ')} ` +
        "(scripts/test.sh installs Debian's chromium; or set CHROMIUM_PATH)"
    : undefined;
}

/** Chromium's switches for a closed network: headless, no sandbox (root in CI), no background traffic. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** How long one step (a navigation, an element to appear) may take before the test fails. */
const STEP_TIMEOUT_MS = 15_000;

/** Time for a browser test: launching Chromium and a sign-in on a loaded machine take seconds. */
export const BROWSER_TEST_TIMEOUT_MS = 60_000;

/**
 * A `describe` of browser tests, with the browser test timeout; skipped, saying why in its name and
 * on the console (where it shows in every reporter), when no Chromium is installed.
 */
export function describeInBrowser(name: string, body: () => void): void {
  const skip = browserSkipReason();
  if (skip !== undefined) console.log(`Browser tests ${skip}`);
  describe.skipIf(skip !== undefined)(
    `${name}${skip ? ` (${skip})` : ''}`,
    { timeout: BROWSER_TEST_TIMEOUT_MS },
    body,
  );
}

export interface TestBrowser {
  /** A new page in a context of its own (no cookies or storage shared with other pages). */
  newPage(): Promise<Page>;
}

/**
 * Launches Chromium for the enclosing `describe` (closed, with its profile, in `afterAll`). Every
 * page it opens is screenshot to `test-results/browser/<test name>.png`, beside what the page logged and the
 * requests that failed (`<test name>.log`), when its test fails.
 */
export function useBrowser(): TestBrowser {
  let browser: Browser | undefined;
  let profile: string | undefined;
  beforeAll(async () => {
    const executablePath = findChromium();
    if (executablePath === undefined) throw new Error(browserSkipReason());
    profile = await mkdtemp(path.join(os.tmpdir(), 'facade-chromium-'));
    browser = await puppeteer.launch({
      executablePath,
      headless: true,
      userDataDir: profile,
      args: [...CHROMIUM_ARGS, `--user-data-dir=${profile}`],
    });
  });
  afterAll(async () => {
    await browser?.close();
    if (profile !== undefined) await rm(profile, { recursive: true, force: true });
  });
  return {
    async newPage() {
      if (browser === undefined) throw new Error('useBrowser: the browser is used before beforeAll ran');
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      // Wide enough that editors and tables do not wrap what a test reads.
      await page.setViewport({ width: 1600, height: 1000 });
      // A step that cannot happen fails well inside the test's own time, with the step named.
      page.setDefaultTimeout(STEP_TIMEOUT_MS);
      // What the page said, for the failure report: its errors and failed requests.
      const pageLog: string[] = [];
      page.on('pageerror', (error) =>
        pageLog.push(`page error: ${error instanceof Error ? error.message : String(error)}`),
      );
      page.on('console', (message) => pageLog.push(`console.${message.type()}: ${message.text()}`));
      page.on('requestfailed', (request) =>
        pageLog.push(
          `request failed: ${request.method()} ${request.url()} ${request.failure()?.errorText ?? ''}`,
        ),
      );
      onTestFailed(async ({ task }) => {
        const folder = path.resolve('test-results/browser');
        await mkdir(folder, { recursive: true });
        const name = task.name.replace(/[^a-z0-9]+/gi, '-').slice(0, 80);
        await page
          .screenshot({ path: path.join(folder, `${name}.png`), fullPage: true })
          .catch(() => undefined);
        await writeFile(path.join(folder, `${name}.log`), `${page.url()}\n${pageLog.join('\n')}\n`);
      });
      return page;
    },
  };
}

/** The text of the first element matching `selector`, once it exists (trimmed). */
export async function textOf(page: Page, selector: string): Promise<string> {
  const element = await page.waitForSelector(selector);
  return ((await element!.evaluate((node) => node.textContent)) ?? '').replace(/\u00a0/g, ' ').trim();
}

/** Resolves once the element matching `selector` shows `expected` (a string it contains, or a pattern). */
export async function waitForText(page: Page, selector: string, expected: string | RegExp): Promise<void> {
  await page.waitForFunction(
    (css: string, source: string, flags: string | null) => {
      // Editors (Monaco) render spaces as no-break spaces.
      const text = (document.querySelector(css)?.textContent ?? '').replace(/\u00a0/g, ' ');
      return flags === null ? text.includes(source) : new RegExp(source, flags).test(text);
    },
    {},
    selector,
    typeof expected === 'string' ? expected : expected.source,
    typeof expected === 'string' ? null : expected.flags,
  );
}
