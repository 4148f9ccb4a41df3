// Outcome mapping for failures the simulators cannot stage: the errors are shaped as the client
// libraries raise them (firebase-admin 14.5.1, @parse/node-apn 8.1.0).
import { failureOutcome } from '../../src/providers/apns.ts';
import { fcmOutcome } from '../../src/providers/fcm.ts';
import { parseRetryAfter } from '../../src/providers/support.ts';

test('an OAuth token endpoint that cannot be reached is transient, not a credentials problem', () => {
  // firebase-admin wraps the credential's failure as app/invalid-credential, keeping the cause.
  const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' });
  const error = Object.assign(new Error('Credential implementation provided to initializeApp() failed'), { code: 'app/invalid-credential', cause: refused });
  expect(fcmOutcome('d1', error)).toEqual({ deliveryId: 'd1', kind: 'transient', reason: 'TokenEndpointUnavailable' });
});

test('a token endpoint that answers 503 is transient', () => {
  const unavailable = Object.assign(new Error('HTTP 503: busy'), { status: 503 });
  const error = Object.assign(new Error('failed to fetch a valid Google OAuth2 access token'), { code: 'app/invalid-credential', cause: unavailable });
  expect(fcmOutcome('d1', error)).toMatchObject({ kind: 'transient' });
});

test('a bare PERMISSION_DENIED (no SENDER_ID_MISMATCH detail) is a credentials problem, not a dead token', () => {
  const error = {
    code: 'messaging/mismatched-credential',
    httpResponse: { status: 403, headers: {}, data: { error: { code: 403, status: 'PERMISSION_DENIED', message: 'Permission denied' } } },
  };
  expect(fcmOutcome('d1', error)).toEqual({ deliveryId: 'd1', kind: 'credentials', reason: 'PERMISSION_DENIED' });
});

test('an FCM failure without an answer from Google (a session error) is transient', () => {
  expect(fcmOutcome('d1', { code: 'messaging/unknown-error', message: 'Session error while making requests: ECONNRESET' })).toMatchObject({
    kind: 'transient',
    reason: 'messaging/unknown-error',
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
  const fcmRefused = Object.assign(new Error('Error while making request: connect ECONNREFUSED 10.0.3.7:443.'), {
    code: 'app/network-error',
    cause: { code: 'ECONNREFUSED' },
  });
  expect(fcmOutcome('d3', fcmRefused)).toEqual({ deliveryId: 'd3', kind: 'transient', reason: 'provider unreachable' });
  for (const error of [refused, timeout, fcmRefused]) {
    expect(JSON.stringify([failureOutcome('x', { device: 'x', error } as never), fcmOutcome('x', error)])).not.toMatch(/\d+\.\d+\.\d+\.\d+|:443/);
  }
});
