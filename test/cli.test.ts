// The herald CLI as an operator runs it, against the run's database: each command run in this
// process (runCli, as main.ts runs it), its output and exit code read as a shell would; the
// commands that only a process of their own can show (its exit code, a closed pipe, a simulator
// running until a signal) are spawned.
import { execFile } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import { promisify } from 'node:util';
import request from 'supertest';
import { runCli } from '../src/cli/program.ts';
import { createToken } from '../src/domain/applications.ts';
import { databaseUrl, runCredentialsKey, startHarness, type Harness } from './support/harness.ts';

const run = promisify(execFile);

/** What a command printed; it rejects, as execFile does, with its exit code and stderr when that is not 0. */
async function heraldWith(env: Record<string, string>, ...args: string[]): Promise<string> {
  return heraldReading('', env, ...args);
}

async function heraldReading(stdin: string, env: Record<string, string>, ...args: string[]): Promise<string> {
  const collected = { stdout: '', stderr: '' };
  const into = (name: keyof typeof collected) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        collected[name] += chunk.toString();
        done();
      },
    });
  const code = await runCli(args, {
    env: { DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn', ...env },
    streams: { stdout: into('stdout'), stderr: into('stderr'), stdin: Readable.from([stdin]) },
  });
  if (code !== 0) throw Object.assign(new Error(`herald ${args.join(' ')} exited with ${code}`), { code, ...collected });
  return collected.stdout;
}

const herald = (...args: string[]) => heraldWith({}, ...args);

