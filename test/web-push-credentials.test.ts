// An application's VAPID key pair: `herald credentials set-webpush` generates one (or stores the one
// given), sealed like the other credentials; replacing it needs --force and says what that breaks;
// `credentials show` and GET /api/v1/app give the public key, which every token may read.
import { createECDH } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import request from 'supertest';
import { runCli } from '../src/cli/program.ts';
import { ProviderCredential } from '../src/db/entities.ts';
import { openCredential } from '../src/domain/credentials.ts';
import { databaseUrl, runCredentialsKey, startHarness, type Harness } from './support/harness.ts';

async function herald(...args: string[]): Promise<string> {
  const collected = { stdout: '', stderr: '' };
  const into = (name: keyof typeof collected) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        collected[name] += chunk.toString();
        done();
      },
    });
  const env = { DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn', HERALD_CREDENTIALS_KEY: runCredentialsKey().toString('base64') };
  const code = await runCli(args, { env, streams: { stdout: into('stdout'), stderr: into('stderr'), stdin: Readable.from(['']) } });
  if (code !== 0) throw Object.assign(new Error(`herald ${args.join(' ')} exited with ${code}: ${collected.stderr}`), { code, ...collected });
  return collected.stdout;
}

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

const stored = (applicationId: string) => harness.orm.em.fork().findOneOrFail(ProviderCredential, { applicationId, provider: 'webpush' });
const getApp = (token: string) => request(harness.app).get('/api/v1/app').set('Authorization', `Bearer ${token}`).expect(200);

test('set-webpush generates a sealed pair whose public key the CLI, the app and every token show; replacing it needs --force', async () => {
  const application = await harness.newApplication('vapid');
  const generated = await herald('credentials', 'set-webpush', '--app', application.id, '--subject', 'mailto:ops@example.com');
  const publicKey = /applicationServerKey pages subscribe with\): (\S+)/.exec(generated)![1];
  expect(Buffer.from(publicKey, 'base64url')).toHaveLength(65);

  const row = await stored(application.id);
  expect(row.settings).toEqual({ subject: 'mailto:ops@example.com', publicKey });
  // The private key is sealed: not in the row's clear parts, and it opens to the pair's private half.
  const opened = openCredential(row as ProviderCredential & { provider: 'webpush' }, runCredentialsKey());
  expect(row.secret).not.toContain(opened.privateKey);
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(Buffer.from(opened.privateKey, 'base64url'));
  expect(ecdh.getPublicKey().toString('base64url')).toBe(publicKey);

  const shown = await herald('credentials', 'show', '--app', application.id);
  expect(shown).toContain(`webpush  subject=mailto:ops@example.com publicKey=${publicKey}`);
  expect(shown).not.toContain(opened.privateKey);

  // A browser's token (no notifications ability) sees the public key and nothing of the health.
  const browser = (await getApp(await application.token(['installations:write', 'events:write']))).body.data;
  expect(browser.vapid_public_key).toBe(publicKey);
  expect(browser.credentials).toBeUndefined();
  const backend = (await getApp(await application.token(['notifications:read']))).body.data;
  expect(backend.credentials.web).toEqual({
    provider: 'webpush',
    public_key: publicKey,
    status: 'unverified',
    since: null,
    reason: null,
    updated_at: row.updatedAt.toISOString(),
  });

  const refused = await herald('credentials', 'set-webpush', '--app', application.id, '--subject', 'mailto:ops@example.com').catch((error) => error);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/already has a VAPID key pair\. Replacing it makes every existing web subscription stop working/);
  expect((await stored(application.id)).settings).toEqual({ subject: 'mailto:ops@example.com', publicKey });

  const replaced = await herald('credentials', 'set-webpush', '--app', application.id, '--subject', 'https://example.com/contact', '--force');
  expect(replaced).toContain('every existing web subscription stops working');
  const newKey = /applicationServerKey pages subscribe with\): (\S+)/.exec(replaced)![1];
  expect(newKey).not.toBe(publicKey);
  expect((await getApp(await application.token(['events:write']))).body.data.vapid_public_key).toBe(newKey);
});

test('a given pair is stored as it is; a pair that does not match, a bad subject or half a pair is refused in words', async () => {
  const application = await harness.newApplication('given vapid');
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-vapid-'));
  // Its 32 bytes, as `web-push generate-vapid-keys` prints them (the scalar may start with a zero byte).
  const scalar = ecdh.getPrivateKey();
  writeFileSync(path.join(dir, 'private.key'), `${Buffer.concat([Buffer.alloc(32 - scalar.length), scalar]).toString('base64url')}\n`);
  const publicKey = ecdh.getPublicKey().toString('base64url');
  const set = (...args: string[]) => herald('credentials', 'set-webpush', '--app', application.id, ...args).catch((error) => error);

  const other = createECDH('prime256v1');
  other.generateKeys();
  const mismatch = await set('--subject', 'mailto:a@example.com', '--public-key', other.getPublicKey().toString('base64url'), '--private-key-file', path.join(dir, 'private.key'));
  expect(mismatch.stderr).toContain("The VAPID public key is not the private key's: give the two keys of one pair.");
  expect((await set('--subject', 'ops@example.com')).stderr).toContain('The subject must be a mailto: address or an https: URL');
  expect((await set('--subject', 'http://example.com')).stderr).toContain('The subject must be a mailto: address or an https: URL');
  expect((await set('--subject', 'mailto:a@example.com', '--public-key', publicKey)).stderr).toContain('Give both --public-key and --private-key-file');

  const ok = await set('--subject', 'mailto:a@example.com', '--public-key', publicKey, '--private-key-file', path.join(dir, 'private.key'));
  expect(ok).toContain(publicKey);
  // The same pair again (a new subject) replaces nothing: no --force needed.
  expect(await set('--subject', 'mailto:b@example.com', '--public-key', publicKey, '--private-key-file', path.join(dir, 'private.key'))).not.toContain('replaced');
  expect((await stored(application.id)).settings).toEqual({ subject: 'mailto:b@example.com', publicKey });
});

test('apps set --allowed-origins names the sites whose pages may call the application; a path or an http site is refused', async () => {
  const application = await harness.newApplication('origins cli');
  expect(await herald('apps', 'set', '--app', application.id, '--allowed-origins', 'https://shop.example, https://www.shop.example')).toBe(
    `Pages of https://shop.example, https://www.shop.example may call application ${application.id} from a browser with its app token.\n`,
  );
  const [row] = await harness.orm.em.fork().execute<{ allowed_origins: string[] }[]>('select allowed_origins from applications where id = ?', [application.id]);
  expect(row.allowed_origins).toEqual(['https://shop.example', 'https://www.shop.example']);
  const refused = await herald('apps', 'set', '--app', application.id, '--allowed-origins', 'https://shop.example/app,http://shop.example').catch((error) => error);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('"https://shop.example/app" is not an origin');
  expect(refused.stderr).toContain('http://shop.example is http: only pages on this machine');
  expect(await herald('apps', 'set', '--app', application.id, '--allowed-origins', '')).toContain('No page may call application');
});

test('credentials check on an application with web credentials alone says that they have no check', async () => {
  const application = await harness.newApplication('vapid-check');
  await herald('credentials', 'set-webpush', '--app', application.id, '--subject', 'mailto:ops@example.com');

  const failed = await herald('credentials', 'check', '--app', application.id).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  expect(failed?.code).toBe(1);
  expect(failed?.stderr).toContain(`Application ${application.id} has no apns or fcm credentials to check (web credentials have no check`);
});
