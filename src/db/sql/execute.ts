// The one seam every hand-written statement goes through. A statement is a Kysely `sql` template
// with its values bound as parameters, beside the comment that explains its trade-off, in the
// module of its area (db/sql/*.ts; pg-boss keeps its plans the same way). Everything else goes
// through the ORM. The hot paths are set-based (unnest of arrays): one round trip per batch, never
// one per push.
//
// A statement runs on a unit of work (an EntityManager, inside its transaction if it has one), in
// a pipelined transaction (a send's: db/pipelined-pool.ts), on a Kysely of its own pool (the
// leases), or, compiled with `compiled()`, on a dedicated session (advisory locks, which live as
// long as their connection).
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryExecutorProvider,
  type RawBuilder,
} from 'kysely';

/** A session that runs a compiled statement itself: a send's pipelined transaction (db/pipelined-pool.ts). */
export type StatementSession = { rows<T>(statement: RawBuilder<T>): Promise<T[]> };

export type Db = EntityManager | QueryExecutorProvider | StatementSession;

export async function rows<T>(db: Db, statement: RawBuilder<T>): Promise<T[]> {
  if ('rows' in db) return db.rows(statement);
  return (await statement.execute('getKysely' in db ? db.getKysely() : db)).rows;
}

export async function run(db: Db, statement: RawBuilder<unknown>): Promise<void> {
  await rows(db, statement);
}

/**
 * A statement that stands alone (no transaction around it) run again when Postgres ended it as a
 * deadlock's victim (SQLSTATE 40P01): its work was undone, and the next try finds the other
 * transaction ended. Registrations take the installation's row and then its users' kept-count
 * rows (audience_users), so two at once, or one beside a statement that takes them another way
 * (a bulk update, the fold), can meet in a cycle; the client should not see a 500 for that.
 */
export async function retriedOnDeadlock<T>(statement: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await statement();
    } catch (error) {
      if (attempt >= attempts || (error as { code?: unknown }).code !== '40P01') throw error;
    }
  }
}

// Compiles without a connection, for statements that must run on one particular session.
const compiler = new Kysely<unknown>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

export function compiled(statement: RawBuilder<unknown>): { text: string; values: unknown[] } {
  const { sql: text, parameters } = statement.compile(compiler);
  return { text, values: [...parameters] };
}

// Raw results carry timestamps as the driver gives them (the ORM's type parsers are not applied).
export const asDate = (value: Date | string): Date => (value instanceof Date ? value : new Date(value));
