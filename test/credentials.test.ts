// Provider credentials at rest: encrypted, shown without secrets, and a worker refuses to start
// without the key that opens them.
import { createCipheriv, randomBytes } from 'node:crypto';
import request from 'supertest';
import {
  decryptSecret,
  encryptSecret,
  listCredentials,
  openCredential,
  setApnsCredentials,
  setFcmCredentials,
  upgradeSealedCredentials,
  type Provider,
} from '../src/domain/credentials.ts';
import { ProviderCredential } from '../src/db/entities.ts';
import { createLogger } from '../src/logging/logger.ts';
import { databaseUrl, startHarness, type Harness } from './support/harness.ts';
import { createDatabase } from './support/seed.ts';
import { startHerald } from './support/processes.ts';
import { ecKeyPair, rsaKeyPair } from './support/simulators.ts';

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

test('neither the .p8 key nor the service account private key is stored in clear', async () => {
  const application = await harness.newApplication();
  const key = randomBytes(32);
  const apnsKey = ecKeyPair().privateKey;
  const fcmKey = rsaKeyPair().privateKey;
  await setApnsCredentials(harness.orm.em.fork(), application.id, { key: apnsKey, keyId: 'KEYID00001', teamId: 'TEAMID0001', bundleId: 'b', sandbox: true }, key);
  await setFcmCredentials(
    harness.orm.em.fork(),
    application.id,
    { serviceAccount: { project_id: 'p', client_email: 'e@p.iam.gserviceaccount.com', private_key: fcmKey } },
    key,
  );
  const rows = await harness.orm.em
    .fork()
    .execute<Record<string, unknown>[]>('select * from provider_credentials where application_id = ?', [application.id]);
  const stored = JSON.stringify(rows);
  const keyBody = (pem: string) => pem.split('\n')[1];
  expect(stored).not.toContain(keyBody(apnsKey));
  expect(stored).not.toContain(keyBody(fcmKey));
  expect(stored).not.toContain('PRIVATE KEY');

  const shown = await listCredentials(harness.orm.em.fork(), application.id);
  expect(shown.map((credential) => credential.settings)).toEqual([
    { keyId: 'KEYID00001', teamId: 'TEAMID0001', bundleId: 'b', sandbox: true },
    { projectId: 'p', clientEmail: 'e@p.iam.gserviceaccount.com' },
  ]);
});

const owner = { applicationId: '0192f6c1-0000-7000-8000-000000000001', provider: 'apns' } as const;

test('a secret opens only with the key it was sealed with', () => {
  const key = randomBytes(32);
  const sealed = encryptSecret('secret', key, owner);
  expect(sealed).toMatch(/^v2\./);
  expect(decryptSecret(sealed, key, owner)).toBe('secret');
  expect(() => decryptSecret(sealed, randomBytes(32), owner)).toThrow(/HERALD_CREDENTIALS_KEY is not the key they were sealed with/);
  expect(encryptSecret('secret', key, owner)).not.toBe(sealed);
});

/** What the first release stored: AES-256-GCM without associated data. */
function sealV1(plaintext: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), sealed.toString('base64')].join('.');
}

const apnsCredentials = (bundleId = 'b') => ({ key: ecKeyPair().privateKey, keyId: 'KEYID00002', teamId: 'TEAMID0002', bundleId, sandbox: false });
const fcmCredentials = () => ({
  serviceAccount: { project_id: 'p', client_email: 'e@p.iam.gserviceaccount.com', private_key: rsaKeyPair().privateKey },
});

async function storedRow<P extends Provider>(applicationId: string, provider: P) {
  const row = await harness.orm.em.fork().findOneOrFail(ProviderCredential, { applicationId, provider }, { disableIdentityMap: true });
  return row as ProviderCredential & { provider: P };
}

async function setSecret(id: string, secret: string) {
  await harness.orm.em.fork().execute('update provider_credentials set secret = ? where id = ?', [secret, id]);
}

