// The APNs simulator checks requests as Apple does; raw HTTP/2 requests show what it answers to
// requests the real client never sends.
import { randomUUID } from 'node:crypto';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { ApnsReceived, ApnsSimulator } from '../../src/providers/simulators/apns-simulator.ts';
import { waitFor } from '../support/receiver.ts';
import { apnsJwt, apnsSimulator, apnsTeam, ecKeyPair, fcmSimulator, h2Request, httpsCall, type RawAnswer } from '../support/simulators.ts';

let sim: ApnsSimulator;
let signingKey: string;

beforeAll(async () => {
  ({ sim, signingKey } = await apnsSimulator({ tokenFormat: 'hex' }));
});
afterAll(() => sim.stop());
beforeEach(() => {
  sim.clear();
  sim.setRules([]);
  sim.setLatency(undefined);
});

const deviceToken = 'ab'.repeat(32);
const payload = JSON.stringify({ aps: { alert: 'Hello' } });

function post(headers: OutgoingHttpHeaders, body: string | Buffer = payload, token = deviceToken): Promise<RawAnswer> {
  return h2Request(sim.url, sim.ca, { ':path': `/3/device/${token}`, ...headers }, body);
}

function validHeaders(): OutgoingHttpHeaders {
  return { authorization: `bearer ${apnsJwt(signingKey)}`, 'apns-topic': apnsTeam.bundleId };
}

test('a valid push is answered 200 with the apns-id it was given', async () => {
  const apnsId = randomUUID();
  const answer = await post({ ...validHeaders(), 'apns-id': apnsId });
  expect(answer.status).toBe(200);
  expect(answer.headers['apns-id']).toBe(apnsId);
  expect(answer.body).toBe('');
});

test('a push without apns-id is answered with a generated uuid', async () => {
  const answer = await post(validHeaders());
  expect(answer.status).toBe(200);
  expect(answer.headers['apns-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
});

describe('provider tokens', () => {
  const jwtCases: [string, string, () => OutgoingHttpHeaders][] = [
    ['no authorization header', 'MissingProviderToken', () => ({})],
    ['a token that is not a JWT', 'InvalidProviderToken', () => ({ authorization: 'bearer not-a-jwt' })],
    ['a JWT signed by a key Apple does not know', 'InvalidProviderToken', () => ({ authorization: `bearer ${apnsJwt(ecKeyPair().privateKey)}` })],
    ['a JWT naming an unknown key id', 'InvalidProviderToken', () => ({ authorization: `bearer ${apnsJwt(signingKey, {}, 'OTHERKEY00')}` })],
    ['a JWT of another team', 'InvalidProviderToken', () => ({ authorization: `bearer ${apnsJwt(signingKey, { iss: 'OTHERTEAM0' })}` })],
    [
      'a JWT issued more than an hour ago',
      'ExpiredProviderToken',
      () => ({ authorization: `bearer ${apnsJwt(signingKey, { iat: Math.floor(Date.now() / 1000) - 3700 })}` }),
    ],
  ];
  test.each(jwtCases)('%s is refused with 403 %s', async (_case, reason, authorization) => {
    const answer = await post({ 'apns-topic': apnsTeam.bundleId, ...authorization() });
    expect(answer.status).toBe(403);
    expect(answer.json).toEqual({ reason });
  });

  test('a token verified once is accepted on later requests', async () => {
    const jwt = apnsJwt(signingKey);
    for (let attempt = 0; attempt < 3; attempt++) {
      expect((await post({ ...validHeaders(), authorization: `bearer ${jwt}` })).status).toBe(200);
    }
  });
});

describe('headers and payload', () => {
  test.each<[string, number, string, OutgoingHttpHeaders]>([
    ['no apns-topic', 400, 'MissingTopic', { 'apns-topic': undefined }],
    ['another app as apns-topic', 400, 'BadTopic', { 'apns-topic': 'com.example.other' }],
    ['an apns-priority outside 1, 5, 10', 400, 'BadPriority', { 'apns-priority': '7' }],
    ['a background push at priority 10', 400, 'BadPriority', { 'apns-push-type': 'background', 'apns-priority': '10' }],
    ['an unknown apns-push-type', 400, 'InvalidPushType', { 'apns-push-type': 'banner' }],
    ['an apns-expiration that is not a number', 400, 'BadExpirationDate', { 'apns-expiration': 'tomorrow' }],
    ['an apns-collapse-id over 64 bytes', 400, 'BadCollapseId', { 'apns-collapse-id': 'c'.repeat(65) }],
    ['an apns-id that is not a uuid', 400, 'BadMessageId', { 'apns-id': 'delivery-1' }],
  ])('%s is refused with %i %s', async (_case, status, reason, headers) => {
    const merged = { ...validHeaders(), ...headers };
    const answer = await post(Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== undefined)));
    expect(answer.status).toBe(status);
    expect(answer.json).toEqual({ reason });
  });

  test('an apns-collapse-id of exactly 64 bytes is accepted', async () => {
    expect((await post({ ...validHeaders(), 'apns-collapse-id': 'c'.repeat(64) })).status).toBe(200);
  });

  test('an empty body is refused with 400 PayloadEmpty', async () => {
    const answer = await post(validHeaders(), '');
    expect([answer.status, answer.json]).toEqual([400, { reason: 'PayloadEmpty' }]);
  });

  test('a payload of 4096 bytes is accepted and one of 4097 is refused with 413 PayloadTooLarge', async () => {
    const sized = (bytes: number) => {
      const base = JSON.stringify({ aps: { alert: '' } });
      return JSON.stringify({ aps: { alert: 'x'.repeat(bytes - base.length) } });
    };
    expect(Buffer.byteLength(sized(4096))).toBe(4096);
    expect((await post(validHeaders(), sized(4096))).status).toBe(200);
    const tooLarge = await post(validHeaders(), sized(4097));
    expect([tooLarge.status, tooLarge.json]).toEqual([413, { reason: 'PayloadTooLarge' }]);
  });

  test('with tokenFormat hex, a token that is not 64+ hex digits is refused with 400 BadDeviceToken', async () => {
    const answer = await post(validHeaders(), payload, 'not-a-device-token');
    expect([answer.status, answer.json]).toEqual([400, { reason: 'BadDeviceToken' }]);
  });
});

