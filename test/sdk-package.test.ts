// The SDK as an integrator meets it: `npm pack` in sdk/ from a shell that has none of the
// repository's tools on its PATH (as on a fresh clone), the tarball installed into a fresh project
// outside the repository, a strict TypeScript program type-checked against it under nodenext (ESM
// and CommonJS) and bundler resolution, and a program run against a live Herald (API, workers and
// provider simulators) as ESM and as CommonJS, on Node 24 and on the system's Node 20.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { newSigningSecret, signatureHeader } from '../src/domain/webhooks.ts';
import { startPipeline, type Pipeline } from './support/fanout.ts';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('..', import.meta.url));
const systemNode = '/usr/bin/node';
const documentVersion = (parse(readFileSync(path.join(repo, 'openapi/openapi.yaml'), 'utf8')) as { info: { version: string } }).info.version;

// Child processes get a plain environment: not jest's NODE_OPTIONS. The run's compile cache
// (global setup) spares each tsc, npm and Node program compiling the same modules again.
const childEnv = (extra: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? tmpdir(),
  NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE,
  ...extra,
});

let workdir: string;
let project: string;
let tarball: string;
let pipeline: Pipeline;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  workdir = mkdtempSync(path.join(tmpdir(), 'herald-sdk-'));
  // The README's command, from a shell whose PATH has none of the repository's tools (tsup was not
  // found so): npm pack builds first (the package's prepack script, `make sdk-build`, which installs
  // the repository's tools when they are missing, as `make install` does on every fresh clone).
  const systemPath = (process.env.PATH ?? '').split(path.delimiter).filter((dir) => !dir.includes('node_modules')).join(path.delimiter);
  await run('npm', ['pack', '--pack-destination', workdir], { cwd: path.join(repo, 'sdk'), env: childEnv({ PATH: systemPath }), maxBuffer: 16 * 1024 * 1024 });
  tarball = path.join(workdir, `herald-sdk-${documentVersion}.tgz`);

  project = path.join(workdir, 'project');
  mkdirSync(project);
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'herald-sdk-consumer', private: true, type: 'module' }));
  await run('npm', ['install', '--no-audit', '--no-fund', tarball], { cwd: project, env: childEnv() });

  pipeline = await startPipeline();
  server = await new Promise<Server>((resolve) => {
    const listening = pipeline.harness.app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 180_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await pipeline?.close();
  if (workdir) rmSync(workdir, { recursive: true, force: true });
});

