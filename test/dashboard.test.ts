/**
 * @jest-environment ./test/support/failure-environment.js
 */
// The dashboard as an operator meets it, in headless Chromium against the real pipeline (API,
// workers, APNs and FCM simulators): sign in, send through the API and watch the funnel fill as
// the app reports events, filter deliveries, find a user, check credentials and quota; a new
// application's empty states; a revoked token and a database cut mid-session; a 1,000-row
// deliveries table. Every step leaves a screenshot in reports/screenshots/, and no request may
// leave the machine.
import { existsSync, mkdtempSync } from 'node:fs';
import http, { type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { jest } from '@jest/globals';
import express, { type Express } from 'express';
import type { Page } from 'playwright-core';
import request from 'supertest';
import { v7 as uuidv7 } from 'uuid';
import { ApiToken } from '../src/db/entities.ts';
import { insertDeliveries, recordResults, type DeliveryResult, type NewDelivery } from '../src/db/sql/deliveries.ts';
import { createToken, revokeToken } from '../src/domain/applications.ts';
import { addWebhookEndpoint } from '../src/domain/webhooks.ts';
import { parseToken } from '../src/domain/tokens.ts';
import { dashboardDir, dashboardRouter } from '../src/http/dashboard.ts';
import { launchBrowser, screenshot, type HeadlessBrowser } from './support/browser.ts';
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { startHarness } from './support/harness.ts';
import { startReceiver, waitFor } from './support/receiver.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

// Browser steps wait for the page's reads (a running notification's, with back-off).
jest.setTimeout(90_000);

let pipeline: Pipeline;
let browser: HeadlessBrowser;
let base: string;
let server: Server;

function serve(app: Express): Promise<{ server: Server; base: string }> {
  return new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => {
      const { port } = listening.address() as { port: number };
      resolve({ server: listening, base: `http://127.0.0.1:${port}` });
    });
  });
}

beforeAll(async () => {
  if (!existsSync(path.join(dashboardDir, 'index.html'))) {
    throw new Error(`The dashboard is not built (${dashboardDir}): run \`make dashboard\` (make test does) first.`);
  }
  pipeline = await startPipeline();
  ({ server, base } = await serve(pipeline.harness.app));
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
  await pipeline?.close();
});
afterEach(async () => {
  // A failed test's pages as they were (the environment says it failed).
  if ((globalThis as { testFailed?: boolean }).testFailed) await browser.keepFailure(expect.getState().currentTestName ?? 'test');
  pipeline.apns.setRules([]);
  // Each test answers for its own pages only.
  const blocked = browser.blocked.splice(0);
  const errors = browser.errors.splice(0);
  // The page loads nothing from anywhere but this machine: no CDN, no font, no image of a notification.
  expect(blocked).toEqual([]);
  // And runs clean: no uncaught error, nothing logged but the browser's own line for each answer
  // that was an error status (the 401, 403 and 503 the tests provoke).
  expect(errors.filter((line) => !/Failed to load resource: the server responded with a status of (401|403|503)/.test(line))).toEqual([]);
});

/** Polls until `check` holds (the dashboard reads the API every few seconds). */
async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  await waitFor(check, Boolean, timeoutMs).catch((error: unknown) => {
    throw new Error(`timed out waiting for ${what}`, { cause: error });
  });
}