describe('failure rules', () => {
  test('a prefix rule answers 410 Unregistered with the timestamp it was given', async () => {
    sim.setRules([{ prefix: 'dead', reason: 'Unregistered', timestamp: 1_700_000_000_000 }]);
    const answer = await post(validHeaders(), payload, `dead${'0'.repeat(60)}`);
    expect(answer.status).toBe(410);
    expect(answer.json).toEqual({ reason: 'Unregistered', timestamp: 1_700_000_000_000 });
    expect((await post(validHeaders())).status).toBe(200);
  });

  test('a 410 without a configured timestamp carries the time of the request', async () => {
    sim.setRules([{ reason: 'Unregistered' }]);
    const before = Date.now();
    const answer = await post(validHeaders());
    const { timestamp } = answer.json as { timestamp: number };
    expect(timestamp).toBeGreaterThanOrEqual(before);
    expect(timestamp).toBeLessThanOrEqual(Date.now());
  });

  test('a rule with retryAfter answers its status with a Retry-After header', async () => {
    sim.setRules([{ reason: 'ServiceUnavailable', retryAfter: 7 }]);
    const answer = await post(validHeaders());
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('7');
    expect(answer.json).toEqual({ reason: 'ServiceUnavailable' });
  });

  test('a rule may set a status of its own', async () => {
    // Apple answers Shutdown with 503; the rule says 500.
    sim.setRules([{ reason: 'Shutdown', status: 500 }]);
    const answer = await post(validHeaders());
    expect([answer.status, answer.json]).toEqual([500, { reason: 'Shutdown' }]);
  });

  test('failure rules apply only after the request passed Apple\'s checks', async () => {
    sim.setRules([{ reason: 'Unregistered' }]);
    expect((await post({ 'apns-topic': apnsTeam.bundleId })).json).toEqual({ reason: 'MissingProviderToken' });
  });
});