/** The CLI as its own process (bin/herald runs this entry point). */
const spawnedHerald = (env: Record<string, string>, ...args: string[]) =>
  run(process.execPath, ['src/cli/main.ts', ...args], { env: { PATH: process.env.PATH, NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE, DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn', ...env } });

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

test('an operator creates an application and a token, uses it, and revokes it', async () => {
  const created = await herald('apps', 'create', '--name', 'CLI app');
  const appId = /Created application (\S+)/.exec(created)?.[1];
  expect(appId).toBeDefined();
  expect(await herald('apps', 'list')).toContain(`${appId}`);

  const tokenOutput = await herald('tokens', 'create', '--app', appId!, '--name', 'backend', '--abilities', 'notifications:read');
  const tokenId = /Created token (\S+)/.exec(tokenOutput)?.[1];
  const token = /^(hrld_\S+)$/m.exec(tokenOutput)?.[1];
  expect(token).toBeDefined();
  await createToken(harness.orm.em.fork(), { applicationId: appId!, name: 'spare', abilities: ['events:write'] });

  const listed = await request(harness.app).get('/api/v1/notifications').set('Authorization', `Bearer ${token}`);
  expect(listed.status).toBe(200);
  const forbidden = await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${token}`)
    .send({ recipients: { user_ids: ['u'] }, notification: { title: 't' } });
  expect(forbidden.status).toBe(403);

  const tokens = await herald('tokens', 'list', '--app', appId!);
  expect(tokens).toContain(tokenId);
  expect(tokens).not.toContain(token!.split('_')[2]);
  const [stored] = await harness.orm.em
    .fork()
    .execute<{ created_at: Date; last_used_at: Date }[]>('select created_at, last_used_at from api_tokens where id = ?', [tokenId]);
  expect(tokens).toContain(`active  created ${new Date(stored.created_at).toISOString()}  last used ${new Date(stored.last_used_at).toISOString()}  backend`);
  expect(tokens).toMatch(/active {2}created \S+Z {2}last used never {2}spare/);

  await herald('tokens', 'revoke', tokenId!);
  const revoked = await request(harness.app).get('/api/v1/notifications').set('Authorization', `Bearer ${token}`);
  expect(revoked.status).toBe(401);
  expect(await herald('tokens', 'list', '--app', appId!)).toMatch(/revoked/);
});

test('a token with no abilities the service knows is refused with a usage error', async () => {
  await expect(herald('tokens', 'create', '--app', 'x', '--name', 'n', '--abilities', 'everything')).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining('expected some of'),
  });
});

test('an unknown application is a clear error, not a stack trace', async () => {
  await expect(
    herald('tokens', 'create', '--app', '00000000-0000-7000-8000-000000000000', '--name', 'n'),
  ).rejects.toMatchObject({ code: 1, stderr: 'herald: No application 00000000-0000-7000-8000-000000000000.\n' });
});

test('an empty HERALD_CREDENTIALS_KEY stops every command at start, with the form it expects', async () => {
  // A process of its own: its exit code is the process's.
  await expect(spawnedHerald({ HERALD_CREDENTIALS_KEY: '' }, 'apps', 'list')).rejects.toMatchObject({
    code: 2,
    stderr: expect.stringContaining('HERALD_CREDENTIALS_KEY: set but empty; unset it, or set it to 32 random bytes in base64'),
  });
});

test('--help lists the commands', async () => {
  const help = await herald('--help');
  for (const command of ['start', 'serve', 'work', 'migrate', 'apps', 'tokens', 'webhooks', 'segments', 'tags', 'stats']) expect(help).toContain(command);
});

test("tokens create --help names every ability, the audiences' included", async () => {
  const help = await herald('tokens', 'create', '--help');
  for (const ability of ['installations:tag', 'notifications:broadcast', 'segments:write', 'notifications:send']) expect(help).toContain(ability);
});

test('an operator saves segments, sees their sizes, counts an audience and deletes a segment', async () => {
  const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'CLI segments'))![1];
  const token = await createToken(harness.orm.em.fork(), { applicationId: appId, name: 'backend', abilities: ['*'] });
  for (const [id, plan] of [['cli-seg-1', 'pro'], ['cli-seg-2', 'pro'], ['cli-seg-3', 'free']]) {
    await request(harness.app)
      .put(`/api/v1/installations/${id}`)
      .set('Authorization', `Bearer ${token.plaintext}`)
      .send({ platform: 'android', provider: { identifier: id }, user_id: id, tags: { plan } });
  }
  expect(await herald('segments', 'set', '--app', appId, 'pro', '{"tags":[{"key":"plan","op":"eq","value":"pro"}]}')).toBe(
    'Created segment pro: 2 installations, 2 users.\n',
  );
  expect(await herald('segments', 'set', '--app', appId, 'everyone', '{"all":true}')).toContain('3 installations, 3 users');
  expect(await herald('segments', 'list', '--app', appId)).toBe(
    'everyone  3 installations, 3 users  {"all":true}\npro  2 installations, 2 users  {"tags":[{"op":"eq","key":"plan","value":"pro"}]}\n',
  );
  expect(await herald('segments', 'show', '--app', appId, 'pro')).toContain('"value": "pro"');
  expect(await herald('segments', 'count', '--app', appId, '{"tags":[{"key":"plan","op":"ne","value":"pro"}]}')).toBe('1 installations, 1 users\n');
  // The API sees what the CLI saved.
  const read = await request(harness.app).get('/api/v1/segments/pro').set('Authorization', `Bearer ${token.plaintext}`);
  expect(read.body.data.audience).toEqual({ tags: [{ key: 'plan', op: 'eq', value: 'pro' }] });
  expect(await herald('segments', 'delete', '--app', appId, 'pro')).toBe('Deleted segment pro.\n');
  await expect(herald('segments', 'delete', '--app', appId, 'pro')).rejects.toMatchObject({ code: 1, stderr: 'herald: No segment pro.\n' });
});

test("an operator lists an application's tags and its hourly statistics, with the API's rules", async () => {
  const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'CLI tags'))![1];
  expect(await herald('tags', '--app', appId)).toMatch(/^No tags\.\n\(computed \d{4}-.*Z\)\n$/);
  const token = await createToken(harness.orm.em.fork(), { applicationId: appId, name: 'backend', abilities: ['*'] });
  for (const [id, plan] of [['cli-tag-1', 'pro'], ['cli-tag-2', 'free'], ['cli-tag-3', 'free']]) {
    await request(harness.app)
      .put(`/api/v1/installations/${id}`)
      .set('Authorization', `Bearer ${token.plaintext}`)
      .send({ platform: 'android', provider: { identifier: id }, tags: { plan, country: 'de' } });
  }
  // The stored summary until it is computed again (by a worker, or here with --refresh).
  expect(await herald('tags', '--app', appId)).toMatch(/^No tags\./);
  // Keys carried by as many installations in byte order.
  expect(await herald('tags', '--app', appId, '--refresh')).toMatch(/^country {2}3 installations: de 3\nplan {2}3 installations: free 2, pro 1\n\(computed /);

  await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${token.plaintext}`)
    .send({ recipients: { user_ids: ['nobody'] }, notification: { title: 'Hi' } })
    .expect(202);
  const now = Date.now();
  const hours = await herald('stats', 'hourly', '--app', appId, '--from', new Date(now - 2 * 3_600_000).toISOString(), '--to', new Date(now + 1).toISOString());
  const lines = hours.trimEnd().split('\n');
  expect(lines[0]).toBe('hour (UTC)               sends  accepted    failed   skipped     opens');
  expect(lines).toHaveLength(4);
  const hour = new Date(Math.floor(now / 3_600_000) * 3_600_000).toISOString().slice(0, 16).split('T');
  expect(lines.at(-1)!.split(/ +/)).toEqual([...hour, '1', '0', '0', '0', '0']);
  await expect(herald('stats', 'hourly', '--app', appId, '--from', '2026-01-01T00:00:00Z', '--to', '2026-03-01T00:00:00Z')).rejects.toMatchObject({
    code: 1,
    stderr: 'herald: The to field must be at most 31 days after from.\n',
  });
});

test('segments set refuses an audience that is not JSON, not an audience, or empty, saying why', async () => {
  const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'CLI bad segments'))![1];
  await expect(herald('segments', 'set', '--app', appId, 's', '{platforms')).rejects.toMatchObject({ stderr: expect.stringContaining('not JSON') });
  await expect(herald('segments', 'set', '--app', appId, 's', '{"platforms":"ios"}')).rejects.toMatchObject({
    stderr: expect.stringContaining('not an audience: /platforms must be array'),
  });
  await expect(herald('segments', 'set', '--app', appId, 's', '{}')).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining('not an audience: audience must NOT have fewer than 1 properties'),
  });
  await expect(herald('segments', 'set', '--app', appId, 'a b', '{"all":true}')).rejects.toMatchObject({ code: 1 });
});