async function signIn(page: Page, token: string, at = base) {
  await page.goto(`${at}/dashboard`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** The count a row of the funnel shows: `Accepted` → 3. Reason rows are named by their reason. */
async function funnel(page: Page, stage: string): Promise<number | null> {
  const row = page.locator('table.funnel tbody tr').filter({ has: page.locator('th', { hasText: new RegExp(`^${stage}( |$)`) }) });
  if ((await row.count()) !== 1) return null;
  return Number((await row.locator('td').first().innerText()).replace(/\D/g, ''));
}

async function funnelIs(page: Page, expected: Record<string, number>): Promise<boolean> {
  for (const [stage, count] of Object.entries(expected)) if ((await funnel(page, stage)) !== count) return false;
  return true;
}

async function report(app: PipelineApplication, delivery: { id: string; installation_id: string }, type: string) {
  await request(pipeline.harness.app)
    .post('/api/v1/events')
    .set('Authorization', `Bearer ${app.client}`)
    .send({ event_id: randomUUID(), delivery_id: delivery.id, installation_id: delivery.installation_id, type, occurred_at: new Date().toISOString() })
    .expect(201);
}

const deliveryRows = (page: Page) => page.locator('section[aria-labelledby="deliveries-heading"] table tbody tr');
const userDeliveryRows = (page: Page) => page.locator('section[aria-labelledby="user-deliveries-heading"] tbody tr');

/** Whether the page is no wider than the window: wide tables scroll inside their box, not the page. */
const fitsWindow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

describe('an operator with a server token', () => {
  let app: PipelineApplication;
  let page: Page;
  let notificationId: string;
  beforeAll(async () => {
    app = await pipeline.newApplication();
    await app.register('ann-phone', ios('dash-01', 'ann', { device: { model: 'iPhone16,2', os_version: '18.1' } }));
    await app.register('ann-tablet', android('fcm-dash-02', 'ann'));
    await app.register('bob-phone', ios('dash-03', 'bob'));
    await app.register('bob-old-phone', ios('dead-dash-04', 'bob'));
    await app.register('cat-phone', ios('dash-05', 'cat', { permission: 'denied' }));
    page = await browser.newPage();
  });

  test('signs in with the token, which stays out of the URL, and starts on an empty list that says what to do', async () => {
    await page.goto(`${base}/dashboard`);
    await page.getByRole('heading', { name: 'Herald' }).waitFor();
    await screenshot(page, 'dashboard-01-sign-in');
    await signIn(page, app.server);
    await page.getByText('No notifications yet.').waitFor();
    await screenshot(page, 'dashboard-02-empty-list');
    expect(page.url()).not.toContain(app.server);
    expect(await page.evaluate(() => window.sessionStorage.getItem('herald.token'))).toBe(app.server);
    expect(await page.evaluate(() => window.localStorage.length)).toBe(0);
  });

  test('a notification sent through the API is listed, and its funnel fills as the fanout runs and events come in', async () => {
    pipeline.apns.setRules([{ prefix: 'dead-', reason: 'Unregistered' }]);
    notificationId = await app.send({
      recipients: { user_ids: ['ann', 'bob', 'cat', 'dan'] },
      notification: { title: 'Your order has shipped', body: 'Order 1042 arrives on Thursday.', image_url: 'https://cdn.example.com/1042.png' },
      data: { order_id: '1042' },
      options: { ttl: 3600, priority: 'high' },
    });
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByRole('link', { name: 'Your order has shipped' }).click();
    await page.getByRole('heading', { name: 'Funnel' }).waitFor();
    expect(page.url()).toBe(`${base}/dashboard#/notifications/${notificationId}`);

    await eventually(
      () => funnelIs(page, { Users: 3, Installations: 5, Accepted: 3, Received: 0, Failed: 1, Unregistered: 1, Skipped: 1, permission_denied: 1 }),
      'the fanout in the funnel',
    );
    await page.getByText('partial', { exact: true }).first().waitFor();
    await screenshot(page, 'dashboard-03-funnel-sent');

    const accepted = (await app.deliveries(notificationId)).filter((d) => d.state === 'accepted');
    for (const delivery of accepted) await report(app, delivery, 'received');
    // The notification has ended, so the page no longer reads it by itself: Refresh does.
    const refreshed = async (expected: Record<string, number>) => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      return funnelIs(page, expected);
    };
    await eventually(() => refreshed({ Received: 3, Displayed: 0, Opened: 0 }), 'received events in the funnel');
    await screenshot(page, 'dashboard-04-funnel-received');
    for (const delivery of accepted.slice(0, 2)) await report(app, delivery, 'displayed');
    await report(app, accepted[0], 'opened');
    await eventually(() => refreshed({ Received: 3, Displayed: 2, Opened: 1 }), 'opened events in the funnel');
    await screenshot(page, 'dashboard-05-funnel-opened');
    await screenshot(page.locator('.funnel-section'), 'dashboard-funnel');

    // The content as sent; the image URL is shown, not loaded (afterEach: nothing left the machine).
    await page.getByText('Order 1042 arrives on Thursday.').waitFor();
    await page.getByText('https://cdn.example.com/1042.png').waitFor();
    expect(await page.locator('pre.json').first().innerText()).toContain('"order_id": "1042"');
  });

  test('the deliveries filter by state, platform and reason', async () => {
    expect(await deliveryRows(page).count()).toBe(5);
    await page.getByLabel('State').selectOption('failed');
    await eventually(async () => (await deliveryRows(page).count()) === 1, 'the failed delivery alone');
    expect(await deliveryRows(page).first().innerText()).toMatch(/bob-old-phone[\s\S]*failed[\s\S]*Unregistered/);
    await page.getByLabel('State').selectOption('');
    await page.getByLabel('Platform').selectOption('android');
    await eventually(async () => (await deliveryRows(page).count()) === 1, 'the android delivery alone');
    expect(await deliveryRows(page).first().innerText()).toContain('ann-tablet');
    await page.getByLabel('Platform').selectOption('');
    await page.getByLabel('Reason').selectOption('permission_denied');
    await eventually(async () => (await deliveryRows(page).count()) === 1, 'the skipped delivery alone');
    expect(await deliveryRows(page).first().innerText()).toContain('cat-phone');
    await screenshot(page, 'dashboard-06-deliveries-by-reason');
    await page.getByLabel('Reason').selectOption('');
  });

  test('filters the list by status', async () => {
    await page.getByRole('link', { name: 'Notifications', exact: true }).click();
    await page.getByLabel('Status').selectOption('completed');
    await page.getByText('No completed notifications.').waitFor();
    await page.getByLabel('Status').selectOption('partial');
    await page.getByRole('link', { name: 'Your order has shipped' }).waitFor();
    await screenshot(page, 'dashboard-07-list-partial');
  });

  test("finds a user's installations and recent deliveries", async () => {
    await page.getByRole('link', { name: 'Users' }).click();
    await page.getByLabel('User id').fill('ann');
    await page.getByRole('button', { name: 'Look up' }).click();
    const installations = page.locator('section[aria-labelledby="installations-heading"] tbody tr');
    await eventually(async () => (await installations.count()) === 2, "ann's two installations");
    const text = await installations.allInnerTexts();
    expect(text.join('\n')).toMatch(/ann-tablet[\s\S]*android[\s\S]*active[\s\S]*authorized/);
    expect(text.join('\n')).toMatch(/ann-phone[\s\S]*ios[\s\S]*iPhone16,2 · OS 18.1/);
    const recent = userDeliveryRows(page);
    await eventually(async () => (await recent.count()) === 2, "ann's two deliveries");
    expect((await recent.allInnerTexts()).join('\n')).toMatch(/Your order has shipped[\s\S]*accepted/);
    expect(page.url()).toBe(`${base}/dashboard#/users/ann`);
    await screenshot(page, 'dashboard-08-user');
  });

  test('shows the credentials health and the send quota', async () => {
    await page.getByRole('link', { name: 'Application' }).click();
    const ios = page.getByRole('row', { name: /iOS \(APNs\)/ });
    await ios.waitFor();
    expect(await ios.innerText()).toContain('healthy');
    expect(await page.getByRole('row', { name: /Android \(FCM\)/ }).innerText()).toContain('healthy');
    // The harness's send policy: 100,000 per 60 s.
    expect(await page.locator('.quota').innerText()).toMatch(/100,000 sends per 60 s/);
    await screenshot(page, 'dashboard-09-application');
  });

  test('signing out forgets the token', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You signed out.').waitFor();
    expect(await page.evaluate(() => window.sessionStorage.getItem('herald.token'))).toBeNull();
    await page.reload();
    await page.getByLabel('API token').waitFor();
  });
});

