// One ORM per process. Migrations are TypeScript files that Node loads with type stripping, or
// their compiled JavaScript beside this module when it runs from the build.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, MikroORM } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { boundedConnections, defaultBounds, migrationBounds, type DatabaseBounds } from './bounds.ts';
import { entities } from './entities.ts';
import { PreparingClient, PreparingPoolClient } from './preparing-client.ts';
import { compiled } from './sql/execute.ts';
import { takeMigrationLock } from './sql/infrastructure.ts';

const migrationsPath = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
const migrationsGlob = import.meta.url.endsWith('.ts') ? '!(*.d).ts' : '*.js';

export function ormConfig(clientUrl: string, poolMax = 10, bounds: DatabaseBounds = defaultBounds) {
  return defineConfig({
    clientUrl,
    entities,
    extensions: [Migrator],
    pool: { max: poolMax },
    // Passed on to its pg pool: each statement text is parsed once per connection, and every call is
    // bounded.
    driverOptions: { Client: PreparingPoolClient, ...boundedConnections(bounds) },
    // Timestamps are written and read as UTC, whatever the database server's time zone.
    forceUtcTimezone: true,
    debug: false,
    // Tables without entities, created in migrations (rate-limiter-flexible's; the job leases; a
    // broadcast's waves; the throttles' slots; the hourly statistics, tag summaries and audience
    // counts, written in SQL only): never diffed away.
    schemaGenerator: {
      skipTables: ['rate_limits', 'job_leases', 'broadcast_waves', 'notification_throttles', 'hourly_statistics', 'tag_summaries', 'audience_users', 'audience_totals', 'audience_members'],
    },
    migrations: {
      path: migrationsPath,
      pathTs: migrationsPath,
      glob: migrationsGlob,
      emit: 'ts',
      silent: true,
      snapshot: false,
    },
  });
}

export type Orm = MikroORM;

export async function openOrm(clientUrl: string, poolMax?: number, bounds?: DatabaseBounds): Promise<Orm> {
  return MikroORM.init(ormConfig(clientUrl, poolMax, bounds));
}

// Any number of processes may start at once against a fresh database: one migrates at a time, on
// connections without a statement bound (their ORM is opened with migrationBounds: service/storage.ts).
const migrationLock = 72_540_301;

export async function migrate(orm: Orm): Promise<void> {
  const lock = new PreparingClient({ connectionString: orm.config.get('clientUrl'), ...boundedConnections(migrationBounds) });
  await lock.connect();
  try {
    const statement = compiled(takeMigrationLock(migrationLock));
    await lock.query(statement.text, statement.values);
    await orm.migrator.up();
  } finally {
    await lock.end();
  }
}
