// The API benchmark (`make bench-api`). On a fresh database that is dropped at the end whatever
// happens, with the APNs and FCM simulators in their own process (`herald simulate`):
//   (1) Herald's API hot paths against a ceiling: Herald as docker-compose deploys it (logging at
//       info), `herald serve` (the API) and `herald work` (the workers, idle here) as two processes
//       (BENCH_API_PROCESSES=start: one `herald start --no-simulate` doing both), and bench/api-ceiling.ts, bare
//       express 5 + pg doing the same token check and the same work in one plain statement per
//       operation, as another process on the same database. For each operation, autocannon with
//       32 connections for 5 s against one, then the other (which goes first alternates from round
//       to round, so that whatever else the machine does weighs on both alike), 3 rounds; medians
//       of req/s, p50/p99 latency and CPU per request (the server process's, and all of Postgres'
//       backends'), and Herald/ceiling req/s against the target (≥ 0.6):
//         PUT installation with a new id each request; PUT installation replacing one of a pool
//         registered beforehand; PATCH and GET installation (the same pool); POST event (a fresh
//         event_id on an accepted delivery of that installation); GET notification (500
//         deliveries; the ceiling is the bare select by id, with zero statistics); GET
//         notifications (a page of 25, each with 500 deliveries).
//       Every response must have the operation's status: any other, or an error or timeout, fails
//       the run (a benchmark of errors is worthless).
//   (2) POST /api/v1/notifications at a steady 50/s (open loop, each to 3 users, with an
//       Idempotency-Key; latency from when each send was due, so a stall shows in full) first
//       with nothing else running, then while a bench-fanout-sized fanout runs: 20 notifications ×
//       500 users (20,000 deliveries) sent at once, until all of them are finished (or for 30 s at
//       most: then the sends stop, and the fanout must still finish). Target: p99 ≤ 25 ms during
//       the fanout. The sends due while the API answers the fanout's own 20 sends (about 0.2 s of
//       20 × 500 recipients at once) are reported apart: that is a burst of the API, not the fanout.
//       Each steady send carries an X-Request-Id, by which its line in Herald's request log gives
//       how long Herald itself took (from its first middleware to the answer written); with how
//       late this process sent it, that splits each latency into the benchmark's share, Herald's,
//       and the rest (the kernel, the connection, waiting for a core).
// With `--prefill`, before measuring: another application's 1 million installations and 2 million
// deliveries of its finished notifications (with their events), written set-based; compare GET
// notification and the others prefilled and empty across two runs.
// It prints the figures against the targets and exits 0 whatever they are (a measurement, not a
// test); non-zero only when the run itself failed (an unexpected status, a fanout not delivered).
//
// Arguments: --prefill
// Environment (all optional):
//   DATABASE_URL                  admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_ROUNDS                  rounds of (1); medians are reported (3)
//   BENCH_API_PROCESSES           split: `herald serve` + `herald work` (default); start: one `herald start`
//   BENCH_SECONDS                 autocannon duration of each operation on each server, and of (2)'s baseline (5)
//   BENCH_CONNECTIONS             autocannon connections (32)
//   BENCH_OPERATIONS              only these operations in (1), comma-separated: put-new, put-replace, patch,
//                                 get-installation, event, get-notification, list (all)
//   BENCH_SEND_RATE               sends per second in (2) (50)
//   BENCH_FANOUT_SECONDS          how long the sends go on at most while the fanout runs (30)
//   BENCH_TIMEOUT_SECONDS         how long the fanout may take once they stopped before the run fails (180)
//   BENCH_PREFILL_INSTALLATIONS   --prefill: the other application's installations (1000000)
//   BENCH_PREFILL_DELIVERIES      --prefill: its deliveries, 1,000 per notification (2000000)
//   BENCH_HERALD_NODE_OPTIONS     NODE_OPTIONS for the Herald process, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
//   BENCH_JSON                    write the figures to this file instead of bench/results/api-<UTC time>.json
//   HERALD_NODE_OPTIONS, MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_: replace bin/herald's own (to compare them)
//   HERALD_DB_POOL_MAX, HERALD_WORKER_CONCURRENCY: passed on to Herald (the pool size to the ceiling too)
//   HERALD_WORKER_NICE            the workers' niceness (10 when split: both processes share this one's scheduling group, where
//                                 it weighs the workers as docker-compose.yml's cpu_shares weighs their container; 0 for one
//                                 `herald start`)
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { loadConfig } from '../src/service/config.ts';
import { createDatabase, iosToken, seedApplication, userId, type Seeded } from '../test/support/seed.ts';
import {
  cpuSeconds,
  cpuSecondsBetween,
  cpuSecondsByProcess,
  createCleanups,
  fixed,
  freePort,
  herald,
  heraldEntry,
  heraldEnvironment,
  integer,
  launch,
  type Launched,
  loadAverage,
  machineLine,
  median,
  openLoop,
  percentile,
  positiveIntegerFromEnv,
  prefillFromArguments,
  prefillOther,
  type Prefilled,
  root,
  runBenchmark,
  type SimulatorsProcess,
  spread,
  startSimulatorsProcess,
  timeOrderedId,
  waitForHttp,
  writeResults,
} from './support.ts';

