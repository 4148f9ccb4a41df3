// The FCM simulator checks requests as Google does; raw HTTP/2 requests show what it answers to
// requests Herald's FCM client never sends.
import { endpointCredential } from '../../src/providers/fcm-token.ts';
import type { FcmCredentials } from '../../src/domain/credentials.ts';
import type { FcmReceived, FcmSimulator } from '../../src/providers/simulators/fcm-simulator.ts';
import { fcmProject, fcmSimulator, h2Request, httpsCall, rsaKeyPair, type RawAnswer } from '../support/simulators.ts';

let sim: FcmSimulator;
let credentials: FcmCredentials;
let accessToken: string;

beforeAll(async () => {
  ({ sim, credentials } = await fcmSimulator());
  accessToken = (await endpointCredential(credentials.serviceAccount, sim.url, sim.ca).getAccessToken()).access_token;
});
afterAll(() => sim.stop());
beforeEach(() => {
  sim.clear();
  sim.setRules([]);
});

function send(body: unknown, authorization = `Bearer ${accessToken}`, project = fcmProject): Promise<RawAnswer> {
  return h2Request(
    sim.url,
    sim.ca,
    { ':path': `/v1/projects/${project}/messages:send`, authorization, 'content-type': 'application/json' },
    typeof body === 'string' ? body : JSON.stringify(body),
  );
}

const fcmError = (errorCode: string) => ({ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode });

test('a valid message is answered with its name', async () => {
  const answer = await send({ message: { token: 'device-1', data: { a: 'b' } } });
  expect(answer.status).toBe(200);
  expect(answer.json).toEqual({ name: expect.stringMatching(new RegExp(`^projects/${fcmProject}/messages/.+`)) });
});

describe('access tokens', () => {
  test('the token endpoint issues a bearer token for a correctly signed assertion', async () => {
    const token = await endpointCredential(credentials.serviceAccount, sim.url, sim.ca).getAccessToken();
    expect(token).toEqual({ access_token: expect.stringMatching(/^sim\./), expires_in: 3600 });
  });

  test('an assertion signed with another key is refused with invalid_grant', async () => {
    const wrongKey = { ...credentials.serviceAccount, private_key: rsaKeyPair().privateKey };
    await expect(endpointCredential(wrongKey, sim.url, sim.ca).getAccessToken()).rejects.toThrow(/^invalid_grant/);
  });

  test('an access token the simulator did not issue is refused with 401 UNAUTHENTICATED', async () => {
    const answer = await send({ message: { token: 'device-1' } }, 'Bearer ya29.forged');
    expect(answer.status).toBe(401);
    expect(answer.json).toEqual({ error: { code: 401, message: expect.stringContaining('invalid authentication credentials'), status: 'UNAUTHENTICATED' } });
  });

  test('with unknownTokenError THIRD_PARTY_AUTH_ERROR, a foreign token is refused with that FCM error', async () => {
    const { sim: strict } = await fcmSimulator({ unknownTokenError: 'THIRD_PARTY_AUTH_ERROR' });
    try {
      const answer = await h2Request(strict.url, strict.ca, { ':path': `/v1/projects/${fcmProject}/messages:send`, authorization: 'Bearer nope' }, '{}');
      expect(answer.status).toBe(401);
      expect(answer.json).toMatchObject({ error: { status: 'UNAUTHENTICATED', details: [fcmError('THIRD_PARTY_AUTH_ERROR')] } });
    } finally {
      await strict.stop();
    }
  });

  test("a token may not send for another service account's project: 403 PERMISSION_DENIED", async () => {
    const answer = await send({ message: { token: 'device-1' } }, undefined, 'someone-else');
    expect(answer.status).toBe(403);
    expect(answer.json).toMatchObject({ error: { code: 403, status: 'PERMISSION_DENIED' } });
  });
});

describe('message validation', () => {
  test.each<[string, unknown, string]>([
    ['a message without a recipient', { message: { data: { a: 'b' } } }, 'Recipient of the message is not set.'],
    ['a data value that is not a string', { message: { token: 'd', data: { a: 'b', count: 1 } } }, "Invalid value at 'message.data[1].value' (TYPE_STRING), 1"],
    ['an android ttl without its unit', { message: { token: 'd', android: { ttl: '3600' } } }, "Invalid value at 'message.android.ttl'"],
    ['an android ttl in milliseconds', { message: { token: 'd', android: { ttl: 3600000 } } }, "Invalid value at 'message.android.ttl'"],
    ['an android priority outside the enum', { message: { token: 'd', android: { priority: 'urgent' } } }, "Invalid value at 'message.android.priority'"],
    ['a field FCM does not have', { message: { token: 'd', android: { channelId: 'x' } } }, 'Unknown name "channelId"'],
    ['a camelCase notification field', { message: { token: 'd', notification: { imageUrl: 'https://x' } } }, 'Unknown name "imageUrl"'],
    ['a body that is not JSON', '{"message": ', 'Invalid JSON payload received.'],
    ['data and notification over 4 KB', { message: { token: 'd', data: { blob: 'x'.repeat(4100) } } }, 'Android message is too big'],
  ])('%s is refused with 400 INVALID_ARGUMENT', async (_case, body, message) => {
    const answer = await send(body);
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT', message: expect.stringContaining(message) } });
  });

  test.each([['3600s'], ['1.5s'], ['0s']])('an android ttl of %s is accepted', async (ttl) => {
    expect((await send({ message: { token: 'd', android: { ttl, priority: 'HIGH' } } })).status).toBe(200);
  });

  test('a token with whitespace is refused as not a valid registration token', async () => {
    const answer = await send({ message: { token: 'not a token' } });
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({
      error: { message: 'The registration token is not a valid FCM registration token', details: [fcmError('INVALID_ARGUMENT'), { fieldViolations: [{ field: 'message.token' }] }] },
    });
  });
});

