// What each provider receives for a push and how it is cut to fit their 4096-byte limit, without
// I/O: how content and options map onto APNs and FCM, what is kept, where the cut falls, what is
// dropped, and what is still refused at send time.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { Truncation } from '../../src/db/entities.ts';
import type { Platform } from '../../src/domain/platforms.ts';
import {
  apnsPayload,
  apnsPayloads,
  contentFor,
  ellipsis,
  fcmMessage,
  fcmMessages,
  fitToPlatform,
  payloadBytes,
  payloadLimits,
  payloadProblems,
  type PushContent,
} from '../../src/domain/payloads.ts';

const platforms: Platform[] = ['ios', 'android'];
const limit = 4096;
const segmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });
const graphemes = (text: string) => Array.from(segmenter.segment(text), (segment) => segment.segment);
const codePoints = (text: string) => Array.from(text).length;
const url = (length: number) => {
  const prefix = 'https://cdn.example.com/';
  return prefix + 'a'.repeat(length - prefix.length);
};
const content = (notification: PushContent['notification'], extra: Partial<PushContent> = {}): PushContent => ({
  notification,
  ...extra,
});
const atLimits = content({ title: 't'.repeat(255), body: 'b'.repeat(4096), image_url: url(2048), action_url: url(2048) });

/**
 * Everything a cut must satisfy: it fits; each cut text is a grapheme prefix of the original plus
 * "…", of the recorded length in code points; it is the longest such prefix (one grapheme more
 * would not fit); what was not cut or dropped is as sent.
 */
function expectValidCut(original: PushContent, platform: Platform): { fitted: PushContent; truncation: Truncation } {
  const { content: fitted, truncation } = fitToPlatform(original, platform);
  expect(truncation).not.toBeNull();
  expect(payloadBytes(fitted, platform)).toBeLessThanOrEqual(payloadLimits[platform]);
  for (const field of ['title', 'body'] as const) {
    const whole = original.notification[field];
    const sent = fitted.notification[field];
    const kept = truncation![field];
    if (kept === null) {
      expect(sent).toBe(whole);
      continue;
    }
    expect(sent!.endsWith(ellipsis)).toBe(true);
    const prefix = sent!.slice(0, -ellipsis.length);
    expect(codePoints(prefix)).toBe(kept);
    const wholeGraphemes = graphemes(whole!);
    const keptGraphemes = graphemes(prefix);
    // A grapheme prefix: never inside a surrogate pair, a combining sequence or a ZWJ sequence.
    expect(keptGraphemes.every((grapheme, index) => grapheme === wholeGraphemes[index])).toBe(true);
    expect(prefix.isWellFormed()).toBe(true);
    expect(keptGraphemes.length).toBeLessThan(wholeGraphemes.length);
    // The longest prefix that fits: one more grapheme would not. (A body cut to "…" to make room
    // for the title may have room for more next to the title as cut: the title comes first.)
    const longer = `${wholeGraphemes.slice(0, keptGraphemes.length + 1).join('')}${ellipsis}`;
    const oneMore = { ...fitted, notification: { ...fitted.notification, [field]: longer } };
    const titleFirst = field === 'body' && truncation!.title !== null;
    if (keptGraphemes.length + 1 < wholeGraphemes.length && !titleFirst) {
      expect(payloadBytes(oneMore, platform)).toBeGreaterThan(payloadLimits[platform]);
    }
  }
  for (const field of ['image_url', 'action_url'] as const) {
    if (truncation!.dropped.includes(field)) expect(fitted.notification[field]).toBeNull();
    else expect(fitted.notification[field]).toBe(original.notification[field]);
  }
  expect(fitted.data).toBe(original.data);
  expect(fitted.options).toBe(original.options);
  return { fitted, truncation: truncation! };
}

