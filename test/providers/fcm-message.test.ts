// FCM's JSON as Herald writes it (fcm-message.ts) is byte for byte what firebase-admin's sendEach
// sent for the same messages, and a message firebase-admin refused is refused. firebase-admin is
// driven through its public API only: its HTTP/1.1 transport and an `httpAgent` whose connections
// reach a local server that keeps each request body.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { deleteApp, initializeApp, type App } from 'firebase-admin/app';
import { getMessaging, type Messaging, type TokenMessage } from 'firebase-admin/messaging';
import type { PushContent } from '../../src/domain/payloads.ts';
import { fcmSendBody, InvalidFcmMessage } from '../../src/providers/fcm-message.ts';
import { messageFor } from '../../src/providers/fcm.ts';
import { makePush } from '../support/simulators.ts';

let server: http.Server;
let app: App;
let messaging: Messaging;
const bodies: string[] = [];

/** Connections to the local server, whatever host firebase-admin asks for; plain HTTP over them. */
class LocalAgent extends https.Agent {
  port = 0;
  override createConnection(): net.Socket {
    return net.connect(this.port, '127.0.0.1');
  }
}

beforeAll(async () => {
  server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: 'projects/p/messages/1' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const agent = new LocalAgent();
  agent.port = (server.address() as AddressInfo).port;
  app = initializeApp(
    { projectId: 'herald-parity', httpAgent: agent, credential: { getAccessToken: async () => ({ access_token: 'token', expires_in: 3600 }) } },
    'herald-fcm-parity',
  );
  messaging = getMessaging(app);
  messaging.enableLegacyHttpTransport();
});

afterAll(async () => {
  await deleteApp(app);
  await new Promise((resolve) => server.close(resolve));
});

/** What firebase-admin sends for the message, or the code it refuses it with. */
async function sentByFirebaseAdmin(message: Record<string, unknown>): Promise<{ body: string } | { refused: string | undefined }> {
  bodies.length = 0;
  const { responses } = await messaging.sendEach([message as unknown as TokenMessage]);
  if (!responses[0].success) return { refused: responses[0].error?.code };
  return { body: bodies[0] };
}

function sentByHerald(message: Record<string, unknown>): { body: string } | { refused: string } {
  try {
    return { body: JSON.stringify(fcmSendBody(message)) };
  } catch (error) {
    if (error instanceof InvalidFcmMessage) return { refused: 'messaging/invalid-payload' };
    throw error;
  }
}

const now = Date.now();
const message = (content: PushContent, expiresAt: Date | null = new Date(now + 600_000)) => messageFor(makePush('token-1', content, expiresAt), now);
const android = (overrides: Record<string, unknown>) => message({ notification: { title: 'Hi' }, options: { platform_overrides: { android: overrides } } });

const sent: [string, Record<string, unknown>][] = [
  [
    'every option Herald sets',
    message({
      notification: { title: 'Order shipped', body: 'On its way', image_url: 'https://img.example/1.png', action_url: 'myapp://orders/1042' },
      data: { order_id: 1042, details: { carrier: 'UPS' } },
      options: { priority: 'high', collapse_id: 'order-1042', sound: 'chime', badge: 3, android_channel_id: 'orders', ttl: 600 },
    }),
  ],
  ['data only, no expiry', message({ notification: {}, data: { sync: 'inbox' } }, null)],
  ['a ttl of 0', message({ notification: { title: 'Now' }, options: { ttl: 0 } })],
  ['a ttl in fractions of a second', android({ ttl: '1.5s' })],
  [
    "overrides in firebase-admin's names",
    android({
      directBootOk: true,
      bandwidthConstrainedOk: false,
      restrictedSatelliteOk: true,
      restrictedPackageName: 'com.example',
      collapseKey: 'override',
      data: { extra: 'yes' },
      fcmOptions: { analyticsLabel: 'campaign' },
      notification: {
        color: '#ff5722',
        clickAction: 'OPEN',
        bodyLocKey: 'body_key',
        bodyLocArgs: ['a'],
        titleLocKey: 'title_key',
        titleLocArgs: ['b'],
        imageUrl: 'https://img.example/2.png',
        localOnly: true,
        priority: 'high',
        visibility: 'public',
        proxy: 'allow',
        vibrateTimingsMillis: [100, 250.5],
        defaultVibrateTimings: false,
        defaultSound: true,
        defaultLightSettings: false,
        notificationCount: 7,
        lightSettings: { color: '#ff000080', lightOnDurationMillis: 100, lightOffDurationMillis: 1500 },
        sticky: true,
        tag: 'orders',
      },
    }),
  ],
  ['a light colour without alpha', android({ notification: { lightSettings: { color: '#00ff00', lightOnDurationMillis: 0, lightOffDurationMillis: 1 } } })],
  ['a priority FCM itself refuses', android({ priority: 'urgent' })],
];

const refused: [string, Record<string, unknown>][] = [
  ['a colour not #RRGGBB', android({ notification: { color: 'red' } })],
  ['an image that is not a URL', message({ notification: { title: 'Hi', image_url: 'ftp://img.example/1.png' } })],
  ['android data that is not text', android({ data: { count: 1 } })],
  ['light settings without a colour', android({ notification: { lightSettings: { lightOnDurationMillis: 1, lightOffDurationMillis: 1 } } })],
  ['an event time that is not a Date', android({ notification: { eventTimestamp: '2026-01-01T00:00:00Z' } })],
  ['loc args without a key', android({ notification: { bodyLocArgs: ['a'] } })],
  ['negative vibrate timings', android({ notification: { vibrateTimingsMillis: [-1] } })],
  ['a message without a token', { notification: { title: 'Hi' }, data: {} }],
];

test.each(sent)('%s: the same JSON as firebase-admin sent', async (_case, built) => {
  const expected = await sentByFirebaseAdmin(built);
  expect(expected).toHaveProperty('body');
  expect(sentByHerald(built)).toEqual(expected);
});

test.each(refused)('%s: refused before sending, as firebase-admin refused it', async (_case, built) => {
  expect(await sentByFirebaseAdmin(built)).toEqual({ refused: 'messaging/invalid-payload' });
  expect(sentByHerald(built)).toEqual({ refused: 'messaging/invalid-payload' });
});

test('the message given is left as it was', () => {
  const built = android({ notification: { lightSettings: { color: '#00ff00', lightOnDurationMillis: 0, lightOffDurationMillis: 1 } } });
  const before = structuredClone(built);
  fcmSendBody(built);
  expect(built).toEqual(before);
});