test("a sealed secret copied onto another application's or provider's row does not open there", async () => {
  const key = randomBytes(32);
  const first = await harness.newApplication();
  const second = await harness.newApplication();
  await setApnsCredentials(harness.orm.em.fork(), first.id, apnsCredentials('first'), key);
  await setFcmCredentials(harness.orm.em.fork(), first.id, fcmCredentials(), key);
  await setApnsCredentials(harness.orm.em.fork(), second.id, apnsCredentials('second'), key);
  const firstApns = await storedRow(first.id, 'apns');
  expect(openCredential(firstApns, key).bundleId).toBe('first');

  await setSecret((await storedRow(second.id, 'apns')).id, firstApns.secret);
  const otherApplication = await storedRow(second.id, 'apns');
  expect(() => openCredential(otherApplication, key)).toThrow(
    `Cannot open the apns credentials of application ${second.id}: HERALD_CREDENTIALS_KEY is not the key they were sealed with, or they were sealed for another application or provider.`,
  );
  await setSecret((await storedRow(first.id, 'fcm')).id, firstApns.secret);
  const otherProvider = await storedRow(first.id, 'fcm');
  expect(() => openCredential(otherProvider, key)).toThrow(
    `Cannot open the fcm credentials of application ${first.id}: HERALD_CREDENTIALS_KEY is not the key they were sealed with, or they were sealed for another application or provider.`,
  );
});

test("v1 credentials still open, and a worker's start re-seals them bound to their row, leaving any it cannot open", async () => {
  const key = randomBytes(32);
  const application = await harness.newApplication();
  const stranger = await harness.newApplication();
  const apns = apnsCredentials('legacy');
  await setApnsCredentials(harness.orm.em.fork(), application.id, apns, key);
  await setFcmCredentials(harness.orm.em.fork(), application.id, fcmCredentials(), key);
  await setApnsCredentials(harness.orm.em.fork(), stranger.id, apnsCredentials(), key);
  const before = await storedRow(application.id, 'apns');
  await setSecret(before.id, sealV1(apns.key, key));
  const fcm = await storedRow(application.id, 'fcm');
  await setSecret(fcm.id, sealV1(JSON.stringify(fcmCredentials().serviceAccount), key));
  // Sealed with some other key: it stays as it is, and does not keep the others from being upgraded.
  const otherKeyRow = await storedRow(stranger.id, 'apns');
  const otherKeySecret = sealV1(apns.key, randomBytes(32));
  await setSecret(otherKeyRow.id, otherKeySecret);
  expect(openCredential(await storedRow(application.id, 'apns'), key).key).toBe(apns.key);

  const warnings: string[] = [];
  const logger = createLogger('warn', { write: (line: string) => warnings.push(line) });
  expect(await upgradeSealedCredentials(harness.orm.em.fork(), key, logger)).toBe(2);

  const after = await storedRow(application.id, 'apns');
  expect(after.secret).toMatch(/^v2\./);
  expect(openCredential(after, key)).toEqual(apns);
  expect((await storedRow(application.id, 'fcm')).secret).toMatch(/^v2\./);
  // Re-sealing is not a change of credentials: running workers' clients stay valid.
  expect(after.updatedAt).toEqual(before.updatedAt);
  expect((await storedRow(stranger.id, 'apns')).secret).toBe(otherKeySecret);
  expect(warnings.join('')).toContain(stranger.id);
  expect(await upgradeSealedCredentials(harness.orm.em.fork(), key, logger)).toBe(0);
});

test('an APNs key that is not an EC key is refused when it is set, not at the first push', async () => {
  const application = await harness.newApplication();
  await expect(
    setApnsCredentials(harness.orm.em.fork(), application.id, { key: rsaKeyPair().privateKey, keyId: 'KEYID00002', teamId: 'TEAMID0002', bundleId: 'b', sandbox: false }, randomBytes(32)),
  ).rejects.toThrow(/EC/);
});

