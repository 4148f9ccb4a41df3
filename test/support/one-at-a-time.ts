// Suites that spawn Herald processes and databases and then time how fast they recover (chaos) or
// kill them mid-batch (crash) run one at a time. On two cores, jest ran both at once (its slowest
// files first): a 5 s recovery bound then measured the two suites' contention, not Herald.
import pg from 'pg';
import { databaseUrl } from './harness.ts';

const lockKey = 72_540_303;

/** Waits until no other such suite runs; the returned function lets the next one go. */
export async function oneAtATime(): Promise<() => Promise<void>> {
  const session = new pg.Client({ connectionString: databaseUrl() });
  await session.connect();
  await session.query('select pg_advisory_lock($1)', [lockKey]);
  return () => session.end();
}