// autocannon ships no types: what this file uses of it.
type CannonRequest = {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (request: CannonRequest) => CannonRequest;
  onResponse?: (status: number, body: string) => void;
};
type CannonHistogram = { average: number; p50: number; p99: number; max: number; total: number };
type CannonResult = {
  requests: CannonHistogram;
  latency: CannonHistogram;
  errors: number;
  timeouts: number;
  statusCodeStats: Record<string, { count: number }>;
};
const autocannon = createRequire(import.meta.url)('autocannon') as (options: {
  url: string;
  connections: number;
  duration: number;
  timeout?: number;
  requests: CannonRequest[];
}) => Promise<CannonResult>;

const env = process.env;
const prefill = prefillFromArguments();

const settings = {
  rounds: positiveIntegerFromEnv('BENCH_ROUNDS', 3),
  seconds: positiveIntegerFromEnv('BENCH_SECONDS', 5),
  connections: positiveIntegerFromEnv('BENCH_CONNECTIONS', 32),
  sendRate: positiveIntegerFromEnv('BENCH_SEND_RATE', 50),
  fanoutCapMs: positiveIntegerFromEnv('BENCH_FANOUT_SECONDS', 30) * 1000,
  timeoutMs: positiveIntegerFromEnv('BENCH_TIMEOUT_SECONDS', 180) * 1000,
  processes: env.BENCH_API_PROCESSES === 'start' ? ('start' as const) : ('split' as const),
  prefill,
  /** Users with one iOS and one Android installation each: (2)'s fanout goes to all of them. */
  users: 10_000,
  /** Installations registered beforehand that PUT (replace), PATCH and GET cycle over. */
  poolInstallations: 2_000,
  /** Finished notifications that GET reads, each with `perNotification` accepted deliveries (POST event reports on them). */
  readNotifications: 40,
  perNotification: 500,
  pageSize: 25,
  fanoutNotifications: 20,
  recipients: 500,
  usersPerSend: 3,
  warmupSeconds: 1,
};

const targets = { ratio: 0.6, sendP99Ms: 25 };

const log = (line = '') => process.stdout.write(`${line}\n`);

// Everything the run opened, closed in reverse order whatever happens.
const cleanups = createCleanups();

// ---------------------------------------------------------------------------------------------
// Data

/** What a notification of this benchmark says (the fanout's and every send's). */
const message = {
  notification: { title: 'Order shipped', body: 'Your order is on its way' },
  data: { order_id: 1234, kind: 'shipping' },
  options: { priority: 'high', ttl: 3600 },
} as const;
const device = { app_version: '1.0.0', os_version: '17.1', model: 'iPhone15,2', locale: 'en-US', timezone: 'Europe/Paris' };

/** The n-th installation of the pool: what it was registered with, and what PUT (replace) sends again. */
function poolInstallation(n: number) {
  return {
    installationId: `existing-${n}`,
    body: { platform: 'ios', provider: { identifier: iosToken(1_000_000 + n) }, user_id: `pool-user-${n}`, permission: 'authorized', device },
  };
}

type Readable = { notificationIds: string[]; deliveries: { id: string; installationId: string }[] };

/**
 * The benchmark application's pool of installations, and its finished notifications with 500
 * accepted deliveries each to its users' real installations (250 users × iOS + Android), as the
 * fanout and deliver jobs leave them.
 */
async function seedReadable(url: string, applicationId: string): Promise<Readable> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const pool = Array.from({ length: settings.poolInstallations }, (_, index) => poolInstallation(index + 1));
    await client.query(
      `insert into installations
         (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
          registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
       select ${timeOrderedId('now()')}, $1, p.installation_id, 'ios', p.token, 'active', 'authorized', p.user_id, $2::jsonb, now(), now(), now(), now()
         from unnest($3::text[], $4::text[], $5::text[]) as p(installation_id, token, user_id)`,
      [
        applicationId,
        JSON.stringify(device),
        pool.map((installation) => installation.installationId),
        pool.map((installation) => installation.body.provider.identifier),
        pool.map((installation) => installation.body.user_id),
      ],
    );
    const usersPer = settings.perNotification / 2;
    const { rows } = await client.query<{ id: string }>(
      `insert into notifications (id, application_id, status, title, body, data, options, user_ids, created_at, processing_started_at, completed_at)
       select ${timeOrderedId('s.at')}, $1, 'completed', $5, $6, $7::jsonb, $8::jsonb,
              array(select 'user-' || (((s.k * $3 + u) % $4) + 1) from generate_series(0, $3 - 1) u), s.at, s.at, s.at + interval '2 seconds'
         from (select k, now() - make_interval(mins => $2 - k) as at from generate_series(0, $2 - 1) k) s
       returning id`,
      [
        applicationId,
        settings.readNotifications,
        usersPer,
        settings.users,
        message.notification.title,
        message.notification.body,
        JSON.stringify(message.data),
        JSON.stringify(message.options),
      ],
    );
    const notificationIds = rows.map((row) => row.id);
    const { rows: deliveries } = await client.query<{ id: string; installationId: string }>(
      `insert into deliveries
         (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform, state, attempts,
          provider_message_id, created_at, last_attempt_at, completed_at)
       select ${timeOrderedId('n.created_at')}, n.application_id, n.id, i.id, i.installation_id, i.user_id, i.platform, 'accepted', 1,
              gen_random_uuid()::text, n.created_at, n.created_at, n.created_at + interval '1 second'
         from notifications n
        cross join lateral unnest(n.user_ids) as u(user_id)
         join installations i on i.application_id = n.application_id and i.user_id = u.user_id
        where n.id = any($1::uuid[])
       returning id, client_installation_id as "installationId"`,
      [notificationIds],
    );
    if (deliveries.length !== settings.readNotifications * settings.perNotification) {
      throw new Error(`seeded ${deliveries.length} deliveries, expected ${settings.readNotifications * settings.perNotification}`);
    }
    await client.query('analyze');
    return { notificationIds, deliveries };
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// The two servers and the operations

