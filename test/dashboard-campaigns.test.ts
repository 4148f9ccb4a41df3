/**
 * @jest-environment ./test/support/failure-environment.js
 */
// The dashboard for campaigns, in headless Chromium against the real pipeline: every view at a
// phone's width (390 px) and a laptop's (1,280 px), each failing on a sideways scroll of the page, a
// control too small for a finger or a console error, with a screenshot of each (reports/screenshots/,
// copied to docs/screenshots/); a filtered notification composed and sent through the page, a double
// click sending it once; the API's field errors beside their fields; a test send to one
// installation; segments created, edited and deleted; a running broadcast's progress and a
// local-time send's due hours; the application's charts. One server and one browser for the file.
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import request from 'supertest';
import { createToken } from '../src/domain/applications.ts';
import { dashboardDir } from '../src/http/dashboard.ts';
import { checkViewAtWidths, launchBrowser, type HeadlessBrowser } from './support/browser.ts';
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

jest.setTimeout(60_000);

let pipeline: Pipeline;
let browser: HeadlessBrowser;
let base: string;
let server: Server;
let app: PipelineApplication;
let page: Page;

/** Installations of the campaign's application: tagged (`plan`), in two time zones. */
const audience: [string, Record<string, unknown>][] = [
  ['ann-phone', ios('camp-01', 'ann', { tags: { plan: 'pro' }, device: { timezone: 'UTC', locale: 'en_GB' } })],
  ['bob-phone', android('camp-02', 'bob', { tags: { plan: 'pro' }, device: { timezone: 'UTC' } })],
  ['cat-phone', ios('camp-03', 'cat', { tags: { plan: 'pro' }, device: { timezone: 'Asia/Tokyo' } })],
  ['dan-phone', android('camp-04', 'dan', { tags: { plan: 'pro' }, device: { timezone: 'Asia/Tokyo' } })],
  ['eve-phone', ios('camp-05', 'eve', { tags: { plan: 'free' }, device: { timezone: 'UTC' } })],
];

beforeAll(async () => {
  if (!existsSync(path.join(dashboardDir, 'index.html'))) {
    throw new Error(`The dashboard is not built (${dashboardDir}): run \`make dashboard\` (make test does) first.`);
  }
  pipeline = await startPipeline();
  server = await new Promise<Server>((resolve) => {
    const listening = pipeline.harness.app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  browser = await launchBrowser();
  app = await pipeline.newApplication();
  // Tags take installations:tag, which the app's own token lacks: registered with the server token.
  for (const [id, body] of audience) await api('put', `/api/v1/installations/${id}`, body).expect(201);
  page = await browser.newPage();
});
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
  await pipeline?.close();
});
afterEach(async () => {
  if ((globalThis as { testFailed?: boolean }).testFailed) await browser.keepFailure(expect.getState().currentTestName ?? 'test');
  expect(browser.blocked.splice(0)).toEqual([]);
  // The 403 and 422 the tests provoke are logged by the browser as failed loads; nothing else may be.
  expect(browser.errors.splice(0).filter((line) => !/Failed to load resource: the server responded with a status of (403|422)/.test(line))).toEqual([]);
});

const api = (method: 'get' | 'put' | 'post', url: string, body?: object, token = app.server) => {
  const call = request(pipeline.harness.app)[method](url).set('Authorization', `Bearer ${token}`);
  return body ? call.send(body) : call;
};

async function signIn(target: Page, token: string) {
  await target.goto(`${base}/dashboard`);
  await target.getByLabel('API token').fill(token);
  await target.getByRole('button', { name: 'Sign in' }).click();
  await target.getByRole('button', { name: 'Sign out' }).waitFor({ state: 'attached' });
}

/** Goes to a view by its menu, folded behind "Menu" at a phone's width. */
async function open(target: Page, section: string) {
  const toggle = target.getByRole('button', { name: 'Menu' });
  if (await toggle.isVisible()) await toggle.click();
  await target.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: section, exact: true }).click();
}

const notificationsTitled = async (title: string) => {
  const { body } = await api('get', '/api/v1/notifications?limit=100').expect(200);
  return (body.data as { id: string; notification: { title: string } }[]).filter((n) => n.notification.title === title);
};

