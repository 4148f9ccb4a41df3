// GET /api/v1/app: the token's own application, its send policy and its credentials' health as the
// workers find them, against real Postgres, real workers and the provider simulators.
import request from 'supertest';
import { createToken, revokeToken } from '../src/domain/applications.ts';
import { setApnsCredentials, setFcmCredentials } from '../src/domain/credentials.ts';
import { setSendPolicy } from '../src/domain/rate-limits.ts';
import { ApiToken, Application, ProviderCredential } from '../src/db/entities.ts';
import { android, ios, startPipeline, type Pipeline } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;

beforeAll(async () => {
  pipeline = await startPipeline({ sendDeadlineSeconds: 1 });
});
afterAll(() => pipeline.close());

const em = () => pipeline.harness.orm.em.fork();
const getApp = (token?: string) => {
  const req = request(pipeline.harness.app).get('/api/v1/app');
  return token === undefined ? req : req.set('Authorization', `Bearer ${token}`);
};

async function credentialRow(applicationId: string, provider: 'apns' | 'fcm') {
  return em().findOneOrFail(ProviderCredential, { applicationId, provider }, { disableIdentityMap: true });
}

const notConfigured = (provider: 'apns' | 'fcm') => ({ provider, status: 'not_configured', since: null, reason: null, updated_at: null });
const webNotConfigured = { ...notConfigured('apns'), provider: 'webpush', public_key: null };

test('every field: the application, this token, the service default send policy, no credentials', async () => {
  const application = await pipeline.harness.newApplication('Shop');
  const { plaintext } = await createToken(em(), { applicationId: application.id, name: 'backend', abilities: ['notifications:send', 'notifications:read'] });
  const row = await em().findOneOrFail(Application, { id: application.id });
  const res = await getApp(plaintext).expect(200);
  expect(res.body).toEqual({
    data: {
      id: application.id,
      name: 'Shop',
      created_at: row.createdAt.toISOString(),
      vapid_public_key: null,
      token: { name: 'backend', abilities: ['notifications:send', 'notifications:read'] },
      // The harness's service default (HERALD_SEND_QUOTA / HERALD_SEND_WINDOW_SECONDS).
      send_policy: { quota: 100_000, window_seconds: 60 },
      credentials: { ios: notConfigured('apns'), android: notConfigured('fcm'), web: webNotConfigured },
    },
  });
});

test('any valid token reads it, whatever its abilities; each token sees its own name and abilities', async () => {
  const application = await pipeline.harness.newApplication('abilities');
  for (const abilities of [['events:write'], ['installations:read'], ['*']]) {
    const { plaintext } = await createToken(em(), { applicationId: application.id, name: `only ${abilities[0]}`, abilities });
    const res = await getApp(plaintext).expect(200);
    expect(res.body.data.token).toEqual({ name: `only ${abilities[0]}`, abilities });
    expect(res.body.data.id).toBe(application.id);
  }
});

test('a token of another application sees only its own application', async () => {
  const ours = await pipeline.harness.newApplication('ours');
  await setApnsCredentials(em(), ours.id, pipeline.credentials.apns, pipeline.credentialsKey);
  await setSendPolicy(em(), ours.id, { quota: 5, windowSeconds: 5 });
  const theirs = await pipeline.harness.newApplication('theirs');
  const res = await getApp(await theirs.token()).expect(200);
  expect(res.body.data).toMatchObject({
    id: theirs.id,
    name: 'theirs',
    send_policy: { quota: 100_000, window_seconds: 60 },
    credentials: { ios: notConfigured('apns'), android: notConfigured('fcm'), web: webNotConfigured },
  });
  expect((await getApp(await ours.token()).expect(200)).body.data).toMatchObject({ id: ours.id, credentials: { ios: { status: 'unverified' } } });
});

test('no token, a malformed one or a revoked one is 401', async () => {
  expect((await getApp()).status).toBe(401);
  expect((await getApp('hrld_nope')).status).toBe(401);
  const application = await pipeline.harness.newApplication('revoked');
  const token = await application.token(['events:write']);
  await getApp(token).expect(200);
  const row = await em().findOneOrFail(ApiToken, { publicId: token.split('_')[1] });
  await revokeToken(em(), row.id);
  const res = await getApp(token);
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ message: 'Unauthenticated.' });
});

test('a query parameter is 422', async () => {
  const application = await pipeline.harness.newApplication('query');
  const res = await request(pipeline.harness.app).get('/api/v1/app?verbose=1').set('Authorization', `Bearer ${await application.token()}`);
  expect(res.status).toBe(422);
  expect(res.body).toEqual({ message: 'The verbose parameter is not allowed.', errors: { verbose: ['The verbose parameter is not allowed.'] } });
});

