// The Web Push provider against the simulator, without the pipeline: the simulator's decryption is
// RFC 8291's (its Appendix A example), it refuses what a push service refuses (no VAPID, a JWT for
// another audience or signed by another key), and the provider gives up each push at its deadline,
// keeps its connections, and never connects to an address the guard refuses.
import { createECDH, createPrivateKey, sign } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import webpush from 'web-push';
import { generateVapidKeys, type WebPushCredentials } from '../../src/domain/credentials.ts';
import { createWebPushProvider } from '../../src/providers/web-push.ts';
import { selfSignedCertificate } from '../../src/providers/simulators/server.ts';
import { decryptWebPush, startWebPushSimulator, type WebPushSimulator } from '../../src/providers/simulators/web-push-simulator.ts';
import type { Push } from '../../src/providers/provider.ts';
import { waitFor } from '../support/receiver.ts';
import { makePush, silentLogger } from '../support/simulators.ts';

let sim: WebPushSimulator;
const vapid: WebPushCredentials = { subject: 'mailto:tests@example.com', ...generateVapidKeys() };

beforeAll(async () => {
  sim = await startWebPushSimulator();
});
afterAll(() => sim.stop());
afterEach(() => {
  sim.setRules([]);
  sim.setLatency(undefined);
  sim.clear();
});

const provider = (options: { allowPrivate?: boolean } = {}) =>
  createWebPushProvider(vapid, { ca: sim.ca, webPushAllowPrivate: options.allowPrivate ?? true }, silentLogger);

function pushTo(endpoint: string, keys: { p256dh: string; auth: string }, title = 'Hello'): Push {
  return { ...makePush(endpoint, { notification: { title } }), subscription: { ...keys, readAt: new Date() } };
}

test("the simulator's decryption gives RFC 8291 Appendix A's plaintext from its message", () => {
  const receiver = createECDH('prime256v1');
  receiver.setPrivateKey(Buffer.from('q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94', 'base64url'));
  expect(receiver.getPublicKey().toString('base64url')).toBe('BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4');
  const message = Buffer.from(
    'DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN',
    'base64url',
  );
  const plaintext = decryptWebPush(message, receiver, Buffer.from('BTBZMqHH6r4Tts7J_aSIgg', 'base64url'));
  expect(plaintext.toString('utf8')).toBe('When I grow up, I want to be a watermelon');
});

test('a subscription a test made itself is decrypted once the simulator is handed its private key', async () => {
  const browser = createECDH('prime256v1');
  browser.generateKeys();
  const keys = { p256dh: browser.getPublicKey().toString('base64url'), auth: Buffer.alloc(16, 7).toString('base64url') };
  sim.adopt('handed-over', { privateKey: browser.getPrivateKey().toString('base64url'), auth: keys.auth });
  const sender = provider();
  try {
    const [outcome] = await sender.send([pushTo(`${sim.url}/push/handed-over`, keys, 'Decrypted')]);
    expect(outcome.kind).toBe('accepted');
    expect(sim.received[0].payload).toMatchObject({ title: 'Decrypted' });
  } finally {
    await sender.close();
  }
});

test('subscriptions issued over HTTP (POST /subscriptions) are what a browser would give, and are decrypted', async () => {
  const issued = (await request(sim.url).post('/subscriptions').trustLocalhost().ca(sim.ca).send({ applicationServerKey: vapid.publicKey }).expect(201)).body;
  expect(issued).toEqual({ endpoint: expect.stringMatching(new RegExp(`^${sim.url}/push/`)), expirationTime: null, keys: { p256dh: expect.any(String), auth: expect.any(String) } });
  const sender = provider();
  try {
    expect((await sender.send([pushTo(issued.endpoint, issued.keys, 'Over HTTP')]))[0].kind).toBe('accepted');
    expect(sim.received[0].payload).toMatchObject({ title: 'Over HTTP' });
  } finally {
    await sender.close();
  }
});

