// A text[] column for free text. MikroORM's PostgreSQL array literal quotes an element only when it
// holds `"{},\` and then escapes it as JSON, so Postgres trims whitespace, reads `NULL` as a null,
// rewrites `\n` escapes and refuses a blank element (a 500). Every element is quoted here instead.
import { ArrayType } from '@mikro-orm/core';

export class TextArrayType extends ArrayType<string> {
  override convertToDatabaseValue(value: string[] | null): string | null {
    if (!value) return value;
    // Inside double quotes only `"` and `\` are special to Postgres, each escaped by a backslash.
    return `{${value.map((item) => `"${item.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
  }
}