test('an operator adds a webhook endpoint (its secret shown once), lists it, rotates its secret, reads its log and removes it', async () => {
  const { randomBytes } = await import('node:crypto');
  const { openWebhookSecret } = await import('../src/domain/credentials.ts');
  const key = randomBytes(32);
  const env = { HERALD_CREDENTIALS_KEY: key.toString('base64') };
  const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'hooks'))![1];

  const added = await heraldWith(env, 'webhooks', 'add', '--app', appId, '--url', 'https://hooks.example.com/herald', '--events', 'notification.completed,delivery.failed');
  const endpointId = /^Created webhook endpoint (\S+) \(https:\/\/hooks\.example\.com\/herald: notification\.completed delivery\.failed\)$/m.exec(added)?.[1];
  expect(endpointId).toBeDefined();
  const secret = added.trim().split('\n').pop()!;
  expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
  // Stored sealed with the credentials key, bound to its endpoint.
  const stored = async () =>
    (await harness.orm.em.fork().execute<{ secret: string; previous_secret: string | null }[]>('select secret, previous_secret from webhook_endpoints where id = ?', [endpointId]))[0];
  expect((await stored()).secret).not.toContain(secret);
  expect(openWebhookSecret((await stored()).secret, key, endpointId!)).toBe(secret);

  const listed = await herald('webhooks', 'list', '--app', appId);
  expect(listed.trim()).toBe(`${endpointId}  app ${appId}  enabled  https://hooks.example.com/herald  [notification.completed delivery.failed]  no attempt yet`);
  expect(listed).not.toContain('whsec_');
  const reader = await createToken(harness.orm.em.fork(), { applicationId: appId, name: 'reader', abilities: ['notifications:read'] });
  const read = await request(harness.app).get('/api/v1/webhooks').set('Authorization', `Bearer ${reader.plaintext}`);
  expect(read.body.data).toEqual([expect.objectContaining({ id: endpointId, url: 'https://hooks.example.com/herald', status: 'enabled', last_attempt: null })]);

  const rotated = await heraldWith(env, 'webhooks', 'rotate-secret', endpointId!);
  const lines = rotated.trim().split('\n');
  expect(lines[0]).toBe(`New signing secret of webhook endpoint ${endpointId}, shown this once:`);
  expect(lines[1]).toMatch(/^whsec_/);
  expect(lines[1]).not.toBe(secret);
  expect(lines[2]).toMatch(/^Requests also carry a signature made with the previous secret until \S+Z\.$/);
  expect(openWebhookSecret((await stored()).previous_secret!, key, endpointId!)).toBe(secret);
  expect(await herald('webhooks', 'list')).toMatch(new RegExp(`${endpointId}.*previous secret signs until \\S+Z`));
  expect((await heraldWith(env, 'webhooks', 'rotate-secret', endpointId!, '--keep-previous', '0')).trim().split('\n')[2]).toBe(
    'The previous secret no longer signs anything.',
  );
  expect((await stored()).previous_secret).toBeNull();

  expect((await herald('webhooks', 'deliveries', endpointId!)).trim()).toBe('No deliveries.');
  expect(await herald('webhooks', 'enable', endpointId!)).toBe(`Enabled webhook endpoint ${endpointId}.\n`);
  expect(await herald('webhooks', 'remove', endpointId!)).toBe(`Removed webhook endpoint ${endpointId}.\n`);
  expect((await herald('webhooks', 'list', '--app', appId)).trim()).toBe('No webhook endpoints.');
  await expect(herald('webhooks', 'remove', endpointId!)).rejects.toMatchObject({ code: 1, stderr: `herald: No webhook endpoint ${endpointId}.\n` });
});

