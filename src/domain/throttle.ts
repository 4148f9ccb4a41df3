// The pace of a throttled notification (`options.throttle_per_minute`), free of I/O: its slots,
// how its pushes are cut into chunks and spread inside one, when a deliver job hands its pushes
// back instead of waiting, and how far a broadcast's walk runs ahead of them. The slots themselves
// are reserved in the database (db/sql/throttles.ts reserveSlots, whose rule `reserve` restates),
// so that every worker process shares one pace.

/** The notification's pushes a minute, or null when it is not throttled. */
export function throttlePerMinute(options: { throttle_per_minute?: unknown }): number | null {
  const perMinute = options.throttle_per_minute;
  return typeof perMinute === 'number' && Number.isInteger(perMinute) && perMinute >= 1 ? perMinute : null;
}

/** The time between two pushes of the pace: even, not a burst at the start of each minute. */
export function slotSpacingMs(perMinute: number): number {
  return 60_000 / perMinute;
}

/**
 * Pushes per reservation (one chunk, recorded together): about one second of the pace, at least
 * one, at most a deliver chunk. A chunk holds its notification's pushes against a cancel while it
 * is spread over its slots, so a second of them keeps a cancel's wait short.
 */
export function throttledChunkSize(perMinute: number, maxChunk: number): number {
  return Math.min(maxChunk, Math.max(1, Math.round(perMinute / 60)));
}

/**
 * How far ahead a deliver job still reserves slots and waits for them: further than this, it hands
 * its pushes back as a job deferred until then, so that no worker is held waiting for a pace.
 */
export const reservationLookaheadMs = 1_000;

/**
 * How long one deliver job goes on reserving and pushing a throttled notification's chunks before
 * it hands the rest back as a new job: a pace of minutes never holds a worker for its length.
 */
export const throttledSliceMs = 5_000;

/**
 * The pure twin of the reservation (reserveSlots): `count` slots from the next free slot (never in
 * the past) when that is within the lookahead; otherwise nothing is reserved, and `freeAt` says when
 * the next free slot is. Times in milliseconds on one clock (the database's).
 */
export function reserve(
  nextSlot: number | null,
  now: number,
  count: number,
  spacingMs: number,
): { start: number; nextSlot: number } | { freeAt: number } {
  const free = Math.max(nextSlot ?? now, now);
  if (free - now > reservationLookaheadMs) return { freeAt: free };
  return { start: free, nextSlot: free + count * spacingMs };
}

/**
 * When a job whose pushes could not reserve hands them back, the delay of that job: until the next
 * free slot comes within the lookahead, so that a job started up to a lookahead late still finds
 * its slot ahead, and the pace has no gap.
 */
export function handBackDelayMs(freeInMs: number): number {
  return Math.max(0, freeInMs - reservationLookaheadMs);
}

/** The timers of a paced chunk are no finer than this: pushes whose slots fall this close go in one provider call. */
export const paceTickMs = 20;

/**
 * A reserved chunk's `count` pushes spread over their slots: push j goes `j × spacing` after the
 * first; pushes whose times fall within a tick of a group's first go with it, in one provider call.
 * Each group: when it goes (ms after the chunk's start) and its pushes [from, to).
 */
export function pacedSends(count: number, spacingMs: number, tickMs: number = paceTickMs): { offsetMs: number; from: number; to: number }[] {
  const groups: { offsetMs: number; from: number; to: number }[] = [];
  for (let j = 0; j < count; j += 1) {
    const at = j * spacingMs;
    const last = groups.at(-1);
    if (last && at - last.offsetMs < tickMs) last.to = j + 1;
    else groups.push({ offsetMs: at, from: j, to: j + 1 });
  }
  return groups;
}

/**
 * A throttled broadcast's walk window (the deliveries it lets wait to be pushed): a couple of
 * minutes of its pace, at least one batch of the walk, at most the window of an unthrottled one.
 */
export function throttledWalkWindow(perMinute: number, batch: number, window: number): number {
  return Math.max(batch, Math.min(window, 2 * perMinute));
}

/** A throttled walk whose window is full comes back no sooner than this: one job a second at most. */
export const minWalkDeferralMs = 1_000;

/** How long a throttled walk whose window is full waits for room: until the pace has pushed what fills it. */
export function walkDeferralMs(pending: number, window: number, perMinute: number): number {
  return Math.max(minWalkDeferralMs, Math.ceil((pending - window + 1) * slotSpacingMs(perMinute)));
}
