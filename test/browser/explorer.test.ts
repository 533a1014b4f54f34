/**
 * The self-hosted explorer (EXPLORER=graphiql) in a real headless Chromium: GraphiQL loads from the
 * facade alone (every request to anywhere else is refused by the test and must not be needed), runs a
 * query with the user's token from its Headers tab, and receives a subscription event over
 * graphql-ws. Its page keeps a strict Content-Security-Policy and is never framed.
 */
import type { HTTPRequest, Page } from 'puppeteer-core';
import { beforeAll, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { EXPLORER_CONTENT_SECURITY_POLICY, prepareExplorer } from '../../src/http/explorer.ts';
import { describeInBrowser, textOf, useBrowser, waitForText } from '../support/harness/browser.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

const secret = generateWebhookSecret();

/** Minutes on a loaded machine: Monaco and GraphiQL are a few megabytes to bundle. */
const BUILD_TIMEOUT_MS = 180_000;

describeInBrowser('the GraphiQL explorer in Chromium', () => {
  // What the facade does at start (src/app.ts), done first so the stack starts within its budget.
  beforeAll(() => prepareExplorer(), BUILD_TIMEOUT_MS);
  const stack = useStack({ env: { EXPLORER: 'graphiql', WEBHOOK_SECRETS: secret } });
  const browser = useBrowser();

  /** Opens the explorer with every request off the facade's origin refused; returns those refused. */
  async function openOffline(page: Page): Promise<string[]> {
    const elsewhere: string[] = [];
    const origin = new URL(stack.facadeUrl).origin;
    await page.setRequestInterception(true);
    page.on('request', (request: HTTPRequest) => {
      const url = request.url();
      if (url.startsWith(`${origin}/`) || url.startsWith('data:') || url.startsWith('blob:')) {
        void request.continue();
      } else {
        elsewhere.push(url);
        void request.abort('internetdisconnected');
      }
    });
    const response = await page.goto(stack.graphqlUrl);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toBe(EXPLORER_CONTENT_SECURITY_POLICY);
    await page.waitForSelector('.graphiql-container .monaco-editor');
    return elsewhere;
  }

  /** Replaces the text of the visible Monaco editor inside `container` (typed as one input, as a paste is). */
  async function setEditor(page: Page, container: string, text: string): Promise<void> {
    const focused = await page.evaluate((css: string) => {
      const input = [
        ...document.querySelectorAll<HTMLTextAreaElement>(`${css} .monaco-editor textarea`),
      ].find((candidate) => candidate.closest<HTMLElement>('.monaco-editor')!.offsetParent !== null);
      input?.focus();
      return input !== undefined;
    }, container);
    expect(focused, `an editor in ${container}`).toBe(true);
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyA');
    await page.keyboard.up('Control');
    await page.keyboard.press('Backspace');
    await page.keyboard.sendCharacter(text);
  }

  /** Runs the query editor's operation once GraphiQL has read its name (the active tab shows it). */
  async function run(page: Page, operationName: string): Promise<void> {
    await waitForText(page, '.graphiql-tab-active', operationName);
    await page.click('.graphiql-execute-button');
  }

  /** Waits until `count()` reaches `expected` (what a page sends arrives in its own time). */
  async function waitForCount(count: () => number, expected: number): Promise<void> {
    while (count() < expected) await new Promise((resolve) => setTimeout(resolve, 50));
  }

  const RESPONSE = '.graphiql-response .monaco-editor .view-lines';

  test('loads with nothing from outside, runs a query with the token of its Headers tab, and receives a subscription event', async () => {
    const page = await browser.newPage();
    const elsewhere = await openOffline(page);
    const headers = JSON.stringify({ Authorization: `Bearer ${await tokenFor('acme')}` });
    await setEditor(page, '.graphiql-editor-tool', headers);

    await setEditor(
      page,
      '.graphiql-query-editor',
      'query Acme { customer(id: "cus_acme") { displayName } }',
    );
    await run(page, 'Acme');
    await waitForText(page, RESPONSE, 'Acme Robotics Ltd');

    // A subscription over graphql-ws on the same origin, with the same token.
    await setEditor(
      page,
      '.graphiql-query-editor',
      'subscription Live { accountChanged(customerId: "cus_acme") { eventId accountId } }',
    );
    await run(page, 'Live');
    await stack.subscriptionsStarted(1);
    const event = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    await waitForText(page, RESPONSE, event.id);
    expect(await textOf(page, RESPONSE)).toContain('"accountId": "acc_acme_eth"');

    expect(elsewhere).toEqual([]);
  });

  test('introspects only once the Headers tab holds a token, and again when the token changes', async () => {
    const page = await browser.newPage();
    // Every introspection the page sends, with the Authorization it carries, and every answer's status.
    const introspections: string[] = [];
    const statuses: number[] = [];
    page.on('request', (request) => {
      if (request.url() === stack.graphqlUrl && request.method() === 'POST') {
        const body = JSON.parse(request.postData() ?? '{}') as { query?: string };
        if (body.query?.includes('__schema')) introspections.push(request.headers()['authorization'] ?? '');
      }
    });
    page.on('response', (response) => {
      if (response.url() === stack.graphqlUrl && response.request().method() === 'POST')
        statuses.push(response.status());
    });
    await openOffline(page);
    await page.click('.graphiql-sidebar button[aria-label="Show Documentation Explorer"]');
    const docs = '.graphiql-doc-explorer';
    // The placeholder token: nothing asked, nothing refused, and the page says what to do.
    await waitForText(page, docs, 'No GraphQL schema available');
    expect(await textOf(page, '.graphiql-query-editor .view-lines')).toContain(
      'Put your access token in the Headers tab',
    );
    expect(introspections).toEqual([]);
    expect(statuses).toEqual([]);

    // A pasted token loads the schema: no ↻ needed.
    const acme = `Bearer ${await tokenFor('acme')}`;
    await setEditor(page, '.graphiql-editor-tool', JSON.stringify({ Authorization: acme }));
    await waitForText(page, docs, 'Query');
    await waitForCount(() => statuses.length, 1);
    expect(introspections).toEqual([acme]);
    expect(statuses).toEqual([200]);

    // Another token: the schema is read again, with it.
    const operator = `Bearer ${await tokenFor('operator')}`;
    await setEditor(page, '.graphiql-editor-tool', JSON.stringify({ Authorization: operator }));
    await waitForCount(() => statuses.length, 2);
    expect(introspections).toEqual([acme, operator]);
    expect(statuses).toEqual([200, 200]);
    expect(await textOf(page, docs)).not.toContain('Error fetching schema');
  });

  test("another customer's data stays closed to a token in the explorer", async () => {
    const page = await browser.newPage();
    await openOffline(page);
    await setEditor(
      page,
      '.graphiql-editor-tool',
      JSON.stringify({ Authorization: `Bearer ${await tokenFor('acme')}` }),
    );
    await setEditor(
      page,
      '.graphiql-query-editor',
      'query Other { customer(id: "cus_globex") { displayName } }',
    );
    await run(page, 'Other');
    await waitForText(page, RESPONSE, 'NOT_FOUND');
    expect(await textOf(page, RESPONSE)).not.toContain('Globex');
  });

  test("the facade serves the real build: the script as JavaScript, Monaco's workers beside it", async () => {
    // The routes themselves are tested without a browser in test/integration/edge-explorer.test.ts.
    for (const file of ['graphiql.js', 'editor.worker.js', 'json.worker.js', 'graphql.worker.js']) {
      const response = await fetch(`${stack.facadeUrl}/explorer/${file}`);
      expect(response.status, file).toBe(200);
      expect(response.headers.get('content-type'), file).toMatch(/^text\/javascript/);
      await response.arrayBuffer();
    }
  });
});