test('a worker does not start when credentials are stored and HERALD_CREDENTIALS_KEY is missing', async () => {
  const application = await harness.newApplication();
  await setApnsCredentials(
    harness.orm.em.fork(),
    application.id,
    { key: ecKeyPair().privateKey, keyId: 'KEYID00002', teamId: 'TEAMID0002', bundleId: 'b', sandbox: false },
    randomBytes(32),
  );
  await expect(startHerald(['work'], {}, (line) => line.includes('workers started'))).rejects.toThrow(
    /provider credential\(s\)( and \d+ webhook signing secret\(s\))? are stored but HERALD_CREDENTIALS_KEY is not set/,
  );
});

test('a worker started with the key re-seals v1 credentials before it takes jobs', async () => {
  const key = randomBytes(32);
  const application = await harness.newApplication();
  const apns = apnsCredentials('worker');
  await setApnsCredentials(harness.orm.em.fork(), application.id, apns, key);
  const row = await storedRow(application.id, 'apns');
  await setSecret(row.id, sealV1(apns.key, key));
  const worker = await startHerald(
    ['work'],
    { HERALD_CREDENTIALS_KEY: key.toString('base64'), HERALD_QUEUE_SCHEMA: `pgboss_${randomBytes(4).toString('hex')}` },
    (line) => line.includes('workers started'),
  );
  await worker.stop();
  const after = await storedRow(application.id, 'apns');
  expect(after.secret).toMatch(/^v2\./);
  expect(openCredential(after, key)).toEqual(apns);
  expect(worker.logs.join('\n')).toContain('provider credentials re-sealed, bound to their application and provider');
});

describe("a worker's start on a database of its own, whose credentials it tries with its key", () => {
  let own: Harness;
  let drop: () => Promise<void>;
  const key = randomBytes(32);
  beforeAll(async () => {
    // Its own database: a worker's start tries (and marks) every credential stored.
    const admin = Object.assign(new URL(databaseUrl()), { pathname: '/postgres' }).toString();
    const database = await createDatabase(admin, `herald_keys_${randomBytes(4).toString('hex')}`);
    drop = database.drop;
    own = await startHarness({ databaseUrl: database.url, queueSchema: `pgboss_${randomBytes(4).toString('hex')}` });
  });
  afterAll(async () => {
    await own.close();
    await drop();
  });
  const worker = (workerKey: Buffer) =>
    startHerald(
      ['work'],
      { DATABASE_URL: own.url, HERALD_CREDENTIALS_KEY: workerKey.toString('base64'), HERALD_QUEUE_SCHEMA: own.queueSchema },
      (line) => line.includes('workers started'),
    );
  const health = async (applicationId: string) =>
    (await listCredentials(own.orm.em.fork(), applicationId)).map((credential) => [credential.provider, credential.unhealthySince !== null, credential.lastError]);

  test('a key that opens none of them: the worker refuses to start, says why and what to do, and marks nothing', async () => {
    const application = await own.newApplication();
    await setApnsCredentials(own.orm.em.fork(), application.id, apnsCredentials(), key);
    const refused = (await worker(randomBytes(32)).catch((error: Error) => error)) as Error;
    expect(refused.message).toMatch(/exited with 1/);
    expect(refused.message).toContain('HERALD_CREDENTIALS_KEY opens none of the 1 stored provider credential(s)');
    expect(refused.message).toContain('herald credentials rotate-key');
    expect(refused.message).not.toContain('workers started');
    expect(refused.message).not.toContain('worker health listening');
    expect(await health(application.id)).toEqual([['apns', false, null]]);
  });

  test('a key that opens some: the worker starts, names each application it cannot open once, and shows those unhealthy', async () => {
    const opened = await own.newApplication();
    await setApnsCredentials(own.orm.em.fork(), opened.id, apnsCredentials(), key);
    const damaged = await own.newApplication();
    await setApnsCredentials(own.orm.em.fork(), damaged.id, apnsCredentials(), key);
    await setFcmCredentials(own.orm.em.fork(), damaged.id, fcmCredentials(), key);
    const apns = await own.orm.em.fork().findOneOrFail(ProviderCredential, { applicationId: damaged.id, provider: 'apns' });
    // One row damaged, the other sealed with another key.
    await own.orm.em.fork().execute('update provider_credentials set secret = ? where id = ?', [`${apns.secret.slice(0, -8)}AAAAAAA=`, apns.id]);
    await own.orm.em
      .fork()
      .execute(`update provider_credentials set secret = ? where application_id = ? and provider = 'fcm'`, [
        encryptSecret('{}', randomBytes(32), { applicationId: damaged.id, provider: 'fcm' }),
        damaged.id,
      ]);

    const started = await worker(key);
    await started.stop();
    const named = started.logs.filter((line) => line.includes(damaged.id));
    expect(named).toHaveLength(1);
    expect(JSON.parse(named[0])).toMatchObject({ level: 40, applicationId: damaged.id, credentials: ['apns', 'fcm'] });
    expect(named[0]).toContain('cannot be opened with this key');
    expect(await health(damaged.id)).toEqual([
      ['apns', true, 'cannot be opened with this key'],
      ['fcm', true, 'cannot be opened with this key'],
    ]);
    expect(await health(opened.id)).toEqual([['apns', false, null]]);
    const shown = await request(own.app).get('/api/v1/app').set('Authorization', `Bearer ${await damaged.token()}`).expect(200);
    expect(shown.body.data.credentials.ios).toMatchObject({ status: 'unhealthy', reason: 'cannot be opened with this key' });

    // Stored again with the key: the next start finds them opening, and the mark is gone.
    await setApnsCredentials(own.orm.em.fork(), damaged.id, apnsCredentials(), key);
    await own.orm.em.fork().execute(`update provider_credentials set unhealthy_since = now(), last_error = 'cannot be opened with this key' where application_id = ? and provider = 'apns'`, [damaged.id]);
    await (await worker(key)).stop();
    expect(await health(damaged.id)).toEqual([
      ['apns', false, null],
      ['fcm', true, 'cannot be opened with this key'],
    ]);
  });
});