test('a new application: every view says what to do next', async () => {
  const app = await pipeline.newApplication({});
  const page = await browser.newPage();
  await signIn(page, app.server);
  await page.getByText('No notifications yet.').waitFor();
  await page.getByRole('link', { name: 'Users' }).click();
  await page.getByLabel('User id').fill('nobody');
  await page.getByRole('button', { name: 'Look up' }).click();
  await page.getByText('No installation is registered for nobody.').waitFor();
  await page.getByText('No notification reached a device of this user.').waitFor();
  await screenshot(page, 'dashboard-10-empty-user');
  await page.getByRole('link', { name: 'Application' }).click();
  for (const platform of [/iOS \(APNs\)/, /Android \(FCM\)/, /Web \(Web Push\)/]) {
    const row = page.getByRole('row', { name: platform });
    await row.waitFor();
    expect(await row.innerText()).toMatch(/not configured[\s\S]*herald credentials set-/);
  }
  await page.getByText('No webhook endpoints').waitFor();
  await screenshot(page, 'dashboard-11-empty-application');
});

test("the application's webhook endpoints: their state, last delivery and recent deliveries", async () => {
  const receiver = await startReceiver();
  try {
    const app = await pipeline.newApplication({});
    await addWebhookEndpoint(
      pipeline.harness.orm.em.fork(),
      { applicationId: app.id, url: `${receiver.url}/herald`, events: ['notification.completed'] },
      pipeline.credentialsKey,
      { allowPrivate: true },
    );
    // A send to a user without installations completes at once: one notification.completed.
    await app.settled(await app.send({ recipients: { user_ids: ['nobody'] }, notification: { title: 'Hi' } }));
    await waitFor(() => receiver.at('/herald'), (got) => got.length === 1);

    const page = await browser.newPage();
    await signIn(page, app.server);
    await page.getByRole('link', { name: 'Application' }).click();
    const shown = page.getByRole('article', { name: `Webhook endpoint ${receiver.url}/herald` });
    // The log's row is written when the answer is recorded, just after the receiver saw the request.
    await eventually(async () => {
      if ((await shown.count()) === 1 && /succeeded/.test(await shown.innerText())) return true;
      await page.reload();
      return false;
    }, 'the delivered endpoint');
    const text = await shown.innerText();
    expect(text).toMatch(/enabled/);
    expect(text).toMatch(/Last delivery\s+succeeded \(HTTP 200\), notification\.completed/i);
    // The recent deliveries are a request of their own, made once the endpoint is shown.
    const rows = shown.locator('table tbody tr');
    await rows.first().waitFor();
    expect(await rows.count()).toBe(1);
    expect(await rows.first().innerText()).toMatch(/notification\.completed\s+succeeded\s+1\s+HTTP 200/);
    await screenshot(page, 'dashboard-18-webhooks');
  } finally {
    await receiver.close();
  }
});

