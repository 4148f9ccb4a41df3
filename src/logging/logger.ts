import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';

export type { Logger };

// Bearer tokens and device push addresses never reach a log line: Herald's name for the address
// (providerIdentifier), the API's (provider.identifier) and the column's, and `token`, what the
// provider libraries and their errors call it; at the top of a line or one object down.
const secretKeys = ['authorization', 'providerIdentifier', 'provider_identifier', 'identifier', 'token'];
const redactPaths = ['req.headers.authorization', 'req.headers.cookie', ...secretKeys, ...secretKeys.map((key) => `*.${key}`)];

/**
 * JSON lines with ISO timestamps; on a terminal (or when asked), the same lines pretty-printed in
 * colour for a person reading them.
 */
export function createLogger(level: string, destination?: pino.DestinationStream, options: { pretty?: boolean } = {}): Logger {
  const pretty = options.pretty ?? (destination === undefined && process.stdout.isTTY === true);
  return pino(
    { level, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: redactPaths, censor: '[redacted]' } },
    pretty ? prettyDestination(destination ?? process.stdout) : destination,
  );
}

/**
 * Each line formatted as it is written (pino-pretty's formatter, not its stream, whose buffering
 * would lose the last lines before a process.exit). Loaded only here: its load time and memory are
 * of no use to a process logging JSON.
 */
function prettyDestination(out: pino.DestinationStream): pino.DestinationStream {
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const format = prettyFactory({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
  return { write: (line: string) => out.write(format(line)) };
}
