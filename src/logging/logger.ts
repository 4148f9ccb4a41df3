import { pino, type Logger } from 'pino';

export type { Logger };

// Bearer tokens and device identifiers never reach a log line.
export const redactPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  '*.authorization',
  '*.providerIdentifier',
  '*.provider_identifier',
  '*.identifier',
  '*.token',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: redactPaths, censor: '[redacted]' } }, destination);
}