test("on a fresh clone, npm pack in sdk/ installs the repository's tools before it builds with them", async () => {
  // The package has no tools of its own: its prepack is the repository's sdk-build, which depends on
  // install. On a fresh clone (no node_modules), the build's tool was not found.
  const scripts = (JSON.parse(readFileSync(path.join(repo, 'sdk/package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  expect(scripts.prepack).toBe('make -C .. sdk-build');
  // What make would run for it in a copy of the checkout with nothing installed (a dry run: the
  // install itself is what every fresh clone's `make test` does).
  const clone = mkdtempSync(path.join(tmpdir(), 'herald-clone-'));
  try {
    const { stdout: files } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', 'Makefile', 'package.json', 'package-lock.json', 'sdk'], { cwd: repo });
    for (const file of files.split('\0').filter(Boolean)) {
      mkdirSync(path.dirname(path.join(clone, file)), { recursive: true });
      writeFileSync(path.join(clone, file), readFileSync(path.join(repo, file)));
    }
    const { stdout } = await run('make', ['-n', '-C', '..', 'sdk-build'], { cwd: path.join(clone, 'sdk'), env: childEnv() });
    expect(stdout).toMatch(/npm ci[\s\S]*cd sdk && rm -rf dist && tsup/);
  } finally {
    rmSync(clone, { recursive: true, force: true });
  }
});

test('npm pack makes a tarball of the build, the README and the license, versioned like the document, with no dependency', async () => {
  const { stdout } = await run('tar', ['-tzf', tarball]);
  expect(stdout.trim().split('\n').sort()).toEqual([
    'package/LICENSE',
    'package/README.md',
    'package/dist/index.cjs',
    'package/dist/index.d.cts',
    'package/dist/index.d.ts',
    'package/dist/index.js',
    'package/dist/web/index.d.ts',
    'package/dist/web/index.js',
    'package/dist/web/service-worker.d.ts',
    'package/dist/web/service-worker.global.js',
    'package/dist/web/service-worker.js',
    'package/package.json',
  ]);
  const manifest = JSON.parse(readFileSync(path.join(project, 'node_modules/@herald/sdk/package.json'), 'utf8'));
  expect(manifest).toMatchObject({ name: '@herald/sdk', version: documentVersion, license: 'MIT', sideEffects: false, engines: { node: '>=20' } });
  expect(manifest.private).toBeUndefined();
  expect(manifest.dependencies).toBeUndefined();
  expect(manifest.peerDependencies).toBeUndefined();
  // Installed, it brought nothing else along.
  expect(readdirSync(path.join(project, 'node_modules')).filter((name) => !name.startsWith('.'))).toEqual(['@herald']);
});

// Every method and error class with the types an integrator relies on; each @ts-expect-error
// proves a type is not `any` (an unused one fails the check).
const typedProgram = `
import { createHerald, HeraldError, HeraldNetworkError, HeraldTimeoutError, HeraldWebhookError, verifyWebhook, type Delivery, type Notification, type WebhookEvent } from '@herald/sdk';

const herald = createHerald({ baseUrl: 'http://127.0.0.1:3000', token: 'hrld_id_secret', retry: { maxAttempts: 2, maxWaitMs: 5_000 }, timeoutMs: 10_000 });

export async function main(): Promise<string[]> {
  const installation = await herald.registerInstallation('phone-1', { platform: 'ios', provider: { identifier: 'abc' }, user_id: 'user-1' });
  const platform: 'ios' | 'android' | 'web' = installation.platform;
  await herald.updateInstallation('phone-1', { permission: 'denied' });
  const sent = await herald.send({ recipients: { user_ids: ['user-1'] }, notification: { title: 'Hi' } }, { idempotencyKey: 'order-1042' });
  const accepted: boolean = sent.meta.accepted;
  const done: Notification = await herald.waitForCompletion(sent.data.id, { timeoutMs: 10_000, intervalMs: 500 });
  const ids: string[] = [platform, String(accepted), String(done.statistics.opened)];
  for await (const delivery of herald.deliveries(done.id, { state: 'failed', userId: 'user-1' })) {
    const typed: Delivery = delivery;
    ids.push(typed.reason ?? '');
  }
  for await (const notification of herald.notifications({ limit: 50 })) ids.push(notification.status);
  for await (const device of herald.installations({ userId: 'user-1' })) ids.push(device.installation_id);
  const page = await herald.listNotifications({ limit: 10, cursor: 'AAAAAAAAAAAAAAAAAAAAAA' });
  ids.push(page.meta.next_cursor ?? 'last page');
  const event = await herald.reportEvent({ event_id: crypto.randomUUID(), delivery_id: ids[0], installation_id: 'phone-1', type: 'opened', occurred_at: new Date().toISOString() });
  ids.push(event.received_at);
  const app = await herald.getApp();
  ids.push(app.name);
  for (const endpoint of await herald.listWebhooks()) {
    ids.push(endpoint.status, endpoint.last_attempt?.outcome ?? 'never');
    for await (const delivery of herald.webhookDeliveries(endpoint.id, { state: 'failed' })) ids.push(delivery.reason ?? '');
  }
  try {
    await herald.deleteInstallation('phone-1');
  } catch (error) {
    if (error instanceof HeraldError) {
      const status: number = error.status;
      const fields: string[] | undefined = error.errors?.['recipients.user_ids'];
      const requestId: string | null = error.requestId;
      const retryAfter: number | null = error.retryAfter;
      ids.push(String(status), String(fields), String(requestId), String(retryAfter), error.message);
    } else if (error instanceof HeraldNetworkError) {
      const attempts: number = error.attempts;
      ids.push(String(attempts), String(error.cause));
    } else if (error instanceof HeraldTimeoutError) {
      ids.push(error.notification.status);
    }
  }
  // @ts-expect-error: a delivery log state Herald does not know
  herald.webhookDeliveries('id', { state: 'sent' });
  // @ts-expect-error: a platform Herald does not know
  await herald.registerInstallation('phone-2', { platform: 'windows', provider: { identifier: 'abc' } });
  // @ts-expect-error: a delivery state Herald does not know
  herald.deliveries(done.id, { state: 'lost' });
  // @ts-expect-error: listing installations needs a user id
  herald.installations({});
  // @ts-expect-error: a send needs recipients
  await herald.send({ notification: { title: 'Hi' } });
  return ids;
}

/** A webhook receiver's side: the event's type narrows its data. */
export async function receive(body: string | Uint8Array, header: string | undefined): Promise<string> {
  try {
    const event: WebhookEvent = await verifyWebhook(body, header, 'whsec_secret', { toleranceSeconds: 60 });
    if (event.type === 'delivery.failed') return event.data.delivery.reason ?? event.data.notification_id;
    if (event.type === 'notification.completed') return String(event.data.notification.statistics.failed);
    if (event.type === 'installation.invalidated') return event.data.installation.installation_id;
    // @ts-expect-error: an event.reported has no delivery
    return event.data.delivery.id;
  } catch (error) {
    if (error instanceof HeraldWebhookError) return error.message;
    throw error;
  }
}
`;

test('a strict TypeScript program type-checks against the package under nodenext (ESM and CommonJS) and bundler resolution', async () => {
  writeFileSync(path.join(project, 'typed.mts'), typedProgram);
  writeFileSync(path.join(project, 'typed.cts'), typedProgram);
  writeFileSync(path.join(project, 'typed.ts'), typedProgram);
  const common = { target: 'es2022', strict: true, noEmit: true, types: ['node'], typeRoots: [path.join(repo, 'node_modules/@types')] };
  const configs = {
    // A Node service: no DOM library, fetch's types from @types/node.
    'tsconfig.nodenext.json': { compilerOptions: { ...common, module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022'] }, files: ['typed.mts', 'typed.cts'] },
    // A bundled app (Vite, webpack, esbuild).
    'tsconfig.bundler.json': { compilerOptions: { ...common, module: 'esnext', moduleResolution: 'bundler', lib: ['es2022', 'dom'] }, files: ['typed.ts'] },
  };
  const tsc = path.join(repo, 'node_modules/typescript/bin/tsc');
  const declarations: Record<string, string[]> = {};
  await Promise.all(
    Object.entries(configs).map(async ([file, config]) => {
      writeFileSync(path.join(project, file), JSON.stringify(config, null, 2));
      const checked = await run(process.execPath, [tsc, '-p', file, '--strict', '--listFiles'], { cwd: project, env: childEnv() }).catch(
        (error: { stdout: string }) => {
          throw new Error(`tsc -p ${file} failed:\n${error.stdout}`);
        },
      );
      declarations[file] = checked.stdout.split('\n').filter((line) => line.includes('node_modules/@herald/sdk/')).map((line) => path.basename(line));
    }),
  );
  // nodenext took the import condition for the .mts and the require condition for the .cts.
  expect(declarations['tsconfig.nodenext.json'].sort()).toEqual(['index.d.cts', 'index.d.ts']);
  expect(declarations['tsconfig.bundler.json']).toEqual(['index.d.ts']);
}, 60_000);

// A page and its service worker, each in the TypeScript setting it would have: the page with the
// DOM library, the worker with the WebWorker library alone (the two cannot share a program).
const webPage = `
import { subscribe, unsubscribe, HeraldError, type SubscribeOptions, type WebSubscription } from '@herald/sdk/web';

export async function start(serviceWorker: ServiceWorkerRegistration): Promise<string> {
  const options: SubscribeOptions = { baseUrl: 'https://push.example.com', appToken: 'hrld_id_secret', serviceWorker, userId: 'user-1', vapidPublicKey: 'BKey' };
  try {
    const subscribed: WebSubscription = await subscribe(options);
    const endpoint: string = subscribed.subscription.endpoint;
    // @ts-expect-error: an installation's platform is a known one
    const platform: 'windows' | undefined = subscribed.installation?.platform;
    await unsubscribe({ serviceWorker });
    return endpoint + String(platform);
  } catch (error) {
    if (error instanceof HeraldError) return String(error.status);
    throw error;
  }
}
`;
const webWorker = `
import { heraldServiceWorker } from '@herald/sdk/web/service-worker';
declare const self: ServiceWorkerGlobalScope;
heraldServiceWorker(self, { fallbackTitle: 'Shop', defaultUrl: '/' });
// @ts-expect-error: an option it does not have
heraldServiceWorker(self, { title: 'Shop' });
`;

test("the browser entries type-check: the page's under the DOM library, the service worker's under WebWorker alone", async () => {
  writeFileSync(path.join(project, 'page.ts'), webPage);
  writeFileSync(path.join(project, 'sw.ts'), webWorker);
  const common = { target: 'es2022', strict: true, noEmit: true, module: 'esnext', moduleResolution: 'bundler', types: [] };
  const configs = {
    'tsconfig.page.json': { compilerOptions: { ...common, lib: ['es2022', 'dom'] }, files: ['page.ts'] },
    'tsconfig.sw.json': { compilerOptions: { ...common, lib: ['es2022', 'webworker'] }, files: ['sw.ts'] },
  };
  const tsc = path.join(repo, 'node_modules/typescript/bin/tsc');
  await Promise.all(
    Object.entries(configs).map(async ([file, config]) => {
      writeFileSync(path.join(project, file), JSON.stringify(config, null, 2));
      await run(process.execPath, [tsc, '-p', file], { cwd: project, env: childEnv() }).catch((error: { stdout: string }) => {
        throw new Error(`tsc -p ${file} failed:\n${error.stdout}`);
      });
    }),
  );
}, 60_000);

// One program, as ESM (.mjs) and CommonJS (.cjs): register, send, wait, page through two lists,
// and meet a 422 and a 401. It prints what it saw as one JSON line.
const flow = `
const { createHerald, HeraldError } = sdk;
const { HERALD_URL: baseUrl, HERALD_TOKEN: token, RUN: run } = process.env;
const herald = createHerald({ baseUrl, token });
const user = run + '-user';
for (const n of [1, 2, 3]) {
  await herald.registerInstallation(run + '-phone-' + n, {
    platform: n === 3 ? 'android' : 'ios',
    provider: { identifier: run + '-token-' + n },
    user_id: user,
    permission: 'authorized',
  });
}
const sent = await herald.send({ recipients: { user_ids: [user] }, notification: { title: 'From the package' } });
const done = await herald.waitForCompletion(sent.data.id, { intervalMs: 100, timeoutMs: 20000 });
const deliveries = [];
for await (const delivery of herald.deliveries(done.id, { limit: 2 })) deliveries.push(delivery.installation_id);
await herald.send({ recipients: { user_ids: [user] }, notification: { title: 'Second' } });
const titles = [];
for await (const notification of herald.notifications({ limit: 1 })) titles.push(notification.notification.title);
const failure = async (promise) => promise.then(() => null, (error) => error);
const { verifyWebhook, HeraldWebhookError } = sdk;
const { WEBHOOK_BODY: webhookBody, WEBHOOK_HEADER: webhookHeader, WEBHOOK_SECRET: webhookSecret } = process.env;
const webhook = await verifyWebhook(webhookBody, webhookHeader, webhookSecret);
const forged = await failure(verifyWebhook(webhookBody.replace('Unregistered', 'BadDeviceToken'), webhookHeader, webhookSecret));
const invalid = await failure(herald.send({ recipients: { user_ids: [] }, notification: { title: 'Nobody' } }));
const stranger = await failure(createHerald({ baseUrl, token: 'hrld_unknown_token' }).listNotifications());
const describe = (error) => ({
  heraldError: error instanceof HeraldError,
  error: error instanceof Error,
  name: error.name,
  status: error.status,
  message: error.message,
  errors: error.errors ?? null,
  requestId: typeof error.requestId,
});
console.log(JSON.stringify({
  node: process.version,
  resolved,
  accepted: sent.meta.accepted,
  status: done.status,
  statistics: done.statistics,
  deliveries: deliveries.sort(),
  titles,
  invalid: describe(invalid),
  stranger: describe(stranger),
  webhook: { id: webhook.id, type: webhook.type, reason: webhook.data.delivery.reason },
  forged: { webhookError: forged instanceof HeraldWebhookError, message: forged.message },
}));
`;

const programs = {
  'flow.mjs': `import * as sdk from '@herald/sdk';\nconst resolved = import.meta.resolve('@herald/sdk');\n${flow}`,
  'flow.cjs': `const sdk = require('@herald/sdk');\nconst resolved = require.resolve('@herald/sdk');\n(async () => {\n${flow}\n})().catch((error) => {\n  console.error(error);\n  process.exitCode = 1;\n});\n`,
};

async function nodeMajor(node: string): Promise<number> {
  if (!existsSync(node)) throw new Error(`${node} is missing: the SDK is tested on the system's Node 20 there (Debian: apt-get install nodejs).`);
  const { stdout } = await run(node, ['--version']);
  return Number(/^v(\d+)\./.exec(stdout)?.[1]);
}

describe.each([
  ['Node 24', process.execPath, 24],
  ['the system Node 20', systemNode, 20],
])('on %s', (_name, node, major) => {
  test.each([
    ['ESM', 'flow.mjs', 'dist/index.js'],
    ['CommonJS', 'flow.cjs', 'dist/index.cjs'],
  ])('as %s, a program registers, sends, waits for completion, pages through lists and meets HeraldError', async (_kind, file, entry) => {
    expect(await nodeMajor(node)).toBe(major);
    writeFileSync(path.join(project, file), programs[file as keyof typeof programs]);
    const application = await pipeline.newApplication();
    const runId = `${path.parse(file).ext.slice(1)}-${major}`;
    // A webhook request as Herald signs it (src/domain/webhooks.ts), for the program to verify.
    const webhookSecret = newSigningSecret();
    const webhookEventId = randomUUID();
    const webhookBody = JSON.stringify({ id: webhookEventId, type: 'delivery.failed', created_at: new Date().toISOString(), data: { notification_id: randomUUID(), delivery: { reason: 'Unregistered' } } });
    const { stdout } = await run(node, [file], {
      cwd: project,
      env: childEnv({
        HERALD_URL: baseUrl,
        HERALD_TOKEN: application.server,
        RUN: runId,
        WEBHOOK_BODY: webhookBody,
        WEBHOOK_HEADER: signatureHeader([webhookSecret], webhookBody, new Date()),
        WEBHOOK_SECRET: webhookSecret,
      }),
    }).catch((error: { stdout: string; stderr: string }) => {
      throw new Error(`node ${major} ${file} failed:\n${error.stdout}\n${error.stderr}`);
    });
    const seen = JSON.parse(stdout);
    expect(seen.node).toMatch(new RegExp(`^v${major}\\.`));
    expect(seen.resolved).toMatch(new RegExp(`node_modules/@herald/sdk/${entry.replace('.', '\\.')}$`));
    expect(seen).toMatchObject({
      accepted: true,
      status: 'completed',
      statistics: { users: 1, installations: 3, accepted: 3, failed: 0, skipped: 0 },
      deliveries: [1, 2, 3].map((n) => `${runId}-phone-${n}`),
      titles: ['Second', 'From the package'],
    });
    expect(seen.invalid).toEqual({
      heraldError: true,
      error: true,
      name: 'HeraldError',
      status: 422,
      message: expect.stringContaining('user_ids'),
      errors: { 'recipients.user_ids': [expect.any(String)] },
      requestId: 'string',
    });
    // verifyWebhook on this Node, through Web Crypto.
    expect(seen.webhook).toEqual({ id: webhookEventId, type: 'delivery.failed', reason: 'Unregistered' });
    expect(seen.forged).toEqual({ webhookError: true, message: 'No signature of the Herald-Signature header matches this body and secret.' });
    expect(seen.stranger).toEqual({
      heraldError: true,
      error: true,
      name: 'HeraldError',
      status: 401,
      message: 'Unauthenticated.',
      errors: null,
      requestId: 'string',
    });
  });
});
