// The ceiling of `make bench-api` (bench/api.ts): what Herald's API hot paths could cost at best
// with the same stack underneath, plain express 5 and a `pg` Pool, no ORM, no validator, no
// per-request logging, on the SAME tables (a database Herald migrated), doing the same work in as
// few round trips as it takes:
//   - the same token check on every request: `hrld_<public id>_<secret>` parsed, one select of the
//     token by public id, SHA-256 of the secret compared in constant time (Herald's own pure
//     functions from src/domain/tokens.ts, so the check cannot drift), then the ability;
//   - then one plain statement per operation: PUT installation an upsert (201 created, 200
//     replaced), PATCH an update, GET a select, POST event one statement that checks the delivery
//     and records the event, its first-seen time and the installation's last sight together (a
//     second one only to compare a repeated event_id), GET notification the bare select by id and
//     the list one select of a page.
// Bodies are parsed (express.json) and answered with the same JSON shapes as Herald's. The
// notification statistics are zeros: this is the bare select of the row, the cost of reading
// counters kept on it; and of the target users only their number is read.
//
// Its own process: `node bench/api-ceiling.ts`, with DATABASE_URL and PORT (HOST 127.0.0.1,
// DB_POOL_MAX 10, Herald's default pool size); it prints `listening on http://host:port`.
import express, { type NextFunction, type Request, type Response } from 'express';
import pg from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { decodeCursor, encodeCursor } from '../src/domain/cursor.ts';
import { grants, hashSecret, parseToken, secretMatches } from '../src/domain/tokens.ts';

const env = process.env;
if (!env.DATABASE_URL || !env.PORT) {
  process.stderr.write('api-ceiling: DATABASE_URL and PORT are required\n');
  process.exit(2);
}
const host = env.HOST ?? '127.0.0.1';
const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: Number(env.DB_POOL_MAX ?? 10) });
pool.on('error', () => undefined);

class HttpError extends Error {
  readonly status: number;
  readonly errors: Record<string, string[]> | undefined;
  constructor(status: number, message: string, errors?: Record<string, string[]>) {
    super(message);
    this.status = status;
    this.errors = errors;
  }
}
const notFound = () => new HttpError(404, 'Not Found');
const invalid = (field: string, message: string) => new HttpError(422, message, { [field]: [message] });

// ---------------------------------------------------------------------------------------------
// The token check

type TokenRow = { application_id: string; secret_hash: string; abilities: string[]; revoked_at: Date | null };
// An unknown public id costs the same as a wrong secret, as in Herald.
const decoyHash = hashSecret('decoy');

async function applicationOf(req: Request, ability: string): Promise<string> {
  const match = /^Bearer +(\S+) *$/i.exec(req.get('authorization') ?? '');
  const parts = match ? parseToken(match[1]) : null;
  if (!parts) throw new HttpError(401, 'Unauthenticated.');
  const { rows } = await pool.query<TokenRow>('select application_id, secret_hash, abilities, revoked_at from api_tokens where public_id = $1', [
    parts.publicId,
  ]);
  const token = rows[0];
  const matches = secretMatches(parts.secret, token?.secret_hash ?? decoyHash);
  if (!token || !matches || token.revoked_at) throw new HttpError(401, 'Unauthenticated.');
  if (!grants(token.abilities, [ability])) throw new HttpError(403, 'This action is unauthorized.');
  return token.application_id;
}

// ---------------------------------------------------------------------------------------------
// Views: the JSON Herald answers (openapi/openapi.yaml Installation, Notification, Event)

const deviceFields = ['app_version', 'os_version', 'model', 'locale', 'timezone'] as const;
const identifierTypes: Record<string, string> = { ios: 'apns_token', android: 'fcm_token' };
const iso = (value: Date | null) => value?.toISOString() ?? null;

type InstallationRow = {
  id: string;
  installation_id: string;
  platform: string;
  provider_identifier: string;
  status: string;
  permission: string;
  user_id: string | null;
  device: Record<string, string | null> | null;
  registered_at: Date;
  last_seen_at: Date;
  identifier_updated_at: Date;
  permission_updated_at: Date;
  invalidated_at: Date | null;
  invalid_reason: string | null;
};