test("the application's segments with their sizes, and a notification's audience on its page", async () => {
  const app = await pipeline.newApplication({});
  const api = (method: 'put' | 'post', path: string, body: object) =>
    request(pipeline.harness.app)[method](path).set('Authorization', `Bearer ${app.server}`).send(body);
  for (const [id, plan, user] of [['seg-a', 'pro', 'ann'], ['seg-b', 'pro', 'ann'], ['seg-c', 'free', 'bob']]) {
    await api('put', `/api/v1/installations/${id}`, { platform: 'android', provider: { identifier: `token-${id}` }, user_id: user, tags: { plan } });
  }
  await api('put', '/api/v1/segments/pro', { audience: { platforms: ['android'], tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } });
  await api('put', '/api/v1/segments/everyone', { audience: { all: true } });
  const sent = await api('post', '/api/v1/notifications', { recipients: { segment: 'pro' }, notification: { title: 'For pro users' } });
  expect(sent.status).toBe(202);

  const page = await browser.newPage();
  await signIn(page, app.server);
  await page.getByRole('link', { name: 'Segments' }).click();
  const rows = page.locator('section[aria-labelledby="segments-heading"] tbody tr');
  await eventually(async () => (await rows.count()) === 2 && !(await rows.allInnerTexts()).some((text) => text.includes('…')), 'the segments and their sizes');
  const [everyone, pro] = await rows.allInnerTexts();
  expect(everyone).toMatch(/everyone\s+every installation\s+3\s+2/);
  expect(pro).toMatch(/pro\s+android and plan = pro\s+2\s+1/);
  await screenshot(page, 'dashboard-19-segments');

  await page.goto(`${base}/dashboard#/notifications/${sent.body.data.id}`);
  const facts = page.locator('dl.facts');
  await facts.waitFor();
  expect(await facts.innerText()).toMatch(/Audience\s+segment pro: android and plan = pro/i);
});

