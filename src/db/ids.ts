// Row ids: UUID v7, increasing as uuid's v7() makes them, from a pool of random bytes. uuid's v7()
// asks WebCrypto for 16 random bytes per id, a call that costs more than the rest of the id; a
// fanout makes one id per delivery, so the bytes are drawn for 256 ids at a time.
import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

const pool = new Uint8Array(16 * 256);
let used = pool.length;
// An id's 16 bytes, copied out of the pool: a view of it (subarray) would be one more object per id.
const random = new Uint8Array(16);
// As in v7(): within one millisecond, a 31-bit counter (started at random) after the time keeps
// the ids this process issues in increasing order.
const clock = { msecs: -Infinity, seq: 0 };

/** A new row id: a UUID v7, ordered by when it was issued. */
export function newId(): string {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  for (let i = 0; i < 16; i++) random[i] = pool[used + i]!;
  used += 16;
  const now = Date.now();
  if (now > clock.msecs) {
    clock.msecs = now;
    clock.seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
  } else {
    clock.seq = (clock.seq + 1) | 0;
    if (clock.seq === 0) clock.msecs++;
  }
  return v7({ random, msecs: clock.msecs, seq: clock.seq });
}
