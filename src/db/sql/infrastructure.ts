// The service's own statements: readiness, the migration lock, creating a database.
import { sql } from 'kysely';
import { type Db, run } from './execute.ts';

/** Readiness and the outage watch's probe. */
export async function ping(db: Db): Promise<void> {
  await run(db, sql`select 1`);
}

/** Session-level: any number of processes may start at once; one migrates at a time. */
export const takeMigrationLock = (key: number) => sql`select pg_advisory_lock(${key})`;

export const databaseExists = (name: string) => sql`select 1 from pg_database where datname = ${name}`;

export const createDatabase = (name: string) => sql`create database ${sql.id(name)}`;