/** A fresh compose form (the view is made anew when the URL comes to it from another view). */
async function compose() {
  await page.goto(`${base}/dashboard#/notifications`);
  await page.goto(`${base}/dashboard#/notifications/new`);
  await page.getByRole('heading', { name: 'New notification' }).waitFor();
}

/** A local time this minute in UTC, so that UTC's installations are due at once and Tokyo's hours later. */
async function thisMinuteUtc(): Promise<string> {
  // Not within the last seconds of a minute: the send must be made in the minute it names.
  const now = await waitFor(async () => new Date(), (at) => at.getUTCSeconds() < 45, 20_000);
  return now.toISOString().slice(11, 16);
}

test('signing in, and the header folding into a menu at a phone’s width', async () => {
  await page.goto(`${base}/dashboard`);
  await checkViewAtWidths(browser, page, 'sign-in', () => page.getByLabel('API token').waitFor());
  await signIn(page, app.server);
  await page.setViewportSize({ width: 390, height: 844 });
  const nav = page.getByRole('navigation', { name: 'Sections' });
  expect(await nav.isVisible()).toBe(false);
  await page.getByRole('button', { name: 'Menu' }).click();
  expect(await page.getByRole('button', { name: 'Menu' }).getAttribute('aria-expanded')).toBe('true');
  await nav.getByRole('link', { name: 'Users' }).waitFor();
  await checkViewAtWidths(browser, page, 'menu', () => nav.waitFor({ state: 'attached' }));
  await page.setViewportSize({ width: 390, height: 844 });
  await nav.getByRole('link', { name: 'Users' }).click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();
  // A chosen view folds the menu again.
  await nav.waitFor({ state: 'hidden' });
});

test('composes a filtered notification, counts its audience, confirms, and sends it once however often Send is clicked', async () => {
  await compose();
  const size = page.getByTestId('audience-size');
  await page.getByRole('button', { name: 'Add a tag condition' }).click();
  const condition = page.getByRole('group', { name: 'Tag condition 1' });
  await condition.getByLabel('Key').fill('plan');
  await condition.getByLabel('Value').fill('pro');
  await size.filter({ hasText: 'Reaches 4 installations of 4 users now' }).waitFor();
  await page.getByLabel('iOS').check();
  await size.filter({ hasText: 'Reaches 2 installations of 2 users now' }).waitFor();
  await page.getByLabel('Title').first().fill('Pro sale: 20 % off');
  await page.getByLabel('Body').first().fill('Until Sunday.');
  await page.getByLabel('Data (a JSON object)').fill('{"campaign": "pro-sale"}');
  await page.getByLabel('Priority').selectOption('high');
  await checkViewAtWidths(browser, page, 'compose', () => size.filter({ hasText: 'Reaches 2' }).waitFor(), { show: page.getByRole('heading', { name: 'New notification' }) });

  await page.getByRole('button', { name: 'Review and send…' }).click();
  const confirm = page.getByRole('region', { name: 'Send to 2 installations?' });
  await checkViewAtWidths(browser, page, 'compose-confirm', () => confirm.waitFor());
  await confirm.getByRole('button', { name: 'Send', exact: true }).dblclick();
  await page.getByRole('heading', { name: 'Pro sale: 20 % off' }).waitFor();

  const sent = await notificationsTitled('Pro sale: 20 % off');
  expect(sent).toHaveLength(1);
  expect(page.url()).toBe(`${base}/dashboard#/notifications/${sent[0].id}`);
  const notification = await app.settled(sent[0].id);
  expect(notification).toMatchObject({
    status: 'completed',
    audience: { platforms: ['ios'], tags: [{ key: 'plan', op: 'eq', value: 'pro' }] },
    data: { campaign: 'pro-sale' },
    options: { priority: 'high' },
    statistics: { installations: 2, accepted: 2 },
  });
  // The page stops reading it once it has ended; its funnel shows the end.
  await page.locator('table.funnel').getByRole('row', { name: /^Accepted/ }).filter({ hasText: '2' }).waitFor();
});

