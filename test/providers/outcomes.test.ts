// Outcome mapping for failures the simulators cannot stage: APNs errors shaped as @parse/node-apn
// 8.1.0 raises them; FCM's as Herald's own client reports them (fcm.ts FcmFailure).
import { failureOutcome } from '../../src/providers/apns.ts';
import { timeoutError } from '../../src/providers/fcm-client.ts';
import { fcmOutcome } from '../../src/providers/fcm.ts';
import { parseRetryAfter } from '../../src/providers/support.ts';

test('an OAuth token endpoint that cannot be reached is transient, not a credentials problem', () => {
  // The token library may wrap the failure: the cause is what counts.
  const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' });
  const error = Object.assign(new Error('request to https://oauth2.googleapis.com/token failed'), { cause: refused });
  expect(fcmOutcome('d1', { credential: error })).toEqual({ deliveryId: 'd1', kind: 'transient', reason: 'TokenEndpointUnavailable' });
});

test('a token endpoint that answers 503 is transient', () => {
  const unavailable = Object.assign(new Error('HTTP 503: busy'), { status: 503 });
  expect(fcmOutcome('d1', { credential: unavailable })).toMatchObject({ kind: 'transient' });
});

test('a bare PERMISSION_DENIED (no SENDER_ID_MISMATCH detail) is a credentials problem, not a dead token', () => {
  const answer = { status: 403, headers: {}, body: JSON.stringify({ error: { code: 403, status: 'PERMISSION_DENIED', message: 'Permission denied' } }) };
  expect(fcmOutcome('d1', { answer })).toEqual({ deliveryId: 'd1', kind: 'credentials', reason: 'PERMISSION_DENIED' });
});

test('an FCM failure without an answer from Google (a session error) is transient', () => {
  const reset = Object.assign(new Error('FCM connection closed before it answered'), { code: 'ECONNRESET' });
  expect(fcmOutcome('d1', { unanswered: reset })).toMatchObject({
    kind: 'transient',
    reason: 'provider connection lost',
  });
});

test('an answer that is not JSON (a proxy\'s error page) is read by its status', () => {
  const page = (status: number) => ({ answer: { status, headers: { 'retry-after': '12' }, body: '<html>Bad Gateway</html>' } });
  expect(fcmOutcome('d1', page(502))).toEqual({ deliveryId: 'd1', kind: 'transient', reason: 'messaging/unknown-error', retryAfterSeconds: 12 });
  expect(fcmOutcome('d1', page(503))).toEqual({ deliveryId: 'd1', kind: 'transient', reason: 'messaging/server-unavailable', retryAfterSeconds: 12 });
  expect(fcmOutcome('d1', page(401))).toEqual({ deliveryId: 'd1', kind: 'credentials', reason: 'messaging/authentication-error' });
  expect(fcmOutcome('d1', page(400))).toEqual({ deliveryId: 'd1', kind: 'rejected', reason: 'messaging/invalid-argument' });
});

test("a deadline that passes before FCM answers is a transient 'provider timeout'", () => {
  expect(fcmOutcome('d1', { unanswered: timeoutError('FCM did not answer before the deadline') })).toEqual({
    deliveryId: 'd1',
    kind: 'transient',
    reason: 'provider timeout',
  });
});

test('Retry-After is read as seconds or as an HTTP date', () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);
  expect(parseRetryAfter('120', now)).toBe(120);
  expect(parseRetryAfter(['7'], now)).toBe(7);
  expect(parseRetryAfter('Thu, 01 Jan 2026 12:00:30 GMT', now)).toBe(30);
  expect(parseRetryAfter('Thu, 01 Jan 2026 11:00:00 GMT', now)).toBe(0);
  expect(parseRetryAfter('soon', now)).toBeUndefined();
  expect(parseRetryAfter(undefined, now)).toBeUndefined();
});

test('an APNs failure that lost its error message (a spread Error) is still transient', () => {
  // node-apn spreads a thrown Error into a plain object: the message is lost, a `code` may remain.
  expect(failureOutcome('d1', { device: 'x', code: 'ERR_HTTP2_INVALID_SESSION' } as never)).toEqual({
    deliveryId: 'd1',
    kind: 'transient',
    reason: 'provider connection lost',
  });
});

test('a network failure is said in words, never with the address it failed on', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.3.7:443'), { code: 'ECONNREFUSED' });
  expect(failureOutcome('d1', { device: 'x', error: refused } as never)).toEqual({ deliveryId: 'd1', kind: 'transient', reason: 'provider unreachable' });
  const timeout = new Error('apn write timeout');
  expect(failureOutcome('d2', { device: 'x', error: timeout } as never)).toEqual({ deliveryId: 'd2', kind: 'transient', reason: 'provider timeout' });
  const fcmRefused = Object.assign(new Error('connect ECONNREFUSED 10.0.3.7:443'), { code: 'ECONNREFUSED' });
  expect(fcmOutcome('d3', { unanswered: fcmRefused })).toEqual({ deliveryId: 'd3', kind: 'transient', reason: 'provider unreachable' });
  for (const error of [refused, timeout, fcmRefused]) {
    expect(JSON.stringify([failureOutcome('x', { device: 'x', error } as never), fcmOutcome('x', { unanswered: error })])).not.toMatch(/\d+\.\d+\.\d+\.\d+|:443/);
  }
});