test('webhooks add refuses what it could never deliver to, and needs the credentials key', async () => {
  const { randomBytes } = await import('node:crypto');
  const env = { HERALD_CREDENTIALS_KEY: randomBytes(32).toString('base64') };
  const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'refused hooks'))![1];
  const add = (url: string, events = 'delivery.failed', extra: Record<string, string> = {}) =>
    heraldWith({ ...env, ...extra }, 'webhooks', 'add', '--app', appId, '--url', url, '--events', events);
  await expect(add('https://127.0.0.1/hook')).rejects.toMatchObject({
    code: 1,
    stderr: "herald: The URL's address 127.0.0.1 is loopback: webhooks go only to public addresses (unless HERALD_WEBHOOK_ALLOW_PRIVATE=true).\n",
  });
  await expect(add('http://hooks.example.com/hook')).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('must use https') });
  await expect(add('https://hooks.example.com/hook', 'delivery.failed,delivery.sent')).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining('expected some of: notification.completed, notification.cancelled, delivery.failed, installation.invalidated, event.reported'),
  });
  await expect(heraldWith({}, 'webhooks', 'add', '--app', appId, '--url', 'https://hooks.example.com/h', '--events', 'delivery.failed')).rejects.toMatchObject({
    code: 1,
    stderr: 'herald: HERALD_CREDENTIALS_KEY is not set: it encrypts webhook signing secrets at rest.\n',
  });
  // A receiver on this machine, for development.
  expect(await add('http://127.0.0.1:8080/hook', 'delivery.failed', { HERALD_WEBHOOK_ALLOW_PRIVATE: 'true' })).toMatch(/^Created webhook endpoint /);
});