test("the API's field errors are shown beside their fields, and nothing is sent", async () => {
  await compose();
  await page.getByLabel('User ids').check();
  await page.getByRole('textbox', { name: 'User ids' }).fill('ann bob');
  await page.getByLabel('Title').first().fill('Refused');
  // A fallback zone without a local time, and a TTL past four weeks.
  await page.getByLabel('Time zone').fill('Europe/Berlin');
  await page.getByLabel('TTL (seconds)').fill('9999999');
  await page.getByRole('button', { name: 'Review and send…' }).click();
  await page.getByRole('region', { name: 'Send to 2 users?' }).getByRole('button', { name: 'Send', exact: true }).click();
  await page.locator('[data-field="options.timezone"]').waitFor();
  expect(await page.locator('[data-field="options.timezone"]').innerText()).toMatch(/local_time/);
  expect(await page.locator('[data-field="options.ttl"]').innerText()).toMatch(/2419200/);
  // Beside the field itself: inside the label that holds the box.
  expect(await page.getByLabel('Time zone').getAttribute('aria-invalid')).toBe('true');
  await page.getByRole('alert').filter({ hasText: 'Not sent' }).waitFor();
  expect(await notificationsTitled('Refused')).toHaveLength(0);
});

test('sends a test of the message to one installation', async () => {
  await compose();
  await page.getByLabel('Title').first().fill('Only a test');
  await page.getByLabel('Installation id').fill('eve-phone');
  await page.getByRole('button', { name: 'Send test' }).click();
  await page.getByRole('status').filter({ hasText: 'Test sent' }).waitFor();
  const [test] = await notificationsTitled('Only a test');
  const settled = await app.settled(test.id);
  expect(settled).toMatchObject({ target_users: 1, statistics: { installations: 1, accepted: 1 } });
  expect((await app.deliveries(test.id)).map((d) => d.installation_id)).toEqual(['eve-phone']);
});

test('a token without the abilities to send sees the page read-only, the missing ability named', async () => {
  const { plaintext: reader } = await createToken(pipeline.harness.orm.em.fork(), { applicationId: app.id, name: 'reader', abilities: ['notifications:read'] });
  const { plaintext: sender } = await createToken(pipeline.harness.orm.em.fork(), {
    applicationId: app.id,
    name: 'sender',
    abilities: ['notifications:read', 'notifications:send'],
  });
  const other = await browser.newPage();
  try {
    await signIn(other, reader);
    await other.goto(`${base}/dashboard#/notifications/new`);
    await other.getByRole('note').filter({ hasText: 'lacks the notifications:send and notifications:broadcast abilities' }).waitFor();
    expect(await other.getByRole('button', { name: 'Review and send…' }).isDisabled()).toBe(true);
    await open(other, 'Segments');
    await other.getByRole('note').filter({ hasText: 'lacks the segments:write ability' }).waitFor();
    expect(await other.getByRole('button', { name: 'New segment' }).count()).toBe(0);

    await other.evaluate(() => window.sessionStorage.clear());
    await signIn(other, sender);
    await other.goto(`${base}/dashboard#/notifications/new`);
    await other.getByRole('note').filter({ hasText: 'lacks the notifications:broadcast ability that sends to an audience or a segment' }).waitFor();
    await other.getByLabel('User ids').check();
    expect(await other.getByRole('note').count()).toBe(0);
    expect(await other.getByRole('button', { name: 'Review and send…' }).isDisabled()).toBe(false);
  } finally {
    await other.close();
  }
});