test("the application's own send policy, set with `herald apps limit`, replaces the default; --default brings it back", async () => {
  const application = await pipeline.harness.newApplication('limited');
  // The policy is shown to a token that may send.
  const token = await application.token(['notifications:send']);
  await setSendPolicy(em(), application.id, { quota: 7, windowSeconds: 30 });
  expect((await getApp(token).expect(200)).body.data.send_policy).toEqual({ quota: 7, window_seconds: 30 });
  // The quota in force is the one a send is held to.
  const sent = await request(pipeline.harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${await application.token(['notifications:send'])}`)
    .send({ recipients: { user_ids: ['nobody'] }, notification: { title: 'Hi' } })
    .expect(202);
  expect(sent.headers['ratelimit-policy']).toBe('"send";q=7;w=30');
  await setSendPolicy(em(), application.id, null);
  expect((await getApp(token).expect(200)).body.data.send_policy).toEqual({ quota: 100_000, window_seconds: 60 });
});

test('stored credentials are unverified until a provider accepts a push, then healthy; setting them again makes them unverified and moves their time', async () => {
  const app = await pipeline.newApplication();
  const res = await getApp(app.server).expect(200);
  const apns = await credentialRow(app.id, 'apns');
  const fcm = await credentialRow(app.id, 'fcm');
  expect(res.body.data.credentials).toEqual({
    ios: { provider: 'apns', status: 'unverified', since: null, reason: null, updated_at: apns.updatedAt.toISOString() },
    android: { provider: 'fcm', status: 'unverified', since: null, reason: null, updated_at: fcm.updatedAt.toISOString() },
    web: webNotConfigured,
  });
  await app.register('verified-phone', ios('verified-1', 'vera'));
  await app.register('verified-tablet', android('verified-2', 'vera'));
  expect((await app.settled(await app.send({ recipients: { user_ids: ['vera'] }, notification: { title: 'Hi' } }))).status).toBe('completed');
  expect((await getApp(app.server).expect(200)).body.data.credentials).toEqual({
    ios: { provider: 'apns', status: 'healthy', since: null, reason: null, updated_at: apns.updatedAt.toISOString() },
    android: { provider: 'fcm', status: 'healthy', since: null, reason: null, updated_at: fcm.updatedAt.toISOString() },
    web: webNotConfigured,
  });
  await setFcmCredentials(em(), app.id, pipeline.credentials.fcm, pipeline.credentialsKey);
  const again = await getApp(app.server).expect(200);
  expect(again.body.data.credentials.android.status).toBe('unverified');
  expect(Date.parse(again.body.data.credentials.android.updated_at)).toBeGreaterThan(fcm.updatedAt.getTime());
  expect(again.body.data.credentials.ios).toMatchObject({ status: 'healthy', updated_at: apns.updatedAt.toISOString() });
  expect(JSON.stringify(again.body)).not.toContain('PRIVATE KEY');
});

test('credentials APNs refuses are unhealthy with its reason until a push is accepted again; the other platform stays healthy', async () => {
  pipeline.apns.setRules([{ prefix: 'refused-', reason: 'InvalidProviderToken' }]);
  try {
    const app = await pipeline.newApplication();
    await app.register('refused-phone', ios('refused-1', 'rita'));
    const failed = await app.send({ recipients: { user_ids: ['rita'] }, notification: { title: 'Hi' } });
    expect((await app.settled(failed)).status).toBe('failed');

    const res = await getApp(app.server).expect(200);
    const apns = await credentialRow(app.id, 'apns');
    expect(res.body.data.credentials.ios).toEqual({
      provider: 'apns',
      status: 'unhealthy',
      since: apns.unhealthySince!.toISOString(),
      reason: 'InvalidProviderToken',
      updated_at: apns.updatedAt.toISOString(),
    });
    expect(res.body.data.credentials.android.status).toBe('unverified');

    pipeline.apns.setRules([]);
    await app.register('accepted-phone', ios('accepted-1', 'rita'));
    const accepted = await app.send({ recipients: { user_ids: ['rita'] }, notification: { title: 'Again' } });
    expect((await app.settled(accepted)).statistics.accepted).toBeGreaterThan(0);
    expect((await getApp(app.server).expect(200)).body.data.credentials.ios).toMatchObject({ status: 'healthy', since: null, reason: null });
  } finally {
    pipeline.apns.setRules([]);
  }
}, 60_000);

test('a provider that cannot be reached is unreachable (not unhealthy: the credentials are not at fault) until it answers again', async () => {
  const app = await pipeline.newApplication();
  await app.register('hung-phone', ios('hung-1', 'hugo'));
  // Past the 1 s send deadline; short, so that the answer it holds back does not outlive the file.
  pipeline.apns.setLatency(5_000);
  try {
    const id = await app.send({ recipients: { user_ids: ['hugo'] }, notification: { title: 'Hi' } });
    // The worker gives a batch up at its 1 s send deadline.
    const ios = await waitFor(async () => (await getApp(app.server).expect(200)).body.data.credentials.ios, (credential) => credential.status === 'unreachable', 15_000);
    const apns = await credentialRow(app.id, 'apns');
    expect(ios).toEqual({ provider: 'apns', status: 'unreachable', since: apns.unreachableSince!.toISOString(), reason: null, updated_at: apns.updatedAt.toISOString() });

    pipeline.apns.setLatency(0);
    expect((await app.settled(id, 30_000)).status).toBe('completed');
    expect((await getApp(app.server).expect(200)).body.data.credentials.ios).toMatchObject({ status: 'healthy', since: null });
  } finally {
    pipeline.apns.setLatency(0);
  }
}, 60_000);
