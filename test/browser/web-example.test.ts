/**
 * The example web app (examples/web/) in a real headless Chromium, against a real facade, emulator
 * and OpenID provider: a demo user signs in (authorization code with PKCE, the issuer's login page),
 * the dashboard renders, pages through accounts, a top-up updates the cached balance and the live
 * total (a `@live` query the facade answers again, reading the customer and its accounts once), a
 * change made elsewhere arrives live in both, and the user signs out. The facade runs with the app's own
 * trusted-documents manifest. The same page served from an origin missing from CORS_ORIGINS is
 * refused, and says which origin and which setting. The page is screenshot at desktop and phone
 * (390 px) width into test-results/browser/, and at 390 px nothing overflows sideways.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { buildWebExample } from '../../examples/web/build.ts';
import { startWebServer, type WebConfig, type WebServer } from '../../examples/web/serve.ts';
import { describeInBrowser, textOf, useBrowser, waitForText } from '../support/harness/browser.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { devIssuerEnv, startDevIssuer, type DevIssuer } from '../support/issuer.ts';

const MANIFEST = path.resolve('examples/web/src/gql/persisted-documents.json');

/** Where the screenshots go (git ignores it), to look at after a run. */
const SCREENSHOTS = path.resolve('test-results/browser');

/** A phone's width in CSS pixels (not `isMobile`: changing that reloads the page, and the token is in memory). */
const PHONE = { width: 390, height: 844, deviceScaleFactor: 2 };
const DESKTOP = { width: 1280, height: 800 };

/** How far the page, and its accounts table, are wider than what shows of them (0: nothing hidden). */
async function overflow(page: Page): Promise<{ document: number; table: number }> {
  return page.evaluate(() => {
    const table = document.querySelector<HTMLElement>('[data-testid="accounts"]');
    const root = document.documentElement;
    return {
      document: root.scrollWidth - root.clientWidth,
      table: table === null ? 0 : table.scrollWidth - table.clientWidth,
    };
  });
}

/** The page's headings of the first level: one, "Platform dashboard". */
const headings = (page: Page) =>
  page.$$eval('h1', (elements) => elements.map((element) => element.textContent));