test('segments: created, edited with the size counted live, listed with their sizes, deleted', async () => {
  await open(page, 'Segments');
  await page.getByRole('heading', { name: 'Segments' }).waitFor();
  await page.getByRole('button', { name: 'New segment' }).click();
  const editor = page.getByRole('form', { name: 'New segment' });
  await editor.getByLabel('Name').fill('tokyo-pro');
  await editor.getByRole('button', { name: 'Add a tag condition' }).click();
  await editor.getByLabel('Key').fill('plan');
  await editor.getByLabel('Value').fill('pro');
  await editor.getByTestId('audience-size').filter({ hasText: 'Reaches 4 installations' }).waitFor();
  await editor.getByRole('button', { name: 'Save segment' }).click();
  const row = page.getByRole('row', { name: /tokyo-pro/ });
  const rowShows = (text: RegExp) => waitFor(async () => (await row.allInnerTexts()).join('\n'), (shown) => text.test(shown));
  await rowShows(/tokyo-pro\s+plan = pro\s+4\s+4/);

  await row.getByRole('button', { name: 'Edit tokyo-pro' }).click();
  const edit = page.getByRole('form', { name: 'Edit segment tokyo-pro' });
  await edit.getByLabel('Android').check();
  await edit.getByTestId('audience-size').filter({ hasText: 'Reaches 2 installations of 2 users' }).waitFor();
  await edit.getByRole('button', { name: 'Save segment' }).click();
  await rowShows(/android and plan = pro\s+2\s+2/);
  await api('put', '/api/v1/segments/everyone', { audience: { all: true } }).expect(201);
  await page.reload();
  const everyone = page.getByRole('row', { name: /everyone/ });
  await checkViewAtWidths(browser, page, 'segments', () => waitFor(async () => (await everyone.allInnerTexts()).join('\n'), (shown) => /every installation\s+5\s+5/.test(shown)));

  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Delete everyone' }).click();
  await waitFor(() => page.getByRole('row', { name: /everyone/ }).count(), (count) => count === 0);
  await api('get', '/api/v1/segments/everyone').expect(404);
});

test('a running broadcast at local time: its progress, read less often while it waits; a local-time send to users: its pushes still due per hour', async () => {
  const localTime = await thisMinuteUtc();
  // UTC's two pro installations are due at once, Tokyo's two in hours: the walk stops halfway.
  const broadcast = await app.send({
    recipients: { audience: { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } },
    notification: { title: 'Good morning, pro users' },
    options: { local_time: localTime },
  });
  const toUsers = await app.send({
    recipients: { user_ids: ['ann', 'cat', 'dan', 'eve'] },
    notification: { title: 'Your morning digest' },
    options: { local_time: localTime },
  });
  try {
    // Sent in the minute it names: Tokyo (UTC+9) reaches that time 15 hours later.
    const tokyoHourOf = async (id: string) => {
      const due = new Date(Date.parse((await app.notification(id)).created_at) + 15 * 3_600_000);
      due.setUTCMinutes(0, 0, 0);
      return page.evaluate((iso) => new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso)), due.toISOString());
    };
    await page.goto(`${base}/dashboard#/notifications/${broadcast}`);
    const progress = page.locator('section[aria-labelledby="progress-heading"]');
    await progress.locator('.walk-summary').filter({ hasText: '50 %: 2 of 4 installations walked, for 4 target users' }).waitFor({ timeout: 20_000 });
    await progress.locator('.push-summary').filter({ hasText: '2 accepted' }).waitFor();
    expect(await progress.getByRole('progressbar', { name: 'Audience walked' }).getAttribute('aria-valuenow')).toBe('50');
    // Tokyo's wave, not walked yet: its two installations are due in its hour.
    const dueRows = page.locator('table[aria-labelledby="due-heading"] tbody tr');
    const broadcastTokyoHour = await tokyoHourOf(broadcast);
    await waitFor(() => dueRows.allInnerTexts(), (rows) => rows.length === 1 && rows[0] === `${broadcastTokyoHour}\t2`, 20_000);
    // Nothing moves until Tokyo's hour: each read waits twice as long as the one before (1 s, 2 s, 4 s).
    const followNote = page.locator('.follow-note');
    await followNote.filter({ hasText: 'Read again in 4 s' }).waitFor({ timeout: 10_000 });
    await checkViewAtWidths(browser, page, 'notification-progress', () => progress.waitFor(), { show: progress });

    await page.goto(`${base}/dashboard#/notifications/${toUsers}`);
    const tokyoHour = await tokyoHourOf(toUsers);
    await waitFor(() => dueRows.allInnerTexts(), (rows) => rows.length === 1 && rows[0] === `${tokyoHour}\t2`, 20_000);
    await progress.locator('.push-summary').filter({ hasText: /2 accepted[\s\S]*2 still to push/ }).waitFor();
    await checkViewAtWidths(browser, page, 'notification-due-hours', () => dueRows.first().waitFor(), { show: progress });

    // Cancelled from elsewhere, it has ended: the page sees it at its next read, and reads no more.
    await api('post', `/api/v1/notifications/${toUsers}/cancel`).expect(200);
    await followNote.filter({ hasText: 'It has ended: not read again by itself' }).waitFor({ timeout: 10_000 });
    await page.getByText('cancelled', { exact: true }).first().waitFor();
    expect(await progress.count()).toBe(0);
  } finally {
    await api('post', `/api/v1/notifications/${broadcast}/cancel`);
    await api('post', `/api/v1/notifications/${toUsers}/cancel`);
  }
});

