// Bearer tokens and push addresses never reach a log line (logging/logger.ts): in the shapes Herald
// and its libraries log them, at the top of a line or one object down, an error's included.
import { createLogger } from '../src/logging/logger.ts';

const bearer = 'hrld_0123456789abcdef_secretsecretsecret';
const address = 'f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed';

function linesOf(log: (logger: ReturnType<typeof createLogger>) => void): string[] {
  const lines: string[] = [];
  log(createLogger('info', { write: (line: string) => void lines.push(line) }));
  return lines;
}

test.each([
  ['a request object', { req: { method: 'GET', headers: { authorization: `Bearer ${bearer}`, cookie: 'session=1' } } }],
  ['an authorization header object', { headers: { authorization: `Bearer ${bearer}` } }],
  ['authorization at the top', { authorization: `Bearer ${bearer}` }],
  ["Herald's push", { push: { deliveryId: 'd1', providerIdentifier: address } }],
  ['a push address at the top', { providerIdentifier: address }],
  ['a row', { row: { id: 'r1', provider_identifier: address } }],
  ['a row at the top', { provider_identifier: address }],
  ["the API's installation", { provider: { type: 'apns_token', identifier: address } }],
  ['an identifier at the top', { identifier: address }],
  ["a provider library's device", { device: { token: address } }],
  ['a token at the top', { token: address }],
  ["a provider library's error", { err: Object.assign(new Error('BadDeviceToken'), { token: address }) }],
])('%s: the secret is redacted, the rest is logged', (_shape, fields) => {
  const [line] = linesOf((logger) => logger.warn(fields, 'something happened'));
  expect(line).not.toContain(bearer);
  expect(line).not.toContain(address);
  expect(line).toContain('[redacted]');
  expect(JSON.parse(line)).toMatchObject({ level: 40, msg: 'something happened' });
});

test("a child logger's bindings are redacted too, and a line without secrets is left as it is", () => {
  const lines = linesOf((logger) => {
    logger.child({ push: { providerIdentifier: address } }).info('bound');
    logger.info({ route: '/api/v1/installations/{installationId}', status: 200, durationMs: 3 }, 'request completed');
  });
  expect(lines[0]).not.toContain(address);
  expect(JSON.parse(lines[1])).toMatchObject({ route: '/api/v1/installations/{installationId}', status: 200, durationMs: 3 });
});
