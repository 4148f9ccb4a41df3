// verifyWebhook (the SDK) accepts exactly what Herald signs (src/domain/webhooks.ts), and says why it refuses the rest.
import { HeraldWebhookError, verifyWebhook } from '../sdk/src/index.ts';
import { newSigningSecret, signatureHeader, webhookBody } from '../src/domain/webhooks.ts';

const secret = newSigningSecret();
const body = webhookBody({
  id: '0193a1c0-1f2e-7d3c-9b4a-5f6e7d8c9b0a',
  type: 'event.reported',
  createdAt: new Date('2026-11-02T10:03:42.087Z'),
  data: { event: { event_id: 'e', type: 'opened' }, notification_id: 'n', user_id: 'Zoë' },
});
// A whole second, as the header's t: the ages below are exact.
const now = new Date(Math.floor(Date.now() / 1000) * 1000);
const header = signatureHeader([secret], body, now);

test('a request Herald signed is verified and its event returned, from a string or from the raw bytes', async () => {
  expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
  const event = await verifyWebhook(body, header, secret);
  expect(event).toEqual(JSON.parse(body));
  expect(await verifyWebhook(Buffer.from(body, 'utf8'), header, secret)).toEqual(event);
  expect(await verifyWebhook(new TextEncoder().encode(body), header, secret)).toEqual(event);
});

test('with two signatures (a secret rotation), either secret verifies; an unknown scheme is ignored', async () => {
  const previous = newSigningSecret();
  const both = signatureHeader([secret, previous], body, now);
  expect(both).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
  await expect(verifyWebhook(body, both, secret)).resolves.toMatchObject({ type: 'event.reported' });
  await expect(verifyWebhook(body, both, previous)).resolves.toMatchObject({ type: 'event.reported' });
  await expect(verifyWebhook(body, `${header},v0=${'0'.repeat(64)}`, secret)).resolves.toMatchObject({ type: 'event.reported' });
});

test.each([
  ['a changed body', body.replace('Zoë', 'Zoe'), header, secret, 'No signature of the Herald-Signature header matches this body and secret.'],
  ['another secret', body, header, newSigningSecret(), 'No signature of the Herald-Signature header matches this body and secret.'],
  ['another timestamp', body, header.replace(/^t=(\d+)/, (_, t) => `t=${Number(t) - 1}`), secret, 'No signature of the Herald-Signature header matches this body and secret.'],
  ['no header', body, undefined, secret, 'The request has no Herald-Signature header.'],
  ['an empty header', body, '', secret, 'The request has no Herald-Signature header.'],
  ['no signature', body, header.split(',')[0], secret, 'The Herald-Signature header is not t=<unix seconds>,v1=<hex HMAC-SHA256>.'],
  ['no timestamp', body, header.split(',')[1], secret, 'The Herald-Signature header is not t=<unix seconds>,v1=<hex HMAC-SHA256>.'],
  ['a short signature', body, `${header.split(',')[0]},v1=abc`, secret, 'The Herald-Signature header is not t=<unix seconds>,v1=<hex HMAC-SHA256>.'],
])('%s is refused', async (_case, given, givenHeader, givenSecret, message) => {
  const refused = verifyWebhook(given, givenHeader, givenSecret);
  await expect(refused).rejects.toThrow(HeraldWebhookError);
  await expect(refused).rejects.toThrow(message);
});

test('a request signed more than the tolerance ago, or ahead, is refused as a possible replay; the tolerance is an option', async () => {
  const old = signatureHeader([secret], body, new Date(now.getTime() - 301_000));
  await expect(verifyWebhook(body, old, secret, { now })).rejects.toThrow(/^The request was signed 301 s ago, more than the 300 s tolerated\.$/);
  await expect(verifyWebhook(body, old, secret, { toleranceSeconds: 600 })).resolves.toMatchObject({ type: 'event.reported' });
  const ahead = signatureHeader([secret], body, new Date(now.getTime() + 400_000));
  await expect(verifyWebhook(body, ahead, secret, { now })).rejects.toThrow('The request was signed 400 s in the future, more than the 300 s tolerated.');
  await expect(verifyWebhook(body, ahead, secret, { now: new Date(now.getTime() + 400_000) })).resolves.toMatchObject({ type: 'event.reported' });
});