describe('failure rules', () => {
  test('UNREGISTERED is answered exactly as Google does', async () => {
    sim.setRules([{ prefix: 'dead-', reason: 'UNREGISTERED' }]);
    const answer = await send({ message: { token: 'dead-1' } });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body)).toEqual({
      error: { code: 404, message: 'Requested entity was not found.', status: 'NOT_FOUND', details: [fcmError('UNREGISTERED')] },
    });
    expect((await send({ message: { token: 'alive-1' } })).status).toBe(200);
  });

  test.each<[string, number, string]>([
    ['INVALID_ARGUMENT', 400, 'INVALID_ARGUMENT'],
    ['SENDER_ID_MISMATCH', 403, 'PERMISSION_DENIED'],
    ['QUOTA_EXCEEDED', 429, 'RESOURCE_EXHAUSTED'],
    ['UNAVAILABLE', 503, 'UNAVAILABLE'],
    ['INTERNAL', 500, 'INTERNAL'],
    ['THIRD_PARTY_AUTH_ERROR', 401, 'UNAUTHENTICATED'],
  ])('%s is answered %i %s with its FcmError detail', async (errorCode, status, statusName) => {
    sim.setRules([{ reason: errorCode }]);
    const answer = await send({ message: { token: 'device-1' } });
    expect(answer.status).toBe(status);
    expect(answer.json).toMatchObject({ error: { code: status, status: statusName, details: expect.arrayContaining([fcmError(errorCode)]) } });
  });

  test('an INVALID_ARGUMENT rule names the token unless it has a message of its own', async () => {
    sim.setRules([{ prefix: 'bad-', reason: 'INVALID_ARGUMENT' }, { prefix: 'payload-', reason: 'INVALID_ARGUMENT', message: 'Invalid value at message.android' }]);
    expect(((await send({ message: { token: 'bad-1' } })).json as { error: { message: string } }).error.message).toBe(
      'The registration token is not a valid FCM registration token',
    );
    expect(((await send({ message: { token: 'payload-1' } })).json as { error: { message: string } }).error.message).toBe('Invalid value at message.android');
  });

  test('QUOTA_EXCEEDED with retryAfter carries a Retry-After header', async () => {
    sim.setRules([{ reason: 'QUOTA_EXCEEDED', retryAfter: 60 }]);
    const answer = await send({ message: { token: 'device-1' } });
    expect(answer.headers['retry-after']).toBe('60');
  });
});

describe('record and control endpoints', () => {
  test('each message is recorded as it came over the wire, with its answer', async () => {
    sim.setRules([{ prefix: 'dead-', reason: 'UNREGISTERED' }]);
    await send({ message: { token: 'dead-1', data: { a: 'b' } } });
    expect(sim.received).toEqual([
      expect.objectContaining({ projectId: fcmProject, token: 'dead-1', message: { token: 'dead-1', data: { a: 'b' } }, status: 404, errorCode: 'UNREGISTERED' }),
    ]);
  });

  test('another process reads, clears and steers the simulator over HTTPS', async () => {
    await send({ message: { token: 'device-1' } });
    const read = await httpsCall(`${sim.url}/__sim/received`, sim.ca, 'GET');
    expect(read.status).toBe(200);
    expect((read.json as { received: FcmReceived[] }).received).toEqual([expect.objectContaining({ token: 'device-1', status: 200 })]);

    expect((await httpsCall(`${sim.url}/__sim/rules`, sim.ca, 'PUT', { rules: [{ reason: 'UNAVAILABLE' }] })).status).toBe(204);
    expect((await send({ message: { token: 'device-2' } })).status).toBe(503);

    expect((await httpsCall(`${sim.url}/__sim/received`, sim.ca, 'DELETE')).status).toBe(204);
    expect(sim.received).toHaveLength(0);
  });

  test('with record off, the simulator only counts', async () => {
    const { sim: counting, credentials: countingCredentials } = await fcmSimulator({ record: false });
    try {
      const token = (await endpointCredential(countingCredentials.serviceAccount, counting.url, counting.ca).getAccessToken()).access_token;
      await h2Request(counting.url, counting.ca, { ':path': `/v1/projects/${fcmProject}/messages:send`, authorization: `Bearer ${token}` }, '{"message":{"token":"a"}}');
      expect(counting.received).toHaveLength(0);
      expect(counting.counters).toMatchObject({ requests: 1, byStatus: { 200: 1 }, unrecorded: 1 });
      expect(counting.tokensIssued()).toBe(1);
    } finally {
      await counting.stop();
    }
  });
});
