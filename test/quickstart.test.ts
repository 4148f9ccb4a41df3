// The README's quick start, automated: `herald start --simulate` on an empty database prints a
// demo application whose tokens take a notification all the way to `completed`.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import request from 'supertest';
import { databaseUrl } from './support/harness.ts';
import { startHerald, type HeraldProcess } from './support/processes.ts';
import { waitFor } from './support/receiver.ts';

let herald: HeraldProcess;
let emptyDatabase: string;
const name = `herald_quickstart_${process.pid}`;

async function admin(sql: string) {
  const url = new URL(databaseUrl());
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  await admin(`create database ${name}`);
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  emptyDatabase = url.toString();
  herald = await startHerald(
    ['start', '--simulate'],
    { DATABASE_URL: emptyDatabase, HERALD_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'herald-quickstart-')) },
    // The banner's last line: the lines before it may arrive in later chunks than its first.
    (line) => line.includes('/api/v1/installations?user_id=user-1'),
  );
}, 90_000);
afterAll(async () => {
  await herald?.stop();
  await admin(`drop database if exists ${name} with (force)`);
});

test('the demo tokens register two phones and the printed browser, and send them a notification that completes through the simulators', async () => {
  const output = herald.logs.join('\n');
  const server = /server token \(all abilities\):\s+(hrld_\S+)/.exec(output)?.[1];
  const app = /app token \([^)]*\):\s+(hrld_\S+)/.exec(output)?.[1];
  expect(server).toBeDefined();
  expect(app).toBeDefined();
  const api = request(`http://127.0.0.1:${herald.port}`);

  await api
    .put('/api/v1/installations/phone-1')
    .set('Authorization', `Bearer ${app}`)
    .send({ platform: 'ios', provider: { identifier: 'a1b2c3d4' }, user_id: 'user-1', permission: 'authorized' })
    .expect(201);
  await api
    .put('/api/v1/installations/phone-2')
    .set('Authorization', `Bearer ${app}`)
    .send({ platform: 'android', provider: { identifier: 'fcm-token-1' }, user_id: 'user-1', permission: 'authorized' })
    .expect(201);
  // The banner's web installation: a subscription the Web Push simulator issued.
  const browser = JSON.parse(/installations\/browser-1 [^\n]*\n\s*-d '([^']+)'/.exec(output)![1]);
  expect(browser).toMatchObject({ platform: 'web', user_id: 'user-1', provider: { keys: { p256dh: expect.any(String), auth: expect.any(String) } } });
  await api.put('/api/v1/installations/browser-1').set('Authorization', `Bearer ${app}`).send(browser).expect(201);
  const sent = await api
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${server}`)
    .send({ recipients: { user_ids: ['user-1'] }, notification: { title: 'Hello', body: 'From Herald' } })
    .expect(202);
  expect(sent.body.data.status).toBe('queued');

  const notification = await waitFor(
    async () => (await api.get(`/api/v1/notifications/${sent.body.data.id}`).set('Authorization', `Bearer ${server}`)).body.data,
    (read) => Boolean(read.completed_at),
    15_000,
  );
  expect(notification.status).toBe('completed');
  expect(notification.statistics).toMatchObject({ users: 1, installations: 3, accepted: 3 });

  // The banner's last example: the user's two phones and the browser.
  const devices = await api.get('/api/v1/installations?user_id=user-1').set('Authorization', `Bearer ${server}`).expect(200);
  expect(devices.body.data.map((i: { installation_id: string }) => i.installation_id)).toEqual(['browser-1', 'phone-2', 'phone-1']);
});

test('the banner links the API reference, which the process serves', async () => {
  const link = /API reference: (http:\/\/localhost:\d+\/docs)/.exec(herald.logs.join('\n'))?.[1];
  expect(link).toBe(`http://localhost:${herald.port}/docs`);
  const api = request(`http://127.0.0.1:${herald.port}`);
  const page = await api.get('/docs').expect(200);
  expect(page.text).toContain('docs/swagger-ui-bundle.js');
  await api.get('/docs/swagger-ui-bundle.js').expect(200);
});

test('the banner links the dashboard, which the same process serves', async () => {
  const link = /Dashboard: (\S+) \(sign in with the server token\)/.exec(herald.logs.join('\n'))?.[1];
  expect(link).toBe(`http://localhost:${herald.port}/dashboard`);
  const page = await request(`http://127.0.0.1:${herald.port}`).get('/dashboard').expect(200);
  expect(page.text).toContain('<script type="module" src="dashboard/main.js">');
});