type Side = 'herald' | 'ceiling';
/** `workers`: Herald's worker process, when the API runs apart from it. */
type Target = { side: Side; base: string; process: Launched; workers?: Launched };
type Tokens = { client: string; server: string };

type Operation = {
  /** What BENCH_OPERATIONS names it. */
  key: string;
  label: string;
  /** The status every answer must have. */
  expected: number;
  token: keyof Tokens;
  /** The autocannon request; `side` keeps the two servers' fresh ids apart. */
  request(side: Side): CannonRequest;
};

function operations(readable: Readable): Operation[] {
  const json = { 'content-type': 'application/json' };
  let fresh = 0;
  let cycle = 0;
  const next = (size: number) => (cycle++ % size) + 1;
  const poolPath = (n: number) => `/api/v1/installations/${poolInstallation(n).installationId}`;
  const eventTypes = ['received', 'displayed', 'opened', 'dismissed'] as const;
  return [
    {
      key: 'put-new',
      label: 'PUT installation, new id',
      expected: 201,
      token: 'client',
      request: (side) => ({
        method: 'PUT',
        headers: json,
        setupRequest: (request) => {
          const n = ++fresh;
          const body = { platform: 'ios', provider: { identifier: iosToken(2_000_000 + n) }, user_id: `new-user-${n}`, permission: 'authorized', device };
          return { ...request, path: `/api/v1/installations/new-${side}-${n}`, body: JSON.stringify(body) };
        },
      }),
    },
    {
      key: 'put-replace',
      label: 'PUT installation, replace',
      expected: 200,
      token: 'client',
      request: () => ({
        method: 'PUT',
        headers: json,
        setupRequest: (request) => {
          const n = next(settings.poolInstallations);
          return { ...request, path: poolPath(n), body: JSON.stringify(poolInstallation(n).body) };
        },
      }),
    },
    {
      key: 'patch',
      label: 'PATCH installation',
      expected: 200,
      token: 'client',
      request: () => ({
        method: 'PATCH',
        headers: json,
        setupRequest: (request) => {
          const n = next(settings.poolInstallations);
          // A real change each time: the user moves between two ids.
          return { ...request, path: poolPath(n), body: JSON.stringify({ user_id: `pool-user-${n}${cycle % 2 === 0 ? '' : '-b'}` }) };
        },
      }),
    },
    {
      key: 'get-installation',
      label: 'GET installation',
      expected: 200,
      token: 'client',
      request: () => ({
        method: 'GET',
        setupRequest: (request) => ({ ...request, path: poolPath(next(settings.poolInstallations)) }),
      }),
    },
    {
      key: 'event',
      label: 'POST event',
      expected: 201,
      token: 'client',
      request: () => ({
        method: 'POST',
        path: '/api/v1/events',
        headers: json,
        setupRequest: (request) => {
          const n = next(readable.deliveries.length);
          const delivery = readable.deliveries[n - 1];
          const body = {
            event_id: randomUUID(),
            delivery_id: delivery.id,
            installation_id: delivery.installationId,
            type: eventTypes[n % eventTypes.length],
            occurred_at: new Date().toISOString(),
          };
          return { ...request, body: JSON.stringify(body) };
        },
      }),
    },
    {
      key: 'get-notification',
      label: `GET notification (${settings.perNotification} deliveries)`,
      expected: 200,
      token: 'server',
      request: () => ({
        method: 'GET',
        setupRequest: (request) => ({ ...request, path: `/api/v1/notifications/${readable.notificationIds[next(readable.notificationIds.length) - 1]}` }),
      }),
    },
    {
      key: 'list',
      label: `GET notifications, page of ${settings.pageSize}`,
      expected: 200,
      token: 'server',
      request: () => ({ method: 'GET', path: `/api/v1/notifications?limit=${settings.pageSize}` }),
    },
  ];
}

/** The operations BENCH_OPERATIONS names (comma-separated keys), all when it is unset. */
function selected(all: Operation[]): Operation[] {
  if (!env.BENCH_OPERATIONS) return all;
  const keys = env.BENCH_OPERATIONS.split(',').map((key) => key.trim());
  const unknown = keys.filter((key) => !all.some((operation) => operation.key === key));
  if (unknown.length > 0) throw new Error(`BENCH_OPERATIONS: unknown ${unknown.join(', ')} (known: ${all.map((operation) => operation.key).join(', ')})`);
  return all.filter((operation) => keys.includes(operation.key));
}

