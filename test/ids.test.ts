// Row ids: UUID v7 from a pool of random bytes, still unique and in the order they were issued.
import { validate, version } from 'uuid';
import { newId } from '../src/db/ids.ts';
import { isUuid } from '../src/domain/ids.ts';

test('ids are valid UUID v7s carrying the time they were issued', () => {
  const before = Date.now();
  const id = newId();
  const after = Date.now();
  expect([validate(id), version(id), isUuid(id)]).toEqual([true, 7, true]);
  const issuedAt = parseInt(id.replaceAll('-', '').slice(0, 12), 16);
  expect(issuedAt).toBeGreaterThanOrEqual(before);
  expect(issuedAt).toBeLessThanOrEqual(after);
});

test('ids issued one after another, many in the same millisecond and across refills of the pool, are unique and increasing', () => {
  const ids = Array.from({ length: 5000 }, newId);
  expect(new Set(ids).size).toBe(ids.length);
  expect(ids.every((id, i) => i === 0 || ids[i - 1]! < id)).toBe(true);
  // Each id takes fresh bytes from the pool: no two share their random tail.
  expect(new Set(ids.map((id) => id.slice(-12))).size).toBe(ids.length);
});