function installationView(row: InstallationRow) {
  return {
    id: row.id,
    installation_id: row.installation_id,
    platform: row.platform,
    provider_identifier_type: identifierTypes[row.platform],
    status: row.status,
    permission: row.permission,
    device: Object.fromEntries(deviceFields.map((field) => [field, row.device?.[field] ?? null])),
    registered_at: iso(row.registered_at),
    last_seen_at: iso(row.last_seen_at),
    identifier_updated_at: iso(row.identifier_updated_at),
    user_id: row.user_id,
    permission_updated_at: iso(row.permission_updated_at),
    invalidated_at: iso(row.invalidated_at),
    invalid_reason: row.invalid_reason,
  };
}

type NotificationRow = {
  id: string;
  status: string;
  title: string | null;
  body: string | null;
  image_url: string | null;
  action_url: string | null;
  data: Record<string, unknown>;
  options: Record<string, unknown>;
  target_users: number;
  created_at: Date;
  processing_started_at: Date | null;
  completed_at: Date | null;
};

const statistics = { users: 0, installations: 0, accepted: 0, received: 0, displayed: 0, opened: 0, failed: 0, skipped: 0 };

function notificationView(row: NotificationRow) {
  return {
    id: row.id,
    status: row.status,
    notification: { title: row.title, body: row.body, image_url: row.image_url, action_url: row.action_url },
    data: row.data,
    options: row.options,
    target_users: row.target_users,
    statistics,
    created_at: iso(row.created_at),
    processing_started_at: iso(row.processing_started_at),
    completed_at: iso(row.completed_at),
  };
}

// Only the number of target users is answered: the array itself is not read (pg parses a text[]
// in JavaScript, element by element).
const notificationColumns = `id, status, title, body, image_url, action_url, data, options, cardinality(user_ids) as target_users,
                             created_at, processing_started_at, completed_at`;

type EventRow = { event_id: string; delivery_id: string; client_installation_id: string; type: string; occurred_at: Date; received_at: Date };

function eventView(row: EventRow) {
  return {
    event_id: row.event_id,
    delivery_id: row.delivery_id,
    installation_id: row.client_installation_id,
    type: row.type,
    occurred_at: iso(row.occurred_at),
    received_at: iso(row.received_at),
  };
}

// ---------------------------------------------------------------------------------------------
// The operations

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const platforms = new Set(['ios', 'android']);
const permissions = new Set(['unknown', 'not_determined', 'authorized', 'provisional', 'ephemeral', 'denied']);
const eventTypes = new Set(['received', 'displayed', 'opened', 'dismissed']);
type Body = Record<string, unknown>;
const bodyOf = (req: Request): Body => (req.body !== null && typeof req.body === 'object' ? (req.body as Body) : {});

// A replace keeps registered_at, moves identifier_updated_at and permission_updated_at only when
// those values change, and keeps an invalidation unless the identifier changed (domain/installations.ts);
// an identifier another installation holds marks both as sharing it (db/sql/installations.ts).
const upsertInstallation = `
  with holders as (
    select o.id, o.identifier_shared from installations o
     where o.application_id = $2 and o.provider_identifier = $5 and o.installation_id <> $3
  ), flagged as (
    update installations o set identifier_shared = true from holders h where o.id = h.id and not h.identifier_shared
  )
  insert into installations
    (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
     registered_at, last_seen_at, identifier_updated_at, permission_updated_at, identifier_shared)
  values ($1, $2, $3, $4, $5, 'active', $6, $7, $8, now(), now(), now(), now(), exists (select from holders))
  on conflict (application_id, installation_id) do update set
    identifier_shared = installations.identifier_shared or excluded.identifier_shared,
    platform = excluded.platform,
    provider_identifier = excluded.provider_identifier,
    permission = excluded.permission,
    user_id = excluded.user_id,
    device = excluded.device,
    last_seen_at = now(),
    identifier_updated_at = case when installations.provider_identifier = excluded.provider_identifier
                                 then installations.identifier_updated_at else now() end,
    permission_updated_at = case when installations.permission = excluded.permission
                                 then installations.permission_updated_at else now() end,
    status = case when installations.provider_identifier = excluded.provider_identifier and installations.status = 'invalid'
                  then 'invalid' else 'active' end,
    invalidated_at = case when installations.provider_identifier = excluded.provider_identifier and installations.status = 'invalid'
                          then installations.invalidated_at end,
    invalid_reason = case when installations.provider_identifier = excluded.provider_identifier and installations.status = 'invalid'
                          then installations.invalid_reason end
  returning *, (xmax = 0) as created`;