test('a token without the ability a view needs: that view names it, the others work', async () => {
  const app = await pipeline.newApplication({});
  const { plaintext } = await createToken(pipeline.harness.orm.em.fork(), { applicationId: app.id, name: 'support', abilities: ['notifications:read'] });
  const page = await browser.newPage();
  await signIn(page, plaintext);
  await page.getByText('No notifications yet.').waitFor();
  await page.getByRole('link', { name: 'Users' }).click();
  await page.getByLabel('User id').fill('ann');
  await page.getByRole('button', { name: 'Look up' }).click();
  await page.getByRole('alert').filter({ hasText: 'This token lacks the installations:list ability this view needs' }).waitFor();
  // Its deliveries need only notifications:read.
  await page.getByText('No notification reached a device of this user.').waitFor();
  await screenshot(page, 'dashboard-17-missing-ability');
});

test('a token revoked mid-session returns to sign-in with a message, and is forgotten', async () => {
  const app = await pipeline.newApplication({});
  const page = await browser.newPage();
  await signIn(page, app.server);
  await page.getByText('No notifications yet.').waitFor();
  const { publicId } = parseToken(app.server)!;
  const token = await pipeline.harness.orm.em.fork().findOneOrFail(ApiToken, { publicId });
  expect(await revokeToken(pipeline.harness.orm.em.fork(), token.id)).toBe(true);

  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.getByRole('alert').filter({ hasText: 'Herald refused this token' }).waitFor();
  await page.getByLabel('API token').waitFor();
  expect(await page.evaluate(() => window.sessionStorage.getItem('herald.token'))).toBeNull();
  await screenshot(page, 'dashboard-12-revoked');

  // A wrong token is told the same, on the sign-in page itself.
  const fresh = await browser.newPage();
  await fresh.goto(`${base}/dashboard`);
  await fresh.getByLabel('API token').fill('hrld_wrong_token');
  await fresh.getByRole('button', { name: 'Sign in' }).click();
  await fresh.getByRole('alert').filter({ hasText: 'Herald refused this token' }).waitFor();
  expect(await fresh.evaluate(() => window.sessionStorage.getItem('herald.token'))).toBeNull();
});

