// Localized content end to end: each installation receives the localization that matches its
// device locale (or the default content) through the real APNs and FCM clients, each delivery
// records it, localized pushes are cut to fit like the default content, and bad localizations are
// refused before anything is stored.
import request from 'supertest';
import { countNotifications } from './support/deliveries.ts';
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;
beforeAll(async () => {
  pipeline = await startPipeline();
});
afterAll(() => pipeline.close());
afterEach(() => {
  pipeline.apns.setRules([]);
  pipeline.fcm.setRules([]);
});

type Truncation = { title: number | null; body: number | null; dropped: string[]; badge: number | null } | null;
type DeliveryRow = { installation_id: string; state: string; reason: string | null; locale: string | null; truncation: Truncation; attempts: number };
type Alert = { title?: string; body?: string };

const apnsAlert = (token: string): Alert[] =>
  pipeline.apns.received.filter((push) => push.token === token).map((push) => (push.payload as { aps: { alert: Alert } }).aps.alert);
const fcmNotification = (token: string): Alert[] =>
  pipeline.fcm.received.filter((push) => push.token === token).map((push) => (push.message as { notification: Alert }).notification);
const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

async function deliveriesByInstallation(app: PipelineApplication, id: string): Promise<Record<string, DeliveryRow>> {
  const rows = (await app.deliveries(id)) as unknown as DeliveryRow[];
  return Object.fromEntries(rows.map((row) => [row.installation_id, row]));
}

const shipped = {
  title: 'Your order has shipped',
  body: 'It arrives on Thursday.',
  localizations: {
    fr: { title: 'Votre commande est partie', body: 'Elle arrive jeudi.' },
    'pt-BR': { title: 'Seu pedido foi enviado', body: 'Chega na quinta-feira.' },
    // A body only: the title is the default's.
    de: { body: 'Sie kommt am Donnerstag an.' },
  },
};

test('each device receives the localization of its locale on APNs and FCM, and each delivery records it', async () => {
  const app = await pipeline.newApplication();
  // [installation, device.locale, localization expected, title, body]
  const devices: [string, string | null, string | null, string, string][] = [
    ['fr', 'fr_FR', 'fr', 'Votre commande est partie', 'Elle arrive jeudi.'],
    ['fr-ca', 'fr-CA', 'fr', 'Votre commande est partie', 'Elle arrive jeudi.'],
    ['pt-br', 'pt_BR', 'pt-BR', 'Seu pedido foi enviado', 'Chega na quinta-feira.'],
    ['de-at', 'de-AT', 'de', 'Your order has shipped', 'Sie kommt am Donnerstag an.'],
    ['en', 'en_US', null, 'Your order has shipped', 'It arrives on Thursday.'],
    ['none', null, null, 'Your order has shipped', 'It arrives on Thursday.'],
  ];
  for (const [name, locale] of devices) {
    const device = locale === null ? {} : { device: { locale } };
    await app.register(`${name}-ios`, ios(`l10n-${name}-01`, 'lou', device));
    await app.register(`${name}-android`, android(`fcm-l10n-${name}-02`, 'lou', device));
  }
  // A device that is skipped is sent nothing, in no language.
  await app.register('fr-denied', ios('l10n-denied-03', 'lou', { permission: 'denied', device: { locale: 'fr_FR' } }));

  const id = await app.send({ recipients: { user_ids: ['lou'] }, notification: shipped });
  const notification = await app.settled(id);
  expect(notification.status).toBe('completed');
  expect(notification.statistics).toMatchObject({ installations: 13, accepted: 12, skipped: 1, failed: 0 });
  // The notification is stored and shown as sent, localizations included.
  expect(notification.notification).toEqual({ ...shipped, image_url: null, action_url: null });

  const deliveries = await deliveriesByInstallation(app, id);
  for (const [name, , locale, title, body] of devices) {
    expect({ name, alert: apnsAlert(`l10n-${name}-01`) }).toEqual({ name, alert: [{ title, body }] });
    expect({ name, notification: fcmNotification(`fcm-l10n-${name}-02`) }).toEqual({ name, notification: [{ title, body }] });
    for (const platform of ['ios', 'android']) {
      const delivery = deliveries[`${name}-${platform}`];
      expect({ name, platform, state: delivery.state, locale: delivery.locale, truncation: delivery.truncation }).toEqual({
        name,
        platform,
        state: 'accepted',
        locale,
        truncation: null,
      });
    }
  }
  expect(deliveries['fr-denied']).toMatchObject({ state: 'skipped', reason: 'permission_denied', locale: null });
  expect(apnsAlert('l10n-denied-03')).toEqual([]);
});

