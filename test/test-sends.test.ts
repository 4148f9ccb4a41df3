// A test send (`recipients.installation_ids`) end to end, against the simulators: the named
// installations of the application get a real push through the fanout's rules; ids of no
// installation of the application (another application's among them) reach nothing and count as
// a user id without installations does; the ids are validated like the spec's user_ids, and the
// kind of recipients is exclusive.
import request from 'supertest';
import { createToken } from '../src/domain/applications.ts';
import { android, ios, startPipeline, type Pipeline } from './support/fanout.ts';
import { recountedStatistics } from './support/deliveries.ts';

let pipeline: Pipeline;

beforeAll(async () => {
  pipeline = await startPipeline();
}, 120_000);
afterAll(async () => {
  await pipeline.close();
});

const send = (bearer: string, recipients: unknown) =>
  request(pipeline.harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${bearer}`)
    .send({ recipients, notification: { title: 'Test push', body: 'If you can read this, pushes reach this phone.' } });

test("a test send pushes to the application's own installations by id; unknown ids and another application's reach nothing", async () => {
  const app = await pipeline.newApplication();
  const other = await pipeline.newApplication();
  await app.registerAll([
    ['phone-ios', ios('test-send-ios', 'user-a')],
    ['phone-android', android('test-send-android', 'user-a')],
    ['tablet-denied', android('test-send-denied', 'user-b', { permission: 'denied' })],
    ['no-user', { platform: 'android', provider: { identifier: 'test-send-no-user' }, permission: 'authorized' }],
    // The same user's other phone, not named: a test send reaches the ids given, not their users.
    ['phone-not-named', android('test-send-not-named', 'user-a')],
    ['phone-invalid', android('test-send-invalid', 'user-c')],
  ]);
  await pipeline.harness.orm.em.fork().execute(`update installations set status = 'invalid' where application_id = ? and installation_id = 'phone-invalid'`, [app.id]);
  // Registered by another application under an id this one does not have.
  await other.register('theirs', android('test-send-theirs', 'user-x'));

  // notifications:send alone: a test send is not a broadcast.
  const sender = (await createToken(pipeline.harness.orm.em.fork(), { applicationId: app.id, name: 'sender', abilities: ['notifications:send'] })).plaintext;
  const ids = ['phone-ios', 'phone-android', 'tablet-denied', 'no-user', 'phone-invalid', 'unknown-phone', 'theirs'];
  const sent = await send(sender, { installation_ids: ids });
  expect(sent.status).toBe(202);
  expect(sent.body.data).toMatchObject({ status: 'queued', target_users: ids.length });
  // The ids are not echoed: an installation id is what a device registers under.
  expect(JSON.stringify(sent.body)).not.toContain('phone-ios');

  const settled = await app.settled(sent.body.data.id);
  // Four installations of the application considered (the invalid one is not, as for any send):
  // three pushed, the denied one skipped; users: user-a, user-b, and the installation without one.
  expect(settled.statistics).toMatchObject({ users: 3, installations: 4, accepted: 3, failed: 0, skipped: 1 });
  expect(settled.status).toBe('completed');
  expect(settled.target_users).toBe(ids.length);
  expect(settled.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, settled.id));
  const deliveries = await app.deliveries(settled.id);
  expect(deliveries.map((delivery) => [delivery.installation_id, delivery.state, delivery.reason]).sort()).toEqual([
    ['no-user', 'accepted', null],
    ['phone-android', 'accepted', null],
    ['phone-ios', 'accepted', null],
    ['tablet-denied', 'skipped', 'permission_denied'],
  ]);
  const pushedTo = [...pipeline.apns.received.map((push) => push.token), ...pipeline.fcm.received.map((push) => push.token)];
  expect(pushedTo).toEqual(expect.arrayContaining(['test-send-ios', 'test-send-android', 'test-send-no-user']));
  for (const never of ['test-send-denied', 'test-send-not-named', 'test-send-invalid', 'test-send-theirs']) expect(pushedTo).not.toContain(never);
}, 60_000);

test('a test send to ids of no installation ends completed with zero counters, as a send to users without installations does', async () => {
  const app = await pipeline.newApplication();
  const sent = await send(app.server, { installation_ids: ['nobody-1', 'nobody-2'] });
  expect(sent.status).toBe(202);
  const settled = await app.settled(sent.body.data.id);
  expect(settled).toMatchObject({ status: 'completed', target_users: 2 });
  expect(settled.statistics).toEqual({ users: 0, installations: 0, accepted: 0, received: 0, displayed: 0, opened: 0, failed: 0, skipped: 0 });
});

test.each<[string, unknown, string]>([
  ['an empty list', [], 'recipients.installation_ids'],
  ['more than 100 ids', Array.from({ length: 101 }, (_, i) => `phone-${i}`), 'recipients.installation_ids'],
  ['an id given twice', ['phone-1', 'phone-1'], 'recipients.installation_ids'],
  ['an empty id', ['phone-1', ''], 'recipients.installation_ids.1'],
  ['an id over 255 characters', ['x'.repeat(256)], 'recipients.installation_ids.0'],
  ['an id that is not a string', [42], 'recipients.installation_ids.0'],
  ['not a list', 'phone-1', 'recipients.installation_ids'],
])('installation_ids with %s is 422 naming it, and nothing is sent', async (_, installationIds, field) => {
  const app = await pipeline.newApplication();
  const res = await send(app.server, { installation_ids: installationIds });
  expect(res.status).toBe(422);
  expect(Object.keys(res.body.errors)).toEqual([field]);
  const list = await request(pipeline.harness.app).get('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).expect(200);
  expect(list.body.data).toEqual([]);
});

test('100 ids are accepted, and the ids are one kind of recipients among four', async () => {
  const app = await pipeline.newApplication();
  expect((await send(app.server, { installation_ids: Array.from({ length: 100 }, (_, i) => `phone-${i}`) })).status).toBe(202);
  const both = await send(app.server, { user_ids: ['user-a'], installation_ids: ['phone-1'] });
  expect(both.status).toBe(422);
  expect(both.body.errors).toEqual({ recipients: ['The recipients field must have exactly one of user_ids, audience, segment or installation_ids.'] });
});
