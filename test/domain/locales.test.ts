// Which localization a device receives, from the locale it registered with: the matching rules
// without I/O.
import { deviceSubtags, localeMatcher } from '../../src/domain/locales.ts';

describe('a device locale read as BCP 47 subtags', () => {
  test.each([
    ['fr', ['fr']],
    ['fr-FR', ['fr', 'fr']],
    ['fr_FR', ['fr', 'fr']],
    ['pt_BR', ['pt', 'br']],
    ['zh-Hant-TW', ['zh', 'hant', 'tw']],
    ['zh-Hant_TW', ['zh', 'hant', 'tw']],
    // Java's Locale.toString(): the script last, after '#'.
    ['zh_TW_#Hant', ['zh', 'hant', 'tw']],
    // POSIX: codeset and modifier.
    ['en_US.UTF-8', ['en', 'us']],
    ['sr_RS@latin', ['sr', 'rs']],
    ['de-CH-1996', ['de', 'ch', '1996']],
    ['es-419', ['es', '419']],
  ])('%s', (locale, subtags) => {
    expect(deviceSubtags(locale)).toEqual(subtags);
  });

  test.each([null, undefined, '', 'C', 'C.UTF-8', 'POSIX', 'und', 'und-US', '12', '#Hant', '_', 'f'])('%p names no language', (locale) => {
    expect(deviceSubtags(locale)).toBeNull();
  });
});

describe('the localization a device receives', () => {
  const given = ['fr', 'pt-BR', 'de', 'zh-Hans', 'zh-Hant', 'en-GB'];
  const match = localeMatcher(given);

  test.each([
    // Exact, whatever the letter case and separator.
    ['fr', 'fr'],
    ['FR', 'fr'],
    ['pt-BR', 'pt-BR'],
    ['pt_br', 'pt-BR'],
    ['en_GB', 'en-GB'],
    // More general, a subtag at a time.
    ['fr-CA', 'fr'],
    ['fr_FR', 'fr'],
    ['de-CH-1996', 'de'],
    ['zh-Hant-TW', 'zh-Hant'],
    // With the script the device's language and region most likely use.
    ['zh-TW', 'zh-Hant'],
    ['zh_TW', 'zh-Hant'],
    ['zh-HK', 'zh-Hant'],
    ['zh-CN', 'zh-Hans'],
    ['zh', 'zh-Hans'],
    ['zh_TW_#Hant', 'zh-Hant'],
    // The same language, another region: pt-PT reads pt-BR rather than the default content.
    ['pt-PT', 'pt-BR'],
    ['pt', 'pt-BR'],
    ['en-US', 'en-GB'],
  ])('a %s device receives %s', (locale, tag) => {
    expect(match(locale)).toBe(tag);
  });

  test.each([['ja-JP'], ['es'], ['nl_NL.UTF-8'], [null], [''], ['C'], ['und']])('a %p device receives the default content', (locale) => {
    expect(match(locale)).toBeNull();
  });

  test('a notification without localizations matches nothing', () => {
    expect(localeMatcher([])('fr-FR')).toBeNull();
  });

  test('the tag is answered as the notification gives it, matched whatever its case', () => {
    expect(localeMatcher(['PT-br', 'ZH-hant'])('pt_BR')).toBe('PT-br');
    expect(localeMatcher(['PT-br', 'ZH-hant'])('zh-TW')).toBe('ZH-hant');
  });

  test('the language alone is tried before other regions of it', () => {
    expect(localeMatcher(['pt-PT', 'pt'])('pt-BR')).toBe('pt');
    expect(localeMatcher(['fr-CA', 'fr'])('fr-FR')).toBe('fr');
  });

  test('among other tags of the language: the likely script first, then the region, then the fewest subtags, then alphabetical', () => {
    // A zh-TW reader is given Traditional characters, although zh-Hans-CN comes first alphabetically.
    expect(localeMatcher(['zh-Hans-CN', 'zh-Hant-HK'])('zh-TW')).toBe('zh-Hant-HK');
    expect(localeMatcher(['zh-Hans-SG', 'zh-Hans-CN'])('zh')).toBe('zh-Hans-CN');
    // en likely means en-US.
    expect(localeMatcher(['en-GB', 'en-US'])('en')).toBe('en-US');
    expect(localeMatcher(['en-AU', 'en-GB', 'en-GB-oxendict'])('en-IE')).toBe('en-AU');
    expect(localeMatcher(['pt-PT-x-test', 'pt-PT'])('pt-BR')).toBe('pt-PT');
    expect(localeMatcher(['pt-PT', 'pt-AO'])('pt-BR')).toBe('pt-AO');
  });

  test('deprecated language codes that old Android versions report match their current ones', () => {
    expect(localeMatcher(['he'])('iw_IL')).toBe('he');
    expect(localeMatcher(['id'])('in_ID')).toBe('id');
    expect(localeMatcher(['iw'])('he-IL')).toBe('iw');
  });

  test('the answer does not depend on the order the tags are given in', () => {
    const tags = ['pt-PT', 'pt-AO', 'pt-MZ', 'zh-Hant-HK', 'zh-Hans-CN', 'en-GB', 'en-AU'];
    const devices = ['pt-BR', 'pt', 'zh-TW', 'zh', 'en', 'en-NZ', 'fr'];
    const answers = devices.map(localeMatcher(tags));
    expect(devices.map(localeMatcher([...tags].reverse()))).toEqual(answers);
  });
});
