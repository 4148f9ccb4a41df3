// The API reference at /docs, as a person meets it: opened in headless Chromium against the running
// app, with every request to another host blocked. It must render every operation of the served
// document, ask nothing of the internet, log no error, and its "Try it out" must reach this server.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { loadDocument } from '../src/http/document.ts';
import { launchBrowser, screenshot, type HeadlessBrowser } from './support/browser.ts';
import { startHarness, type Harness } from './support/harness.ts';

// Chromium's start and a 1.7 MB bundle on a busy two-core machine.
const browserTimeout = 120_000;

let harness: Harness;
let server: Server;
let baseUrl: string;
let browser: HeadlessBrowser;

beforeAll(async () => {
  harness = await startHarness();
  server = await new Promise<Server>((resolve) => {
    const listening = harness.app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await launchBrowser();
}, browserTimeout);

afterAll(async () => {
  await browser?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await harness.close();
});

const document = loadDocument() as { paths: Record<string, Record<string, { summary?: string; operationId?: string }>> };
const summaries = Object.values(document.paths).flatMap((item) =>
  Object.values(item).flatMap((operation) => (operation?.operationId && operation.summary ? [operation.summary] : [])),
);

test('every operation of the served document is rendered, from this process alone, without an error', async () => {
  const page = await browser.newPage();
  const response = await page.goto(`${baseUrl}/docs`);
  expect(response?.status()).toBe(200);
  await page.getByRole('heading', { name: /Herald API/ }).waitFor({ timeout: 60_000 });
  expect(summaries).toEqual(expect.arrayContaining(['Send a notification to users', "List a user's installations", "The token's application"]));
  for (const summary of summaries) {
    await expect(page.locator('.opblock-summary-description', { hasText: summary }).first().isVisible()).resolves.toBe(true);
  }
  await screenshot(page, 'docs');
  expect(browser.blocked).toEqual([]);
  expect(browser.errors).toEqual([]);
  await page.close();
}, browserTimeout);

test('Try it out: GET /api/v1/app with a token given to Authorize answers from this server', async () => {
  const application = await harness.newApplication('Docs page');
  const token = await application.token(['events:write']);
  const page = await browser.newPage();
  await page.goto(`${baseUrl}/docs#/applications/getApp`);
  await page.getByRole('button', { name: 'Authorize' }).first().click();
  await page.locator('.modal-ux input').first().fill(token);
  await page.locator('.modal-ux').getByRole('button', { name: 'Apply credentials' }).click();
  await page.locator('.modal-ux').getByRole('button', { name: 'Close' }).click();

  const operation = page.locator('#operations-applications-getApp');
  await operation.getByRole('button', { name: 'Try it out' }).click();
  await operation.getByRole('button', { name: 'Execute' }).click();
  const status = operation.locator('.live-responses-table .response .response-col_status').first();
  await status.waitFor({ timeout: 30_000 });
  expect((await status.textContent())?.trim()).toBe('200');
  await expect(operation.locator('.live-responses-table .microlight').first().textContent()).resolves.toContain('"Docs page"');
  await screenshot(operation, 'docs-try-it-out');
  expect(browser.blocked).toEqual([]);
  expect(browser.errors).toEqual([]);
  await page.close();
}, browserTimeout);

describe('what /docs serves (without a browser)', () => {
  test('the page, with a CSP that allows only this origin and does not upgrade requests to HTTPS', async () => {
    const res = await request(harness.app).get('/docs').expect(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.text).toContain('<title>Herald API reference</title>');
    const csp = res.headers['content-security-policy'];
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('upgrade-insecure-requests');
    // Every URL the page names is relative to it: served by this process, under any path prefix.
    for (const [, url] of res.text.matchAll(/(?:src|href)="([^"]+)"/g)) expect(url).toMatch(/^(docs\/[\w.-]+|openapi\.json)$/);
  });

  test.each([
    ['/docs/swagger-ui-bundle.js', /^text\/javascript/],
    ['/docs/swagger-ui.css', /^text\/css/],
    ['/docs/reference.js', /^text\/javascript/],
    ['/docs/favicon-32x32.png', /^image\/png/],
  ])('%s is served', async (path, type) => {
    const res = await request(harness.app).get(path).expect(200);
    expect(res.headers['content-type']).toMatch(type);
  });

  test.each(['/docs/index.html', '/docs/swagger-initializer.js', '/docs/package.json', '/docs/../package.json', '/docs/', '/Docs'])(
    '%s is not served (only the files the page uses are)',
    async (path) => {
      const res = await request(harness.app).get(path);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: 'Not Found' });
    },
  );

  test('the page needs no token', async () => {
    await request(harness.app).get('/docs').expect(200);
    await request(harness.app).head('/docs/swagger-ui-bundle.js').expect(200);
  });
});