/** The keys of a JSON body, nested: what must be alike between Herald's answer and the ceiling's. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length > 0 ? [shape(value[0])] : [];
  if (value === null || typeof value !== 'object') return null;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, shape((value as Record<string, unknown>)[key])]),
  );
}

/**
 * One request of each operation to each server, outside autocannon: both must answer the expected
 * status, and bodies of the same shape (a difference is reported, not fatal).
 */
async function checkAnswers(servers: Target[], ops: Operation[], tokens: Tokens): Promise<void> {
  for (const operation of ops) {
    const shapes: string[] = [];
    for (const target of servers) {
      const template = operation.request(target.side);
      const request = template.setupRequest ? template.setupRequest({ ...template }) : template;
      const response = await fetch(`${target.base}${request.path}`, {
        method: request.method,
        headers: { ...request.headers, authorization: `Bearer ${tokens[operation.token]}` },
        body: request.body,
      });
      const text = await response.text();
      if (response.status !== operation.expected) {
        throw new Error(`${operation.label} on ${target.side}: ${response.status} (expected ${operation.expected}): ${text.slice(0, 500)}`);
      }
      shapes.push(JSON.stringify(shape(JSON.parse(text))));
    }
    if (shapes[0] !== shapes[1]) log(`note: ${operation.label}: the answers differ in shape:\n  herald  ${shapes[0]}\n  ceiling ${shapes[1]}`);
  }
}

/**
 * `cpuUs`: the server process's CPU (user + system) per request, µs; `postgresUs`: all of Postgres'
 * backends' per request (only the one server is driven at a time). Both are the work a request
 * costs, which moves far less with what else the host does than the rate does: a small change
 * shows in them where the spread of the rounds' ratios hides it.
 */
type Measured = { rate: number; p50: number; p99: number; requests: number; cpuUs: number; postgresUs: number };

/** autocannon on one server for one operation; any answer but the expected status fails the run. */
async function measure(target: Target, operation: Operation, tokens: Tokens, seconds: number): Promise<Measured> {
  let firstUnexpected: string | null = null;
  const template = operation.request(target.side);
  const cpuBefore = { server: cpuSeconds(target.process.pid), postgres: cpuSecondsByProcess('postgres') };
  const result = await autocannon({
    url: target.base,
    connections: settings.connections,
    duration: seconds,
    timeout: 30,
    requests: [
      {
        ...template,
        headers: { ...template.headers, authorization: `Bearer ${tokens[operation.token]}` },
        onResponse: (status, body) => {
          if (status !== operation.expected) firstUnexpected ??= `${status} ${body.slice(0, 300)}`;
        },
      },
    ],
  });
  const unexpected = Object.entries(result.statusCodeStats)
    .filter(([status]) => Number(status) !== operation.expected)
    .reduce((sum, [, { count }]) => sum + count, 0);
  if (unexpected > 0 || result.errors > 0 || result.timeouts > 0 || target.process.exited()) {
    throw new Error(
      `${operation.label} on ${target.side}: ${unexpected} answers other than ${operation.expected} ` +
        `(${JSON.stringify(result.statusCodeStats)}), ${result.errors} errors, ${result.timeouts} timeouts` +
        `${target.process.exited() ? ', the process exited' : ''}; first: ${firstUnexpected ?? 'none'}`,
    );
  }
  const perRequest = (seconds: number) => (seconds * 1e6) / Math.max(result.requests.total, 1);
  return {
    rate: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    cpuUs: perRequest(cpuSeconds(target.process.pid) - cpuBefore.server),
    postgresUs: perRequest(cpuSecondsBetween(cpuBefore.postgres, cpuSecondsByProcess('postgres'))),
  };
}

type OperationRounds = { label: string; rounds: { herald: Measured; ceiling: Measured; ratio: number; heraldFirst: boolean }[] };

