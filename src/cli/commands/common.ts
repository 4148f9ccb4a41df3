// What the command groups share: printing results, reading a port, and admin commands' database access.
import type { Readable } from 'node:stream';
import { InvalidArgumentError } from 'commander';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../service/config.ts';
import { findApplication } from '../../domain/applications.ts';
import type { Logger } from '../../logging/logger.ts';
import { openDatabase, resolveCredentialsKey, roleBounds } from '../../service/storage.ts';

/** Where a command prints its results and reads its input: the process's streams, or a test's. */
export type CommandIo = { out: (line?: string) => void; stdin: Readable };

export function port(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65535) throw new InvalidArgumentError('not a port');
  return parsed;
}

export async function requireApplication(em: EntityManager, id: string): Promise<void> {
  if (!(await findApplication(em, id))) throw new Error(`No application ${id}.`);
}

/**
 * Runs an admin command against the database, then closes everything it opened. Bounded as a
 * worker's calls: a command may rewrite every credential in one transaction.
 */
export async function withDatabase<T>(config: Config, logger: Logger, work: (em: EntityManager) => Promise<T>): Promise<T> {
  const database = await openDatabase(config, logger, roleBounds(config).worker);
  try {
    return await work(database.orm.em.fork());
  } finally {
    await database.close();
  }
}

/** The credentials key, or an error that says what it protects (`what`: "provider credentials"). */
export function requireCredentialsKey(config: Config, what: string): Buffer {
  const key = resolveCredentialsKey(config);
  if (!key) throw new Error(`HERALD_CREDENTIALS_KEY is not set: it encrypts ${what} at rest.`);
  return key;
}
