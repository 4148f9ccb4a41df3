// GET /api/v1/deliveries?user_id=…: a user's deliveries across the application's notifications,
// newest first, a page at a time, each with its notification's id and title; over HTTP against
// real Postgres with responses validated against the document. The deliveries are written by the
// fanout's own statement (insertDeliveries), for notifications sent through the API.
import request from 'supertest';
import { newId } from '../src/db/ids.ts';
import { insertDeliveries, recordResults } from '../src/db/sql/deliveries.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;
let token: string;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('user-deliveries');
  token = await application.token(['notifications:send', 'notifications:read']);
});
afterAll(() => harness.close());

let counter = 0;
/** A fresh user per test, so that tests never see each other's deliveries. */
const newUser = (label: string) => `${label}-${Date.now()}-${++counter}`;

async function send(notification: { title?: string; body?: string }, userIds: string[], bearer = token): Promise<string> {
  const res = await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${bearer}`)
    .send({ recipients: { user_ids: userIds }, notification })
    .expect(202);
  return res.body.data.id as string;
}

/** A delivery as the fanout writes it (this harness runs no worker), accepted unless told otherwise. */
async function deliver(applicationId: string, notificationId: string, userId: string, installationId: string, state: 'accepted' | 'failed' = 'accepted') {
  const deliveryId = newId();
  const em = harness.orm.em.fork();
  await insertDeliveries(em, [
    {
      applicationId,
      notificationId,
      deliveryId,
      rowId: newId(),
      installationId,
      userId,
      platform: installationId.includes('tablet') ? 'android' : 'ios',
      providerIdentifier: 'unused',
      permission: 'authorized',
      lastSeenAt: new Date(),
      deviceLocale: null,
      state: 'pending',
      reason: null,
      locale: null,
      truncation: null,
    },
  ]);
  await recordResults(em, [{ deliveryId, state, reason: state === 'failed' ? 'Unregistered' : null, providerMessageId: null }], true);
  return deliveryId;
}

/** The list as a client builds its URL: `query` is the raw query string. */
const listRaw = (query: string, bearer = token) => request(harness.app).get(`/api/v1/deliveries?${query}`).set('Authorization', `Bearer ${bearer}`);
const list = (userId: string, page: { limit?: number; cursor?: string } = {}) =>
  listRaw(new URLSearchParams({ user_id: userId, ...(page.limit ? { limit: String(page.limit) } : {}), ...(page.cursor ? { cursor: page.cursor } : {}) }).toString());

type Row = { notification_id: string; notification_title: string | null; delivery: { id: string; installation_id: string; user_id: string } };

test("a user's deliveries of every notification, newest first, each with its notification's id and title, as the notification's list shows them", async () => {
  const user = newUser('ann');
  const other = newUser('bob');
  const first = await send({ title: 'Your order has shipped' }, [user, other]);
  const phone = await deliver(application.id, first, user, 'ann-phone');
  const tablet = await deliver(application.id, first, user, 'ann-tablet', 'failed');
  await deliver(application.id, first, other, 'bob-phone');
  const untitled = await send({ body: 'No title here' }, [user]);
  const latest = await deliver(application.id, untitled, user, 'ann-phone');
  await deliver(application.id, await send({ title: 'Not for Ann' }, [other]), other, 'bob-phone');
  // The same user id in another application is another user.
  const elsewhere = await harness.newApplication('user-deliveries-elsewhere');
  const elsewhereToken = await elsewhere.token(['notifications:send']);
  await deliver(elsewhere.id, await send({ title: 'Elsewhere' }, [user], elsewhereToken), user, 'ann-phone');

  const res = await list(user).expect(200);
  const rows = res.body.data as Row[];
  expect(rows.map((row) => [row.delivery.id, row.notification_id, row.notification_title])).toEqual([
    [latest, untitled, null],
    [tablet, first, 'Your order has shipped'],
    [phone, first, 'Your order has shipped'],
  ]);
  expect(res.body.meta).toEqual({ next_cursor: null });
  // Each delivery is exactly the row its notification's deliveries list shows.
  const ofFirst = await request(harness.app)
    .get(`/api/v1/notifications/${first}/deliveries?user_id=${encodeURIComponent(user)}`)
    .set('Authorization', `Bearer ${token}`)
    .expect(200);
  expect(rows.filter((row) => row.notification_id === first).map((row) => row.delivery)).toEqual([...ofFirst.body.data].reverse());
  expect(rows[1].delivery).toMatchObject({ installation_id: 'ann-tablet', platform: 'android', state: 'failed', reason: 'Unregistered', attempts: 1 });
});

test('a user without deliveries has an empty list', async () => {
  await send({ title: 'To nobody with a device' }, [newUser('nobody')]);
  expect((await list(newUser('nobody')).expect(200)).body).toEqual({ data: [], meta: { next_cursor: null } });
});

test('7 deliveries at limit 3: pages of 3, 3 and 1, newest first, every delivery once, next_cursor null on the last', async () => {
  const user = newUser('paged');
  const made: string[] = [];
  for (let i = 0; i < 7; i++) made.push(await deliver(application.id, await send({ title: `Send ${i}` }, [user]), user, `paged-${i}`));
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const res = await list(user, { limit: 3, cursor }).expect(200);
    pages.push((res.body.data as Row[]).map((row) => row.delivery.id));
    cursor = res.body.meta.next_cursor ?? undefined;
    if (cursor !== undefined) expect(cursor).toMatch(/^[A-Za-z0-9_-]{22}$/);
  } while (cursor !== undefined && pages.length < 10);
  expect(pages).toEqual([made.slice(4).reverse(), made.slice(1, 4).reverse(), [made[0]]]);
  // The position before every id has nothing older after it.
  expect((await list(user, { cursor: 'AAAAAAAAAAAAAAAAAAAAAA' }).expect(200)).body.data).toEqual([]);
});

describe('bad input is a 422 naming the parameter', () => {
  test.each([
    ['no user_id', 'limit=5', 'user_id', 'The user_id field is required.'],
    ['an empty user_id', 'user_id=', 'user_id', expect.stringContaining('user_id')],
    ['a user_id over 255 characters', `user_id=${'u'.repeat(256)}`, 'user_id', expect.stringContaining('255')],
    ['limit 0', 'user_id=ann&limit=0', 'limit', expect.stringContaining('limit')],
    ['limit 101', 'user_id=ann&limit=101', 'limit', expect.stringContaining('100')],
    ['a cursor that is not one', 'user_id=ann&cursor=nope', 'cursor', expect.stringContaining('cursor')],
  ])('%s', async (_, query, field, message) => {
    const res = await listRaw(query).expect(422);
    expect(res.body.errors[field]).toEqual([message]);
  });
});
