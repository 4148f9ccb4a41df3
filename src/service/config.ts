// The only reader of process.env: validated once, reported all together, frozen.
import path from 'node:path';
import { z } from 'zod';
import { credentialsKeyForm, decodeCredentialsKey } from '../domain/credentials-key.ts';

/** pg-boss's schema when HERALD_QUEUE_SCHEMA is unset. */
export const defaultQueueSchema = 'pgboss';

const flag = z
  .enum(['true', 'false', '1', '0'])
  .transform((value) => value === 'true' || value === '1');

const schema = z.object({
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
  HOST: z.string().min(1).default('0.0.0.0'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  HERALD_DATA_DIR: z.string().min(1).default('.herald'),
  HERALD_EMBEDDED_PG_PORT: z.coerce.number().int().min(1).max(65535).default(5488),
  HERALD_BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb)$/i).default('1mb'),
  HERALD_VALIDATE_RESPONSES: flag.default(false),
  HERALD_DB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  // Bounds of every database call (db/bounds.ts). Opening a connection, or waiting for a free one.
  HERALD_DB_CONNECT_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(60).default(2),
  // The API's statements: past this Postgres cancels one (statement_timeout), half a second later the
  // client gives up on a database that answers nothing. With the connect bound, a request in a stall
  // is answered 503 within about 5 s.
  HERALD_DB_STATEMENT_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(600).default(3),
  // The API's lock waits (lock_timeout): below the statement bound, so a held lock is named as such.
  HERALD_DB_LOCK_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(600).default(2),
  // The workers' statements (and their maintenance's): fanouts and chunks write many rows at once,
  // well below a deliver job's 120 s expiry.
  HERALD_DB_WORKER_STATEMENT_TIMEOUT_SECONDS: z.coerce.number().min(0.1).max(600).default(30),
  // 32 random bytes, base64: encrypts provider credentials at rest (`openssl rand -base64 32`).
  HERALD_CREDENTIALS_KEY: z
    .string()
    .min(1, `set but empty; unset it, or set it to ${credentialsKeyForm}`)
    .refine((value) => value === '' || decodeCredentialsKey(value) !== null, `must be ${credentialsKeyForm}`)
    .optional(),
  // Provider endpoints: unset means Apple's and Google's; the simulators set them.
  HERALD_APNS_ENDPOINT: z.url({ protocol: /^https$/ }).optional(),
  HERALD_FCM_ENDPOINT: z.url({ protocol: /^https$/ }).optional(),
  HERALD_PROVIDER_CA_FILE: z.string().min(1).optional(),
  // Sends per window per application, unless the application has its own (`herald apps limit`).
  HERALD_SEND_QUOTA: z.coerce.number().int().min(1).default(600),
  HERALD_SEND_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86400).default(60),
  // The Postgres schema of the job queue (pg-boss); every process of one deployment must agree.
  HERALD_QUEUE_SCHEMA: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/).default(defaultQueueSchema),
  // How often an idle worker looks for jobs that no NOTIFY announced (a retry, a deferred job come
  // due): each look is one small query per worker. At least pg-boss's 0.5.
  HERALD_QUEUE_POLL_SECONDS: z.coerce.number().min(0.5).max(60).default(2),
  // Deliver jobs one worker process runs at once for one application (it runs one more for the others: workers.ts fairShare).
  HERALD_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  // `herald work` only: the scheduling priority (nice, 0 to 19) of its threads. Where the API and the
  // workers share CPUs and one cgroup, a positive value lets a send be answered first while a fanout
  // keeps the CPUs busy (containers: their CPU weight, docker-compose.yml).
  HERALD_WORKER_NICE: z.coerce.number().int().min(0).max(19).default(0),
  // `herald work` only: a port answering GET /healthz (the process runs) and /readyz (its database
  // answers), for container health checks. Unset: no port. (`serve` and `start` have the API's.)
  HERALD_WORKER_HEALTH_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  // Prometheus metrics of this process (GET /metrics) on a listener of their own, never on the
  // API's port, so no application token can read them. Unset: none. 0: any free port (logged).
  // The same port as HERALD_WORKER_HEALTH_PORT: one listener serves both.
  HERALD_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  // Loopback by default: a host's other users cannot read them. In a container, 0.0.0.0, and the
  // port left unpublished so that only the container network (Prometheus) reaches it.
  HERALD_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  // SIGTERM/SIGINT: how long in-flight batches may finish before they are handed to another worker.
  // With the 3 s allowed for closing, below Docker's 10 s and Kubernetes' 30 s: Herald exits before it is killed.
  HERALD_SHUTDOWN_GRACE_SECONDS: z.coerce.number().min(0).max(3600).default(5),
  // A batch's provider send not answered by then is retried later with a fresh client; well below
  // the deliver job's 120 s expiry, so a hung connection costs seconds, not the job.
  HERALD_PROVIDER_DEADLINE_SECONDS: z.coerce.number().min(1).max(100).default(5),
  // Pushes sent per provider round trip within a deliver job; each round's outcomes are recorded
  // before the next is sent, so a crash re-sends at most this many pushes per job in flight.
  HERALD_DELIVER_CHUNK_SIZE: z.coerce.number().int().min(1).max(5000).default(250),
  // Pushes per deliver job. One chunk's worth: short jobs spread a fanout's end over every worker
  // and free a worker sooner for another application's or a high-priority job (docs/PERFORMANCE.md).
  HERALD_DELIVER_BATCH_SIZE: z.coerce.number().int().min(1).max(5000).default(250),
  // Notifications that ended longer ago than this, with their deliveries, events and keys, are deleted.
  // At most a century: a horizon further back is past what a Postgres timestamp can subtract.
  HERALD_RETENTION_DAYS: z.coerce.number().int().min(1).max(36500).default(30),
  // Webhooks to loopback, private, link-local and other non-public addresses (and to http URLs):
  // refused unless this is set, for local development and tests with a receiver on this machine.
  HERALD_WEBHOOK_ALLOW_PRIVATE: flag.default(false),
  // Web Push subscription endpoints beyond the known push services (domain/web-push.ts), comma
  // separated: `host`, `host:port` or `*.domain` (a local simulator: `127.0.0.1:2199`).
  HERALD_WEBPUSH_HOSTS: z
    .string()
    .transform((value) => value.split(',').map((host) => host.trim()).filter((host) => host !== ''))
    .refine(
      (hosts) => hosts.every((host) => /^((\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/.test(host)),
      'must be host names, host:port or *.domain, comma separated (e.g. push.example.net,127.0.0.1:2199)',
    )
    .default([]),
  // Web Push to loopback, private, link-local and other non-public addresses: refused unless this is
  // set, as webhooks are, for a simulator on this machine.
  HERALD_WEBPUSH_ALLOW_PRIVATE: flag.default(false),
  // A webhook request not answered (headers and the start of the body) by then is a failed attempt.
  HERALD_WEBHOOK_TIMEOUT_SECONDS: z.coerce.number().min(1).max(60).default(10),
  // The first retry of a failed webhook request comes this long after it, each next one twice as long, up to an hour.
  HERALD_WEBHOOK_RETRY_BASE_SECONDS: z.coerce.number().min(0.1).max(3600).default(10),
  // An event is retried this long after it was made; an endpoint that failed every attempt for this long is disabled.
  HERALD_WEBHOOK_RETRY_WINDOW_SECONDS: z.coerce.number().int().min(1).max(7 * 86400).default(86400),
  // Webhook jobs one worker process runs at once for one endpoint (one more for the others), each with up to 10 requests in flight.
  HERALD_WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
});

export type Config = Readonly<z.infer<typeof schema>> & { readonly dataDir: string };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means unset, as in most shells' `VAR= command`; except the credentials key:
  // set but empty is a secret that did not arrive (an unset CI or compose variable), not a choice.
  const given = Object.fromEntries(
    Object.entries(env).filter(([name, value]) => value !== '' || name === 'HERALD_CREDENTIALS_KEY'),
  );
  const result = schema.safeParse(given);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`Invalid environment:\n${problems.join('\n')}`);
  }
  return Object.freeze({ ...result.data, dataDir: path.resolve(result.data.HERALD_DATA_DIR) });
}
