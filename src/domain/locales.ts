// Which localization of a notification a device receives, from the locale it registered with.
// Pure (no I/O), so the rules are tested directly; the fanout builds one matcher per notification.

/**
 * A device's locale as lowercase BCP 47 subtags, or null when it names no language. Devices report
 * locales in several spellings: `fr-FR` (BCP 47), `fr_FR` (iOS, Java), `zh_TW_#Hant` (Java's
 * Locale.toString puts the script last, after `#`), `en_US.UTF-8` and `sr_RS@latin` (POSIX: the
 * codeset and modifier say nothing a tag can match).
 */
export function deviceSubtags(locale: string | null | undefined): string[] | null {
  if (!locale) return null;
  const subtags = locale
    .split(/[.@]/, 1)[0]
    .split(/[-_]/)
    .filter((subtag) => subtag !== '')
    .map((subtag) => subtag.toLowerCase());
  const hashed = subtags.findIndex((subtag) => subtag.startsWith('#'));
  if (hashed > 0) {
    const [marked] = subtags.splice(hashed, 1);
    const script = marked.slice(1);
    if (/^[a-z]{4}$/.test(script)) subtags.splice(1, 0, script);
    else if (script !== '') subtags.splice(hashed, 0, script);
  }
  // A language subtag is 2–3 or 5–8 letters; `und` (undetermined) and POSIX's `C`/`POSIX` name none.
  const language = subtags[0] ?? '';
  if (!/^(?:[a-z]{2,3}|[a-z]{5,8})$/.test(language) || language === 'und' || language === 'posix') return null;
  return subtags;
}

/** What a tag says once completed with its likely subtags (`zh-TW` → zh, Hant, TW), as far as it can be. */
type Likely = { language: string; script: string | null; region: string | null };

/**
 * The language canonicalized (`iw` → `he`, `in` → `id`: old Android reports the deprecated codes)
 * with the script and region it most likely has (Unicode CLDR likely subtags, through ICU). A tag
 * Intl cannot read (extlangs such as `zh-yue`) keeps its own language and no likely subtags.
 */
function likely(subtags: string[]): Likely {
  try {
    const maximized = new Intl.Locale(subtags.join('-')).maximize();
    return { language: maximized.language, script: maximized.script?.toLowerCase() ?? null, region: maximized.region?.toLowerCase() ?? null };
  } catch {
    return { language: subtags[0], script: null, region: null };
  }
}

/**
 * The tags a device accepts, most specific first, down to its language (RFC 4647 "Lookup"): its
 * own tag shortened a subtag at a time from the end (a singleton left last goes with it), then its
 * language with its likely script and region (`zh-TW`: `zh-Hant-TW`, `zh-Hant`), then the language
 * as given and canonicalized.
 */
function fallbacks(subtags: string[], device: Likely): string[] {
  const chain: string[] = [];
  const add = (tag: string) => {
    if (!chain.includes(tag)) chain.push(tag);
  };
  for (let length = subtags.length; length > 1; length--) {
    if (subtags[length - 1].length > 1) add(subtags.slice(0, length).join('-'));
  }
  if (device.script) {
    if (device.region) add(`${device.language}-${device.script}-${device.region}`);
    add(`${device.language}-${device.script}`);
  }
  add(subtags[0]);
  add(device.language);
  return chain;
}

type Candidate = Likely & { tag: string; lowercase: string; subtags: number };

/** Among localizations of the device's language: its likely script, then its region, then the fewest subtags, then alphabetical. */
function closest(candidates: Candidate[], device: Likely): string {
  const rank = (candidate: Candidate): [number, number, number, string] => [
    device.script !== null && candidate.script === device.script ? 0 : 1,
    device.region !== null && candidate.region === device.region ? 0 : 1,
    candidate.subtags,
    candidate.lowercase,
  ];
  const before = (a: Candidate, b: Candidate) => {
    const [x, y] = [rank(a), rank(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] < y[i];
    return false;
  };
  return candidates.reduce((best, candidate) => (before(candidate, best) ? candidate : best)).tag;
}

/** The tag of the localization a device receives, as the notification gives it; null: the default content. */
export type LocaleMatcher = (deviceLocale: string | null | undefined) => string | null;

/**
 * A matcher over a notification's localization tags (well-formed BCP 47, unique whatever their
 * letter case: the send checks both). For a device: the localization whose tag is the first of the
 * device's fallbacks, else the closest one of its language, else none. Answers are remembered per
 * device locale, so a fanout works each locale out once.
 */
export function localeMatcher(tags: readonly string[]): LocaleMatcher {
  const byTag = new Map(tags.map((tag) => [tag.toLowerCase(), tag]));
  const byLanguage = new Map<string, Candidate[]>();
  for (const tag of tags) {
    const subtags = tag.toLowerCase().split('-');
    const candidate = { ...likely(subtags), tag, lowercase: subtags.join('-'), subtags: subtags.length };
    byLanguage.set(candidate.language, [...(byLanguage.get(candidate.language) ?? []), candidate]);
  }
  const match = (locale: string): string | null => {
    const subtags = deviceSubtags(locale);
    if (!subtags) return null;
    const device = likely(subtags);
    for (const tag of fallbacks(subtags, device)) {
      const found = byTag.get(tag);
      if (found !== undefined) return found;
    }
    const sameLanguage = byLanguage.get(device.language) ?? byLanguage.get(subtags[0]);
    return sameLanguage ? closest(sameLanguage, device) : null;
  };
  const answers = new Map<string, string | null>();
  return (deviceLocale) => {
    if (!deviceLocale || byTag.size === 0) return null;
    let answer = answers.get(deviceLocale);
    if (answer === undefined) answers.set(deviceLocale, (answer = match(deviceLocale)));
    return answer;
  };
}
