// The error examples of openapi.yaml are what a client reads first: each is the server's exact
// answer to the request it illustrates.
import request from 'supertest';
import { loadDocument } from '../src/http/document.ts';
import { startHarness, type Harness } from './support/harness.ts';

type Example = { value?: unknown };
type Response = { example?: unknown; examples?: Record<string, Example>; $ref?: string };

const document = loadDocument() as {
  paths: Record<string, Record<string, { responses: Record<string, Response & { content?: Record<string, Response> }> }>>;
  components: { responses: Record<string, { content: Record<string, Response> }> };
};

function example(path: string, method: string, status: string, name?: string): unknown {
  let response = document.paths[path][method].responses[status] as Response & { content?: Record<string, Response> };
  if (response.$ref) response = document.components.responses[response.$ref.split('/').pop()!];
  const media = response.content!['application/json'];
  return name ? media.examples![name].value : media.example;
}

let harness: Harness;
let token: string;

beforeAll(async () => {
  harness = await startHarness();
  token = await (await harness.newApplication('examples')).token();
});

afterAll(async () => {
  await harness.close();
});

const call = (method: 'get' | 'post' | 'put', path: string, body?: object) =>
  request(harness.app)[method](path).set('Authorization', `Bearer ${token}`).send(body);

test.each([
  [
    'send: invalid fields',
    () => call('post', '/api/v1/notifications', {
      recipients: { user_ids: Array.from({ length: 501 }, (_, i) => `u${i}`) },
      notification: { title: 't'.repeat(256) },
    }),
    ['/api/v1/notifications', 'post', '422', 'fields'],
  ],
  [
    'send: nothing to show',
    () => call('post', '/api/v1/notifications', { recipients: { user_ids: ['u'] }, notification: {} }),
    ['/api/v1/notifications', 'post', '422', 'empty'],
  ],
  [
    'send: a localization keyed by a locale that is not a BCP 47 tag',
    () =>
      call('post', '/api/v1/notifications', {
        recipients: { user_ids: ['u'] },
        notification: { title: 'Your order has shipped', localizations: { fr_FR: { title: 'Votre commande est partie' } } },
      }),
    ['/api/v1/notifications', 'post', '422', 'bad-tag'],
  ],
  [
    'send: Idempotency-Key reused with another body',
    async () => {
      const post = (title: string) =>
        call('post', '/api/v1/notifications', { recipients: { user_ids: ['u'] }, notification: { title } }).set('Idempotency-Key', 'examples-reused');
      expect((await post('first')).status).toBe(202);
      return post('second');
    },
    ['/api/v1/notifications', 'post', '409'],
  ],
  ['list: limit', () => call('get', '/api/v1/notifications?limit=101'), ['/api/v1/notifications', 'get', '422', 'limit']],
  ['list: cursor', () => call('get', '/api/v1/notifications?cursor=0'), ['/api/v1/notifications', 'get', '422', 'cursor']],
  [
    'deliveries: cursor',
    () => call('get', '/api/v1/notifications/01960000-0000-7000-8000-000000000000/deliveries?cursor=0'),
    ['/api/v1/notifications/{notificationId}/deliveries', 'get', '422'],
  ],
  [
    'webhook deliveries: cursor',
    () => call('get', '/api/v1/webhooks/01960000-0000-7000-8000-000000000000/deliveries?cursor=0'),
    ['/api/v1/webhooks/{webhookId}/deliveries', 'get', '422'],
  ],
  [
    "a user's installations: user_id missing",
    () => call('get', '/api/v1/installations'),
    ['/api/v1/installations', 'get', '422'],
  ],
  [
    'installation: invalid fields',
    () => call('put', '/api/v1/installations/examples-1', { provider: { identifier: '' }, platform: 'windows' }),
    ['/api/v1/installations/{installationId}', 'put', '422', 'installation'],
  ],
  [
    'event: invalid fields',
    () =>
      call('post', '/api/v1/events', {
        event_id: 'not-a-uuid',
        delivery_id: 'd',
        installation_id: 'i',
        type: 'clicked',
        occurred_at: '2026-11-02T10:03:41Z',
      }),
    ['/api/v1/events', 'post', '422', 'event'],
  ],
  [
    'notification id not a UUID',
    () => call('get', '/api/v1/notifications/order-1042'),
    ['/api/v1/notifications/{notificationId}', 'get', '422'],
  ],
  [
    'installation: unknown query parameter',
    () => call('get', '/api/v1/installations/examples-1?verbose=1'),
    ['/api/v1/installations/{installationId}', 'get', '422'],
  ],
  ['unknown query parameter', () => call('get', '/healthz?verbose=1'), ['/healthz', 'get', '422']],
] as const)('%s', async (_name, send, [path, method, status, name]) => {
  const res = await send();
  expect(String(res.status)).toBe(status);
  expect(res.body).toEqual(example(path, method, status, name));
});