describe('record and control endpoints', () => {
  test('each request is recorded with the headers that matter, its payload and its answer', async () => {
    await post({ ...validHeaders(), 'apns-priority': '5', 'apns-push-type': 'background', 'apns-expiration': '0', 'apns-collapse-id': 'c1' });
    expect(sim.received).toEqual([
      expect.objectContaining({
        token: deviceToken,
        topic: apnsTeam.bundleId,
        priority: '5',
        pushType: 'background',
        expiration: '0',
        collapseId: 'c1',
        payload: { aps: { alert: 'Hello' } },
        status: 200,
      }),
    ]);
    expect(sim.counters).toMatchObject({ requests: 1, byStatus: { 200: 1 } });
  });

  test('another process reads, clears and steers the simulator over HTTPS', async () => {
    await post(validHeaders());
    const read = await httpsCall(`${sim.url}/__sim/received`, sim.ca, 'GET');
    expect(read.status).toBe(200);
    const body = read.json as { counters: { requests: number }; received: ApnsReceived[] };
    expect(body.counters.requests).toBe(1);
    expect(body.received[0]).toMatchObject({ token: deviceToken, status: 200 });

    const rules = await httpsCall(`${sim.url}/__sim/rules`, sim.ca, 'PUT', { rules: [{ reason: 'TooManyRequests' }] });
    expect(rules.status).toBe(204);
    expect((await post(validHeaders())).status).toBe(429);

    expect((await httpsCall(`${sim.url}/__sim/received`, sim.ca, 'DELETE')).status).toBe(204);
    expect(sim.received).toHaveLength(0);
    expect(sim.counters.requests).toBe(0);

    expect((await httpsCall(`${sim.url}/__sim/rules`, sim.ca, 'PUT', [])).status).toBe(204);
    expect((await post(validHeaders())).status).toBe(200);
  });

  test('latency can be set over HTTPS', async () => {
    expect((await httpsCall(`${sim.url}/__sim/rules`, sim.ca, 'PUT', { latency: 150 })).status).toBe(204);
    const started = Date.now();
    await post(validHeaders());
    expect(Date.now() - started).toBeGreaterThanOrEqual(145);
  });

  test('another process cuts every connection: a push not answered yet gets no answer, and is counted', async () => {
    sim.setLatency(5000);
    const answered = post(validHeaders()).then((answer) => answer.status, () => 'cut');
    await waitFor(() => sim.received.length, (count) => count === 1, 5000);
    const cut = await httpsCall(`${sim.url}/__sim/connections`, sim.ca, 'DELETE');
    expect(cut).toMatchObject({ status: 200, json: { unanswered: 1 } });
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([answered, new Promise((resolve) => (timer = setTimeout(() => resolve('no answer'), 3000)))]);
    clearTimeout(timer);
    expect(outcome).not.toBe(200);
  });

  test('a malformed rule set is refused with 400 and changes nothing', async () => {
    sim.setRules([{ reason: 'TooManyRequests' }]);
    const answer = await httpsCall(`${sim.url}/__sim/rules`, sim.ca, 'PUT', { rules: [{ prefix: 'x' }] });
    expect(answer.status).toBe(400);
    expect((await post(validHeaders())).status).toBe(429);
  });

  test("both simulators' certificates can be trusted from one CA file", async () => {
    const { sim: fcm } = await fcmSimulator();
    try {
      // What HERALD_PROVIDER_CA_FILE holds when both simulators run: their PEMs, one after the other.
      const caFile = sim.ca + fcm.ca;
      expect((await httpsCall(`${sim.url}/__sim/received`, caFile, 'GET')).status).toBe(200);
      expect((await httpsCall(`${fcm.url}/__sim/received`, caFile, 'GET')).status).toBe(200);
    } finally {
      await fcm.stop();
    }
  });

  test('with record off, the simulator only counts', async () => {
    const { sim: counting, signingKey: key } = await apnsSimulator({ record: false });
    try {
      const headers = { authorization: `bearer ${apnsJwt(key)}`, 'apns-topic': apnsTeam.bundleId };
      await h2Request(counting.url, counting.ca, { ':path': '/3/device/abc', ...headers }, payload);
      await h2Request(counting.url, counting.ca, { ':path': '/3/device/abc', ...headers }, '');
      expect(counting.received).toHaveLength(0);
      expect(counting.counters).toMatchObject({ requests: 2, byStatus: { 200: 1, 400: 1 }, unrecorded: 2 });
    } finally {
      await counting.stop();
    }
  });

  test('a recordLimit keeps the first requests and counts the rest', async () => {
    const { sim: bounded, signingKey: key } = await apnsSimulator({ recordLimit: 2 });
    try {
      const headers = { authorization: `bearer ${apnsJwt(key)}`, 'apns-topic': apnsTeam.bundleId };
      for (const token of ['one', 'two', 'three']) {
        await h2Request(bounded.url, bounded.ca, { ':path': `/3/device/${token}`, ...headers }, payload);
      }
      expect(bounded.received.map((received) => received.token)).toEqual(['one', 'two']);
      expect(bounded.counters).toMatchObject({ requests: 3, unrecorded: 1 });
    } finally {
      await bounded.stop();
    }
  });
});