describeInBrowser('the example web app in Chromium', () => {
  const browser = useBrowser();
  const secret = generateWebhookSecret();
  let built: string;
  let web: WebServer;
  let issuer: DevIssuer;
  let stack: Stack;
  let config: WebConfig | undefined;
  /** The app from the allowed origin, and the same server under another name (another origin). */
  let allowedOrigin: string;
  let otherOrigin: string;

  beforeAll(async () => {
    built = await mkdtemp(path.join(os.tmpdir(), 'web-example-'));
    await buildWebExample(built);
    web = await startWebServer({
      root: built,
      config: () => {
        if (config === undefined) throw new Error('the stack has not started yet');
        return config;
      },
    });
    allowedOrigin = `http://127.0.0.1:${web.port}`;
    otherOrigin = `http://localhost:${web.port}`;
    // The app's public client may come back to either origin; only the first may call the facade.
    issuer = await startDevIssuer({
      webClients: [{ clientId: 'demo-web', redirectUris: [`${allowedOrigin}/`, `${otherOrigin}/`] }],
    });
    stack = await startStack({
      env: {
        ...devIssuerEnv(issuer),
        CORS_ORIGINS: allowedOrigin,
        TRUSTED_DOCUMENTS: MANIFEST,
        WEBHOOK_SECRETS: secret,
        // As deployed: the live total is a live query, which follows the response cache.
        CACHE_ENABLED: 'true',
      },
    });
    config = {
      graphqlUrl: stack.graphqlUrl,
      issuer: issuer.issuer,
      clientId: 'demo-web',
      resource: issuer.resource,
    };
  });

  afterAll(async () => {
    await stack?.close();
    await issuer?.close();
    await web?.close();
    if (built !== undefined) await rm(built, { recursive: true, force: true });
  });

  /** Opens the app at `origin` and signs in as acme on the issuer's login page. */
  async function signIn(page: Page, origin: string): Promise<void> {
    await page.goto(`${origin}/`);
    await (await page.waitForSelector('[data-testid="sign-in"]'))!.click();
    // The issuer's own login page, on the issuer's origin.
    await page.waitForSelector('input[name="username"]');
    expect(new URL(page.url()).origin).toBe(issuer.issuer);
    await page.type('input[name="username"]', 'acme');
    await page.type('input[name="password"]', 'acme-demo-password');
    await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  }

  test('signs in, renders the dashboard, pages, tops up into the cached balance, and hears a change live', async () => {
    const page = await browser.newPage();
    // What the app's requests to the facade carry: Apollo Client's own headers need CORS to allow them.
    const sent: Record<string, string>[] = [];
    page.on('request', (request) => {
      if (request.url() === stack.graphqlUrl && request.method() === 'POST') sent.push(request.headers());
    });
    await signIn(page, allowedOrigin);

    // Back on the app, the code gone from the address bar; the dashboard of acme's own customer.
    await waitForText(page, '[data-testid="customer-name"]', 'Acme Robotics Ltd');
    expect(page.url()).toBe(`${allowedOrigin}/`);
    expect(await headings(page)).toEqual(['Platform dashboard']);
    expect(await textOf(page, '[data-testid="user"]')).toBe('acme');
    // Money as the reader's locale writes it, from the decimal string (USDC is no ISO currency).
    const locale = await page.evaluate(() => navigator.language);
    const money = (amount: number) =>
      `${new Intl.NumberFormat(locale, { minimumFractionDigits: 2 }).format(amount)} USDC`;
    expect(await textOf(page, '[data-testid="account-acc_acme_eth"] [data-testid="available"]')).toBe(
      money(12_500),
    );
    // The live query's first answer: every account's available USDC (12,500 + 0).
    await waitForText(page, '[data-testid="live-balance"]', money(12_500));
    const rows = () => page.$$eval('tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-testid')));
    expect(await rows()).toEqual(['account-acc_acme_eth', 'account-acc_acme_polygon']);
    expect(sent[0]).toMatchObject({
      'apollographql-client-name': 'platform-web-example',
      'apollographql-client-version': '1.0.0',
    });
    expect(sent[0]!['authorization']).toMatch(/^Bearer ey/);

    // The next page merges below the first (relayStylePagination), and no page follows it.
    await page.click('[data-testid="more-accounts"]');
    await page.waitForSelector('[data-testid="account-acc_acme_bank"]');
    expect(await rows()).toEqual([
      'account-acc_acme_eth',
      'account-acc_acme_polygon',
      'account-acc_acme_bank',
    ]);
    expect(await page.$('[data-testid="more-accounts"]')).toBeNull();

    // A top-up: its payload's account replaces the cached one, so the row shows the new balance.
    const eth = '[data-testid="account-acc_acme_eth"]';
    const before = await textOf(page, `${eth} [data-testid="available"]`);
    const amount = Number(before.replace(/[^\d.]/g, ''));
    const currency = before.split(' ').at(-1);
    expect(currency).toBe('USDC');
    const expected = money(amount + 25);
    await stack.resetUpstreamCalls();
    await page.click(`${eth} [data-testid="top-up"]`);
    await waitForText(page, `${eth} [data-testid="available"]`, expected);
    // The live total reads the same cached account, so it shows the new balance at once; the write
    // also made its answers stale, and the facade answers it again (into the same cache).
    await waitForText(page, '[data-testid="live-balance"]', expected);
    // One write upstream and the account read back: nothing refetched the dashboard's list; the
    // live total, answered again, read the customer and its accounts once.
    let calls = await stack.upstreamCalls();
    await waitFor(
      () =>
        calls.byRoute['GET /v3/customers/{customerId}'] !== undefined &&
        calls.byRoute['GET /v3/customers/{customerId}/accounts'] !== undefined,
      "the live total's new answer",
      undefined,
      async () => {
        calls = await stack.upstreamCalls();
      },
    );
    expect(calls.byRoute).toEqual({
      'POST /v3/sandbox/accounts/{accountId}/topup': 1,
      'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/accounts': 1,
    });

    // A change made elsewhere (the operator tops up the same wallet through another client)
    // reaches the page over graphql-ws; the event's account lands in the cache and in the row.
    await stack.subscriptionsStarted(1);
    const topUp = await stack.query(
      `mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", amount: "7.00", currency: "${currency}", idempotencyKey: "browser-live-${Date.now()}" }) { topUp { id } } }`,
      undefined,
      { authorization: `Bearer ${await issuer.token('demo-operator')}` },
    );
    expect(topUp.body.errors).toBeUndefined();
    const event = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    const live = money(amount + 25 + 7);
    await waitForText(page, `${eth} [data-testid="available"]`, live);
    await waitForText(page, '[data-testid="live-balance"]', live);
    const item = `[data-testid="live-events"] li[data-event-id="${event.id}"]`;
    expect(await textOf(page, `${item} [data-testid="event-text"]`)).toBe(
      `account.updated acc_acme_eth: ${live}`,
    );
    // The event's time, as the reader's locale writes it.
    const occurredAt = await page.$eval(`${item} time`, (time) => time.getAttribute('datetime'));
    expect(await textOf(page, `${item} time`)).toBe(
      new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short' }).format(
        new Date(occurredAt!),
      ),
    );

    // As a team would show it: at desktop width, and on a phone, where nothing overflows sideways.
    await mkdir(SCREENSHOTS, { recursive: true });
    await page.setViewport(DESKTOP);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'web-example-desktop.png'), fullPage: true });
    expect(await overflow(page)).toEqual({ document: 0, table: 0 });
    await page.setViewport(PHONE);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'web-example-phone.png'), fullPage: true });
    expect(await overflow(page)).toEqual({ document: 0, table: 0 });
    expect(await rows()).toHaveLength(3);

    // Signing out forgets the token: the dashboard and the user go.
    await page.click('[data-testid="sign-out"]');
    await page.waitForSelector('[data-testid="signed-out"]');
    expect(await page.$('[data-testid="user"]')).toBeNull();
    expect(await page.$('[data-testid="customer-name"]')).toBeNull();
    expect(await page.$('[data-testid="sign-in"]')).not.toBeNull();
  });

  test('the same page served from an origin not in CORS_ORIGINS signs in but is refused by the facade', async () => {
    const page = await browser.newPage();
    const refusedPreflights: number[] = [];
    page.on('response', (response) => {
      if (response.url().startsWith(stack.graphqlUrl) && response.request().method() === 'OPTIONS')
        refusedPreflights.push(response.status());
    });
    await signIn(page, otherOrigin);

    // The browser withholds the facade's answer: the page says why, never shows the data.
    await waitForText(page, '[data-testid="problem"]', 'CORS_ORIGINS');
    expect(await page.$('[data-testid="customer-name"]')).toBeNull();
    expect(refusedPreflights).toContain(403);
    const problem = await textOf(page, '[data-testid="problem"]');
    expect(problem).toContain(`refuses this page's origin, ${otherOrigin}`);
    expect(problem).toContain(`CORS_ORIGINS=${otherOrigin}`);
    expect(problem).toContain(new URL(stack.graphqlUrl).origin);
    expect(problem).not.toContain('Failed to fetch');
    expect(await headings(page)).toEqual(['Platform dashboard']);
    expect(await textOf(page, '[data-testid="user"]')).toBe('acme');
    await mkdir(SCREENSHOTS, { recursive: true });
    await page.setViewport(PHONE);
    await page.screenshot({
      path: path.join(SCREENSHOTS, 'web-example-refused-origin-phone.png'),
      fullPage: true,
    });
    expect(await overflow(page)).toEqual({ document: 0, table: 0 });
  });

  test('a facade that is down is named as unreachable, not as refusing the origin', async () => {
    // A port nothing listens on: the one a server had a moment ago.
    const closed = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const live = config!;
    config = { ...live, graphqlUrl: `http://127.0.0.1:${closed}/graphql` };
    try {
      const page = await browser.newPage();
      await signIn(page, allowedOrigin);
      await waitForText(page, '[data-testid="problem"]', 'cannot be reached');
      const problem = await textOf(page, '[data-testid="problem"]');
      expect(problem).toBe(
        `The facade at http://127.0.0.1:${closed} cannot be reached. Is it running (npm start)?`,
      );
      expect(await textOf(page, '[data-testid="user"]')).toBe('acme');
    } finally {
      config = live;
    }
  });
});