/** An ES256 JWT with these claims, signed by the test's VAPID key. */
function vapidJwt(claims: Record<string, unknown>): string {
  const point = Buffer.from(vapid.publicKey, 'base64url');
  const key = createPrivateKey({
    key: { kty: 'EC', crv: 'P-256', d: vapid.privateKey, x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') },
    format: 'jwk',
  });
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const unsigned = `${encode({ typ: 'JWT', alg: 'ES256' })}.${encode(claims)}`;
  return `${unsigned}.${sign('sha256', Buffer.from(unsigned), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
}

describe('what the simulator refuses, as a push service does', () => {
  const post = async (headers: Record<string, string>) => {
    const subscription = sim.subscribe();
    return request(subscription.endpoint).post('').trustLocalhost().ca(sim.ca).set(headers).send(Buffer.alloc(0));
  };
  const authorization = (audience: string) => webpush.getVapidHeaders(audience, vapid.subject, vapid.publicKey, vapid.privateKey, 'aes128gcm').Authorization;

  test('no Authorization, a JWT for another audience, one not signed by k, an expired one or one for over 24 hours: 401', async () => {
    expect((await post({ TTL: '60' })).body).toEqual({ reason: 'Unauthorized' });
    expect((await post({ TTL: '60', Authorization: authorization('https://push.example.net') })).body).toEqual({ reason: 'BadJwtToken' });
    const [jwt] = /t=([^,]+)/.exec(authorization(sim.url))!.slice(1);
    const otherKey = generateVapidKeys().publicKey;
    const forged = await post({ TTL: '60', Authorization: `vapid t=${jwt}, k=${otherKey}` });
    expect([forged.status, forged.body]).toEqual([401, { reason: 'BadJwtToken' }]);
    // Signed here: the library refuses to sign an expired JWT, or one for more than 24 hours.
    const now = Math.floor(Date.now() / 1000);
    const signed = (exp: number) => `vapid t=${vapidJwt({ aud: sim.url, sub: vapid.subject, exp })}, k=${vapid.publicKey}`;
    expect((await post({ TTL: '60', Authorization: signed(now - 10) })).body).toEqual({ reason: 'ExpiredJwtToken' });
    expect((await post({ TTL: '60', Authorization: signed(now + 48 * 3600) })).body).toEqual({ reason: 'BadJwtToken' });
    expect((await post({ TTL: '60', Authorization: signed(now + 3600) })).status).toBe(201);
  });

  test('a push without TTL is 400; one signed for the simulator is 201 with a Location', async () => {
    expect((await post({ Authorization: authorization(sim.url) })).body).toEqual({ reason: 'MissingTTL' });
    const accepted = await post({ TTL: '60', Authorization: authorization(sim.url) });
    expect(accepted.status).toBe(201);
    expect(accepted.headers.location).toMatch(new RegExp(`^${sim.url}/message/`));
  });
});

test('a slow push service: each push not answered by the deadline is a transient provider timeout, and the send resolves by it', async () => {
  sim.setLatency(3_000);
  const subscription = sim.subscribe();
  const sender = provider();
  try {
    const started = Date.now();
    const [outcome] = await sender.send([pushTo(subscription.endpoint, subscription.keys)], { deadline: new Date(Date.now() + 300) });
    expect(outcome).toMatchObject({ kind: 'transient', reason: 'provider timeout' });
    expect(Date.now() - started).toBeLessThan(1_500);
  } finally {
    await sender.close();
  }
});

test('many pushes share a few kept connections', async () => {
  const sender = provider();
  try {
    const connectionsBefore = sim.counters.connections;
    const pushes = Array.from({ length: 40 }, () => {
      const subscription = sim.subscribe();
      return pushTo(subscription.endpoint, subscription.keys);
    });
    for (let round = 0; round < 3; round++) {
      expect((await sender.send(pushes)).every((outcome) => outcome.kind === 'accepted')).toBe(true);
    }
    expect(sim.counters.requests).toBe(120);
    // HTTP/1.1 keep-alive: the first round opens the connections, later rounds reuse them.
    expect(sim.counters.connections - connectionsBefore).toBeLessThanOrEqual(40);
  } finally {
    await sender.close();
  }
});

test("a kept connection is closed before the push service's announced keep-alive ends, not reused as it closes", async () => {
  // A push service that announces `Keep-Alive: timeout=2` (Node's server closes an idle connection a
  // second after the time it announces). A client that ignores the hint keeps the connection until
  // the service closes it, and a push written at that moment fails with a `socket hang up`.
  const certificate = await selfSignedCertificate('keep-alive', '127.0.0.1');
  const server = https.createServer({ key: certificate.private, cert: certificate.cert }, (request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(201).end());
  });
  server.keepAliveTimeout = 2000;
  const closings: ('client' | 'service')[] = [];
  server.on('secureConnection', (socket) => {
    let peerEnded = false;
    socket.on('end', () => (peerEnded = true));
    socket.on('close', () => closings.push(peerEnded ? 'client' : 'service'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const sender = createWebPushProvider(vapid, { ca: certificate.cert, webPushAllowPrivate: true }, silentLogger);
  try {
    const subscription = sim.subscribe();
    const [outcome] = await sender.send([pushTo(`https://127.0.0.1:${port}/push/kept`, subscription.keys)]);
    expect(outcome.kind).toBe('accepted');
    await waitFor(() => closings.length, (closed) => closed > 0, 5000);
    expect(closings).toEqual(['client']);
  } finally {
    await sender.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('without HERALD_WEBPUSH_ALLOW_PRIVATE the provider connects to no loopback address, by IP or by name', async () => {
  const subscription = sim.subscribe();
  const sender = provider({ allowPrivate: false });
  try {
    const port = new URL(sim.url).port;
    const outcomes = await sender.send([
      pushTo(subscription.endpoint, subscription.keys),
      pushTo(`https://localhost:${port}/push/x`, subscription.keys),
      pushTo(`https://[::ffff:127.0.0.1]:${port}/push/x`, subscription.keys),
    ]);
    expect(outcomes.map((outcome) => ({ kind: outcome.kind, reason: 'reason' in outcome ? outcome.reason : undefined }))).toEqual([
      { kind: 'rejected', reason: 'address not allowed: 127.0.0.1 is loopback' },
      { kind: 'rejected', reason: expect.stringMatching(/^address not allowed: localhost is (127\.0\.0\.1|::1) \(loopback\)$/) },
      { kind: 'rejected', reason: 'address not allowed: ::ffff:7f00:1 is loopback' },
    ]);
    expect(sim.counters.requests).toBe(0);
  } finally {
    await sender.close();
  }
});
