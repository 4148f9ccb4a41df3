// The request hash an Idempotency-Key is checked against, without I/O: what a request means
// decides it, not how its JSON is written.
import { requestHash, type SendRequest } from '../../src/domain/notifications.ts';

const send: SendRequest = {
  recipients: { user_ids: ['user-1', 'user-2'] },
  notification: { title: 'Order shipped', body: 'On its way', image_url: null, action_url: 'app://orders/1' },
  data: { order: { id: 1042, lines: [{ sku: 'a', quantity: 2 }] } },
  options: { ttl: 3600, priority: 'high', platform_overrides: { ios: { aps: { sound: 'bell.caf' } } } },
};

describe('requestHash', () => {
  test('is a SHA-256 hex digest, the same for the same request', () => {
    expect(requestHash(send)).toMatch(/^[0-9a-f]{64}$/);
    expect(requestHash(structuredClone(send))).toBe(requestHash(send));
  });

  test('key order does not change it, at any depth', () => {
    const reordered: SendRequest = {
      options: { platform_overrides: { ios: { aps: { sound: 'bell.caf' } } }, priority: 'high', ttl: 3600 },
      data: { order: { lines: [{ quantity: 2, sku: 'a' }], id: 1042 } },
      notification: { action_url: 'app://orders/1', image_url: null, body: 'On its way', title: 'Order shipped' },
      recipients: { user_ids: ['user-1', 'user-2'] },
    };
    expect(JSON.stringify(reordered)).not.toBe(JSON.stringify(send));
    expect(requestHash(reordered)).toBe(requestHash(send));
  });

  test.each<[string, (request: SendRequest) => void]>([
    ['a title', (r) => (r.notification.title = 'Order delivered')],
    ['a null becoming a value', (r) => (r.notification.image_url = 'https://cdn.example.com/a.png')],
    ['a number for the same digits as a string', (r) => ((r.data!.order as { id: unknown }).id = '1042')],
    ['a nested value in data', (r) => ((r.data!.order as { lines: { quantity: number }[] }).lines[0].quantity = 3)],
    ['an option', (r) => (r.options!.ttl = 3601)],
    ['a platform override', (r) => (r.options!.platform_overrides!.ios = { aps: { sound: 'default' } })],
    ['the order of the recipients', (r) => r.recipients.user_ids.reverse()],
    ['one more recipient', (r) => r.recipients.user_ids.push('user-3')],
    ['a key added', (r) => (r.data!.extra = true)],
    ['a key removed', (r) => delete r.options!.priority],
  ])('any change of value changes it: %s', (_change, change) => {
    const changed = structuredClone(send);
    change(changed);
    expect(requestHash(changed)).not.toBe(requestHash(send));
  });
});