test('a device locale changed after the send does not change what its pending retry pushes', async () => {
  pipeline.apns.setRules([{ prefix: 'l10n-retry-', reason: 'ServiceUnavailable', retryAfter: 1 }]);
  const app = await pipeline.newApplication();
  await app.register('retry-ios', ios('l10n-retry-01', 'rita', { device: { locale: 'pt-BR' } }));
  const id = await app.send({ recipients: { user_ids: ['rita'] }, notification: shipped });
  await waitFor(() => apnsAlert('l10n-retry-01').length, (pushes) => pushes > 0, 10_000);
  // Registered again meanwhile, in French: the retry still carries what the fanout chose and recorded.
  await app.register('retry-ios', ios('l10n-retry-01', 'rita', { device: { locale: 'fr_FR' } }));
  pipeline.apns.setRules([]);

  await app.settled(id);
  const [delivery] = (await app.deliveries(id)) as unknown as DeliveryRow[];
  expect([delivery.state, delivery.attempts, delivery.locale]).toEqual(['accepted', 2, 'pt-BR']);
  const pushed = { title: 'Seu pedido foi enviado', body: 'Chega na quinta-feira.' };
  expect(apnsAlert('l10n-retry-01')).toEqual([pushed, pushed]);
});

test('a localized push skipped at send time (its installation deleted while it waited for a retry) records no locale', async () => {
  pipeline.apns.setRules([{ prefix: 'l10n-gone-', reason: 'ServiceUnavailable', retryAfter: 1 }]);
  const app = await pipeline.newApplication();
  await app.register('gone-ios', ios('l10n-gone-01', 'gus', { device: { locale: 'fr_FR' } }));
  const id = await app.send({ recipients: { user_ids: ['gus'] }, notification: shipped });
  await waitFor(() => apnsAlert('l10n-gone-01').length, (pushes) => pushes > 0, 10_000);
  expect(((await app.deliveries(id)) as unknown as DeliveryRow[])[0]).toMatchObject({ state: 'pending', locale: 'fr' });
  await request(pipeline.harness.app).delete('/api/v1/installations/gone-ios').set('Authorization', `Bearer ${app.client}`).expect(204);
  pipeline.apns.setRules([]);

  await app.settled(id);
  const [delivery] = (await app.deliveries(id)) as unknown as DeliveryRow[];
  expect(delivery).toMatchObject({ state: 'skipped', reason: 'installation_deleted', locale: null, truncation: null });
});