test('credentials are set from files and shown without their secrets; a send limit is set per application', async () => {
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { generateKeyPairSync } = await import('node:crypto');
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-cli-'));
  const p8 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  writeFileSync(path.join(dir, 'key.p8'), p8);
  writeFileSync(
    path.join(dir, 'sa.json'),
    JSON.stringify({ type: 'service_account', project_id: 'proj-1', client_email: 'svc@proj-1.iam.gserviceaccount.com', private_key: rsa }),
  );
  const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'creds'))![1];
  // The run's key: a worker another file starts marks what its key does not open.
  const env = { HERALD_CREDENTIALS_KEY: runCredentialsKey().toString('base64') };

  await heraldWith(env, 'credentials', 'set-apns', '--app', appId, '--key-file', path.join(dir, 'key.p8'), '--key-id', 'ABC123DEFG', '--team-id', 'TEAM987654', '--bundle-id', 'com.example.app', '--sandbox');
  await heraldWith(env, 'credentials', 'set-fcm', '--app', appId, '--service-account', path.join(dir, 'sa.json'));
  const shown = await heraldWith(env, 'credentials', 'show', '--app', appId);
  const line = (provider: string) => shown.split('\n').find((text) => text.startsWith(`${provider}  `)) ?? '';
  for (const setting of ['keyId=ABC123DEFG', 'teamId=TEAM987654', 'bundleId=com.example.app', 'sandbox=true']) {
    expect(line('apns')).toContain(setting);
  }
  expect(line('apns')).toMatch(/ unverified: no provider has accepted them yet \(herald credentials check asks now\)$/);
  expect(line('fcm')).toContain('projectId=proj-1');
  expect(line('fcm')).toContain('clientEmail=svc@proj-1.iam.gserviceaccount.com');
  expect(shown).not.toContain('PRIVATE KEY');

  expect(await herald('apps', 'limit', '--app', appId, '--quota', '50', '--window', '10')).toContain('50 notifications per 10 s');
  const [row] = await harness.orm.em
    .fork()
    .execute<{ send_quota: number; send_window_seconds: number }[]>('select send_quota, send_window_seconds from applications where id = ?', [appId]);
  expect(row).toEqual({ send_quota: 50, send_window_seconds: 10 });
});

