// The validator speaks ajv ("must be string,null", "must NOT have fewer than 1 properties"); a
// client reads one sentence per problem that says what is wrong with the field and what is allowed.
type Issue = { message?: string; errorCode?: string };

const typeNames: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

// A uuid field also has the bare-UUID pattern: both say the same, so the field gets one message.
const bareUuid = 'a UUID written as 8-4-4-4-12 hexadecimal digits, with no prefix';

const formatNames: Record<string, string> = {
  uuid: bareUuid,
  uri: 'an absolute URI (for example https://example.com/image.png)',
  'date-time': 'an RFC 3339 date-time (for example 2026-11-02T10:03:41Z)',
};

const nul = '^[^\\x00]*$';
const languageTag =
  '^(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*(?:-[0-9A-WY-Za-wy-z](?:-[A-Za-z0-9]{2,8})+)*(?:-[Xx](?:-[A-Za-z0-9]{1,8})+)?$';

// The patterns of openapi.yaml, by what they mean.
const patternMeanings: Record<string, string> = {
  [nul]: 'must not contain a NUL character (U+0000)',
  [languageTag]: 'must be a well-formed BCP 47 language tag (for example fr, pt-BR or zh-Hant-TW)',
  '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$': `must be ${bareUuid}`,
  '^[A-Za-z0-9_-]{22}$': 'must be a meta.next_cursor of an earlier page',
  '^([01][0-9]|2[0-3]):[0-5][0-9]$': 'must be a 24-hour time HH:MM (for example 09:00 or 18:30)',
  '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$': 'must be an IANA time zone name (for example Europe/Berlin, America/New_York or UTC)',
};

function list(items: string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function times(count: number): string {
  return count === 2 ? 'twice' : `${count} times`;
}

/** What is wrong, as the rest of "The <field> field …" (or "The body …"). */
function problem(issue: Issue, value: unknown): string {
  const keyword = issue.errorCode?.replace(/\.openapi\.validation$/, '') ?? '';
  const text = issue.message ?? '';
  const number = Number(/(-?\d+(?:\.\d+)?)/.exec(text)?.[1]);
  switch (keyword) {
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not allowed';
    case 'type': {
      const types = (/^must be (.+)$/.exec(text)?.[1] ?? '').split(',');
      return `must be ${list(types.map((type) => typeNames[type] ?? type))}`;
    }
    case 'maxLength':
      return `must not be longer than ${plural(number, 'character')}`;
    case 'minLength':
      return number === 1 ? 'must not be empty' : `must be at least ${plural(number, 'character')} long`;
    case 'maxItems':
      return `must not have more than ${plural(number, 'item')}`;
    case 'minItems':
      return `must have at least ${plural(number, 'item')}`;
    case 'maxProperties':
      return `must not have more than ${plural(number, 'field')}`;
    case 'minProperties':
      return `must have at least ${plural(number, 'field')}`;
    case 'maximum':
      return `must be at most ${number}`;
    case 'minimum':
      return `must be at least ${number}`;
    case 'enum': {
      const allowed = /allowed values: (.+)$/.exec(text)?.[1];
      return allowed ? `must be one of: ${allowed}` : 'is not one of the allowed values';
    }
    case 'format': {
      const format = /format "([^"]+)"/.exec(text)?.[1] ?? '';
      return `must be ${formatNames[format] ?? `in the ${format} format`}`;
    }
    case 'pattern': {
      const pattern = /pattern "(.+)"$/.exec(text)?.[1] ?? '';
      return patternMeanings[pattern] ?? `must match ${pattern}`;
    }
    // A field an object may not have beside another (an audience's tag condition: `values` with `eq`).
    case 'false schema':
      return 'is not allowed';
    case 'const':
      return 'must be the one value the document allows';
    case 'propertyNames':
      return `has a key that ${patternMeanings[nul]}`;
    case 'uniqueItems': {
      const index = Number(/items ## (\d+) and/.exec(text)?.[1]);
      const items = Array.isArray(value) ? value : [];
      const duplicate = items[index];
      const count = items.filter((item) => JSON.stringify(item) === JSON.stringify(duplicate)).length;
      return duplicate === undefined ? 'must not repeat an item' : `must be unique: ${JSON.stringify(duplicate)} appears ${times(count)}`;
    }
    default:
      if (/^unknown query parameter/i.test(text)) return 'is not allowed';
      // `?user_id=`: the validator's own check, before the schema's (it has no keyword).
      if (/^empty value found for query parameter/i.test(text)) return 'must not be empty';
      return text || 'is invalid';
  }
}

/**
 * For a `propertyNames` rule of the object `field` (`pattern`, `maxLength`), the keys that break it,
 * each with its sentence; null when the issue is not about keys. Keys that may hold a NUL stay
 * unnamed (a field path with U+0000 in it helps nobody): the object's own message says it.
 */
export function keyValidationText(field: string, issue: Issue, keys: string[]): [string, string][] | null {
  const keyword = issue.errorCode?.replace(/\.openapi\.validation$/, '') ?? '';
  const text = issue.message ?? '';
  let breaks: (key: string) => boolean;
  if (keyword === 'pattern') {
    const pattern = /pattern "(.+)"$/.exec(text)?.[1];
    if (pattern === undefined || pattern === nul) return null;
    const regexp = new RegExp(pattern, 'u');
    breaks = (key) => !regexp.test(key);
  } else if (keyword === 'maxLength') {
    const limit = Number(/(\d+)/.exec(text)?.[1]);
    breaks = (key) => Array.from(key).length > limit;
  } else if (keyword === 'propertyNames') {
    // ajv's summary of the key errors above ("property name must be valid"), unless a key holds a NUL.
    return keys.some((key) => key.includes('\u0000')) ? null : [];
  } else {
    return null;
  }
  return keys.filter(breaks).map((key) => [key, `The ${field} key "${key}" ${problem(issue, key)}.`]);
}

export function validationText(field: string, issue: Issue, value: unknown): string {
  if (/^unknown query parameter/i.test(issue.message ?? '')) return `The ${field} parameter is not allowed.`;
  const subject = field === 'body' ? 'The body' : `The ${field} field`;
  return `${subject} ${problem(issue, value)}.`;
}
