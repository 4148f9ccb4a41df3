// Where webhooks may go: only public addresses unless HERALD_WEBHOOK_ALLOW_PRIVATE is set, judged on
// the address a request connects to (the sender's lookup), for IP literals and names alike.
import { refusedAddress, webhookUrlProblem } from '../src/domain/webhook-addresses.ts';
import { createWebhookSender } from '../src/worker/webhook-sender.ts';
import { startReceiver, type Receiver } from './support/receiver.ts';

test.each([
  ['127.0.0.1', 'loopback'],
  ['127.255.0.9', 'loopback'],
  ['::1', 'loopback'],
  ['10.20.30.40', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['fd12:3456::1', 'private'],
  ['169.254.169.254', 'link-local'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['100.64.0.1', 'shared (carrier-grade NAT)'],
  ['0.0.0.0', 'unspecified'],
  ['::', 'unspecified'],
  ['224.0.0.251', 'multicast'],
  ['ff02::1', 'multicast'],
  ['255.255.255.255', 'reserved'],
  ['192.0.2.10', 'reserved'],
  ['2001:db8::1', 'reserved'],
  // IPv4-mapped IPv6, written both ways: judged by the IPv4 address inside.
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.0.0.1', 'private'],
  ['::ffff:a9fe:a9fe', 'link-local'],
  // NAT64, 6to4 and IPv4-compatible forms reach the IPv4 address inside, too.
  ['64:ff9b::a00:1', 'private (10.0.0.1 inside 64:ff9b::a00:1)'],
  ['2002:c0a8:101::1', 'private (192.168.1.1 inside 2002:c0a8:101::1)'],
  ['::127.0.0.1', 'loopback (127.0.0.1 inside ::127.0.0.1)'],
])('%s is refused as %s', (address, kind) => {
  expect(refusedAddress(address)).toBe(kind);
});

test.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'])(
  '%s is public',
  (address) => {
    expect(refusedAddress(address)).toBeNull();
  },
);

test('an endpoint URL is https, with no credentials and no fragment, and a literal address must be public', () => {
  const strict = { allowPrivate: false };
  expect(webhookUrlProblem('https://hooks.example.com/herald?source=push', strict)).toBeNull();
  expect(webhookUrlProblem('https://93.184.216.34/herald', strict)).toBeNull();
  expect(webhookUrlProblem('http://hooks.example.com/herald', strict)).toMatch(/must use https/);
  expect(webhookUrlProblem('ftp://hooks.example.com/', strict)).toBe('The URL must be an absolute https URL.');
  expect(webhookUrlProblem('/relative', strict)).toBe('The URL must be an absolute https URL.');
  expect(webhookUrlProblem('https://user:secret@hooks.example.com/', strict)).toMatch(/user name or password/);
  expect(webhookUrlProblem('https://hooks.example.com/#part', strict)).toMatch(/fragment/);
  expect(webhookUrlProblem(`https://hooks.example.com/${'a'.repeat(2048)}`, strict)).toMatch(/longer than 2048/);
  expect(webhookUrlProblem('https://127.0.0.1/herald', strict)).toBe(
    "The URL's address 127.0.0.1 is loopback: webhooks go only to public addresses (unless HERALD_WEBHOOK_ALLOW_PRIVATE=true).",
  );
  expect(webhookUrlProblem('https://[::ffff:169.254.169.254]/latest/meta-data', strict)).toMatch(/is link-local/);
  expect(webhookUrlProblem('https://10.0.0.5/herald', strict)).toMatch(/is private/);
  // A name is judged on what it resolves to when a request is made, not here.
  expect(webhookUrlProblem('https://localhost/herald', strict)).toBeNull();

  const local = { allowPrivate: true };
  expect(webhookUrlProblem('http://127.0.0.1:8080/herald', local)).toBeNull();
  expect(webhookUrlProblem('https://user:secret@127.0.0.1/', local)).toMatch(/user name or password/);
});

describe('the sender', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(() => receiver.close());

  const port = () => new URL(receiver.url).port;

  test('without HERALD_WEBHOOK_ALLOW_PRIVATE it connects to no private address, by IP or by a name that resolves to one', async () => {
    const sender = createWebhookSender({ allowPrivate: false, timeoutMs: 2_000 });
    try {
      const refused = async (url: string) => (await sender.post(url, '{}', { 'Content-Type': 'application/json' })).error;
      expect(await refused(`http://127.0.0.1:${port()}/strict`)).toBe('address not allowed: 127.0.0.1 is loopback');
      // (URL writes it ::ffff:7f00:1.)
      expect(await refused(`http://[::ffff:127.0.0.1]:${port()}/strict`)).toBe('address not allowed: ::ffff:7f00:1 is loopback');
      expect(await refused(`http://[::1]:${port()}/strict`)).toBe('address not allowed: ::1 is loopback');
      // A name: its addresses are checked by the lookup the socket connects with.
      expect(await refused(`http://localhost:${port()}/strict`)).toMatch(/^address not allowed: localhost is (127\.0\.0\.1|::1) \(loopback\)$/);
      expect(receiver.at('/strict')).toEqual([]);
    } finally {
      sender.close();
    }
  });

  test('with it, the same receiver is reached, by IP and by name', async () => {
    const sender = createWebhookSender({ allowPrivate: true, timeoutMs: 2_000 });
    try {
      expect(await sender.post(`http://127.0.0.1:${port()}/local`, '{"a":1}', {})).toEqual({ ok: true, statusCode: 200, error: null, excerpt: 'ok' });
      expect((await sender.post(`http://localhost:${port()}/local`, '{"a":2}', {})).ok).toBe(true);
      expect(receiver.at('/local').map((got) => got.body)).toEqual(['{"a":1}', '{"a":2}']);
    } finally {
      sender.close();
    }
  });

  test('no answer within the timeout, a refused connection and an unknown host are failures that say so', async () => {
    const sender = createWebhookSender({ allowPrivate: true, timeoutMs: 300 });
    try {
      receiver.answer('/slow', { delayMs: 2_000 });
      const started = Date.now();
      expect(await sender.post(`${receiver.url}/slow`, '{}', {})).toEqual({ ok: false, statusCode: null, error: 'timeout after 0.3 s', excerpt: null });
      expect(Date.now() - started).toBeLessThan(1_500);
      expect((await sender.post('http://127.0.0.1:1/closed', '{}', {})).error).toBe('connection refused');
      expect((await sender.post('http://no-such-host.invalid/', '{}', {})).error).toMatch(/^(host not found|DNS lookup failed)$/);
    } finally {
      sender.close();
    }
  });
});