test('rotate-key re-encrypts every credential under the new key, or changes nothing', async () => {
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { randomBytes } = await import('node:crypto');
  const pg = (await import('pg')).default;
  const { migrate, openOrm } = await import('../src/db/orm.ts');
  const { createApplication } = await import('../src/domain/applications.ts');
  const { openCredential, openWebhookSecret, setApnsCredentials, setFcmCredentials } = await import('../src/domain/credentials.ts');
  const { addWebhookEndpoint } = await import('../src/domain/webhooks.ts');
  const { ProviderCredential } = await import('../src/db/entities.ts');
  const { ecKeyPair, rsaKeyPair } = await import('./support/simulators.ts');

  // Its own database: a rotation re-encrypts every credential stored, other test files' too.
  const name = `herald_rotate_${process.pid}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: new URL('/postgres', databaseUrl()).toString() });
    await client.connect();
    await client.query(sql).finally(() => client.end());
  };
  await admin(`create database ${name}`);
  const url = new URL(`/${name}`, databaseUrl()).toString();
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-rotate-'));
  const [keyA, keyB, keyC, keyD] = [0, 1, 2, 3].map(() => randomBytes(32));
  const rotate = (currentKey: Buffer, ...args: string[]) =>
    heraldWith({ DATABASE_URL: url, HERALD_CREDENTIALS_KEY: currentKey.toString('base64') }, 'credentials', 'rotate-key', ...args);
  const keyFile = (name: string, text: string) => {
    writeFileSync(path.join(dir, name), text);
    return path.join(dir, name);
  };

  const orm = await openOrm(url, 2);
  try {
    await migrate(orm);
    const secrets = async () =>
      (await orm.em.fork().execute<{ secret: string }[]>('select secret from provider_credentials order by id')).map((row) => row.secret);
    const opened = async (key: Buffer) =>
      (await orm.em.fork().find(ProviderCredential, {}, { orderBy: { provider: 'asc' } })).map((row) => openCredential(row, key));
    const application = await createApplication(orm.em.fork(), 'rotated');
    const apns = { key: ecKeyPair().privateKey, keyId: 'KEYID00002', teamId: 'TEAMID0002', bundleId: 'com.example.rotated', sandbox: false };
    const fcm = { serviceAccount: { project_id: 'p', client_email: 'e@p.iam.gserviceaccount.com', private_key: rsaKeyPair().privateKey } };
    await setApnsCredentials(orm.em.fork(), application.id, apns, keyA);
    await setFcmCredentials(orm.em.fork(), application.id, fcm, keyA);
    const { endpoint, secret: signingSecret } = await addWebhookEndpoint(
      orm.em.fork(),
      { applicationId: application.id, url: 'https://hooks.example.com/rotated', events: ['delivery.failed'] },
      keyA,
      { allowPrivate: false },
    );
    const webhookSecret = async (key: Buffer) =>
      openWebhookSecret((await orm.em.fork().execute<{ secret: string }[]>('select secret from webhook_endpoints where id = ?', [endpoint.id]))[0].secret, key, endpoint.id);
    // Stored under another key: while it is there, no rotation happens at all.
    const stray = await createApplication(orm.em.fork(), 'stray');
    await setApnsCredentials(orm.em.fork(), stray.id, apns, keyC);
    const before = await secrets();

    for (const [file, text] of [
      ['short.key', `${randomBytes(31).toString('base64')}\n`],
      ['spaced.key', `  ${keyB.toString('base64')}\n`],
    ]) {
      await expect(rotate(keyA, '--new-key-file', keyFile(file, text))).rejects.toMatchObject({
        code: 1,
        stderr: 'herald: The new key must be 32 random bytes in base64, 44 characters ending in "=" (`openssl rand -base64 32`); nothing was re-encrypted.\n',
      });
    }
    await expect(rotate(keyA, '--new-key-file', keyFile('b.key', `${keyB.toString('base64')}\n`))).rejects.toMatchObject({
      code: 1,
      stderr: `herald: 1 of 3 stored credential(s) do not open with HERALD_CREDENTIALS_KEY (apns of application ${stray.id}): nothing was re-encrypted. Set HERALD_CREDENTIALS_KEY to the key they were stored with, or store those credentials again.\n`,
    });
    await expect(rotate(keyA, '--new-key-file', keyFile('a.key', keyA.toString('base64')))).rejects.toMatchObject({
      stderr: expect.stringContaining('The new key is HERALD_CREDENTIALS_KEY itself'),
    });
    expect(await secrets()).toEqual(before);

    await orm.em.fork().nativeDelete(ProviderCredential, { applicationId: stray.id });
    const rotated = await rotate(keyA, '--new-key-file', path.join(dir, 'b.key'));
    expect(rotated).toContain('Re-encrypted 2 stored credential(s) with the new key.');
    expect(rotated).toContain('Re-encrypted 1 webhook signing secret(s) with the new key.');
    expect(await webhookSecret(keyB)).toBe(signingSecret);
    await expect(webhookSecret(keyA)).rejects.toThrow(/is not the key they were sealed with, or they were sealed for another endpoint/);
    expect(rotated).toContain('set HERALD_CREDENTIALS_KEY to the new key');
    expect(rotated).toContain('restart the workers');
    expect(await opened(keyB)).toEqual([apns, fcm]);
    await expect(opened(keyA)).rejects.toThrow(/HERALD_CREDENTIALS_KEY is not the key they were sealed with/);

    const fromStdin = heraldReading(`${keyD.toString('base64')}\n`, { DATABASE_URL: url, HERALD_CREDENTIALS_KEY: keyB.toString('base64') }, 'credentials', 'rotate-key', '--new-key-stdin');
    expect(await fromStdin).toContain('Re-encrypted 2 stored credential(s)');
    expect(await opened(keyD)).toEqual([apns, fcm]);
  } finally {
    await orm.close();
    await admin(`drop database if exists ${name} with (force)`);
  }
});

test('herald simulate runs the three simulators, says where, and writes the CA to trust', async () => {
  const { mkdtempSync, readFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const { httpsCall } = await import('./support/simulators.ts');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-sim-'));
  const child = spawn(process.execPath, ['src/cli/main.ts', 'simulate', '--apns-port', '0', '--fcm-port', '0', '--webpush-port', '0'], {
    env: { PATH: process.env.PATH, HERALD_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
    const started = JSON.parse(line) as { apns: string; fcm: string; webPush: string; caFile: string; keysDir: string };
    expect(started.apns).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(started.fcm).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(started.webPush).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const ca = readFileSync(started.caFile, 'utf8');
    for (const url of [started.apns, started.fcm, started.webPush]) {
      const answer = await httpsCall(`${url}/__sim/received`, ca, 'GET');
      expect(answer.status).toBe(200);
    }
    expect(readFileSync(path.join(started.keysDir, 'apns-key.p8'), 'utf8')).toContain('PRIVATE KEY');
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
});

test('a reader that closes the pipe early does not cut a command short: it finishes and exits 0', async () => {
  const { spawn } = await import('node:child_process');
  const name = `piped-${Date.now()}`;
  const child = spawn(process.execPath, ['src/cli/main.ts', 'apps', 'create', '--name', name], {
    env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // As `herald apps create … | head -0` does: the reading end is gone before anything is printed.
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  expect(await herald('apps', 'list')).toContain(name);
});

test('credentials check asks each provider now, prints its answer, and records it; a refusal is exit 1', async () => {
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const { setApnsCredentials, setFcmCredentials } = await import('../src/domain/credentials.ts');
  const { apnsSimulator, ecKeyPair, fcmSimulator } = await import('./support/simulators.ts');
  const apns = await apnsSimulator();
  const fcm = await fcmSimulator();
  try {
    const caFile = path.join(mkdtempSync(path.join(tmpdir(), 'herald-check-')), 'ca.pem');
    writeFileSync(caFile, `${apns.sim.ca}\n${fcm.sim.ca}`);
    const key = runCredentialsKey();
    const env = {
      HERALD_CREDENTIALS_KEY: key.toString('base64'),
      HERALD_APNS_ENDPOINT: apns.sim.url,
      HERALD_FCM_ENDPOINT: fcm.sim.url,
      HERALD_PROVIDER_CA_FILE: caFile,
    };
    const application = await harness.newApplication('checked');
    await setApnsCredentials(harness.orm.em.fork(), application.id, apns.credentials, key);
    await setFcmCredentials(harness.orm.em.fork(), application.id, fcm.credentials, key);
    const show = async () => (await heraldWith(env, 'credentials', 'show', '--app', application.id)).trim().split('\n').map((line) => line.split('  ').at(-1));
    expect(await show()).toEqual([expect.stringMatching(/^unverified/), expect.stringMatching(/^unverified/)]);

    expect((await heraldWith(env, 'credentials', 'check', '--app', application.id)).trim().split('\n')).toEqual([
      'apns  accepted: the provider took the credentials (it answered accepted to a push no device receives)',
      'fcm  accepted: the provider took the credentials (it answered accepted to a push no device receives)',
    ]);
    // FCM was asked to check the message, not to send it; APNs was sent one for a device that does not exist.
    expect(fcm.sim.received.map((received) => received.validateOnly)).toEqual([true]);
    expect(apns.sim.received.map((received) => received.token)).toEqual(['0'.repeat(64)]);
    expect(await show()).toEqual(['healthy', 'healthy']);

    // A .p8 that Apple does not know under that key id.
    await setApnsCredentials(harness.orm.em.fork(), application.id, { ...apns.credentials, key: ecKeyPair().privateKey }, key);
    await expect(heraldWith(env, 'credentials', 'check', '--app', application.id, '--provider', 'apns')).rejects.toMatchObject({
      code: 1,
      stdout: 'apns  REFUSED: InvalidProviderToken; pushes fail until the credentials are stored again (herald credentials set-apns)\n',
      stderr: 'herald: 1 of 1 credential(s) were not accepted.\n',
    });
    expect(await show()).toEqual([expect.stringMatching(/^UNHEALTHY since \S+: InvalidProviderToken$/), 'healthy']);
  } finally {
    await apns.sim.stop();
    await fcm.sim.stop();
  }
});

test('set-apns and set-fcm say in words what is wrong with a key file', async () => {
  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-cli-files-'));
  writeFileSync(path.join(dir, 'key.p8'), 'this is not a key\n');
  writeFileSync(path.join(dir, 'sa.json'), '{"type": "service_account",');
  const application = await harness.newApplication('bad files');
  const env = { HERALD_CREDENTIALS_KEY: runCredentialsKey().toString('base64') };
  const setApns = (...args: string[]) =>
    heraldWith(env, 'credentials', 'set-apns', '--app', application.id, '--key-file', path.join(dir, 'key.p8'), '--bundle-id', 'com.example.app', ...args);
  await expect(setApns('--key-id', 'ABC123DEFG', '--team-id', 'TEAM987654')).rejects.toMatchObject({
    code: 1,
    stderr:
      'herald: The key file (the .p8 downloaded from Apple\'s developer site, under Keys) is not a private key in PEM form (a block beginning "-----BEGIN PRIVATE KEY-----").\n',
  });
  await expect(setApns('--key-id', 'ABC123', '--team-id', 'TEAM987654')).rejects.toMatchObject({
    stderr: 'herald: The key id must be the 10 letters and digits Apple shows for it (e.g. ABC123DEFG); got "ABC123".\n',
  });
  await expect(heraldWith(env, 'credentials', 'set-fcm', '--app', application.id, '--service-account', path.join(dir, 'sa.json'))).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringMatching(/^herald: \S+sa\.json is not JSON \(.+\): use the key file the Firebase console downloads\.\n$/),
  });
});

test("herald --version prints Herald's version and its API document's", async () => {
  const { readFileSync } = await import('node:fs');
  const { parse } = await import('yaml');
  const herald = JSON.parse(readFileSync('package.json', 'utf8')).version;
  const document = parse(readFileSync('openapi/openapi.yaml', 'utf8')).info.version;
  expect(await heraldWith({}, '--version')).toBe(`herald ${herald} (API document ${document})\n`);
});

test('a database the CLI cannot use is named by its setting, DATABASE_URL, without its password', async () => {
  const { freePort } = await import('./support/ports.ts');
  const port = await freePort();
  await expect(heraldWith({ DATABASE_URL: `postgres://herald:s3cret@127.0.0.1:${port}/herald` }, 'apps', 'list')).rejects.toMatchObject({
    code: 1,
    stderr: `herald: Cannot use the database DATABASE_URL names (127.0.0.1:${port}/herald): connect ECONNREFUSED 127.0.0.1:${port}. Check DATABASE_URL, or unset it for the embedded Postgres.\n`,
  });
  const missing = Object.assign(new URL(databaseUrl()), { pathname: '/herald_no_such_database' }).toString();
  await expect(heraldWith({ DATABASE_URL: missing }, 'apps', 'list')).rejects.toMatchObject({
    stderr: expect.stringMatching(/^herald: Cannot use the database DATABASE_URL names \(\S+\/herald_no_such_database\): database "herald_no_such_database" does not exist\. Check DATABASE_URL/),
  });
});