test('set-apns refuses a key id or team id that is not 10 characters and a key file that is not a .p8, in words', async () => {
  const application = await harness.newApplication();
  const set = (credentials: Partial<ReturnType<typeof apnsCredentials>>) =>
    setApnsCredentials(harness.orm.em.fork(), application.id, { ...apnsCredentials(), ...credentials }, randomBytes(32));
  await expect(set({ keyId: 'ABC123' })).rejects.toThrow('The key id must be the 10 letters and digits Apple shows for it (e.g. ABC123DEFG); got "ABC123".');
  await expect(set({ teamId: 'TEAM-12345' })).rejects.toThrow('The team id must be the 10 letters and digits Apple shows for it');
  await expect(set({ key: 'not a key' })).rejects.toThrow(
    'The key file (the .p8 downloaded from Apple\'s developer site, under Keys) is not a private key in PEM form (a block beginning "-----BEGIN PRIVATE KEY-----").',
  );
  expect(await listCredentials(harness.orm.em.fork(), application.id)).toEqual([]);
});

test("set-fcm checks the service account's fields, in words", async () => {
  const application = await harness.newApplication();
  const account = fcmCredentials().serviceAccount;
  const set = (serviceAccount: Record<string, unknown>) =>
    setFcmCredentials(harness.orm.em.fork(), application.id, { serviceAccount: serviceAccount as typeof account }, randomBytes(32));
  await expect(set({ ...account, type: 'authorized_user' })).rejects.toThrow('The file is not a service account key: its "type" is "authorized_user", not "service_account".');
  await expect(set({ ...account, project_id: '' })).rejects.toThrow('The service account has no project_id');
  await expect(set({ ...account, client_email: 'herald' })).rejects.toThrow("The service account's client_email is not an email address");
  await expect(set({ ...account, private_key: 'garbage' })).rejects.toThrow("The service account's private_key is not a private key in PEM form");
  await expect(set({ ...account, private_key: ecKeyPair().privateKey })).rejects.toThrow("The service account's private_key must be an RSA key");
  expect(await listCredentials(harness.orm.em.fork(), application.id)).toEqual([]);
});
