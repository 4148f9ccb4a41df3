// The send quota is per application and shared by every API process (counted in Postgres).
import request from 'supertest';
import { setSendPolicy } from '../src/domain/rate-limits.ts';
import { countFanoutJobs } from './support/deliveries.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';
import { startHerald, type HeraldProcess } from './support/processes.ts';

let harness: Harness;
let servers: HeraldProcess[] = [];
beforeAll(async () => {
  harness = await startHarness();
  servers = await Promise.all([startHerald(['serve']), startHerald(['serve'])]);
});
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  await harness.close();
});

const send = (port: number, token: string) =>
  request(`http://127.0.0.1:${port}`)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${token}`)
    .send({ recipients: { user_ids: ['u1'] }, notification: { title: 'hi' } });

async function limitedApplication(quota: number, windowSeconds: number): Promise<TestApplication & { tokenValue: string }> {
  const application = await harness.newApplication('rate limited');
  await setSendPolicy(harness.orm.em.fork(), application.id, { quota, windowSeconds });
  return { ...application, tokenValue: await application.token(['notifications:send']) };
}

test('the limit holds exactly across two API processes sending at once', async () => {
  const application = await limitedApplication(10, 60);
  const responses = await Promise.all(
    Array.from({ length: 30 }, (_, i) => send(servers[i % 2].port!, application.tokenValue)),
  );
  const statuses = responses.map((res) => res.status);
  expect(statuses.filter((status) => status === 202)).toHaveLength(10);
  expect(statuses.filter((status) => status === 429)).toHaveLength(20);

  const limited = responses.find((res) => res.status === 429)!;
  expect(limited.body).toEqual({ message: 'Too Many Requests.' });
  expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
  expect(limited.headers['ratelimit-policy']).toBe('"send";q=10;w=60');
  expect(limited.headers.ratelimit).toMatch(/^"send";r=0;t=\d+$/);
  const [{ count }] = await harness.orm.em
    .fork()
    .execute<{ count: number }[]>('select count(*)::int as count from notifications where application_id = ?', [application.id]);
  expect(count).toBe(10);
  // A refused send's statements went out before the quota answered: rolled back, job included.
  expect(await countFanoutJobs(harness, application.id)).toBe(10);
});

test('every accepted send announces the policy and what is left of it', async () => {
  const application = await limitedApplication(5, 30);
  const first = await send(servers[0].port!, application.tokenValue);
  const second = await send(servers[1].port!, application.tokenValue);
  expect(first.headers['ratelimit-policy']).toBe('"send";q=5;w=30');
  expect(first.headers.ratelimit).toMatch(/^"send";r=4;t=(29|30)$/);
  expect(second.headers.ratelimit).toMatch(/^"send";r=3;t=\d+$/);
});

test('the window resets: once it has passed, sends are accepted again', async () => {
  const application = await limitedApplication(2, 60);
  await send(servers[0].port!, application.tokenValue).expect(202);
  await send(servers[1].port!, application.tokenValue).expect(202);
  await send(servers[0].port!, application.tokenValue).expect(429);
  // End the window now instead of waiting a minute.
  await harness.orm.em.fork().execute('update rate_limits set expire = 0 where key like ?', [`%${application.id}`]);
  const again = await send(servers[1].port!, application.tokenValue).expect(202);
  expect(again.headers.ratelimit).toMatch(/^"send";r=1;/);
});

test('another application is unaffected by one that exhausted its quota', async () => {
  const exhausted = await limitedApplication(1, 60);
  const other = await limitedApplication(1, 60);
  await send(servers[0].port!, exhausted.tokenValue).expect(202);
  await send(servers[1].port!, exhausted.tokenValue).expect(429);
  await send(servers[1].port!, other.tokenValue).expect(202);
});

test('an application without its own limit gets the service default', async () => {
  const application = await harness.newApplication('default limit');
  const token = await application.token(['notifications:send']);
  const res = await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${token}`)
    .send({ recipients: { user_ids: ['u1'] }, notification: { title: 'hi' } })
    .expect(202);
  // The harness runs with a default of 100000 per 60 s.
  expect(res.headers['ratelimit-policy']).toBe('"send";q=100000;w=60');
});