// The old row's values on the right: permission_updated_at moves only on a new permission.
const patchInstallation = `
  update installations set
    user_id = case when $3 then $4 else user_id end,
    permission = coalesce($5, permission),
    permission_updated_at = case when $5::text is not null and $5 <> permission then now() else permission_updated_at end,
    last_seen_at = now()
   where application_id = $1 and installation_id = $2
  returning *`;

// The delivery must be the application's and have gone to that installation; a skipped one was
// never pushed. A new event records the kind's first time on the delivery (least() ignores nulls)
// and the installation's last sight, all in this one statement.
const recordEvent = `
  with target as (
    select installation_id, state, reason from deliveries
     where id = $2 and application_id = $1 and client_installation_id = $3
  ), inserted as (
    insert into delivery_events (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
    select $7, $1, $4, $2, $3, $5, $6, now() from target where state <> 'skipped'
    on conflict (application_id, event_id) do nothing
    returning event_id, delivery_id, client_installation_id, type, occurred_at, received_at
  ), first_seen as (
    update deliveries set
      received_at = case when $5::text = 'received' then least(received_at, $6::timestamptz) else received_at end,
      displayed_at = case when $5::text = 'displayed' then least(displayed_at, $6::timestamptz) else displayed_at end,
      opened_at = case when $5::text = 'opened' then least(opened_at, $6::timestamptz) else opened_at end,
      dismissed_at = case when $5::text = 'dismissed' then least(dismissed_at, $6::timestamptz) else dismissed_at end
     where id = $2 and exists (select 1 from inserted)
  ), touched as (
    update installations set last_seen_at = now()
     where id = (select installation_id from target) and exists (select 1 from inserted)
  )
  select t.state, t.reason, i.* from target t left join inserted i on true`;

const app = express();
app.disable('x-powered-by');
app.use(express.json({ limit: '1mb' }));

app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});

app.put('/api/v1/installations/:installationId', async (req, res) => {
  const applicationId = await applicationOf(req, 'installations:write');
  const body = bodyOf(req);
  const provider = body.provider as { identifier?: unknown } | undefined;
  if (typeof provider?.identifier !== 'string' || provider.identifier === '') throw invalid('provider.identifier', 'The provider.identifier field is required.');
  if (typeof body.platform !== 'string' || !platforms.has(body.platform)) throw invalid('platform', 'The selected platform is invalid.');
  const permission = body.permission ?? 'unknown';
  if (typeof permission !== 'string' || !permissions.has(permission)) throw invalid('permission', 'The selected permission is invalid.');
  const device = (body.device ?? {}) as Record<string, unknown>;
  const { rows } = await pool.query<InstallationRow & { created: boolean }>(upsertInstallation, [
    uuidv7(),
    applicationId,
    req.params.installationId,
    body.platform,
    provider.identifier,
    permission,
    body.user_id ?? null,
    JSON.stringify(Object.fromEntries(deviceFields.map((field) => [field, device[field] ?? null]))),
  ]);
  res.status(rows[0].created ? 201 : 200).json({ data: installationView(rows[0]) });
});

app.patch('/api/v1/installations/:installationId', async (req, res) => {
  const applicationId = await applicationOf(req, 'installations:write');
  const body = bodyOf(req);
  if (body.permission !== undefined && (typeof body.permission !== 'string' || !permissions.has(body.permission))) {
    throw invalid('permission', 'The selected permission is invalid.');
  }
  const { rows } = await pool.query<InstallationRow>(patchInstallation, [
    applicationId,
    req.params.installationId,
    body.user_id !== undefined,
    body.user_id ?? null,
    body.permission ?? null,
  ]);
  if (!rows[0]) throw notFound();
  res.json({ data: installationView(rows[0]) });
});

app.get('/api/v1/installations/:installationId', async (req, res) => {
  const applicationId = await applicationOf(req, 'installations:read');
  const { rows } = await pool.query<InstallationRow>('select * from installations where application_id = $1 and installation_id = $2', [
    applicationId,
    req.params.installationId,
  ]);
  if (!rows[0]) throw notFound();
  res.json({ data: installationView(rows[0]) });
});

