import { pino, type Logger } from 'pino';

export type { Logger };

// Bearer tokens and device push addresses never reach a log line: Herald's name for the address
// (providerIdentifier), the API's (provider.identifier) and the column's, and `token`, what the
// provider libraries and their errors call it.
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
