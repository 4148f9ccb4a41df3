// What an operator sees of a running Herald: its Prometheus metrics, scraped from the metrics port
// of a real `herald start` after a real fanout to the simulators, and its log lines (one per request,
// one per notification when it ends), read from that process's output.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createLogger } from '../src/logging/logger.ts';
import { parse as parseYaml } from 'yaml';
import { reasonLabel, registry } from '../src/observability/metrics.ts';
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { startHerald, type HeraldProcess } from './support/processes.ts';

type Sample = { name: string; labels: Record<string, string>; value: number };

/** The Prometheus text format, sample lines only (`name{label="value",...} number`). */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[name] = value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of a metric's samples whose labels include `labels` (0 when there is none). */
const valueOf = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value))
    .reduce((sum, s) => sum + s.value, 0);

const has = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.some((s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value));

/** A TCP port nobody listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function listeningPort(process: HeraldProcess, message: string): number {
  const line = process.logs.find((l) => l.includes(`"msg":"${message}"`));
  if (!line) throw new Error(`no "${message}" line:\n${process.logs.join('\n')}`);
  return JSON.parse(line).address.port;
}

let pipeline: Pipeline;
let env: NodeJS.ProcessEnv;
const processes: HeraldProcess[] = [];

beforeAll(async () => {
  // Jobs stay for the spawned process: no worker in this one.
  pipeline = await startPipeline({ workers: false });
  env = {
    ...pipeline.workerEnvironment(),
  };
}, 60_000);
afterAll(async () => {
  await Promise.all(processes.map((process) => process.stop()));
  await pipeline.close();
});

describe('herald start with HERALD_METRICS_PORT, after a fanout', () => {
  let herald: HeraldProcess;
  let api: string;
  let metricsUrl: string;
  let app: PipelineApplication;
  let notificationId: string;
  let samples: Sample[];

  const call = (method: string, route: string, token: string | null, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${api}${route}`, {
      method,
      headers: {
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  beforeAll(async () => {
    // One send per minute per application: the second distinct send is refused (429).
    herald = await startHerald(['start'], { ...env, HERALD_METRICS_PORT: '0', HERALD_SEND_QUOTA: '1' }, (line) =>
      line.includes('"msg":"API listening"'),
    );
    processes.push(herald);
    api = `http://127.0.0.1:${herald.port}`;
    metricsUrl = `http://127.0.0.1:${listeningPort(herald, 'metrics listening')}`;

    pipeline.apns.setRules([{ prefix: 'dead-', reason: 'Unregistered' }]);
    app = await pipeline.newApplication();
    const installations: [string, object][] = [
      ['u1-iphone', ios('aa01', 'u1')],
      ['u1-pixel', android('fcm-aa02', 'u1')],
      ['u2-iphone', ios('bb01', 'u2')],
      ['u3-iphone', ios('cc01', 'u3')],
      ['u4-iphone', ios('dead-01', 'u4')],
      ['u5-iphone', ios('ee01', 'u5', { permission: 'denied' })],
    ];
    for (const [id, body] of installations) expect((await call('PUT', `/api/v1/installations/${id}`, app.client, body)).status).toBe(201);

    const send = { recipients: { user_ids: ['u1', 'u2', 'u3', 'u4', 'u5'] }, notification: { title: 'Hi' } };
    const sent = await call('POST', '/api/v1/notifications', app.server, send, { 'Idempotency-Key': 'metrics-1', 'X-Request-Id': 'metrics-send-1' });
    expect(sent.status).toBe(202);
    notificationId = (await sent.json()).data.id;
    expect((await call('POST', '/api/v1/notifications', app.server, send, { 'Idempotency-Key': 'metrics-1' })).status).toBe(202);
    expect((await call('POST', '/api/v1/notifications', app.server, { ...send, notification: { title: 'Again' } })).status).toBe(429);
    expect((await call('POST', '/api/v1/notifications', null, send)).status).toBe(401);
    expect((await call('POST', '/api/v1/notifications', `${app.server}x`, send)).status).toBe(401);
    expect((await call('POST', '/api/v1/notifications', app.client, send)).status).toBe(403);
    expect((await call('GET', '/no/such/path', app.server)).status).toBe(404);
    expect((await call('GET', '/docs', null)).status).toBe(200);
    expect((await call('GET', '/dashboard', null)).status).toBe(200);
    await app.settled(notificationId);

    const scrape = await fetch(`${metricsUrl}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    samples = parseExposition(await scrape.text());
  }, 60_000);

  test('deliveries are counted by platform, outcome and reason, exactly as they happened', () => {
    const deliveries = (labels: Record<string, string>) => valueOf(samples, 'herald_deliveries_total', labels);
    expect(deliveries({ platform: 'ios', outcome: 'accepted', reason: '' })).toBe(3);
    expect(deliveries({ platform: 'android', outcome: 'accepted', reason: '' })).toBe(1);
    expect(deliveries({ platform: 'ios', outcome: 'failed', reason: 'Unregistered' })).toBe(1);
    expect(deliveries({ platform: 'ios', outcome: 'skipped', reason: 'permission_denied' })).toBe(1);
    expect(deliveries({})).toBe(6);
    expect(valueOf(samples, 'herald_delivery_retries_total')).toBe(0);
  });

  test('sends, the 429 and the authentication failures are counted', () => {
    expect(valueOf(samples, 'herald_sends_total', { application: app.id, result: 'accepted' })).toBe(1);
    expect(valueOf(samples, 'herald_sends_total', { application: app.id, result: 'replayed' })).toBe(1);
    expect(valueOf(samples, 'herald_sends_total', { application: app.id, result: 'rate_limited' })).toBe(1);
    expect(valueOf(samples, 'herald_auth_failures_total', { status: '401', reason: 'missing_token' })).toBe(1);
    expect(valueOf(samples, 'herald_auth_failures_total', { status: '401', reason: 'invalid_token' })).toBe(1);
    expect(valueOf(samples, 'herald_auth_failures_total', { status: '403', reason: 'insufficient_scope' })).toBe(1);
  });

  test('the notification went queued, processing, partial; its duration is observed once', () => {
    for (const status of ['queued', 'processing', 'partial']) expect(valueOf(samples, 'herald_notifications_total', { status })).toBe(1);
    expect(valueOf(samples, 'herald_notifications_total')).toBe(3);
    expect(valueOf(samples, 'herald_notification_duration_seconds_count', { status: 'partial' })).toBe(1);
    expect(valueOf(samples, 'herald_notification_duration_seconds_sum', { status: 'partial' })).toBeGreaterThan(0);
  });

  test('HTTP requests are labelled with the document route template, never the raw URL', () => {
    const requests = (labels: Record<string, string>) => valueOf(samples, 'herald_http_request_duration_seconds_count', labels);
    expect(requests({ route: '/api/v1/installations/{installationId}', method: 'PUT', status: '201' })).toBe(6);
    expect(requests({ route: '/api/v1/notifications', method: 'POST', status: '202' })).toBe(2);
    expect(requests({ route: '/api/v1/notifications', method: 'POST', status: '429' })).toBe(1);
    expect(requests({ route: '/api/v1/notifications', method: 'POST', status: '401' })).toBe(2);
    expect(requests({ route: '/api/v1/notifications', method: 'POST', status: '403' })).toBe(1);
    expect(requests({ route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    expect(requests({ route: '/docs', method: 'GET', status: '200' })).toBe(1);
    expect(requests({ route: '/dashboard', method: 'GET', status: '200' })).toBe(1);
    const routes = new Set(samples.filter((s) => s.name === 'herald_http_request_duration_seconds_count').map((s) => s.labels.route));
    for (const route of routes) expect(route === 'unmatched' || route.startsWith('/')).toBe(true);
    expect([...routes].some((route) => route.includes('u1-iphone') || route.includes('/no/such'))).toBe(false);
    expect(has(samples, 'herald_http_request_duration_seconds_bucket', { route: '/api/v1/notifications', le: '+Inf' })).toBe(true);
  });

  test('provider round trips, job waits, queue depth and the process are measured', () => {
    expect(valueOf(samples, 'herald_provider_request_duration_seconds_count', { platform: 'ios' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(samples, 'herald_provider_request_duration_seconds_count', { platform: 'android' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(samples, 'herald_job_wait_seconds_count', { queue: 'fanout' })).toBe(1);
    // One deliver batch per platform.
    expect(valueOf(samples, 'herald_job_wait_seconds_count', { queue: 'deliver' })).toBe(2);
    for (const queue of ['fanout', 'deliver']) {
      for (const state of ['ready', 'deferred', 'active']) expect(has(samples, 'herald_queue_jobs', { queue, state })).toBe(true);
    }
    expect(valueOf(samples, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(valueOf(samples, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
  });

  test('the API port does not serve /metrics, and the metrics port serves nothing of the API', async () => {
    const onApi = await fetch(`${api}/metrics`);
    expect(onApi.status).toBe(404);
    expect(await onApi.json()).toEqual({ message: 'Not Found' });
    const bearer = { Authorization: `Bearer ${app.server}` };
    expect((await fetch(`${metricsUrl}/api/v1/notifications/${notificationId}`, { headers: bearer })).status).toBe(404);
    expect((await fetch(`${metricsUrl}/openapi.json`)).status).toBe(404);
    // `start` has the API's health checks; the metrics port has none of its own.
    expect((await fetch(`${metricsUrl}/healthz`)).status).toBe(404);
  });

  test('one log line per request: method, route, status, duration, request id, application id; no header anywhere', () => {
    const lines = herald.logs.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
    const send = lines.find((line) => line.requestId === 'metrics-send-1')!;
    expect(send).toMatchObject({
      msg: 'request completed',
      level: 30,
      method: 'POST',
      route: '/api/v1/notifications',
      status: 202,
      requestId: 'metrics-send-1',
      applicationId: app.id,
    });
    expect(typeof send.durationMs).toBe('number');
    expect(send.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Object.keys(send).sort()).toEqual(
      ['applicationId', 'durationMs', 'hostname', 'level', 'method', 'msg', 'pid', 'requestId', 'route', 'status', 'time'].sort(),
    );
    expect(lines.filter((line) => line.requestId === 'metrics-send-1')).toHaveLength(1);
    const unauthenticated = lines.filter((line) => line.msg === 'request completed' && line.status === 401);
    expect(unauthenticated).toHaveLength(2);
    for (const line of unauthenticated) expect(line.applicationId).toBeUndefined();
    const output = herald.logs.join('\n');
    expect(output).not.toMatch(/authorization/i);
    expect(output).not.toContain(app.server.split('_')[2]);
    expect(output).not.toContain(app.client.split('_')[2]);
  });

  test('one log line when the notification ends: id, application, status, statistics, duration', () => {
    const lines = herald.logs.filter((line) => line.includes('"msg":"notification finished"')).map((line) => JSON.parse(line));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      notificationId,
      applicationId: app.id,
      status: 'partial',
      statistics: { users: 5, installations: 6, accepted: 4, failed: 1, skipped: 1, received: 0, displayed: 0, opened: 0 },
    });
    expect(lines[0].durationMs).toBeGreaterThanOrEqual(0);
    expect(lines[0].durationMs).toBeLessThan(60_000);
  });
});

test('herald work with the metrics and health ports the same: one listener answers both', async () => {
  const port = await freePort();
  const worker = await startHerald(['work'], { ...env, HERALD_METRICS_PORT: String(port), HERALD_WORKER_HEALTH_PORT: String(port) }, (line) =>
    line.includes('"msg":"metrics listening"'),
  );
  processes.push(worker);
  const base = `http://127.0.0.1:${port}`;
  expect((await fetch(`${base}/healthz`)).status).toBe(200);
  expect((await fetch(`${base}/readyz`)).status).toBe(200);
  expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(405);
  const samples = parseExposition(await (await fetch(`${base}/metrics`)).text());
  expect(has(samples, 'herald_queue_jobs', { queue: 'deliver', state: 'ready' })).toBe(true);
  expect(valueOf(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  // A worker alone serves no API, and names no route.
  expect(has(samples, 'herald_http_request_duration_seconds_count')).toBe(false);
  expect((await fetch(`${base}/api/v1/notifications`)).status).toBe(404);
}, 30_000);

test('herald work with HERALD_WORKER_NICE runs every thread at that scheduling priority (V8 and libuv ones too); serve keeps the default', async () => {
  // Linux: nice is per thread; field 19 of each thread's stat.
  const threadNices = (pid: number) =>
    readdirSync(`/proc/${pid}/task`).map((thread) => Number(readFileSync(`/proc/${pid}/task/${thread}/stat`, 'utf8').split(') ')[1].split(' ')[16]));
  const port = await freePort();
  const worker = await startHerald(['work'], { ...env, HERALD_WORKER_NICE: '10', HERALD_WORKER_HEALTH_PORT: String(port) }, (line) =>
    line.includes('"msg":"workers started"'),
  );
  processes.push(worker);
  const workerThreads = threadNices(worker.child.pid!);
  // The main thread, V8's garbage collection and compilation threads, libuv's pool.
  expect(workerThreads.length).toBeGreaterThan(4);
  expect(new Set(workerThreads)).toEqual(new Set([10]));
  const api = await startHerald(['serve'], { ...env, HERALD_WORKER_NICE: '10' });
  processes.push(api);
  expect(new Set(threadNices(api.child.pid!))).toEqual(new Set([0]));
}, 30_000);

test("docker-compose.yml weighs the worker's container below the API's by CPU weight, not by a nice value that does not cross containers", () => {
  const { services } = parseYaml(readFileSync('docker-compose.yml', 'utf8'), { merge: true });
  // Docker's default weight is 1024; each container is a cgroup of its own.
  expect(services.worker.cpu_shares).toBeLessThan(services.api.cpu_shares ?? 1024);
  for (const name of ['api', 'worker']) expect([name, services[name].environment.HERALD_WORKER_NICE]).toEqual([name, undefined]);
});

test('a delivery reason outside the known set is one label value', () => {
  expect(reasonLabel('Unregistered')).toBe('Unregistered');
  expect(reasonLabel('messaging/registration-token-not-registered')).toBe('messaging/registration-token-not-registered');
  expect(reasonLabel('provider timeout')).toBe('provider timeout');
  expect(reasonLabel('connect ECONNREFUSED 10.0.3.7:443')).toBe('other');
  expect(reasonLabel('HTTP 418')).toBe('other');
  expect(reasonLabel(null)).toBe('');
});

test('on a terminal, log lines are pretty and coloured; otherwise JSON', () => {
  let pretty = '';
  createLogger('info', { write: (line: string) => void (pretty += line) }, { pretty: true }).info({ notificationId: 'n-1' }, 'notification finished');
  expect(pretty).toContain('\u001b[');
  expect(pretty).toContain('notification finished');
  expect(pretty).toContain('n-1');
  expect(() => JSON.parse(pretty)).toThrow();
  let json = '';
  createLogger('info', { write: (line: string) => void (json += line) }).info({ notificationId: 'n-1' }, 'notification finished');
  expect(JSON.parse(json)).toMatchObject({ msg: 'notification finished', notificationId: 'n-1' });
});

describe('the runbook and the compose file name the metrics as they are', () => {
  const runbook = readFileSync('docs/OPERATIONS.md', 'utf8');
  const heraldMetrics = registry.getMetricsAsArray().map((metric) => metric.name).filter((name) => name.startsWith('herald_'));

  test('every Herald metric is in the runbook\'s table', () => {
    expect(heraldMetrics.length).toBeGreaterThanOrEqual(10);
    for (const name of heraldMetrics) expect(runbook).toContain(`| \`${name}\` |`);
  });

  test('the example alert rules parse and use only metrics that exist', () => {
    const blocks = [...runbook.matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => parseYaml(match[1]));
    const rules = blocks.flatMap((block) => (block.groups ?? []).flatMap((group: { rules: { alert: string; expr: string }[] }) => group.rules));
    expect(rules.length).toBeGreaterThanOrEqual(8);
    const series = new Set(heraldMetrics.flatMap((name) => [name, `${name}_bucket`, `${name}_count`, `${name}_sum`]));
    for (const rule of rules) {
      const used = rule.expr.match(/\bherald_[a-z_]+/g) ?? [];
      for (const name of used) expect([rule.alert, series.has(name)]).toEqual([rule.alert, true]);
    }
  });

  test('docker-compose.yml gives the api and the worker a metrics port on the compose network only', () => {
    const compose = parseYaml(readFileSync('docker-compose.yml', 'utf8'), { merge: true });
    for (const name of ['api', 'worker']) {
      const service = compose.services[name];
      const port = String(service.environment.HERALD_METRICS_PORT);
      expect([name, service.environment.HERALD_METRICS_HOST, service.expose]).toEqual([name, '0.0.0.0', [port]]);
      expect((service.ports ?? []).some((mapping: string) => mapping.endsWith(`:${port}`))).toBe(false);
    }
  });
});
