// The environment is checked once at start: HERALD_CREDENTIALS_KEY must be a real key when it is
// set at all, since a wrong one would only show when a worker tries to open credentials.
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/service/config.ts';

const validKey = randomBytes(32).toString('base64');

function problemsWith(key: string): string {
  try {
    loadConfig({ HERALD_CREDENTIALS_KEY: key });
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`HERALD_CREDENTIALS_KEY=${JSON.stringify(key)} was accepted`);
}

test('a 32-byte key in base64 is accepted as openssl prints it', () => {
  expect(loadConfig({ HERALD_CREDENTIALS_KEY: validKey }).HERALD_CREDENTIALS_KEY).toBe(validKey);
  expect(loadConfig({}).HERALD_CREDENTIALS_KEY).toBeUndefined();
});

test('a credentials key that is set but empty is refused, while other empty variables mean unset', () => {
  expect(problemsWith('')).toBe(
    'Invalid environment:\n  HERALD_CREDENTIALS_KEY: set but empty; unset it, or set it to 32 random bytes in base64, ' +
      '44 characters ending in "=" (`openssl rand -base64 32`)',
  );
  expect(loadConfig({ PORT: '', HERALD_CREDENTIALS_KEY: validKey }).PORT).toBe(3000);
});

test('a credentials key that is not exactly 32 bytes of strict base64 is refused, without echoing it', () => {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const malformed = {
    'not base64 at all': 'correct horse battery staple',
    'without its padding': validKey.replace(/=$/, ''),
    'with extra padding': `${validKey}=`,
    'with a trailing newline': `${validKey}\n`,
    'with spaces': `${validKey.slice(0, 20)} ${validKey.slice(20)}`,
    'in base64url': `${Buffer.alloc(32, 0xfb).toString('base64url')}=`,
    'with a character outside the alphabet': `${validKey.slice(0, 10)}!${validKey.slice(11)}`,
    '31 bytes': randomBytes(31).toString('base64'),
    '33 bytes': randomBytes(33).toString('base64'),
    'hex': randomBytes(32).toString('hex'),
    // The last character carries 2 bits past the 32 bytes: Buffer.from ignores them, a typo there is still a typo.
    'with bits set past the 32 bytes': `${validKey.slice(0, 42)}${alphabet[alphabet.indexOf(validKey[42]) + 1]}=`,
  };
  for (const [what, key] of Object.entries(malformed)) {
    const message = problemsWith(key);
    expect({ what, message }).toEqual({
      what,
      message: expect.stringContaining('HERALD_CREDENTIALS_KEY: must be 32 random bytes in base64, 44 characters ending in "=" (`openssl rand -base64 32`)'),
    });
    expect(message).not.toContain(key.trim());
  }
});

test('every problem of the environment is reported together', () => {
  expect(() => loadConfig({ HERALD_CREDENTIALS_KEY: 'short', PORT: 'x' })).toThrow(/PORT[\s\S]*HERALD_CREDENTIALS_KEY|HERALD_CREDENTIALS_KEY[\s\S]*PORT/);
});

test('a deliver job is one chunk of pushes by default (DESIGN, "Deliver batches")', () => {
  const config = loadConfig({});
  expect([config.HERALD_DELIVER_BATCH_SIZE, config.HERALD_DELIVER_CHUNK_SIZE]).toEqual([250, 250]);
});

test("the queue's backstop poll is 2 s by default, and at least pg-boss's 0.5 s", () => {
  expect(loadConfig({}).HERALD_QUEUE_POLL_SECONDS).toBe(2);
  expect(loadConfig({ HERALD_QUEUE_POLL_SECONDS: '0.5' }).HERALD_QUEUE_POLL_SECONDS).toBe(0.5);
  for (const refused of ['0.4', '61', 'soon']) {
    expect(() => loadConfig({ HERALD_QUEUE_POLL_SECONDS: refused })).toThrow(/HERALD_QUEUE_POLL_SECONDS/);
  }
});

test('HERALD_WEBPUSH_HOSTS is a comma-separated list of hosts, host:port or *.domain', () => {
  expect(loadConfig({}).HERALD_WEBPUSH_HOSTS).toEqual([]);
  expect(loadConfig({ HERALD_WEBPUSH_HOSTS: 'push.example.net, 127.0.0.1:2199,*.push.example,[::1]:2199' }).HERALD_WEBPUSH_HOSTS).toEqual([
    'push.example.net',
    '127.0.0.1:2199',
    '*.push.example',
    '[::1]:2199',
  ]);
  for (const refused of ['https://push.example.net', 'push.example.net/path', '*', 'a b']) {
    expect(() => loadConfig({ HERALD_WEBPUSH_HOSTS: refused })).toThrow(/HERALD_WEBPUSH_HOSTS: must be host names/);
  }
});