test('a localization too long for a provider is cut like the default content, and its deliveries record their own cut', async () => {
  const app = await pipeline.newApplication();
  await app.register('long-fr-ios', ios('l10n-long-fr-01', 'lena', { device: { locale: 'fr_FR' } }));
  await app.register('long-fr-android', android('fcm-l10n-long-fr-02', 'lena', { device: { locale: 'fr-FR' } }));
  await app.register('long-ja-ios', ios('l10n-long-ja-01', 'lena', { device: { locale: 'ja_JP' } }));
  await app.register('long-ja-android', android('fcm-l10n-long-ja-02', 'lena', { device: { locale: 'ja-JP' } }));
  await app.register('long-en-ios', ios('l10n-long-en-01', 'lena', { device: { locale: 'en_GB' } }));
  // 4096 code points of two bytes each (French), and of three bytes each (Japanese); the default is short.
  const french = 'é'.repeat(4096);
  const japanese = '漢'.repeat(4000);
  const id = await app.send({
    recipients: { user_ids: ['lena'] },
    notification: { title: 'News', body: 'Short', localizations: { fr: { title: 'Nouvelles', body: french }, ja: { body: japanese } } },
  });
  expect((await app.settled(id)).statistics).toMatchObject({ accepted: 5, failed: 0 });
  const deliveries = await deliveriesByInstallation(app, id);

  const cases: [string, string, string, string, Alert[]][] = [
    ['long-fr-ios', 'fr', 'Nouvelles', french, apnsAlert('l10n-long-fr-01')],
    ['long-fr-android', 'fr', 'Nouvelles', french, fcmNotification('fcm-l10n-long-fr-02')],
    ['long-ja-ios', 'ja', 'News', japanese, apnsAlert('l10n-long-ja-01')],
    ['long-ja-android', 'ja', 'News', japanese, fcmNotification('fcm-l10n-long-ja-02')],
  ];
  for (const [installation, locale, title, body, [pushed]] of cases) {
    const delivery = deliveries[installation];
    expect({ installation, locale: delivery.locale, truncation: delivery.truncation }).toEqual({
      installation,
      locale,
      truncation: { title: null, body: expect.any(Number), dropped: [], badge: null },
    });
    // What is recorded is what was pushed: the localization's own body, cut where recorded.
    expect(pushed.title).toBe(title);
    expect(pushed.body).toBe(`${Array.from(body).slice(0, delivery.truncation!.body!).join('')}…`);
  }
  // Each localization is measured on its own text: three-byte characters keep fewer.
  expect(deliveries['long-ja-ios'].truncation!.body).toBeLessThan(deliveries['long-fr-ios'].truncation!.body!);
  for (const push of pipeline.apns.received.filter((p) => p.token?.startsWith('l10n-long-'))) expect(bytes(push.payload)).toBeLessThanOrEqual(4096);
  for (const push of pipeline.fcm.received.filter((p) => p.token?.startsWith('fcm-l10n-long-'))) {
    const message = push.message as { data: unknown; notification: unknown };
    expect(bytes({ data: message.data, notification: message.notification })).toBeLessThanOrEqual(4096);
  }
  // The default content fits whole.
  expect(deliveries['long-en-ios']).toMatchObject({ locale: null, truncation: null });
  expect(apnsAlert('l10n-long-en-01')).toEqual([{ title: 'News', body: 'Short' }]);
});

