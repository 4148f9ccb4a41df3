// Postgres array literals, written here rather than by the drivers. MikroORM's quotes an element
// only when it holds `"{},\` and then escapes it as JSON, so Postgres trims whitespace, reads `NULL`
// as a null, rewrites `\n` escapes and refuses a blank element (a 500). node-postgres' builds the
// literal by appending each escaped element to a string: for the fanout's and the deliver jobs'
// arrays (ids by the thousand) that garbage was the largest share of the bytes the worker allocated.
// Every element is quoted here, and an array of plain elements (ids) is a single join.
import { ArrayType } from '@mikro-orm/core';

// Inside double quotes only `"` and `\` are special to Postgres, each escaped by a backslash.
const special = /["\\]/;
const everySpecial = new RegExp(special, 'g');
const quoted = (item: string | number) => `"${String(item).replace(everySpecial, '\\$&')}"`;

/** The literal of an array of any type whose elements are written as text (cast it in the statement); a null element is NULL. */
export function arrayLiteral(values: readonly (string | number | null)[]): string {
  if (values.every((item) => item !== null && !special.test(String(item)))) return values.length === 0 ? '{}' : `{"${values.join('","')}"}`;
  return `{${values.map((item) => (item === null ? 'NULL' : quoted(item))).join(',')}}`;
}

/** A text[] column for free text. */
export class TextArrayType extends ArrayType<string> {
  override convertToDatabaseValue(value: string[] | null): string | null {
    return value && arrayLiteral(value);
  }
}
