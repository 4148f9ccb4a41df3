// A `data` key is the client's own name, whatever it is: a key named like a property every
// JavaScript object inherits (`__proto__`) reaches the device on both platforms, in the push's
// data and in platform_overrides.
import { createApnsProvider } from '../../src/providers/apns.ts';
import { createFcmProvider, type FcmProvider } from '../../src/providers/fcm.ts';
import type { ApnsSimulator } from '../../src/providers/simulators/apns-simulator.ts';
import type { FcmSimulator } from '../../src/providers/simulators/fcm-simulator.ts';
import type { PushContent } from '../../src/domain/payloads.ts';
import { apnsSimulator, fcmSimulator, makePush, silentLogger } from '../support/simulators.ts';

let fcm: FcmSimulator;
let fcmProvider: FcmProvider;
let apns: ApnsSimulator;
let apnsProvider: ReturnType<typeof createApnsProvider>;

beforeAll(async () => {
  const fcmSetup = await fcmSimulator();
  fcm = fcmSetup.sim;
  fcmProvider = createFcmProvider(fcmSetup.credentials, { fcm: fcm.url, ca: fcm.ca }, silentLogger);
  const apnsSetup = await apnsSimulator();
  apns = apnsSetup.sim;
  apnsProvider = createApnsProvider(apnsSetup.credentials, { apns: apns.url, ca: apns.ca }, silentLogger);
});
afterAll(async () => {
  await fcmProvider.close();
  await apnsProvider.close();
  await fcm.stop();
  await apns.stop();
});

// Parsed, as a request body is: in an object literal `__proto__` would set the prototype instead.
const content = JSON.parse(`{
  "notification": { "title": "Hi" },
  "data": { "__proto__": "kept", "constructor": { "a": 1 }, "plain": "x" },
  "options": { "platform_overrides": {
    "android": { "data": { "__proto__": "override" } },
    "ios": { "__proto__": { "c": 3 } }
  } }
}`) as PushContent;

const own = (object: unknown, key: string) => Object.getOwnPropertyDescriptor(object, key)?.value;

test('FCM receives a data key named __proto__, in data and in the Android override of data', async () => {
  const push = makePush('fcm-proto', content);
  const [outcome] = await fcmProvider.send([push]);
  expect(outcome.kind).toBe('accepted');
  const message = fcm.received[0].message as { data: object; android: object };
  expect(own(message.data, '__proto__')).toBe('kept');
  expect(own(message.data, 'constructor')).toBe('{"a":1}');
  expect(own(message.data, 'plain')).toBe('x');
  expect(own(own(message.android, 'data'), '__proto__')).toBe('override');
});

test('APNs receives a data key named __proto__, and the iOS override that names it', async () => {
  const push = makePush('a1'.repeat(32), content);
  const [outcome] = await apnsProvider.send([push]);
  expect(outcome.kind).toBe('accepted');
  const payload = apns.received[0].payload as object;
  expect(own(payload, '__proto__')).toEqual({ c: 3 });
  expect(own(payload, 'constructor')).toEqual({ a: 1 });
  expect(own(payload, 'plain')).toBe('x');
});

test('APNs receives an iOS override named __proto__ when data has no such key', async () => {
  const overridden = JSON.parse('{ "notification": { "title": "Hi" }, "options": { "platform_overrides": { "ios": { "__proto__": { "c": 3 } } } } }');
  const [outcome] = await apnsProvider.send([makePush('b2'.repeat(32), overridden as PushContent)]);
  expect(outcome.kind).toBe('accepted');
  expect(own(apns.received.at(-1)!.payload, '__proto__')).toEqual({ c: 3 });
});