async function compare(servers: Record<Side, Target>, ops: Operation[], tokens: Tokens): Promise<OperationRounds[]> {
  log(`warm-up: ${settings.warmupSeconds} s of each operation on each server`);
  for (const operation of ops) {
    for (const target of [servers.herald, servers.ceiling]) await measure(target, operation, tokens, settings.warmupSeconds);
  }
  const results: OperationRounds[] = ops.map((operation) => ({ label: operation.label, rounds: [] }));
  for (let round = 0; round < settings.rounds; round++) {
    const heraldFirst = round % 2 === 0;
    log(`round ${round + 1} of ${settings.rounds} (${heraldFirst ? 'Herald' : 'the ceiling'} first)`);
    for (const [index, operation] of ops.entries()) {
      const order: Side[] = heraldFirst ? ['herald', 'ceiling'] : ['ceiling', 'herald'];
      const measured = {} as Record<Side, Measured>;
      for (const side of order) measured[side] = await measure(servers[side], operation, tokens, settings.seconds);
      const ratio = measured.herald.rate / measured.ceiling.rate;
      results[index].rounds.push({ ...measured, ratio, heraldFirst });
      const figures = (m: Measured) =>
        `${integer(m.rate).padStart(6)} req/s, p50 ${integer(m.p50).padStart(3)} p99 ${integer(m.p99).padStart(4)} ms, CPU ${integer(m.cpuUs).padStart(4)} + ${integer(m.postgresUs).padStart(3)} µs`;
      log(`  ${operation.label.padEnd(36)} Herald ${figures(measured.herald)} | ceiling ${figures(measured.ceiling)} | ratio ${fixed(ratio, 2)}`);
    }
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// (2) Sends during a fanout

type SendPhase = 'warmup' | 'baseline' | 'burst' | 'fanout';
type MeasuredPhase = Exclude<SendPhase, 'warmup'>;
/** A steady send's latency from when it was due; Herald's own duration (its request log; null if no line was found) and this process's lateness in sending it. */
type SteadySend = { ms: number; heraldMs: number | null; lateMs: number };
const heraldTimes = (sent: SteadySend[]) => sent.flatMap((send) => (send.heraldMs === null ? [] : [send.heraldMs]));
type SendResult = {
  latency: Record<MeasuredPhase, SteadySend[]>;
  /** From the fanout's first send to all 20 finished. */
  fanoutSeconds: number;
  /** Whether that was within BENCH_FANOUT_SECONDS, while the steady sends ran. */
  finishedUnderLoad: boolean;
  bigSendsMs: number;
  deliveries: number;
};

function sender(base: string, token: string) {
  return async (userIds: string[], idempotencyKey: string, requestId?: string): Promise<{ status: number; text: string }> => {
    const response = await fetch(`${base}/api/v1/notifications`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'idempotency-key': idempotencyKey,
        ...(requestId ? { 'x-request-id': requestId } : {}),
      },
      body: JSON.stringify({ recipients: { user_ids: userIds }, ...message }),
    });
    return { status: response.status, text: await response.text() };
  };
}

/** Waits until every notification has a final status: true, or false once `limitMs` has passed. */
async function waitCompleted(pool: pg.Pool, ids: string[], alive: () => boolean, limitMs: number): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const { rows } = await pool.query<{ open: number }>('select count(*)::int as open from notifications where id = any($1::uuid[]) and completed_at is null', [ids]);
    if (rows[0].open === 0) return true;
    if (!alive()) throw new Error('Herald exited during the fanout');
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

/**
 * (2): the steady sends, first alone, then during the fanout until it is finished, or for
 * BENCH_FANOUT_SECONDS at most (a Herald that cannot keep up would otherwise never finish it:
 * the sends' own fanouts compete with it). Then the fanout must finish, every delivery accepted.
 */
async function sendsDuringFanout(heraldTarget: Target, url: string, token: string): Promise<SendResult> {
  const send = sender(heraldTarget.base, token);
  const alive = () => !heraldTarget.process.exited() && !heraldTarget.workers?.exited();
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  cleanups.add('pool', () => pool.end());
  const runId = randomBytes(4).toString('hex');
  const recipients = (index: number) => Array.from({ length: settings.recipients }, (_, offset) => userId(((index * settings.recipients + offset) % settings.users) + 1));
  const accepted = (text: string) => (JSON.parse(text) as { data: { id: string } }).data.id;
  const mustFinish = async (ids: string[], what: string) => {
    if (!(await waitCompleted(pool, ids, alive, settings.timeoutMs))) throw new Error(`${what}: not finished after ${settings.timeoutMs / 1000} s`);
  };

  // Not measured: provider connections and tokens, the send path's JIT.
  const warm = await send(recipients(0), `warmup-${runId}`);
  if (warm.status !== 202) throw new Error(`warm-up send: ${warm.status} ${warm.text.slice(0, 300)}`);
  await mustFinish([accepted(warm.text)], 'the warm-up notification');

  // Herald's own duration of each steady send, from its request log line (pino-http's responseTime).
  const steadyId = `steady-${runId}-`;
  const heraldMs = new Map<number, number>();
  const stopReading = heraldTarget.process.onLine((line) => {
    if (!line.includes(steadyId)) return;
    const entry = JSON.parse(line) as { requestId?: string; durationMs?: number };
    if (entry.requestId?.startsWith(steadyId) && typeof entry.durationMs === 'number') heraldMs.set(Number(entry.requestId.slice(steadyId.length)), entry.durationMs);
  });

  let phase: SendPhase = 'warmup';
  const load = openLoop(
    settings.sendRate,
    async (index) => {
      const userIds = Array.from({ length: settings.usersPerSend }, (_, offset) => userId(((index * settings.usersPerSend + offset) % settings.users) + 1));
      const { status, text } = await send(userIds, `steady-${runId}-${index}`, `${steadyId}${index}`);
      return status === 202 ? null : `${status} ${text.slice(0, 300)}`;
    },
    () => phase,
  );
  const underLoad = async () => {
    await sleep(2000);
    phase = 'baseline';
    await sleep(settings.seconds * 1000);
    phase = 'burst';
    const started = performance.now();
    const sent = await Promise.all(Array.from({ length: settings.fanoutNotifications }, (_, index) => send(recipients(index), `fanout-${runId}-${index}`)));
    const bigSendsMs = performance.now() - started;
    phase = 'fanout';
    const refused = sent.find((answer) => answer.status !== 202);
    if (refused) throw new Error(`fanout send: ${refused.status} ${refused.text.slice(0, 300)}`);
    const ids = sent.map((answer) => accepted(answer.text));
    const finishedUnderLoad = await waitCompleted(pool, ids, alive, settings.fanoutCapMs - (performance.now() - started));
    return { started, bigSendsMs, ids, finishedUnderLoad };
  };
  const { started, bigSendsMs, ids, finishedUnderLoad } = await underLoad().finally(() => load.stop());
  if (!finishedUnderLoad) await mustFinish(ids, 'the fanout');
  const fanoutSeconds = (performance.now() - started) / 1000;
  if (load.refused.length > 0) throw new Error(`${load.refused.length} steady sends refused, e.g. ${load.refused[0]}`);
  const {
    rows: [{ deliveries }],
  } = await pool.query<{ deliveries: number }>(`select count(*)::int as deliveries from deliveries where notification_id = any($1::uuid[]) and state = 'accepted'`, [ids]);
  const expected = settings.fanoutNotifications * settings.recipients * 2;
  if (deliveries !== expected) throw new Error(`the fanout: ${deliveries} deliveries accepted of ${expected}`);
  stopReading();
  const latency = (of: MeasuredPhase) =>
    load.sent.filter((sent) => sent.phase === of).map(({ index, ms, lateMs }) => ({ ms, lateMs, heraldMs: heraldMs.get(index) ?? null }));
  return { latency: { baseline: latency('baseline'), burst: latency('burst'), fanout: latency('fanout') }, fanoutSeconds, finishedUnderLoad, bigSendsMs, deliveries };
}

