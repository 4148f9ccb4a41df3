// A database outage as a process lives it: one log line when it starts, one when it ends, and in
// between no claiming and no retry storm (workers), no line per refused request (the API), only a
// probe with a backoff.
import type { Logger } from '../logging/logger.ts';
import { probeBounds } from './bounds.ts';
import { openStatementPool } from './pools.ts';
import { ping } from './sql/infrastructure.ts';
import { retireConnections } from './preparing-client.ts';
import { isDatabaseUnavailable, isRetiredConnection } from './unavailable.ts';

export type DatabaseProbe = { probe(): Promise<void>; close(): Promise<void> };

/**
 * The watch's probe and the API's readiness: `select 1` on two connections of their own, bounded
 * short (probeBounds), so that it answers within 2 s while the role's pools wait out their longer
 * bounds on a stalled database, or have every connection taken.
 */
export function openDatabaseProbe(url: string): DatabaseProbe {
  const { db, close } = openStatementPool(url, 2, probeBounds);
  return { probe: () => ping(db), close };
}

export type OutageWatch = {
  /** True when `error` means the database is unreachable (the watch then handles it; do not log it). */
  report(error: unknown): boolean;
  readonly down: boolean;
  stop(): void;
};

export function watchDatabase(options: {
  probe: () => Promise<unknown>;
  logger: Logger;
  /** The roles of the process: its log line says what each does while the database is away. */
  roles: { api: boolean; worker: boolean };
  /** Called once when an outage starts (workers stop claiming). */
  onDown?: () => Promise<void> | void;
  /** Called once when the database answers again (workers claim again). */
  onUp?: () => Promise<void> | void;
  /** The database's URL: its pooled connections opened before an outage are dropped when it ends (retireConnections). */
  database?: string;
  firstProbeMs?: number;
  maxProbeMs?: number;
}): OutageWatch {
  const { logger } = options;
  const firstProbeMs = options.firstProbeMs ?? 250;
  // The API answers 503 until it sees the database again; workers should be back about as fast:
  // within a second. A probe is one `select 1` on a pooled connection.
  const maxProbeMs = options.maxProbeMs ?? 1000;
  const meanwhile = [options.roles.api && 'the API answers 503', options.roles.worker && 'workers paused'].filter(Boolean).join(', ');
  let down = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const probeLater = (since: number, waitMs: number) => {
    timer = setTimeout(async () => {
      if (stopped) return;
      try {
        await options.probe();
      } catch {
        probeLater(since, Math.min(waitMs * 2, maxProbeMs));
        return;
      }
      down = false;
      // Before the workers claim again: a connection from before the outage may be hung for good.
      const retired = options.database === undefined ? 0 : retireConnections(options.database, since);
      logger.info({ outageSeconds: Math.round((Date.now() - since) / 100) / 10, connectionsRetired: retired }, 'database reachable again');
      try {
        await options.onUp?.();
      } catch (error) {
        logger.error({ err: error }, 'resuming after the database outage failed');
      }
    }, waitMs);
    timer.unref();
  };

  return {
    report(error) {
      if (!isDatabaseUnavailable(error)) return false;
      // A statement cut by the retirement that ended the last outage: retried, not a new outage.
      if (down || stopped || isRetiredConnection(error)) return true;
      down = true;
      const message = error instanceof Error ? error.message : String(error);
      logger.warn({ cause: message }, `database unreachable: ${meanwhile} until it answers again`);
      void Promise.resolve(options.onDown?.()).catch((failure) => logger.error({ err: failure }, 'pausing the workers failed'));
      probeLater(Date.now(), firstProbeMs);
      return true;
    },
    get down() {
      return down;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
