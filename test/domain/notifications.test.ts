// The request hash an Idempotency-Key is checked against, without I/O: what a request means
// decides it, not how its JSON is written. And the send's rules the schema states too: something
// to show, localizations with a default, exactly one kind of recipients.
import {
  localizationsWithoutDefaultMessage,
  oneRecipientKindMessage,
  recipientsKind,
  requestHash,
  sendRuleViolations,
  type SendRequest,
} from '../../src/domain/notifications.ts';

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
    ['the order of the recipients', (r) => r.recipients.user_ids!.reverse()],
    ['one more recipient', (r) => r.recipients.user_ids!.push('user-3')],
    ['an audience instead of user ids', (r) => (r.recipients = { audience: { all: true } })],
    ['a key added', (r) => (r.data!.extra = true)],
    ['a key removed', (r) => delete r.options!.priority],
    ['a localization added', (r) => (r.notification.localizations = { fr: { title: 'Commande expédiée' } })],
  ])('any change of value changes it: %s', (_change, change) => {
    const changed = structuredClone(send);
    change(changed);
    expect(requestHash(changed)).not.toBe(requestHash(send));
  });
});

describe('the send rules of localizations', () => {
  const localized = (notification: SendRequest['notification']): SendRequest => ({ recipients: { user_ids: ['u'] }, notification });

  test('localizations need a default title or body, which devices without a match receive', () => {
    expect(sendRuleViolations(localized({ localizations: { fr: { title: 'Bonjour' } } }))).toEqual({ notification: [expect.any(String)] });
    expect(sendRuleViolations({ ...localized({ localizations: { fr: { title: 'Bonjour' } } }), data: { sync: 1 } })).toEqual({
      'notification.localizations': [localizationsWithoutDefaultMessage],
    });
    expect(sendRuleViolations({ ...localized({ localizations: {} }), data: { sync: 1 } })).toEqual({});
    expect(sendRuleViolations(localized({ body: 'Hello', localizations: { fr: { title: 'Bonjour' } } }))).toEqual({});
  });

  test('a tag given twice in other letter case is refused, naming the later one', () => {
    const problems = sendRuleViolations(localized({ title: 'Hi', localizations: { 'pt-BR': { title: 'Oi' }, fr: {}, 'PT-br': { title: 'Olá' } } }));
    expect(Object.keys(problems)).toEqual(['notification.localizations.PT-br']);
    expect(problems['notification.localizations.PT-br']).toEqual([
      'The tag "PT-br" is "pt-BR" in other letter case: tags are case-insensitive, so each may be given once.',
    ]);
  });
});

describe('recipientsKind', () => {
  test('names the one kind given; none is the spec\'s user_ids (the schema requires them then)', () => {
    expect(recipientsKind({ user_ids: ['u'] })).toBe('user_ids');
    expect(recipientsKind({ audience: { all: true } })).toBe('audience');
    expect(recipientsKind({ segment: 'pro' })).toBe('segment');
    expect(recipientsKind({ installation_ids: ['phone-1'] })).toBe('installation_ids');
    expect(recipientsKind({})).toBe('user_ids');
  });

  test('more than one kind is null, and the send rules refuse it naming recipients', () => {
    for (const recipients of [
      { user_ids: ['u'], installation_ids: ['i'] },
      { audience: { all: true as const }, installation_ids: ['i'] },
      { segment: 'pro', installation_ids: ['i'] },
      { user_ids: ['u'], segment: 'pro' },
    ]) {
      expect(recipientsKind(recipients)).toBeNull();
      expect(sendRuleViolations({ recipients, notification: { title: 'Hi' } })).toEqual({ recipients: [oneRecipientKindMessage] });
    }
    expect(sendRuleViolations({ recipients: { installation_ids: ['i'] }, notification: { title: 'Hi' } })).toEqual({});
  });
});