describe('fitToPlatform', () => {
  test.each(platforms)('a push that fits is sent whole: truncation null, content untouched (%s)', (platform) => {
    const small = content({ title: 'Hello', body: 'b'.repeat(3000), image_url: 'https://cdn.example.com/a.png', action_url: 'app://x' });
    const fit = fitToPlatform(small, platform);
    expect(fit.truncation).toBeNull();
    expect(fit.content).toBe(small);
  });

  test.each(platforms)('a push of exactly 4096 bytes is sent whole (%s)', (platform) => {
    const base = payloadBytes(content({ title: 'Hello', body: '' }), platform);
    const exact = content({ title: 'Hello', body: 'b'.repeat(limit - base) });
    expect(payloadBytes(exact, platform)).toBe(limit);
    expect(fitToPlatform(exact, platform).truncation).toBeNull();
    const over = content({ title: 'Hello', body: 'b'.repeat(limit - base + 1) });
    expect(fitToPlatform(over, platform).truncation).toEqual({ title: null, body: limit - base - 3, dropped: [], badge: null });
  });

  test.each(platforms)('an ASCII body of 4096 characters is cut, the title kept whole (%s)', (platform) => {
    const { fitted, truncation } = expectValidCut(content({ title: 'Hello', body: 'b'.repeat(4096) }), platform);
    expect(truncation).toEqual({ title: null, body: expect.any(Number), dropped: [], badge: null });
    expect(truncation.body).toBeGreaterThan(3800);
    expect(fitted.notification.title).toBe('Hello');
    // Nothing wasted: the payload is within the 3 bytes of one ellipsis of the limit.
    expect(payloadBytes(fitted, platform)).toBeGreaterThan(limit - 3);
  });

  test.each(platforms)('1500 CJK characters (4500 bytes) are cut at a character (%s)', (platform) => {
    const { truncation } = expectValidCut(content({ title: 'Hello', body: '漢字'.repeat(750) }), platform);
    expect(truncation.body).toBeGreaterThan(1250);
    expect(truncation.body).toBeLessThan(1500);
  });

  test.each(platforms)('emoji are never split: surrogate pairs and ZWJ sequences stay whole (%s)', (platform) => {
    const family = '👨‍👩‍👧‍👦'; // 7 code points, 11 UTF-16 units, 25 bytes
    const { truncation: families } = expectValidCut(content({ title: 'Hi', body: family.repeat(585) }), platform);
    expect(families.body! % 7).toBe(0);
    const mixed = 'a😀🇫🇷👍🏽'.repeat(400); // ASCII, a surrogate pair, a flag, a skin tone modifier
    expectValidCut(content({ title: 'Hi', body: mixed }), platform);
    // An odd offset: a cut by code units would split the last surrogate pair.
    expectValidCut(content({ title: 'Hi', body: `x${'😀'.repeat(1100)}` }), platform);
  });

  test.each(platforms)('combining sequences stay whole: e + U+0301 is one character to cut (%s)', (platform) => {
    const { fitted, truncation } = expectValidCut(content({ title: 'Hi', body: 'e\u0301'.repeat(2048) }), platform);
    expect(truncation.body! % 2).toBe(0);
    expect(fitted.notification.body!.endsWith(`e\u0301${ellipsis}`)).toBe(true);
  });

  test.each(platforms)('JSON escapes are measured as serialized: quotes, backslashes, control characters (%s)', (platform) => {
    for (const body of ['"\\'.repeat(2048), '\n\u0001'.repeat(2048), `${'a'.repeat(1000)}${'\u0007'.repeat(3096)}`]) {
      const { fitted, truncation } = expectValidCut(content({ title: '"quoted" \\ title', body }), platform);
      expect(truncation.title).toBeNull();
      // Character arithmetic would keep far more than fits.
      expect(payloadBytes(fitted, platform)).toBeLessThanOrEqual(limit);
    }
  });

  test.each(platforms)('the title is cut only when the body cut to "…" still does not fit (%s)', (platform) => {
    const data = { blob: 'x'.repeat(3800) };
    const { fitted, truncation } = expectValidCut(content({ title: 'T'.repeat(255), body: 'b'.repeat(4096) }, { data }), platform);
    expect(truncation.body).toBe(0);
    expect(fitted.notification.body).toBe(ellipsis);
    expect(truncation.title).toBeGreaterThan(0);
    expect(truncation.title).toBeLessThan(255);
    expect(truncation.dropped).toEqual([]);
  });

  test.each(platforms)('all four fields at their limits: image_url is dropped, then the text gets the room back (%s)', (platform) => {
    const { fitted, truncation } = expectValidCut(atLimits, platform);
    expect(truncation).toEqual({ title: null, body: expect.any(Number), dropped: ['image_url'], badge: null });
    expect(truncation.body).toBeGreaterThan(1500);
    expect(fitted.notification.action_url).toBe(atLimits.notification.action_url);
    if (platform === 'ios') {
      const payload = apnsPayload(fitted, { deliveryId: 'd', notificationId: 'n' }) as { aps: Record<string, unknown>; herald: Record<string, unknown> };
      expect(payload.herald.image_url).toBeUndefined();
      expect(payload.aps['mutable-content']).toBeUndefined();
    } else {
      const message = fcmMessage(fitted, { deliveryId: 'd', notificationId: 'n' }) as { notification: Record<string, unknown> };
      expect(message.notification.imageUrl).toBeUndefined();
    }
  });

  test.each(platforms)('action_url is dropped after image_url when the text still cannot fit (%s)', (platform) => {
    const urls = content(atLimits.notification, { data: { blob: 'x'.repeat(1900) } });
    const { fitted, truncation } = expectValidCut(urls, platform);
    expect(truncation.dropped).toEqual(['image_url', 'action_url']);
    expect(fitted.notification.title).toBe(atLimits.notification.title);
    expect(truncation.body).toBeGreaterThan(1000);
  });

  test.each(platforms)('only the URLs that exist are dropped, and the text is not cut when dropping one is enough (%s)', (platform) => {
    const data = { blob: 'x'.repeat(2000) };
    const { truncation } = expectValidCut(content({ title: 'Hi', body: 'Short', action_url: url(2048) }, { data }), platform);
    expect(truncation).toEqual({ title: null, body: null, dropped: ['action_url'], badge: null });
  });

  test('the cut is per platform: each is measured on its own payload', () => {
    // FCM carries non-string data as JSON inside a string: every quote weighs twice as much there.
    const data = { nested: { text: '"'.repeat(800) } };
    const push = content({ title: 'Hi', body: 'b'.repeat(1500) }, { data });
    expect(fitToPlatform(push, 'ios').truncation).toBeNull();
    expect(fitToPlatform(push, 'android').truncation).toEqual({ title: null, body: expect.any(Number), dropped: [], badge: null });
  });

  test('a data-only push with URLs too large drops them and cuts nothing', () => {
    const push = content({ image_url: url(2048), action_url: url(2048) }, { data: { sync: 'inbox' } });
    expect(fitToPlatform(push, 'ios').truncation).toEqual({ title: null, body: null, dropped: ['image_url'], badge: null });
  });

  test('deterministic: the fanout and the deliver job get the same content', () => {
    for (const platform of platforms) expect(fitToPlatform(atLimits, platform)).toEqual(fitToPlatform(atLimits, platform));
  });

  test('whatever the mix, a push the send rules accept always fits after the cut', () => {
    const texts = ['b', '漢', '😀', '👨‍👩‍👧‍👦', 'e\u0301', '"', '\\', '\u0001', '€', 'ok '];
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    // Half the time near the maximum, otherwise anywhere up to it.
    const size = (max: number) => (random(2) === 0 ? max - random(Math.ceil(max / 8)) : random(max + 1));
    const text = (maxCodePoints: number) => {
      let out = '';
      let length = 0;
      const target = size(maxCodePoints);
      while (length < target) {
        const piece = texts[random(texts.length)];
        if (length + codePoints(piece) > maxCodePoints) break;
        out += piece;
        length += codePoints(piece);
      }
      return out;
    };
    let checked = 0;
    const cuts = new Set<string>();
    for (let i = 0; i < 100; i += 1) {
      const push = content(
        {
          title: random(5) === 0 ? null : text(255),
          body: random(5) === 0 ? null : text(4096),
          image_url: random(3) === 0 ? null : url(Math.max(30, size(2048))),
          action_url: random(3) === 0 ? null : `app://${'y'.repeat(size(2042))}`,
        },
        { data: { blob: 'x'.repeat(size(3700)) }, options: { sound: 'default', badge: 3 } },
      );
      if (Object.keys(payloadProblems(push)).length > 0) continue;
      checked += 1;
      for (const platform of platforms) {
        const fit = fitToPlatform(push, platform);
        expect(payloadBytes(fit.content, platform)).toBeLessThanOrEqual(limit);
        if (!fit.truncation) continue;
        expectValidCut(push, platform);
        if (fit.truncation.body !== null) cuts.add('body');
        if (fit.truncation.title !== null) cuts.add('title');
        for (const dropped of fit.truncation.dropped) cuts.add(dropped);
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect([...cuts].sort()).toEqual(['action_url', 'body', 'image_url', 'title']);
  });
});

describe('payloadProblems', () => {
  test('content at every field limit has no problem: it is cut, not refused', () => {
    expect(payloadProblems(atLimits)).toEqual({});
    expect(payloadProblems(content({ title: 'Hello', body: '漢'.repeat(1500) }))).toEqual({});
  });

  test('data too large alone is refused, keyed data, naming the provider and the byte counts', () => {
    const problems = payloadProblems(content({ title: 'Hi', body: 'Body', image_url: url(2048) }, { data: { blob: 'x'.repeat(5000) } }));
    expect(Object.keys(problems)).toEqual(['data']);
    expect(problems.data).toEqual([
      expect.stringMatching(/^The APNs payload would be \d+ bytes with the title and body cut to "…" and without the URLs; the limit is 4096\.$/),
      expect.stringMatching(/^The FCM payload would be \d+ bytes with the title and body cut to "…" and without the URLs; the limit is 4096\.$/),
    ]);
  });

  test('the byte count is of the smallest push: title and body as "…", no URLs', () => {
    const push = content({ title: 'Hi', body: 'Body', image_url: url(2048), action_url: url(2048) }, { data: { blob: 'x'.repeat(5000) } });
    const smallest = content({ title: ellipsis, body: ellipsis, image_url: null, action_url: null }, { data: push.data });
    expect(payloadProblems(push).data[0]).toContain(`would be ${payloadBytes(smallest, 'ios')} bytes`);
  });

  test('only the provider whose limit is exceeded is named', () => {
    // Non-string data is JSON inside an FCM string: the escapes double there.
    const fcmOnly = payloadProblems(content({ title: 'Hi' }, { data: { nested: { text: '"'.repeat(1500) } } }));
    expect(fcmOnly.data).toEqual([expect.stringMatching(/^The FCM payload would be \d+ bytes/)]);
    const apnsOnly = payloadProblems(content({ title: 'Hi' }, { options: { platform_overrides: { ios: { extra: 'x'.repeat(4500) } } } }));
    expect(apnsOnly.data).toEqual([expect.stringMatching(/^The APNs payload would be \d+ bytes/)]);
  });

  test("the document's too-large example is the server's exact text", () => {
    const document = parse(readFileSync(new URL('../../openapi/openapi.yaml', import.meta.url), 'utf8'));
    const example = document.paths['/api/v1/notifications'].post.responses['422'].content['application/json'].examples['too-large'].value;
    const base = payloadBytes(content({ title: ellipsis, body: ellipsis }, { data: { blob: '' } }), 'ios');
    const push = content({ title: 'Hello', body: 'Body' }, { data: { blob: 'x'.repeat(5120 - base) } });
    const [apns] = payloadProblems(push).data;
    expect(example).toEqual({ message: apns, errors: { data: [apns] } });
  });

  test.each([
    ['ios', 'APNs'],
    ['android', 'FCM'],
  ] as const)('every localization is measured: one that adds a title the default lacks can be the one over the %s limit', (platform, provider) => {
    // The default has a body only, at the limit once cut; "fr" adds a title: an "…" more.
    const base = payloadBytes(content({ body: ellipsis }, { data: { blob: '' } }), platform);
    const data = { blob: 'x'.repeat(limit - base) };
    const named = (problems: Record<string, string[]>) => (problems.data ?? []).filter((message) => message.startsWith(`The ${provider} `));
    expect(named(payloadProblems(content({ body: 'Body' }, { data })))).toEqual([]);
    const localized = content({ body: 'Body', localizations: { de: { body: 'Text' }, fr: { title: 'Titre' } } }, { data });
    expect(named(payloadProblems(localized))).toEqual([
      `The ${provider} payload of the "fr" localization would be ${limit + payloadBytes(content({ title: ellipsis, body: ellipsis }), platform) - payloadBytes(content({ body: ellipsis }), platform)} bytes with the title and body cut to "…" and without the URLs; the limit is 4096.`,
    ]);
    // Localizations that only replace the default's texts weigh what it weighs once cut.
    expect(named(payloadProblems(content({ body: 'Body', localizations: { de: { body: 'x'.repeat(4096) } } }, { data })))).toEqual([]);
  });

  test('reserved data keys are still refused', () => {
    expect(Object.keys(payloadProblems(content({ title: 'Hi' }, { data: { aps: 1, herald_x: 1, from: 1, 'gcm.x': 1 } })))).toEqual([
      'data.aps',
      'data.herald_x',
      'data.from',
      'data.gcm.x',
    ]);
  });
});

describe('contentFor', () => {
  const push = content(
    {
      title: 'Order shipped',
      body: 'On its way',
      image_url: 'https://cdn.example.com/a.png',
      action_url: 'app://orders/1',
      localizations: { fr: { title: 'Commande expédiée', body: 'En route' }, de: { body: 'Unterwegs' }, es: { title: null, body: '' } },
    },
    { data: { order: 1 }, options: { ttl: 60 } },
  );

  test("a localization's title and body replace the default's; the URLs, data and options stay; the localizations are not pushed", () => {
    expect(contentFor(push, 'fr')).toEqual({
      notification: { title: 'Commande expédiée', body: 'En route', image_url: 'https://cdn.example.com/a.png', action_url: 'app://orders/1' },
      data: { order: 1 },
      options: { ttl: 60 },
    });
  });

  test('a field the localization leaves absent, null or empty is the default content\'s', () => {
    expect(contentFor(push, 'de').notification).toMatchObject({ title: 'Order shipped', body: 'Unterwegs' });
    expect(contentFor(push, 'es').notification).toMatchObject({ title: 'Order shipped', body: 'On its way' });
  });

  test('no tag, or a tag the notification does not have, is the default content', () => {
    const { localizations: _localizations, ...shown } = push.notification;
    expect(contentFor(push, null)).toEqual({ ...push, notification: shown });
    expect(contentFor(push, 'it')).toEqual({ ...push, notification: shown });
  });

  test('a localization is cut to fit like the default content, and its truncation describes its own texts', () => {
    const long = content({ title: 'News', body: 'Short', localizations: { fr: { body: 'é'.repeat(4096) } } });
    expect(fitToPlatform(contentFor(long, null), 'ios').truncation).toBeNull();
    for (const platform of platforms) {
      const { truncation } = expectValidCut(contentFor(long, 'fr'), platform);
      expect(truncation).toEqual({ title: null, body: expect.any(Number), dropped: [], badge: null });
    }
  });
});

const ids = { deliveryId: 'delivery-1', notificationId: 'notification-1' };

describe('apnsPayload', () => {
  test('maps the content and every option onto aps, and the ids and URLs onto herald', () => {
    const push = content(
      { title: 'Order shipped', body: 'On its way', image_url: 'https://cdn.example.com/a.png', action_url: 'app://orders/1' },
      {
        data: { order_id: 1042 },
        options: { sound: 'bell.caf', badge: 3, ios_category: 'ORDER', collapse_id: 'order-1042', priority: 'high', ttl: 60, android_channel_id: 'orders' },
      },
    );
    expect(apnsPayload(push, ids)).toEqual({
      order_id: 1042,
      aps: {
        alert: { title: 'Order shipped', body: 'On its way' },
        sound: 'bell.caf',
        badge: 3,
        category: 'ORDER',
        'thread-id': 'order-1042',
        'mutable-content': 1,
      },
      herald: { delivery_id: 'delivery-1', notification_id: 'notification-1', image_url: 'https://cdn.example.com/a.png', action_url: 'app://orders/1' },
    });
  });

  test('a push with only a title shows it alone, and absent fields are left out rather than null', () => {
    expect(apnsPayload(content({ title: 'Hi', body: null, image_url: null, action_url: null }), ids)).toEqual({
      aps: { alert: { title: 'Hi' } },
      herald: { delivery_id: 'delivery-1', notification_id: 'notification-1' },
    });
  });

  test('a data-only push has no alert and is content-available, to wake the app in the background', () => {
    expect(apnsPayload(content({}, { data: { sync: 'inbox' } }), ids)).toEqual({
      sync: 'inbox',
      aps: { 'content-available': 1 },
      herald: { delivery_id: 'delivery-1', notification_id: 'notification-1' },
    });
  });

  test('iOS overrides are merged last: nested objects merge, other values replace, Android ones are ignored', () => {
    const push = content(
      { title: 'Hi', body: 'There' },
      {
        data: { tags: ['a', 'b'] },
        options: { sound: 'default', platform_overrides: { ios: { aps: { sound: 'bell.caf', 'interruption-level': 'time-sensitive' }, tags: ['c'] }, android: { priority: 'HIGH' } } },
      },
    );
    expect(apnsPayload(push, ids)).toEqual({
      tags: ['c'],
      aps: { alert: { title: 'Hi', body: 'There' }, sound: 'bell.caf', 'interruption-level': 'time-sensitive' },
      herald: { delivery_id: 'delivery-1', notification_id: 'notification-1' },
    });
  });
});

describe('fcmMessage', () => {
  test('maps the content and every option onto notification, data and android', () => {
    const push = content(
      { title: 'Order shipped', body: 'On its way', image_url: 'https://cdn.example.com/a.png', action_url: 'app://orders/1' },
      {
        data: { order: 'A-1042' },
        options: { sound: 'bell', badge: 3, android_channel_id: 'orders', collapse_id: 'order-1042', priority: 'high', ttl: 60, ios_category: 'ORDER' },
      },
    );
    expect(fcmMessage(push, ids)).toEqual({
      notification: { title: 'Order shipped', body: 'On its way', imageUrl: 'https://cdn.example.com/a.png' },
      data: { order: 'A-1042', herald_delivery_id: 'delivery-1', herald_notification_id: 'notification-1', herald_action_url: 'app://orders/1' },
      android: {
        priority: 'high',
        collapseKey: 'order-1042',
        notification: { tag: 'order-1042', channelId: 'orders', sound: 'bell', notificationCount: 3 },
      },
    });
  });

  test('data values that are not strings are sent as JSON, since FCM data holds only strings', () => {
    const push = content({ title: 'Hi' }, { data: { text: 'plain', count: 2, flag: false, nothing: null, nested: { a: [1, '2'] } } });
    expect((fcmMessage(push, ids) as { data: Record<string, string> }).data).toEqual({
      text: 'plain',
      count: '2',
      flag: 'false',
      nothing: 'null',
      nested: '{"a":[1,"2"]}',
      herald_delivery_id: 'delivery-1',
      herald_notification_id: 'notification-1',
    });
  });

  test('a data-only push has no notification, and no options leave android empty', () => {
    expect(fcmMessage(content({ title: null, body: null, image_url: null, action_url: null }, { data: { sync: 'inbox' } }), ids)).toEqual({
      data: { sync: 'inbox', herald_delivery_id: 'delivery-1', herald_notification_id: 'notification-1' },
      android: {},
    });
  });

  test('Android overrides are merged last into android: nested objects merge, other values replace', () => {
    const push = content(
      { title: 'Hi' },
      { options: { priority: 'normal', android_channel_id: 'orders', platform_overrides: { android: { priority: 'high', notification: { color: '#ff0000' } }, ios: { aps: { badge: 9 } } } } },
    );
    expect(fcmMessage(push, ids)).toEqual({
      notification: { title: 'Hi' },
      data: { herald_delivery_id: 'delivery-1', herald_notification_id: 'notification-1' },
      android: { priority: 'high', notification: { tag: 'notification-1', channelId: 'orders', color: '#ff0000' } },
    });
  });
});

describe('apnsPayloads and fcmMessages: one content, many pushes', () => {
  const contents: Record<string, PushContent> = {
    'every field and option': content(
      { title: 'Order shipped', body: 'On its way', image_url: 'https://cdn.example.com/a.png', action_url: 'app://orders/1' },
      {
        data: { order_id: 1042, nested: { a: [1, '2'] } },
        options: { sound: 'bell', badge: 3, ios_category: 'ORDER', collapse_id: 'order-1042', priority: 'high', ttl: 60, android_channel_id: 'orders' },
      },
    ),
    'data only': content({ title: null, body: null, image_url: null, action_url: null }, { data: { sync: 'inbox' } }),
    'overrides of both platforms': content(
      { title: 'Hi', body: 'There' },
      { options: { platform_overrides: { ios: { aps: { sound: 'bell.caf' }, tags: ['c'] }, android: { priority: 'high', notification: { color: '#f00' } } } } },
    ),
    'iOS overrides that name herald': content({ title: 'Hi' }, { options: { platform_overrides: { ios: { herald: { delivery_id: 'fixed', extra: 1 } } } } }),
  };
  const pushes = [ids, { deliveryId: 'delivery-2', notificationId: 'notification-1' }, { deliveryId: 'delivery-3', notificationId: 'notification-2' }];

  test.each(Object.keys(contents))('each push is serialized exactly as built alone, key order included (%s)', (name) => {
    const apns = apnsPayloads(contents[name]);
    const fcm = fcmMessages(contents[name]);
    for (const push of pushes) {
      expect(JSON.stringify(apns(push))).toBe(JSON.stringify(apnsPayload(contents[name], push)));
      expect(JSON.stringify(fcm(push))).toBe(JSON.stringify(fcmMessage(contents[name], push)));
    }
  });

  test('what the pushes share is built once; the ids are each push\'s own', () => {
    const apns = apnsPayloads(contents['every field and option']);
    const [first, second] = [apns(pushes[0]), apns(pushes[1])];
    expect(first.aps).toBe(second.aps);
    expect(first.herald).not.toBe(second.herald);
    expect((first.herald as { delivery_id: string }).delivery_id).toBe('delivery-1');
    expect((second.herald as { delivery_id: string }).delivery_id).toBe('delivery-2');
    const fcm = fcmMessages(contents['every field and option']);
    expect(fcm(pushes[0]).android).toBe(fcm(pushes[1]).android);
    expect((fcm(pushes[2]).data as Record<string, string>).herald_notification_id).toBe('notification-2');
  });
});
