// `herald start|serve|work`: the service in this process, until a signal shuts it down.
import { readdirSync } from 'node:fs';
import { constants as osConstants, setPriority } from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import type { Config } from '../../service/config.ts';
import type { Logger } from '../../logging/logger.ts';
import type { Service } from '../../service/service.ts';
import { port, type CommandIo } from './common.ts';

type RunOptions = { api: boolean; worker: boolean; demo: boolean; simulate: boolean };
type Print = CommandIo['out'];

/**
 * Runs every thread of this process at `nice`. On Linux a nice value is per thread, and V8's own
 * threads (garbage collection, compilation) are running before any of this code: lowering the main
 * thread alone left them competing with the API at full priority. Threads started later inherit
 * the value of the thread that starts them. Elsewhere, setpriority's 0 is the whole process.
 */
function lowerPriority(nice: number): void {
  let threads = [0];
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    // No /proc: not Linux.
  }
  for (const thread of threads) {
    try {
      setPriority(thread, nice);
    } catch (error) {
      // A thread that ended since it was listed.
      if ((error as { info?: { code?: string } }).info?.code !== 'ESRCH') throw error;
    }
  }
}

/**
 * How `herald start|serve|work` ended: 0 everything in flight finished; 3 the grace period ran out
 * and unfinished jobs were handed back (another worker retries them); 4 closing hung past the grace
 * period; 1 an error; 128 + n a second signal n (130 SIGINT, 143 SIGTERM) cut the shutdown short.
 */
const exitCodes = { clean: 0, failed: 1, jobsHandedBack: 3, shutdownTimedOut: 4 } as const;
/** After the grace period: closing pools and the embedded Postgres. */
const closeAllowanceMs = 3000;

export function addServiceCommands(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  const withPort = (options: { port?: number }) => (options.port === undefined ? config : { ...config, PORT: options.port });
  program
    .command('start')
    .description('run the API and the workers in one process; with no DATABASE_URL, an embedded Postgres')
    .option('-p, --port <port>', 'HTTP port (default: PORT or 3000)', port)
    .option('--simulate', 'send to local APNs and FCM simulators (default when DATABASE_URL is unset)')
    .option('--no-simulate', "send to Apple's and Google's real endpoints")
    .action(async (options: { port?: number; simulate?: boolean }) => {
      const simulate = options.simulate ?? !config.DATABASE_URL;
      await run(withPort(options), logger, out, { api: true, worker: true, demo: true, simulate });
    });

  program
    .command('serve')
    .description('run the HTTP API only')
    .option('-p, --port <port>', 'HTTP port (default: PORT or 3000)', port)
    .action(async (options: { port?: number }) => {
      await run(withPort(options), logger, out, { api: true, worker: false, demo: false, simulate: false });
    });

  program
    .command('work')
    .description('run the fanout workers only')
    .action(async () => {
      if (config.HERALD_WORKER_NICE > 0) lowerPriority(config.HERALD_WORKER_NICE);
      await run(config, logger, out, { api: false, worker: true, demo: false, simulate: false });
    });
}

async function run(config: Config, logger: Logger, out: Print, options: RunOptions) {
  // Signals are ours from the first moment: one during start-up shuts down once start-up is done
  // (an embedded Postgres it started is stopped, not orphaned).
  let shutdown: ((signal: NodeJS.Signals) => Promise<void>) | null = null;
  let signalled: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (shutdown) void shutdown(signal);
    else if (signalled) process.exit(128 + osConstants.signals[signal]);
    else signalled = signal;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  // Loaded here, not at the top: the admin commands beside these need none of the service.
  const [{ assertPortsFree, startService }, { ensureDemoApplication }, { startSimulators }] = await Promise.all([
    import('../../service/service.ts'),
    import('../demo.ts'),
    import('../simulate.ts'),
  ]);
  await assertPortsFree(config, options);
  const simulators = options.simulate
    ? await startSimulators({ keysDir: path.join(config.dataDir, 'simulator') })
    : null;
  if (simulators) {
    logger.info({ apns: simulators.endpoints.apns, fcm: simulators.endpoints.fcm, webPush: simulators.webPush.url }, 'provider simulators running');
  }
  let service: Service | null = null;
  try {
    service = await startService(config, logger, options, simulators?.endpoints);
    if (options.demo) {
      const address = service.server?.address();
      const port = address && typeof address === 'object' ? address.port : config.PORT;
      await ensureDemoApplication(service.database.orm.em.fork(), port, out, {
        credentialsKey: service.credentialsKey,
        simulatorKeys: simulators?.keys ?? null,
        webPush: simulators?.webPush ?? null,
      });
    }
  } catch (error) {
    // A failed start leaves nothing running: startService closed what it opened; the rest is closed here.
    await service?.stop(0);
    await simulators?.stop();
    throw error;
  }
  const running = service;
  shutdown = shutdownOnce(config, logger, async (graceMs) => {
    const { released } = await running.stop(graceMs);
    await simulators?.stop();
    return released;
  });
  if (signalled) await shutdown(signalled);
}

/**
 * The shutdown a signal starts: `stop` finishes in-flight work within the grace period and answers
 * how many jobs it handed back; the process then exits with one of `exitCodes`.
 */
function shutdownOnce(config: Config, logger: Logger, stop: (graceMs: number) => Promise<number>) {
  let stopping = false;
  return async (signal: NodeJS.Signals) => {
    if (stopping) {
      // The operator insists: leave now. Jobs in flight are retried elsewhere once their heartbeat lapses.
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(128 + osConstants.signals[signal]);
    }
    stopping = true;
    const graceMs = config.HERALD_SHUTDOWN_GRACE_SECONDS * 1000;
    logger.info({ signal, graceSeconds: config.HERALD_SHUTDOWN_GRACE_SECONDS }, 'shutting down: finishing in-flight work');
    // Whatever hangs (a black-holed database or provider), the process is gone shortly after the grace period.
    setTimeout(() => {
      logger.error('shutdown did not finish in time: exiting');
      process.exit(exitCodes.shutdownTimedOut);
    }, graceMs + closeAllowanceMs).unref();
    try {
      const released = await stop(graceMs);
      if (released > 0) logger.warn({ released }, 'grace period over: unfinished jobs handed back for another worker');
      else logger.info('stopped');
      process.exit(released > 0 ? exitCodes.jobsHandedBack : exitCodes.clean);
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(exitCodes.failed);
    }
  };
}