app.post('/api/v1/events', async (req, res) => {
  const applicationId = await applicationOf(req, 'events:write');
  const body = bodyOf(req);
  const { event_id: eventId, delivery_id: deliveryId, installation_id: installationId, type } = body;
  if (typeof eventId !== 'string' || !uuidPattern.test(eventId)) throw invalid('event_id', 'The event_id field must be a valid UUID.');
  if (typeof installationId !== 'string' || installationId === '') throw invalid('installation_id', 'The installation_id field is required.');
  if (typeof type !== 'string' || !eventTypes.has(type)) throw invalid('type', 'The selected type is invalid.');
  const occurredAt = new Date(typeof body.occurred_at === 'string' ? body.occurred_at : Number.NaN);
  if (Number.isNaN(occurredAt.getTime())) throw invalid('occurred_at', 'The occurred_at field must be a valid date-time.');
  if (typeof deliveryId !== 'string' || !uuidPattern.test(deliveryId)) throw notFound();

  const { rows } = await pool.query<Partial<EventRow> & { state: string; reason: string | null }>(recordEvent, [
    applicationId,
    deliveryId,
    installationId,
    eventId.toLowerCase(),
    type,
    occurredAt,
    uuidv7(),
  ]);
  const found = rows[0];
  if (!found) throw notFound();
  if (found.state === 'skipped') {
    const message = `The delivery was never sent (skipped${found.reason ? `: ${found.reason}` : ''}), so it cannot have events.`;
    throw new HttpError(409, message, { delivery_id: [message] });
  }
  if (found.event_id) return void res.status(201).json({ data: eventView(found as EventRow) });

  // A repeated event_id: the same event again is answered as it was recorded.
  const { rows: existing } = await pool.query<EventRow>(
    'select event_id, delivery_id, client_installation_id, type, occurred_at, received_at from delivery_events where application_id = $1 and event_id = $2',
    [applicationId, eventId.toLowerCase()],
  );
  const event = existing[0];
  const same =
    event.delivery_id === deliveryId.toLowerCase() && event.client_installation_id === installationId && event.type === type && event.occurred_at.getTime() === occurredAt.getTime();
  if (!same) throw new HttpError(409, 'This event_id was already recorded with different content.');
  res.json({ data: eventView(event) });
});

app.get('/api/v1/notifications/:notificationId', async (req, res) => {
  const applicationId = await applicationOf(req, 'notifications:read');
  const id = req.params.notificationId.toLowerCase();
  if (!uuidPattern.test(id)) throw notFound();
  const { rows } = await pool.query<NotificationRow>(`select ${notificationColumns} from notifications where id = $1 and application_id = $2`, [id, applicationId]);
  if (!rows[0]) throw notFound();
  res.json({ data: notificationView(rows[0]) });
});

app.get('/api/v1/notifications', async (req, res) => {
  const applicationId = await applicationOf(req, 'notifications:read');
  const limit = req.query.limit === undefined ? 25 : Number(req.query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw invalid('limit', 'The limit field must be between 1 and 100.');
  const cursor = typeof req.query.cursor === 'string' ? req.query.cursor : undefined;
  if (cursor !== undefined && !/^[A-Za-z0-9_-]{22}$/.test(cursor)) throw invalid('cursor', 'The cursor field is invalid.');
  // One more than the page says whether another page follows.
  const { rows } = await pool.query<NotificationRow>(
    `select ${notificationColumns} from notifications where application_id = $1 and ($2::uuid is null or id < $2) order by id desc limit $3`,
    [applicationId, cursor === undefined ? null : decodeCursor(cursor), limit + 1],
  );
  const page = rows.slice(0, limit);
  res.json({ data: page.map(notificationView), meta: { next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1].id) : null } });
});

app.use((_req, _res, next) => next(notFound()));

// Express 5 hands rejected handlers here.
app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
  if (error instanceof HttpError) {
    res.status(error.status).json({ message: error.message, ...(error.errors ? { errors: error.errors } : {}) });
    return;
  }
  const status = (error as { status?: number }).status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // body-parser: malformed JSON, too large, not JSON.
    res.status(status).json({ message: (error as Error).message });
    return;
  }
  process.stderr.write(`api-ceiling: ${(error as Error).stack ?? error}\n`);
  res.status(500).json({ message: 'Server Error' });
});

const server = app.listen(Number(env.PORT), host, (error?: Error) => {
  if (error) {
    process.stderr.write(`api-ceiling: ${error.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`listening on http://${host}:${env.PORT}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close();
    server.closeAllConnections();
    void pool.end().then(() => process.exit(0));
  });
}