// ---------------------------------------------------------------------------------------------
// Report

function summarize(results: OperationRounds[]) {
  const of = (rounds: OperationRounds['rounds'], side: Side) => ({
    rate: median(rounds.map((round) => round[side].rate)),
    p50: median(rounds.map((round) => round[side].p50)),
    p99: median(rounds.map((round) => round[side].p99)),
    cpuUs: median(rounds.map((round) => round[side].cpuUs)),
    postgresUs: median(rounds.map((round) => round[side].postgresUs)),
  });
  return results.map(({ label, rounds }) => ({
    label,
    herald: of(rounds, 'herald'),
    ceiling: of(rounds, 'ceiling'),
    ratio: median(rounds.map((round) => round.ratio)),
    ratios: rounds.map((round) => round.ratio),
  }));
}

function report(results: OperationRounds[], sends: SendResult, problems: string[], prefilled: Prefilled | null): void {
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'BELOW');
  const cells = (...values: string[]) => values.map((value) => value.padStart(8)).join('');
  const row = (label: string, ...values: string[]) => log(`  ${label.padEnd(38)}${cells(...values)}`);
  log();
  log(
    `Summary: medians of ${settings.rounds} round(s), ${settings.connections} connections, ${settings.seconds} s per operation and server` +
      (prefilled ? `; prefilled (${integer(prefilled.installations)} other installations, ${integer(prefilled.old.deliveries)} other deliveries)` : '; not prefilled'),
  );
  log(`  ${''.padEnd(38)}${'Herald'.padEnd(40).padStart(40)}${'ceiling'.padEnd(40).padStart(40)}  Herald/ceiling req/s`);
  row('operation', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs', 'pg µs', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs', 'pg µs', 'ratio', `≥ ${targets.ratio}`, '  rounds');
  for (const line of summarize(results)) {
    const figures = (side: typeof line.herald) =>
      [side.rate, side.p50, side.p99, side.cpuUs, side.postgresUs].map((value) => integer(value));
    row(
      line.label,
      ...figures(line.herald),
      ...figures(line.ceiling),
      fixed(line.ratio, 2),
      verdict(line.ratio >= targets.ratio),
      `  ${line.ratios.map((ratio) => fixed(ratio, 2)).join(' / ')}`,
    );
  }
  log();
  const { baseline, burst, fanout } = sends.latency;
  const total = (of: SteadySend[]) => of.map((send) => send.ms);
  const latencyRow = (label: string, values: number[]) => {
    const { p50, p99, max, count } = spread(values);
    row(label, fixed(p50, 1), fixed(p99, 1), fixed(max, 1), integer(count));
  };
  log(`POST /api/v1/notifications at ${settings.sendRate}/s, ${settings.usersPerSend} users each (open loop, ms from when each send was due)`);
  row('', 'p50', 'p99', 'max', 'sends');
  // Where the time of the steady sends went: Herald's share is what its request log says.
  const withShares = (label: string, of: SteadySend[]) => {
    latencyRow(label, total(of));
    latencyRow('    of which Herald itself (request log)', heraldTimes(of));
    latencyRow('    of which this process sending late', of.map((send) => send.lateMs));
  };
  withShares('  nothing else running', baseline);
  if (burst.length > 0) latencyRow(`  while the fanout's ${settings.fanoutNotifications} are answered`, total(burst));
  withShares(`  during ${settings.fanoutNotifications} × ${settings.recipients} fanout`, fanout);
  const slow = fanout.filter((send) => send.ms > targets.sendP99Ms);
  if (slow.length > 0) {
    const slowLogged = heraldTimes(slow);
    log(
      `  the ${integer(slow.length)} sends over ${targets.sendP99Ms} ms during the fanout: Herald itself p50 ${fixed(percentile(slowLogged, 50), 0)} / ` +
        `max ${fixed(Math.max(...slowLogged), 0)} ms of them; ${integer(slowLogged.filter((ms) => ms > targets.sendP99Ms).length)} took Herald itself ` +
        `over ${targets.sendP99Ms} ms`,
    );
  }
  log(
    `  the fanout: ${integer(sends.deliveries)} deliveries accepted, ${fixed(sends.fanoutSeconds, 1)} s from its first send to all finished ` +
      `(${integer(sends.deliveries / sends.fanoutSeconds)}/s); its ${settings.fanoutNotifications} sends answered within ${integer(sends.bigSendsMs)} ms`,
  );
  if (!sends.finishedUnderLoad) {
    log(`  NOTE: the fanout had not finished after ${settings.fanoutCapMs / 1000} s of steady sends; they stopped then, and it finished after.`);
  }
  const p99 = percentile(total(fanout), 99);
  log(`  target: p99 ≤ ${targets.sendP99Ms} ms during the fanout: ${fixed(p99, 1)} ms ${verdict(p99 <= targets.sendP99Ms)}`);
  log();
  log(`Herald warnings/errors logged: ${problems.length}; load average at the end ${loadAverage()}`);
  for (const line of problems.slice(0, 5)) log(`  ${line.slice(0, 300)}`);
}