test('a database cut mid-session shows a banner over the last data, and the page recovers when it returns', async () => {
  const proxy = await startTcpProxy(pipeline.harness.url);
  const harness = await startHarness({ databaseUrl: proxy.url, queueSchema: pipeline.queueSchema });
  const served = await serve(harness.app);
  const page = await browser.newPage();
  try {
    const application = await harness.newApplication('outage');
    const token = await application.token();
    await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${token}`)
      .send({ recipients: { user_ids: ['eve'] }, notification: { title: 'Before the outage' } })
      .expect(202);
    await signIn(page, token, served.base);
    await page.getByRole('link', { name: 'Before the outage' }).waitFor();

    await proxy.cut();
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByRole('alert').filter({ hasText: 'cannot reach its database' }).waitFor();
    // Not a blank page: what was loaded stays, under the banner.
    await page.getByRole('link', { name: 'Before the outage' }).waitFor();
    await screenshot(page, 'dashboard-13-database-down');

    await proxy.restore();
    await eventually(async () => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      return (await page.getByRole('alert').count()) === 0;
    }, 'the banner to go');
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
  } finally {
    // Closed first: a page left open would go on calling a server that is gone.
    await page.close();
    // A request the browser left open across the cut would hold close() until it ends.
    const closed = new Promise((resolve) => served.server.close(resolve));
    served.server.closeAllConnections();
    await closed;
    await harness.close();
    await proxy.close();
  }
});

test('a 1,000-row deliveries table is paged: 50 rows at a time, next and previous, filters with their totals', async () => {
  const app = await pipeline.newApplication({});
  // Sent to 250 users with no installation yet (the fanout finds none), then given their deliveries.
  const users = Array.from({ length: 250 }, (_, i) => `bulk-user-${i}`);
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'A thousand deliveries' } });
  await app.settled(id);
  // 1,000 deliveries written by the fanout's own statements: 900 accepted, 60 failed, 40 skipped;
  // time-ordered ids, as the fanout's, so the table's order is bulk-0000 to bulk-0999.
  const rows: NewDelivery[] = Array.from({ length: 1000 }, (_, i) => ({
    applicationId: app.id,
    notificationId: id,
    deliveryId: uuidv7(),
    rowId: null as unknown as string,
    installationId: `bulk-${String(i).padStart(4, '0')}`,
    userId: users[i % 250],
    platform: i % 2 ? 'android' : 'ios',
    providerIdentifier: 'unused',
    permission: 'authorized',
    lastSeenAt: new Date(),
    deviceLocale: null,
    state: i >= 960 ? 'skipped' : 'pending',
    reason: i >= 960 ? 'permission_denied' : null,
    locale: null,
    truncation: null,
  }));
  const em = pipeline.harness.orm.em.fork();
  await insertDeliveries(em, rows);
  const results: DeliveryResult[] = rows.slice(0, 960).map((row, i) => ({
    deliveryId: row.deliveryId,
    state: i < 900 ? 'accepted' : 'failed',
    reason: i < 900 ? null : row.platform === 'ios' ? 'Unregistered' : 'UNREGISTERED',
    providerMessageId: null,
  }));
  await recordResults(em, results, true);

  const page = await browser.newPage();
  await signIn(page, app.server);
  await page.getByRole('link', { name: 'A thousand deliveries' }).click();
  const summary = page.locator('nav[aria-label="Delivery pages"] [aria-live]');
  await eventually(async () => (await summary.innerText()) === 'Deliveries 1–50 of 1,000', 'the first page');
  expect(await deliveryRows(page).count()).toBe(50);
  expect(await funnelIs(page, { Installations: 1000, Accepted: 900, Failed: 60, Unregistered: 30, UNREGISTERED: 30, Skipped: 40 })).toBe(true);
  await screenshot(page, 'dashboard-14-thousand-rows');

  const started = Date.now();
  await page.getByRole('button', { name: 'Next →' }).click();
  await eventually(async () => (await summary.innerText()) === 'Deliveries 51–100 of 1,000', 'the second page');
  const pageTurnMs = Date.now() - started;
  expect(pageTurnMs).toBeLessThan(3000);
  expect(await deliveryRows(page).first().innerText()).toContain('bulk-0050');
  await page.getByRole('button', { name: 'Next →' }).click();
  await eventually(async () => (await summary.innerText()) === 'Deliveries 101–150 of 1,000', 'the third page');
  await page.getByRole('button', { name: '← Previous' }).click();
  await eventually(async () => (await summary.innerText()) === 'Deliveries 51–100 of 1,000', 'back to the second page');

  await page.getByLabel('Reason').selectOption('UNREGISTERED');
  await eventually(async () => (await summary.innerText()) === 'Deliveries 1–30 of 30', 'the android failures');
  expect(await deliveryRows(page).count()).toBe(30);
  await screenshot(page, 'dashboard-15-thousand-rows-filtered');
});

test('a localized notification: each delivery shows the locale it received, and the content section its localizations', async () => {
  const app = await pipeline.newApplication();
  await app.register('lea-phone', ios('dash-l10n-01', 'lea', { device: { locale: 'fr_CA' } }));
  await app.register('lea-tablet', android('fcm-dash-l10n-02', 'lea', { device: { locale: 'en_US' } }));
  await app.register('lea-old-phone', ios('dash-l10n-03', 'lea', { permission: 'denied', device: { locale: 'fr_FR' } }));
  const id = await app.send({
    recipients: { user_ids: ['lea'] },
    notification: {
      title: 'Your order has shipped',
      body: 'It arrives on Thursday.',
      localizations: { 'pt-BR': { body: 'Chega na quinta-feira.' }, fr: { title: 'Votre commande est partie', body: 'Elle arrive jeudi.' } },
    },
  });
  await app.settled(id);
  const page = await browser.newPage();
  await signIn(page, app.server);
  await page.goto(`${base}/dashboard#/notifications/${id}`);
  await eventually(async () => (await deliveryRows(page).count()) === 3, 'the three deliveries');
  // Installation, user, platform, locale, state.
  const cells = async (installation: string) =>
    (await deliveryRows(page).filter({ has: page.getByText(installation, { exact: true }) }).locator('td').allInnerTexts()).slice(0, 5);
  expect(await cells('lea-phone')).toEqual(['lea-phone', 'lea', 'ios', 'fr', 'accepted']);
  expect(await cells('lea-tablet')).toEqual(['lea-tablet', 'lea', 'android', 'default', 'accepted']);
  expect(await cells('lea-old-phone')).toEqual(['lea-old-phone', 'lea', 'ios', '—', 'skipped']);

  await page.getByRole('heading', { name: 'Localizations' }).waitFor();
  const localizations = page.locator('table[aria-labelledby="localizations-heading"] tbody tr');
  const rows = await Promise.all((await localizations.all()).map((row) => row.locator('th, td').allInnerTexts()));
  expect(rows).toEqual([
    ['fr', 'Votre commande est partie', 'Elle arrive jeudi.'],
    ['pt-BR', 'default title', 'Chega na quinta-feira.'],
  ]);
  await screenshot(page, 'dashboard-18-localized');
  await page.close();
});

test('a scheduled notification shows when it is due, in the list and on its page, and is cancelled from its page after a confirmation', async () => {
  const app = await pipeline.newApplication();
  await app.register('sol-phone', ios('dash-sched-01', 'sol'));
  const sendAt = new Date(Date.now() + 3_600_000);
  const id = await app.send({ recipients: { user_ids: ['sol', 'tom'] }, notification: { title: 'Sale starts now' }, options: { send_at: sendAt.toISOString() } });
  const page = await browser.newPage();
  await signIn(page, app.server);
  // The list: when it is due, and whom it goes to, so that it does not look like a stuck `queued` one.
  const row = page.getByRole('row', { name: /Sale starts now/ });
  await row.waitFor();
  const due = await page.evaluate((iso) => new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' }).format(new Date(iso)), sendAt.toISOString());
  const cells = await row.locator('td').allInnerTexts();
  const header = await page.locator('table.data thead th').allInnerTexts();
  expect(cells[header.findIndex((h) => /scheduled for/i.test(h))]).toBe(due);
  expect(cells[header.findIndex((h) => /target users/i.test(h))]).toBe('2');
  await row.getByRole('link', { name: 'Sale starts now' }).click();
  await page.getByText('Scheduled for').waitFor();
  await page.getByText('queued', { exact: true }).first().waitFor();
  expect(await page.locator('.fanout-note').innerText()).toBe(`Scheduled: due on ${due}, when its fanout to the 2 target users starts.`);
  expect(await page.locator('section[aria-labelledby="deliveries-heading"] .empty').innerText()).toContain(`Scheduled: due on ${due}`);
  const dialogs: string[] = [];
  page.once('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.accept();
  });
  await page.getByRole('button', { name: 'Cancel notification' }).click();
  await page.getByText('cancelled', { exact: true }).first().waitFor();
  expect(dialogs).toEqual(['Cancel this notification? Pushes not yet made will not be made.']);
  expect(await page.getByRole('button', { name: 'Cancel notification' }).count()).toBe(0);
  const cancelled = await app.notification(id);
  expect(cancelled.status).toBe('cancelled');
  // Said as it is: cancelled, and when; not "none of the target users has an installation".
  const at = await page.evaluate((iso) => new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' }).format(new Date(iso)), cancelled.completed_at!);
  await eventually(
    async () => (await page.locator('.fanout-note').innerText()) === `Cancelled on ${at}, before it was due on ${due}: nothing was pushed.`,
    'the cancellation explained',
  );
  expect(await page.locator('section[aria-labelledby="deliveries-heading"] .empty').innerText()).toContain(`Cancelled on ${at}`);
  expect(await page.getByText(/has an installation/).count()).toBe(0);
  await screenshot(page, 'dashboard-19-cancelled');
  await page.close();
});

test("a user's deliveries of every notification, however many were sent since, a page at a time, at 390 and 1,280 px wide", async () => {
  const app = await pipeline.newApplication();
  await app.register('dan-phone', ios('dash-user-01', 'dan'));
  const first = await app.send({ recipients: { user_ids: ['dan'] }, notification: { title: 'Your parcel is out for delivery' } });
  await app.settled(first);
  // Thirty notifications to other users since: dan's delivery is older than the 25 latest.
  for (let i = 0; i < 30; i++) await app.settled(await app.send({ recipients: { user_ids: [`crowd-${i}`] }, notification: { title: `Crowd ${i}` } }));
  // And 25 more of his own, so that his list takes two pages.
  for (let i = 0; i < 25; i++) await app.settled(await app.send({ recipients: { user_ids: ['dan'] }, notification: { title: `Daily digest ${i}` } }));

  const page = await browser.newPage();
  await signIn(page, app.server);
  await page.goto(`${base}/dashboard#/users/dan`);
  const rows = userDeliveryRows(page);
  await eventually(async () => (await rows.count()) === 25, "the first page of dan's deliveries");
  expect(await rows.first().innerText()).toMatch(/Daily digest 24[\s\S]*dan-phone[\s\S]*accepted/);
  const pager = page.getByRole('navigation', { name: 'Delivery pages' });
  expect(await pager.locator('[aria-live]').innerText()).toBe('Deliveries 1–25');
  await pager.getByRole('button', { name: 'Next →' }).click();
  await eventually(async () => (await rows.count()) === 1, 'the second page');
  expect(await rows.first().innerText()).toMatch(/Your parcel is out for delivery[\s\S]*dan-phone[\s\S]*accepted/);
  expect(await pager.getByRole('button', { name: 'Next →' }).isDisabled()).toBe(true);
  expect(await fitsWindow(page)).toBe(true);
  await screenshot(page, 'dashboard-20-user-deliveries');
  await rows.first().getByRole('link', { name: 'Your parcel is out for delivery' }).click();
  await page.getByRole('heading', { name: 'Your parcel is out for delivery' }).waitFor();
  expect(page.url()).toBe(`${base}/dashboard#/notifications/${first}`);

  // A phone's width: the page does not grow sideways; the tables scroll in their box.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${base}/dashboard#/users/dan`);
  await eventually(async () => (await rows.count()) === 25, "dan's deliveries at 390 px");
  expect(await fitsWindow(page)).toBe(true);
  await screenshot(page, 'dashboard-21-user-deliveries-390');
  // At this width the sections are behind the menu.
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('link', { name: 'Notifications', exact: true }).click();
  await page.getByRole('link', { name: 'Daily digest 24' }).waitFor();
  expect(await fitsWindow(page)).toBe(true);
  await screenshot(page, 'dashboard-22-notifications-390');
  await page.close();
});

test('behind a proxy that serves Herald under a path prefix, the page and its API calls keep the prefix', async () => {
  const app = await pipeline.newApplication({});
  // A reverse proxy as one is usually set up: /herald/… here is /… there.
  const prefixed = await serve(
    express().use('/herald', (req, res) => {
      const upstream = http.request(`${base}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    }),
  );
  const page = await browser.newPage();
  try {
    await page.goto(`${prefixed.base}/herald/dashboard`);
    await page.getByLabel('API token').fill(app.server);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('No notifications yet.').waitFor();
    expect(await page.getByRole('link', { name: 'API reference' }).getAttribute('href')).toBe('docs');
    await screenshot(page, 'dashboard-16-under-a-prefix');
  } finally {
    await page.close();
    await new Promise((resolve) => prefixed.server.close(resolve));
  }
});

describe('serving the page', () => {
  test('the page and its bundle come from this process, revalidated on every load, under a same-origin CSP', async () => {
    const page = await request(pipeline.harness.app).get('/dashboard').expect(200);
    expect(page.headers['cache-control']).toBe('no-cache');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    // Over plain HTTP on a private address, an upgrade would ask for the bundle over HTTPS.
    expect(page.headers['content-security-policy']).not.toContain('upgrade-insecure-requests');
    expect(page.text).not.toMatch(/https?:\/\//);
    // Its URLs are relative to /dashboard: /dashboard/ is sent there.
    const slash = await request(pipeline.harness.app).get('/dashboard/').expect(301);
    expect(slash.headers.location).toBe('../dashboard');
    const script = await request(pipeline.harness.app).get('/dashboard/main.js').expect(200);
    expect(script.headers['content-type']).toMatch(/javascript/);
    await request(pipeline.harness.app).get('/dashboard/main.css').expect(200);
    // Anything else under /dashboard is the API's 404.
    expect((await request(pipeline.harness.app).get('/dashboard/nope.js')).body).toEqual({ message: 'Not Found' });
  });

  test('an unbuilt dashboard says how to build it', async () => {
    const app = express().use(dashboardRouter(mkdtempSync(path.join(tmpdir(), 'herald-no-dashboard-'))));
    const res = await request(app).get('/dashboard').expect(404);
    expect(res.body.message).toMatch(/The dashboard is not built: run `make dashboard`/);
  });
});
