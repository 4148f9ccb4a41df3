// Provider credentials at rest: encrypted, shown without secrets, and a worker refuses to start
// without the key that opens them.
import { randomBytes } from 'node:crypto';
import { decryptSecret, encryptSecret, listCredentials, setApnsCredentials, setFcmCredentials } from '../src/domain/credentials.ts';
import { startHarness, type Harness } from './support/harness.ts';
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
  await setApnsCredentials(harness.orm.em.fork(), application.id, { key: apnsKey, keyId: 'K1', teamId: 'T1', bundleId: 'b', sandbox: true }, key);
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
    { keyId: 'K1', teamId: 'T1', bundleId: 'b', sandbox: true },
    { projectId: 'p', clientEmail: 'e@p.iam.gserviceaccount.com' },
  ]);
});

test('a secret opens only with the key it was sealed with', () => {
  const key = randomBytes(32);
  const sealed = encryptSecret('secret', key);
  expect(decryptSecret(sealed, key)).toBe('secret');
  expect(() => decryptSecret(sealed, randomBytes(32))).toThrow(/HERALD_CREDENTIALS_KEY/);
  expect(encryptSecret('secret', key)).not.toBe(sealed);
});

test('an APNs key that is not an EC key is refused when it is set, not at the first push', async () => {
  const application = await harness.newApplication();
  await expect(
    setApnsCredentials(harness.orm.em.fork(), application.id, { key: rsaKeyPair().privateKey, keyId: 'K', teamId: 'T', bundleId: 'b', sandbox: false }, randomBytes(32)),
  ).rejects.toThrow(/EC/);
});

test('a worker does not start when credentials are stored and HERALD_CREDENTIALS_KEY is missing', async () => {
  const application = await harness.newApplication();
  await setApnsCredentials(
    harness.orm.em.fork(),
    application.id,
    { key: ecKeyPair().privateKey, keyId: 'K', teamId: 'T', bundleId: 'b', sandbox: false },
    randomBytes(32),
  );
  await expect(startHerald(['work'], {}, (line) => line.includes('workers started'))).rejects.toThrow(
    /provider credential\(s\) are stored but HERALD_CREDENTIALS_KEY is not set/,
  );
});
