// Array parameters are written as Postgres array literals by db/array-literal.ts, not by the drivers:
// what Postgres reads back from them, on a connection of the real Postgres.
import pg from 'pg';
import { arrayLiteral } from '../src/db/array-literal.ts';
import { databaseUrl } from './support/harness.ts';

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
});
afterAll(() => client.end());

const readBack = async <T>(literal: string, type: string): Promise<T[]> =>
  (await client.query<{ value: T[] }>(`select $1::${type}[] as value`, [literal])).rows[0].value;

test('free text comes back unchanged, whatever Postgres would otherwise read into it', async () => {
  const values = ['say "hi"', 'back\\slash', 'a,b', '{braces}', 'NULL', ' spaced ', '', 'tab\tand\nnewline', '\\"', 'ünï👍🏽'];
  expect(await readBack<string>(arrayLiteral(values), 'text')).toEqual(values);
});

test('a null element is a null, beside text that reads NULL', async () => {
  expect(await readBack<string | null>(arrayLiteral([null, 'NULL', null, 'x']), 'text')).toEqual([null, 'NULL', null, 'x']);
});

test('ids, numbers, timestamps and JSON documents read as their types; an empty array is empty', async () => {
  const ids = ['0195f3a0-0000-7000-8000-000000000001', '0195f3a0-0000-7000-8000-000000000002'];
  expect(await readBack<string>(arrayLiteral(ids), 'uuid')).toEqual(ids);
  expect(await readBack<number>(arrayLiteral([200, null, 503]), 'int')).toEqual([200, null, 503]);
  const at = new Date('2026-11-29T07:00:00.123Z');
  expect(await readBack<Date>(arrayLiteral([at.toISOString()]), 'timestamptz')).toEqual([at]);
  const documents = [{ quote: '"', slash: '\\', nested: { list: [1, 'two'] } }, null];
  expect(await readBack<unknown>(arrayLiteral(documents.map((d) => (d === null ? null : JSON.stringify(d)))), 'jsonb')).toEqual(documents);
  expect(await readBack<string>(arrayLiteral([]), 'uuid')).toEqual([]);
});
