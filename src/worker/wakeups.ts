// When pg-boss's own wake-ups come too late. pg-boss fetches when its polling interval ends or a
// NOTIFY (sent when a job is inserted) arrives; both miss cases that matter here.
import type { PgBoss } from 'pg-boss';

/**
 * After a job, pg-boss waits out the polling interval before its next fetch unless a NOTIFY came
 * meanwhile; a burst of jobs inserted at once notifies only once, so each worker would idle between
 * them. A worker that has just run a job fetches again at once instead (notifying a worker that is
 * running a job only skips its next wait); an empty fetch ends the streak. Idle workers fetch then
 * too: one whose job pg-boss put back (fetched by two workers at once, it was one too many for its
 * application: workers.ts fairShare) sleeps out the interval, though another application's job may
 * be waiting for it; a job ending is when that changes.
 */
export function fetchAgainAtOnce(boss: PgBoss, queue: string): void {
  for (const worker of boss.getWipData()) {
    if (worker.name === queue) boss.notifyWorker(worker.id);
  }
}

/**
 * A deferred job (a scheduled send) sends no NOTIFY when it becomes due, and pg-boss polls at most
 * every half second. So one idle worker of the queue is woken every `everyMs`: a due job starts
 * within about that of its time, and a worker that finds a full batch wakes the others
 * (fetchAgainAtOnce) for the rest due then. Answers how to stop it.
 */
export function wakeIdleWorkerEvery(boss: PgBoss, queue: string, everyMs: number): () => void {
  const timer = setInterval(() => {
    const idle = boss.getWipData().find((worker) => worker.name === queue && (worker.lastJobStartedOn ?? 0) <= (worker.lastJobEndedOn ?? 0));
    if (idle) boss.notifyWorker(idle.id);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
