// The herald CLI as an operator runs it: a real process against the run's database.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import request from 'supertest';
import { databaseUrl, startHarness, type Harness } from './support/harness.ts';

const run = promisify(execFile);

async function herald(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['src/cli/main.ts', ...args], {
    env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn' },
  });
  return stdout;
}

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

test('--help lists the commands', async () => {
  const help = await herald('--help');
  for (const command of ['start', 'serve', 'work', 'migrate', 'apps', 'tokens']) expect(help).toContain(command);
});
