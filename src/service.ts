// Composition of a Herald process: database (given or embedded), ORM, job queue, and the roles
// it plays (API, worker). Everything opened here is closed by the returned stop().
import type { Server } from 'node:http';
import type { PgBoss } from 'pg-boss';
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from './db/embedded.ts';
import { migrate, openOrm, type Orm } from './db/orm.ts';
import { startMaintenance } from './fanout/maintenance.ts';
import { startBoss } from './fanout/queue.ts';
import { createApp } from './http/app.ts';
import { loadDocument } from './http/document.ts';
import type { Logger } from './logger.ts';

export type Database = { orm: Orm; url: string; close(): Promise<void> };

/** Opens the configured database, or the embedded one when DATABASE_URL is unset, migrated. */
export async function openDatabase(config: Config, logger: Logger, options: { ownEmbedded: boolean }): Promise<Database> {
  const embedded = config.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({
        dataDir: config.dataDir,
        port: config.HERALD_EMBEDDED_PG_PORT,
        logger,
        own: options.ownEmbedded,
      });
  const url = config.DATABASE_URL ?? embedded!.url;
  try {
    const orm = await openOrm(url, config.HERALD_DB_POOL_MAX);
    await migrate(orm);
    return {
      orm,
      url,
      close: async () => {
        await orm.close();
        await embedded?.stop();
      },
    };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}

/** The validator compiles the document on its first request (~300 ms): pay that now, not on a client. */
async function warmUp(server: Server, logger: Logger): Promise<void> {
  const address = server.address();
  if (!address || typeof address === 'string') return;
  const host = ['0.0.0.0', '::'].includes(address.address) ? '127.0.0.1' : address.address;
  try {
    await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${address.port}/healthz`);
  } catch (error) {
    logger.warn({ err: error }, 'warm-up request failed');
  }
}

export type Service = { database: Database; boss: PgBoss; server: Server | null; stop(): Promise<void> };

export async function startService(
  config: Config,
  logger: Logger,
  roles: { api: boolean; worker: boolean },
): Promise<Service> {
  const database = await openDatabase(config, logger, { ownEmbedded: true });
  const boss = await startBoss(database.url, logger, { worker: roles.worker });
  if (roles.worker) await startMaintenance(boss, database.orm, logger);
  let server: Server | null = null;
  if (roles.api) {
    const app = createApp({
      orm: database.orm,
      boss,
      logger,
      document: loadDocument(),
      bodyLimit: config.HERALD_BODY_LIMIT,
      validateResponses: config.HERALD_VALIDATE_RESPONSES,
    });
    server = await new Promise<Server>((resolve, reject) => {
      const listening = app.listen(config.PORT, config.HOST, (error?: Error) => (error ? reject(error) : resolve(listening)));
    });
    logger.info({ address: server.address() }, 'API listening');
    await warmUp(server, logger);
  }
  const stop = async () => {
    if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
    await boss.stop({ graceful: true, timeout: 10_000 });
    await database.close();
  };
  return { database, boss, server, stop };
}