function writeFigures(results: OperationRounds[], sends: SendResult, problems: string[], prefilled: Prefilled | null): void {
  const latency = (sent: SteadySend[]) => ({
    ...spread(sent.map((send) => send.ms)),
    herald: spread(heraldTimes(sent)),
    lateness: spread(sent.map((send) => send.lateMs)),
  });
  const slow = sends.latency.fanout.filter((send) => send.ms > targets.sendP99Ms);
  const slowLogged = heraldTimes(slow);
  const sendP99 = percentile(sends.latency.fanout.map((send) => send.ms), 99);
  const figures = {
    settings,
    targets,
    prefilled,
    operations: summarize(results).map((line, index) => ({ ...line, pass: line.ratio >= targets.ratio, rounds: results[index].rounds })),
    verdicts: {
      sendP99DuringFanoutMs: { value: sendP99, target: targets.sendP99Ms, pass: sendP99 <= targets.sendP99Ms },
      operationsBelowRatio: summarize(results).filter((line) => !(line.ratio >= targets.ratio)).map((line) => line.label),
    },
    sends: {
      baseline: latency(sends.latency.baseline),
      burst: sends.latency.burst.length > 0 ? latency(sends.latency.burst) : null,
      fanout: latency(sends.latency.fanout),
      fanoutSeconds: sends.fanoutSeconds,
      finishedUnderLoad: sends.finishedUnderLoad,
      deliveries: sends.deliveries,
      bigSendsMs: sends.bigSendsMs,
      slowDuringFanout: {
        count: slow.length,
        heraldP50Ms: percentile(slowLogged, 50),
        heraldMaxMs: slowLogged.length > 0 ? Math.max(...slowLogged) : null,
        heraldOverTarget: slowLogged.filter((ms) => ms > targets.sendP99Ms).length,
      },
    },
    problems: problems.length,
    firstProblems: problems.slice(0, 5),
  };
  writeResults('api', figures);
}

// ---------------------------------------------------------------------------------------------

type Stage = { url: string; tmp: string; sims: SimulatorsProcess; credentialsKey: Buffer; seeded: Seeded; readable: Readable; prefilled: Prefilled | null };

async function setUp(adminUrl: string, database: string): Promise<Stage> {
  log(`Herald API benchmark${prefill ? ' (--prefill)' : ''}, ${new Date().toISOString()}`);
  log(machineLine(database, adminUrl));
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'herald-bench-api-'));
  cleanups.add('temporary folder', async () => rmSync(tmp, { recursive: true, force: true }));
  const { url, drop } = await createDatabase(adminUrl, database);
  cleanups.add('database', drop);

  // Counters only: (2) reads what happened from the database.
  const sims = await startSimulatorsProcess(path.join(tmp, 'simulators'), { record: false });
  cleanups.add('simulators', () => sims.process.stop(10_000));
  log(`simulators: APNs ${sims.apns}, FCM ${sims.fcm} (process ${sims.process.pid})`);

  const credentialsKey = randomBytes(32);
  const seeded = await seedApplication(url, { name: 'API benchmark', credentialsKey, keys: sims.keys, users: settings.users });
  let prefilled: Prefilled | null = null;
  if (settings.prefill) {
    log(`prefilling: ${integer(settings.prefill.installations)} installations and ${integer(settings.prefill.deliveries)} deliveries of another application`);
    prefilled = await prefillOther(url, settings.prefill, log);
    log(
      `prefilled in ${fixed(prefilled.seconds, 1)} s: ${integer(prefilled.installations)} installations, ${integer(prefilled.old.notifications)} ` +
        `notifications with ${integer(prefilled.old.deliveries)} deliveries and ${integer(prefilled.old.events)} events; database ${prefilled.size}`,
    );
  }
  const readable = await seedReadable(url, seeded.applicationId);
  log(
    `seeded: ${integer(seeded.installations)} installations (${integer(settings.users)} users × iOS + Android), ` +
      `${integer(settings.poolInstallations)} more to replace, patch and read, ${settings.readNotifications} finished notifications ` +
      `× ${settings.perNotification} accepted deliveries`,
  );
  return { url, tmp, sims, credentialsKey, seeded, readable, prefilled };
}