describe('refused localizations', () => {
  let app: PipelineApplication;
  beforeAll(async () => {
    app = await pipeline.newApplication();
  });
  const send = (notification: object, extra: object = {}) =>
    request(pipeline.harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send({ recipients: { user_ids: ['u'] }, notification, ...extra });
  const tags = (count: number) =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`x${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + Math.floor(i / 26))}`, { title: 'T' }]));

  test.each<[string, object, Record<string, string[]>]>([
    [
      'an underscore tag',
      { title: 'Hi', localizations: { fr_FR: { title: 'Salut' } } },
      { 'notification.localizations.fr_FR': ['The notification.localizations key "fr_FR" must be a well-formed BCP 47 language tag (for example fr, pt-BR or zh-Hant-TW).'] },
    ],
    [
      'a private-use tag, a grandfathered tag and a dangling separator',
      { title: 'Hi', localizations: { 'x-pirate': {}, 'i-klingon': {}, 'en-': {}, fr: {} } },
      {
        'notification.localizations.x-pirate': ['The notification.localizations key "x-pirate" must be a well-formed BCP 47 language tag (for example fr, pt-BR or zh-Hant-TW).'],
        'notification.localizations.i-klingon': ['The notification.localizations key "i-klingon" must be a well-formed BCP 47 language tag (for example fr, pt-BR or zh-Hant-TW).'],
        'notification.localizations.en-': ['The notification.localizations key "en-" must be a well-formed BCP 47 language tag (for example fr, pt-BR or zh-Hant-TW).'],
      },
    ],
    [
      'more than 50 localizations',
      { title: 'Hi', localizations: tags(51) },
      { 'notification.localizations': ['The notification.localizations field must not have more than 50 fields.'] },
    ],
    [
      'a title of 256 characters',
      { title: 'Hi', localizations: { fr: { title: 't'.repeat(256) } } },
      { 'notification.localizations.fr.title': ['The notification.localizations.fr.title field must not be longer than 255 characters.'] },
    ],
    [
      'a body of 4097 characters',
      { title: 'Hi', localizations: { 'pt-BR': { body: 'b'.repeat(4097) } } },
      { 'notification.localizations.pt-BR.body': ['The notification.localizations.pt-BR.body field must not be longer than 4096 characters.'] },
    ],
    [
      'a URL in a localization',
      { title: 'Hi', localizations: { de: { image_url: 'https://cdn.example.com/de.png' } } },
      { 'notification.localizations.de.image_url': ['The notification.localizations.de.image_url field is not allowed.'] },
    ],
    [
      'a tag given twice in other letter case',
      { title: 'Hi', localizations: { 'zh-Hant': { title: '你好' }, 'ZH-HANT': { title: '您好' } } },
      { 'notification.localizations.ZH-HANT': ['The tag "ZH-HANT" is "zh-Hant" in other letter case: tags are case-insensitive, so each may be given once.'] },
    ],
  ])('%s is 422 naming the field', async (_name, notification, errors) => {
    const before = await countNotifications(pipeline.harness.orm, app.id);
    const res = await send(notification);
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual(errors);
    expect(res.body.message).toMatch(/^The /);
    expect(await countNotifications(pipeline.harness.orm, app.id)).toBe(before);
  });

  test('localizations without a default title or body are 422, however much data there is', async () => {
    const res = await send({ localizations: { fr: { title: 'Salut' } } }, { data: { sync: 'inbox' } });
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual({
      'notification.localizations': [
        'The notification must have a title or a body of its own to have localizations: devices that match none of them receive it, and a localization falls back to it field by field.',
      ],
    });
  });

  test('at the limits: 50 localizations, a 255-character title and a 4096-character body, tags in any letter case, an empty one', async () => {
    const localizations = { ...tags(48), 'ZH-hant-tw': { title: 't'.repeat(255) }, 'en-GB-oxendict': { body: 'b'.repeat(4096) } };
    expect(Object.keys(localizations)).toHaveLength(50);
    const res = await send({ title: 'Hi', localizations });
    expect(res.status).toBe(202);
    expect(res.body.data.notification.localizations).toEqual(localizations);
    // No localizations at all is the default content, shown as {}.
    const none = await send({ title: 'Hi', localizations: {} });
    expect(none.status).toBe(202);
    expect(none.body.data.notification.localizations).toEqual({});
  });
});

describe('an Idempotency-Key and localizations', () => {
  test('the same localizations, in any key order, replay; other localizations with the same key are 409', async () => {
    const app = await pipeline.newApplication();
    const send = (notification: object) =>
      request(pipeline.harness.app)
        .post('/api/v1/notifications')
        .set('Authorization', `Bearer ${app.server}`)
        .set('Idempotency-Key', 'localized-send-1')
        .send({ recipients: { user_ids: ['ida'] }, notification });
    const first = await send(shipped);
    expect(first.status).toBe(202);
    expect(first.body.meta.accepted).toBe(true);

    const reordered = { localizations: { de: shipped.localizations.de, 'pt-BR': shipped.localizations['pt-BR'], fr: shipped.localizations.fr }, body: shipped.body, title: shipped.title };
    const replay = await send(reordered);
    expect(replay.status).toBe(202);
    expect(replay.body.meta.accepted).toBe(false);
    expect(replay.body.data.id).toBe(first.body.data.id);

    for (const changed of [
      { ...shipped, localizations: { ...shipped.localizations, fr: { title: 'Votre commande est en route', body: 'Elle arrive jeudi.' } } },
      { ...shipped, localizations: { ...shipped.localizations, it: { title: 'Il tuo ordine è partito' } } },
      { ...shipped, localizations: { fr: shipped.localizations.fr } },
      { title: shipped.title, body: shipped.body },
    ]) {
      const conflict = await send(changed);
      expect(conflict.status).toBe(409);
      expect(conflict.body).toEqual({ message: 'This Idempotency-Key was already used for a different request.' });
    }
    expect(await countNotifications(pipeline.harness.orm, app.id)).toBe(1);
  });
});
