// A send's transaction in two round trips instead of four. In node-postgres' pipeline mode a
// statement goes out without waiting for the answer to the one before: the BEGIN, the statements
// and the fanout job's insert leave together and are answered together, then COMMIT or ROLLBACK.
// Under a fanout that holds both cores every round trip is two wake-ups waiting for a core (the
// backend's, then Herald's), so the round trips in a row are what a send's latency is made of.
// Each statement keeps its own answer or error; after an error the ones behind it fail as the
// aborted transaction's (25P02), and the transaction rolls back.
import type { RawBuilder } from 'kysely';
import { boundedConnections, defaultBounds, type DatabaseBounds } from './bounds.ts';
import { openListenedPool } from './pools.ts';
import { compiled, type StatementSession } from './sql/execute.ts';

export type PipelinedSession = StatementSession & {
  /** A library's statement (pg-boss's `db` option), sent at once as well. */
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
};

/** What the work decided: COMMIT, or ROLLBACK with an answer all the same (a replay). */
export type Outcome<T> = { commit: boolean; value: T };

export type PipelinedPool = {
  /**
   * BEGIN, then `work`, whose statements go out as it issues them (it awaits their answers only
   * where it needs them), then COMMIT or ROLLBACK as it decides; a throw rolls back.
   */
  transaction<T>(work: (session: PipelinedSession) => Promise<Outcome<T>>): Promise<T>;
  close(): Promise<void>;
};

export function openPipelinedPool(url: string, max: number, bounds: DatabaseBounds = defaultBounds): PipelinedPool {
  const pool = openListenedPool({ connectionString: url, max, pipeline: true, ...boundedConnections(bounds) });
  return {
    async transaction(work) {
      const client = await pool.connect();
      // Once COMMIT or ROLLBACK is sent, nothing more goes out: a statement issued late (pg-boss's
      // insert behind its queue lookup, when a refused quota ended the work first) would otherwise
      // run outside the transaction, on a connection already handed to the next send.
      let open = true;
      const send = (text: string, values: unknown[] = []) =>
        observed(open ? client.query(text, values) : Promise.reject(new Error('The transaction has ended: the statement was not sent.')));
      const end = (text: 'commit' | 'rollback') => {
        open = false;
        return client.query(text);
      };
      const session: PipelinedSession = {
        rows<T>(statement: RawBuilder<T>) {
          const { text, values } = compiled(statement);
          return observed(send(text, values).then((result) => result.rows as T[]));
        },
        executeSql: send,
      };
      let reusable = true;
      try {
        void send('begin');
        const { commit, value } = await work(session);
        await end(commit ? 'commit' : 'rollback');
        return value;
      } catch (error) {
        // A connection that cannot even roll back is closed rather than handed to the next send.
        await end('rollback').catch(() => (reusable = false));
        throw error;
      } finally {
        client.release(!reusable);
      }
    },
    close: () => pool.end(),
  };
}

/**
 * The same promise, observed at once: a statement still in flight when the work gives up (a
 * refused quota) must not end the process as an unhandled rejection. Its caller still sees the error.
 */
export function observed<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}