test('every other view at both widths: the list with when each is due and its target users, a funnel, a user, the application with its charts', async () => {
  const scheduled = new Date(Date.now() + 86_400_000).toISOString();
  await app.send({ recipients: { user_ids: ['ann', 'bob', 'zed'] }, notification: { title: 'Tomorrow’s sale' }, options: { send_at: scheduled } });
  const opened = await app.send({ recipients: { user_ids: ['ann', 'bob'] }, notification: { title: 'Your order has shipped' } });
  await app.settled(opened);
  for (const delivery of (await app.deliveries(opened)).slice(0, 1)) {
    await request(pipeline.harness.app)
      .post('/api/v1/events')
      .set('Authorization', `Bearer ${app.client}`)
      .send({ event_id: randomUUID(), delivery_id: delivery.id, installation_id: delivery.installation_id, type: 'opened', occurred_at: new Date().toISOString() })
      .expect(201);
  }

  await page.goto(`${base}/dashboard#/notifications`);
  const row = page.getByRole('row', { name: /Tomorrow’s sale/ });
  await checkViewAtWidths(browser, page, 'notifications', () => row.waitFor());
  const header = await page.locator('table.data thead th').allInnerTexts();
  const cells = await row.locator('td').allInnerTexts();
  expect(cells[header.findIndex((h) => /target users/i.test(h))]).toBe('3');
  expect(cells[header.findIndex((h) => /scheduled for/i.test(h))]).not.toBe('—');

  await page.goto(`${base}/dashboard#/notifications/${opened}`);
  await checkViewAtWidths(browser, page, 'notification-funnel', () => page.locator('table.funnel').getByRole('row', { name: /^Opened/ }).filter({ hasText: '1' }).waitFor());

  await page.goto(`${base}/dashboard#/users/ann`);
  await checkViewAtWidths(browser, page, 'user', () => page.locator('section[aria-labelledby="user-deliveries-heading"] tbody tr').first().waitFor());

  await page.goto(`${base}/dashboard#/application`);
  const charts = page.locator('section[aria-labelledby="charts-heading"]');
  await checkViewAtWidths(browser, page, 'application-charts', () => charts.locator('canvas').nth(2).waitFor(), { show: charts.locator('figure').first() });
  const summaries = await charts.locator('.chart-summary').allInnerTexts();
  const { body } = await api('get', '/api/v1/notifications?limit=100').expect(200);
  expect(summaries[0]).toBe(`${body.data.length} notifications sent in 7 days.`);
  expect(summaries[1]).toMatch(/[1-9]\d* pushes accepted, 0 failed, \d+ skipped, 1 opened\./);
  expect(summaries[2]).toMatch(/Opened of accepted, oldest on the left\. Average [\d.]+ % over the \d+ with accepted pushes\./);
  // The charts are drawn at the box's width: a canvas no wider than the window.
  for (const size of [390, 1280]) {
    await page.setViewportSize({ width: size, height: 800 });
    // Redrawn when the box is resized (a ResizeObserver: after the next layout).
    await waitFor(
      () => charts.locator('canvas').evaluateAll((canvases) => canvases.map((canvas) => canvas.getBoundingClientRect().width)),
      (widths) => widths.length === 3 && widths.every((width) => width > 200 && width <= size),
      5000,
    );
  }
});