async function startServers(stage: Stage): Promise<Record<Side, Target>> {
  const heraldPort = await freePort();
  const heraldEnv = heraldEnvironment({ databaseUrl: stage.url, port: heraldPort, dataDir: path.join(stage.tmp, 'herald'), ...stage.sims, credentialsKey: stage.credentialsKey });
  const split = settings.processes === 'split';
  // As docker-compose.yml runs the workers: below the API (with one `herald start`, the API would be too).
  if (split) heraldEnv.HERALD_WORKER_NICE = '10';
  for (const name of ['HERALD_WORKER_CONCURRENCY', 'HERALD_DB_POOL_MAX', 'HERALD_WORKER_NICE']) {
    if (env[name]) heraldEnv[name] = env[name];
  }
  if (env.BENCH_HERALD_NODE_OPTIONS) heraldEnv.NODE_OPTIONS = env.BENCH_HERALD_NODE_OPTIONS;
  const poolMax = loadConfig(heraldEnv).HERALD_DB_POOL_MAX;
  const heraldProcess = split
    ? launch('herald serve', herald, ['serve'], { cwd: root, env: heraldEnv })
    : launch('herald start', herald, ['start', '--no-simulate'], { cwd: root, env: heraldEnv });
  cleanups.add('herald', () => heraldProcess.stop());
  await waitForHttp(`http://127.0.0.1:${heraldPort}/readyz`, 60_000, () => !heraldProcess.exited());
  const healthPort = await freePort();
  const workers = split
    ? launch('herald work', herald, ['work'], { cwd: root, env: { ...heraldEnv, HERALD_WORKER_HEALTH_PORT: String(healthPort) } })
    : undefined;
  if (workers) {
    cleanups.add('herald workers', () => workers.stop());
    await waitForHttp(`http://127.0.0.1:${healthPort}/readyz`, 60_000, () => !workers.exited());
  }

  const ceilingPort = await freePort();
  const ceilingProcess = launch('api-ceiling', process.execPath, [path.join(root, 'bench', 'api-ceiling.ts')], {
    cwd: root,
    env: { PATH: env.PATH, HOME: env.HOME, DATABASE_URL: stage.url, PORT: String(ceilingPort), HOST: '127.0.0.1', DB_POOL_MAX: String(poolMax) },
  });
  cleanups.add('ceiling', () => ceilingProcess.stop(5_000));
  await ceilingProcess.waitForLine((line) => line.startsWith('listening'), 30_000);
  log(`herald: ${split ? `API process ${heraldProcess.pid}, workers process ${workers!.pid}` : `process ${heraldProcess.pid}`} on port ${heraldPort}, running ${heraldEntry(heraldProcess.pid)}; ceiling: process ${ceilingProcess.pid} on port ${ceilingPort}; database pool ${poolMax} each`);
  return {
    herald: { side: 'herald', base: `http://127.0.0.1:${heraldPort}`, process: heraldProcess, workers },
    ceiling: { side: 'ceiling', base: `http://127.0.0.1:${ceilingPort}`, process: ceilingProcess },
  };
}

async function run(): Promise<number> {
  const adminUrl = env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 17);
  const stage = await setUp(adminUrl, `herald_bench_api_${stamp}`);
  const servers = await startServers(stage);
  const tokens: Tokens = { client: stage.seeded.clientToken, server: stage.seeded.serverToken };
  const ops = selected(operations(stage.readable));
  await checkAnswers([servers.herald, servers.ceiling], ops, tokens);
  const results = await compare(servers, ops, tokens);
  await servers.ceiling.process.stop(5_000);

  log(`sends at ${settings.sendRate}/s: ${settings.seconds} s with nothing else running, then during a ${settings.fanoutNotifications} × ${settings.recipients} fanout`);
  const sends = await sendsDuringFanout(servers.herald, stage.url, tokens.server);
  const problems = [...servers.herald.process.problems, ...(servers.herald.workers?.problems ?? [])];
  await servers.herald.process.stop();
  await servers.herald.workers?.stop();
  report(results, sends, problems, stage.prefilled);
  writeFigures(results, sends, problems, stage.prefilled);
  return 0;
}

await runBenchmark('bench-api', run, cleanups);
