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

// The patterns of openapi.yaml, by what they mean.
const patternMeanings: Record<string, string> = {
  '^[^\\x00]*$': 'must not contain a NUL character (U+0000)',
  '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$': `must be ${bareUuid}`,
  '^[A-Za-z0-9_-]{22}$': 'must be a meta.next_cursor of an earlier page',
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
    case 'propertyNames':
      return `has a key that ${patternMeanings['^[^\\x00]*$']}`;
    case 'uniqueItems': {
      const index = Number(/items ## (\d+) and/.exec(text)?.[1]);
      const items = Array.isArray(value) ? value : [];
      const duplicate = items[index];
      const count = items.filter((item) => JSON.stringify(item) === JSON.stringify(duplicate)).length;
      return duplicate === undefined ? 'must not repeat an item' : `must be unique: ${JSON.stringify(duplicate)} appears ${times(count)}`;
    }
    default:
      return /^unknown query parameter/i.test(text) ? 'is not allowed' : text || 'is invalid';
  }
}

export function validationText(field: string, issue: Issue, value: unknown): string {
  if (/^unknown query parameter/i.test(issue.message ?? '')) return `The ${field} parameter is not allowed.`;
  const subject = field === 'body' ? 'The body' : `The ${field} field`;
  return `${subject} ${problem(issue, value)}.`;
}
