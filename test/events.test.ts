import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { loadDocument } from '../src/http/document.ts';
import { countEvents, insertDelivery, setEventReceivedAt, setInstallationLastSeen, type DeliveryState } from './support/deliveries.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;
let token: string;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('events');
  token = await application.token();
});
afterAll(() => harness.close());

type Body = Record<string, unknown>;

function report(body: Body, bearer = token) {
  return request(harness.app).post('/api/v1/events').set('Authorization', `Bearer ${bearer}`).send(body);
}

async function register(bearer: string, installationId: string, userId: string) {
  const res = await request(harness.app)
    .put(`/api/v1/installations/${installationId}`)
    .set('Authorization', `Bearer ${bearer}`)
    .send({ platform: 'ios', provider: { identifier: `token-${installationId}` }, user_id: userId });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function statistics(notificationId: string, bearer = token) {
  const res = await request(harness.app)
    .get(`/api/v1/notifications/${notificationId}`)
    .set('Authorization', `Bearer ${bearer}`);
  expect(res.status).toBe(200);
  return res.body.data.statistics;
}

type Fixture = {
  app: TestApplication;
  bearer: string;
  notificationId: string;
  phoneA: string;
  phoneB: string;
  installationA: string;
  deliveryA: string;
  deliveryB: string;
};

type DeliveryOutcome = { state: DeliveryState; reason?: string | null };

/**
 * A notification to alice and bob, each with one installation and one delivery: bob's accepted,
 * alice's accepted unless `outcomeA` says otherwise.
 */
async function fixture(app = application, bearer = token, outcomeA: DeliveryOutcome = { state: 'accepted' }): Promise<Fixture> {
  const suffix = randomUUID().slice(0, 8);
  const phoneA = `alice-phone-${suffix}`;
  const phoneB = `bob-phone-${suffix}`;
  const installationA = await register(bearer, phoneA, 'alice');
  const installationB = await register(bearer, phoneB, 'bob');
  const sent = await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${bearer}`)
    .send({ recipients: { user_ids: ['alice', 'bob'] }, notification: { title: 'Hi' } });
  expect(sent.status).toBe(202);
  const notificationId: string = sent.body.data.id;
  const base = { applicationId: app.id, notificationId, state: 'accepted' as const };
  const deliveryA = await insertDelivery(harness.orm, {
    ...base,
    ...outcomeA,
    installationRowId: installationA,
    clientInstallationId: phoneA,
    userId: 'alice',
  });
  const deliveryB = await insertDelivery(harness.orm, {
    ...base,
    installationRowId: installationB,
    clientInstallationId: phoneB,
    userId: 'bob',
  });
  return { app, bearer, notificationId, phoneA, phoneB, installationA, deliveryA, deliveryB };
}

const occurredAt = '2026-11-02T10:03:41.512Z';

function eventFor(f: Fixture, overrides: Body = {}): Body {
  return {
    event_id: randomUUID(),
    delivery_id: f.deliveryA,
    installation_id: f.phoneA,
    type: 'received',
    occurred_at: occurredAt,
    ...overrides,
  };
}

describe('reporting an event', () => {
  test('a new event is 201 with the recorded event and its received_at', async () => {
    const f = await fixture();
    const body = eventFor(f, { type: 'opened' });
    const res = await report(body);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      data: {
        event_id: body.event_id,
        delivery_id: f.deliveryA,
        installation_id: f.phoneA,
        type: 'opened',
        occurred_at: occurredAt,
        received_at: expect.any(String),
      },
    });
    expect(Math.abs(Date.parse(res.body.data.received_at) - Date.now())).toBeLessThan(60_000);
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(1);
  });

  test('the same event_id with the same content is 200 with the stored record, received_at unchanged', async () => {
    const f = await fixture();
    const body = eventFor(f);
    const first = await report(body);
    expect(first.status).toBe(201);
    // The stored event dated an hour back: a replay that re-dated it would answer another time
    // however soon it came, without waiting for the database's clock to move.
    const receivedAt = new Date(Date.parse(first.body.data.received_at) - 3_600_000);
    await setEventReceivedAt(harness.orm, application.id, body.event_id as string, receivedAt);
    const second = await report(body);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ data: { ...first.body.data, received_at: receivedAt.toISOString() } });
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(1);
    expect((await statistics(f.notificationId)).received).toBe(1);
  });

  test('a replay that writes the same instant in another time zone is the same event', async () => {
    const f = await fixture();
    const body = eventFor(f, { occurred_at: '2026-11-02T12:03:41.512+02:00' });
    const first = await report(body);
    expect(first.status).toBe(201);
    expect(first.body.data.occurred_at).toBe(occurredAt);
    const second = await report({ ...body, occurred_at: occurredAt });
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
  });

  test('an event_id in upper case is the same event as in lower case', async () => {
    const f = await fixture();
    const body = eventFor(f);
    const first = await report({ ...body, event_id: (body.event_id as string).toUpperCase() });
    expect(first.status).toBe(201);
    expect(first.body.data.event_id).toBe(body.event_id);
    const second = await report(body);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
  });

  test.each([
    ['type', { type: 'opened' }],
    ['occurred_at', { occurred_at: '2026-11-02T10:03:42.512Z' }],
  ])('the same event_id with a different %s is 409 with a message only, and the stored record is kept', async (_field, change) => {
    const f = await fixture();
    const body = eventFor(f);
    const first = await report(body);
    expect(first.status).toBe(201);
    const conflict = await report({ ...body, ...change });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toEqual({ message: expect.any(String) });
    const replay = await report(body);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
  });

  test('the same event_id for another installation (and its delivery) is 409 with a message only', async () => {
    const f = await fixture();
    const body = eventFor(f);
    expect((await report(body)).status).toBe(201);
    const conflict = await report({ ...body, delivery_id: f.deliveryB, installation_id: f.phoneB });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toEqual({ message: expect.any(String) });
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(1);
    const stats = await statistics(f.notificationId);
    expect(stats.received).toBe(1);
  });

  test('the same event_id for another delivery of the same installation is 409', async () => {
    const f = await fixture();
    const other = await fixture();
    // A second delivery to alice's phone, from another notification.
    const secondDelivery = await insertDelivery(harness.orm, {
      applicationId: application.id,
      notificationId: other.notificationId,
      installationRowId: f.installationA,
      clientInstallationId: f.phoneA,
      userId: 'alice',
      state: 'accepted',
    });
    const body = eventFor(f);
    expect((await report(body)).status).toBe(201);
    const conflict = await report({ ...body, delivery_id: secondDelivery });
    expect(conflict.status).toBe(409);
    expect(conflict.body.errors).toBeUndefined();
  });

  test('an unknown delivery is 404', async () => {
    const f = await fixture();
    const res = await report(eventFor(f, { delivery_id: randomUUID() }));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });

  test("another application's delivery is 404 and records nothing", async () => {
    const f = await fixture();
    const stranger = await harness.newApplication('stranger');
    const body = eventFor(f);
    const res = await report(body, await stranger.token(['events:write']));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
    expect(await countEvents(harness.orm, stranger.id)).toBe(0);
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(0);
  });

  test('a delivery reported for an installation it was not sent to is 404', async () => {
    const f = await fixture();
    const res = await report(eventFor(f, { installation_id: f.phoneB }));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
    const unknownInstallation = await report(eventFor(f, { installation_id: 'no-such-phone' }));
    expect(unknownInstallation.status).toBe(404);
  });

  test('a delivery_id that is not a UUID is 404', async () => {
    const f = await fixture();
    const res = await report(eventFor(f, { delivery_id: 'not-a-delivery' }));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });

  test('an event for a delivery whose installation was deleted is still recorded', async () => {
    const f = await fixture();
    const deleted = await request(harness.app)
      .delete(`/api/v1/installations/${f.phoneA}`)
      .set('Authorization', `Bearer ${token}`);
    expect(deleted.status).toBe(204);
    const res = await report(eventFor(f, { type: 'displayed' }));
    expect(res.status).toBe(201);
    expect((await statistics(f.notificationId)).displayed).toBe(1);
  });
});

describe('event validation', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture();
  });

  test.each([
    ['event_id is not a UUID', { event_id: 'event-1' }, 'event_id'],
    ['type is not in the enumeration', { type: 'clicked' }, 'type'],
    ['occurred_at is not a date-time', { occurred_at: 'yesterday' }, 'occurred_at'],
    ['occurred_at is a date without a time', { occurred_at: '2026-11-02' }, 'occurred_at'],
    ['occurred_at falls in year 10000 in UTC', { occurred_at: '9999-12-31T23:00:00-05:00' }, 'occurred_at'],
    ['occurred_at is in year 0000', { occurred_at: '0000-06-01T00:00:00Z' }, 'occurred_at'],
    ['occurred_at is a leap second', { occurred_at: '2016-12-31T23:59:60Z' }, 'occurred_at'],
    ['delivery_id is empty', { delivery_id: '' }, 'delivery_id'],
    ['installation_id is longer than 255 characters', { installation_id: 'i'.repeat(256) }, 'installation_id'],
    ['an unknown field is present', { source: 'ios' }, 'source'],
  ])('422 when %s, and nothing is recorded', async (_case, change, field) => {
    const before = await countEvents(harness.orm, application.id);
    const res = await report(eventFor(f, change));
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toContain(field);
    expect(await countEvents(harness.orm, application.id)).toBe(before);
  });

  test.each(['event_id', 'delivery_id', 'installation_id', 'type', 'occurred_at'])('422 keyed %s when it is missing', async (field) => {
    const body = eventFor(f);
    delete body[field];
    const res = await report(body);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
  });

  test('422 naming every required field when the body is empty', async () => {
    const res = await report({});
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(['delivery_id', 'event_id', 'installation_id', 'occurred_at', 'type']);
  });
});

describe('statistics from events', () => {
  test('received, displayed and opened count once per delivery; dismissed has no counter', async () => {
    const f = await fixture();
    const a = (type: string) => eventFor(f, { type });
    const b = (type: string) => eventFor(f, { type, delivery_id: f.deliveryB, installation_id: f.phoneB });
    for (const body of [a('received'), a('displayed'), a('opened'), a('opened'), a('received'), a('dismissed'), b('received'), b('dismissed')]) {
      expect((await report(body)).status).toBe(201);
    }
    expect(await statistics(f.notificationId)).toEqual({
      users: 2,
      installations: 2,
      accepted: 2,
      failed: 0,
      skipped: 0,
      received: 2,
      displayed: 1,
      opened: 1,
    });
  });

  test('a dismissed event alone changes no counter', async () => {
    const f = await fixture();
    const before = await statistics(f.notificationId);
    expect((await report(eventFor(f, { type: 'dismissed' }))).status).toBe(201);
    expect(await statistics(f.notificationId)).toEqual(before);
  });

  test('20 concurrent reports of the same event: one 201, the rest 200, one row', async () => {
    const f = await fixture();
    const body = eventFor(f, { type: 'opened' });
    const responses = await Promise.all(Array.from({ length: 20 }, () => report(body)));
    const statuses = responses.map((r) => r.status).sort((x, y) => x - y);
    expect(statuses).toEqual([...Array(19).fill(200), 201]);
    const created = responses.find((r) => r.status === 201)!;
    for (const r of responses) expect(r.body).toEqual(created.body);
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(1);
    expect((await statistics(f.notificationId)).opened).toBe(1);
  });
});

describe('installation activity', () => {
  test("a recorded event moves the installation's last_seen_at forward", async () => {
    const f = await fixture();
    const longAgo = new Date('2020-01-01T00:00:00.000Z');
    await setInstallationLastSeen(harness.orm, f.installationA, longAgo);
    const read = () =>
      request(harness.app).get(`/api/v1/installations/${f.phoneA}`).set('Authorization', `Bearer ${token}`);
    expect((await read()).body.data.last_seen_at).toBe(longAgo.toISOString());
    const started = Date.now();
    expect((await report(eventFor(f))).status).toBe(201);
    const lastSeen = Date.parse((await read()).body.data.last_seen_at);
    expect(lastSeen).toBeGreaterThan(longAgo.getTime());
    expect(Math.abs(lastSeen - started)).toBeLessThan(60_000);
  });

  test("an event on another installation's delivery leaves this installation's last_seen_at alone", async () => {
    const f = await fixture();
    const longAgo = new Date('2020-01-01T00:00:00.000Z');
    await setInstallationLastSeen(harness.orm, f.installationA, longAgo);
    expect((await report(eventFor(f, { delivery_id: f.deliveryB, installation_id: f.phoneB }))).status).toBe(201);
    const res = await request(harness.app).get(`/api/v1/installations/${f.phoneA}`).set('Authorization', `Bearer ${token}`);
    expect(res.body.data.last_seen_at).toBe(longAgo.toISOString());
  });
});

describe('events only where a push was made', () => {
  const neverSent = (reason: string) => `The delivery was never sent (skipped: ${reason}), so it cannot have events.`;

  async function deliveryRow(f: Fixture, deliveryId: string) {
    const res = await request(harness.app)
      .get(`/api/v1/notifications/${f.notificationId}/deliveries`)
      .set('Authorization', `Bearer ${f.bearer}`);
    expect(res.status).toBe(200);
    return (res.body.data as { id: string }[]).find((d) => d.id === deliveryId) as Record<string, unknown>;
  }

  async function lastSeen(installationId: string) {
    const res = await request(harness.app).get(`/api/v1/installations/${installationId}`).set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(200);
    return res.body.data.last_seen_at as string;
  }

  test.each(['permission_denied', 'permission_not_determined', 'no_credentials', 'duplicate_identifier', 'installation_invalid'])(
    'an event on a delivery skipped for %s is 409 with a message only, naming the reason, and is never counted',
    async (reason) => {
      const f = await fixture(application, token, { state: 'skipped', reason });
      const longAgo = new Date('2020-01-01T00:00:00.000Z');
      await setInstallationLastSeen(harness.orm, f.installationA, longAgo);
      const bodies = ['received', 'displayed', 'opened', 'dismissed'].map((type) => eventFor(f, { type }));
      for (const body of bodies) {
        const res = await report(body);
        expect(res.status).toBe(409);
        expect(res.body).toEqual({ message: neverSent(reason) });
        expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(0);
      }
      // The same refused event again is refused again: nothing was stored to replay.
      expect((await report(bodies[0])).status).toBe(409);
      expect(await statistics(f.notificationId)).toEqual({
        users: 2,
        installations: 2,
        accepted: 1,
        failed: 0,
        skipped: 1,
        received: 0,
        displayed: 0,
        opened: 0,
      });
      expect(await deliveryRow(f, f.deliveryA)).toMatchObject({
        state: 'skipped',
        reason,
        received_at: null,
        displayed_at: null,
        opened_at: null,
        dismissed_at: null,
      });
      expect(await lastSeen(f.phoneA)).toBe(longAgo.toISOString());
    },
  );

  test('an event on a delivery skipped because its installation was deleted is 409 with installation_deleted', async () => {
    const f = await fixture();
    const deleted = await request(harness.app).delete(`/api/v1/installations/${f.phoneA}`).set('Authorization', `Bearer ${token}`);
    expect(deleted.status).toBe(204);
    const other = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${token}`)
      .send({ recipients: { user_ids: ['alice'] }, notification: { title: 'Again' } });
    expect(other.status).toBe(202);
    const skipped = await insertDelivery(harness.orm, {
      applicationId: application.id,
      notificationId: other.body.data.id,
      installationRowId: null,
      clientInstallationId: f.phoneA,
      userId: 'alice',
      state: 'skipped',
      reason: 'installation_deleted',
    });
    const body = eventFor(f, { delivery_id: skipped, type: 'opened' });
    const res = await report(body);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ message: neverSent('installation_deleted') });
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(0);
    expect((await statistics(other.body.data.id)).opened).toBe(0);
  });

  test.each([
    ['pending', null],
    ['accepted', null],
    ['failed', 'provider timeout'],
  ] as const)('an event on a delivery in state %s is still 201 and counted', async (state, reason) => {
    const f = await fixture(application, token, { state, reason });
    for (const type of ['received', 'opened']) {
      const res = await report(eventFor(f, { type }));
      expect(res.status).toBe(201);
    }
    const stats = await statistics(f.notificationId);
    expect(stats.received).toBe(1);
    expect(stats.opened).toBe(1);
  });

  test('a skipped delivery reported for another installation is 404, not 409', async () => {
    const f = await fixture(application, token, { state: 'skipped', reason: 'permission_denied' });
    const res = await report(eventFor(f, { installation_id: f.phoneB }));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });

  test("another application's skipped delivery is 404, not 409", async () => {
    const f = await fixture(application, token, { state: 'skipped', reason: 'no_credentials' });
    const stranger = await harness.newApplication('stranger');
    const res = await report(eventFor(f), await stranger.token(['events:write']));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });

  test('the skipped check comes before event_id: an event_id already recorded elsewhere is refused for the skipped delivery', async () => {
    const f = await fixture();
    const skipped = await fixture(application, token, { state: 'skipped', reason: 'permission_denied' });
    const body = eventFor(f);
    expect((await report(body)).status).toBe(201);
    const res = await report({ ...body, delivery_id: skipped.deliveryA, installation_id: skipped.phoneA });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ message: neverSent('permission_denied') });
    expect(await countEvents(harness.orm, application.id, body.event_id as string)).toBe(1);
  });

  test("the document's two 409 examples are the server's exact answers", async () => {
    const document = loadDocument() as {
      paths: Record<string, { post: { responses: Record<string, { content: Record<string, { examples: Record<string, { value: unknown }> }> }> } }>;
    };
    const examples = document.paths['/api/v1/events'].post.responses['409'].content['application/json'].examples;
    const skipped = await fixture(application, token, { state: 'skipped', reason: 'permission_denied' });
    expect((await report(eventFor(skipped))).body).toEqual(examples['never-sent'].value);
    const body = eventFor(await fixture());
    expect((await report(body)).status).toBe(201);
    expect((await report({ ...body, type: 'opened' })).body).toEqual(examples['event-id-reused'].value);
  });
});
