// High-priority work first within a worker process. Queue priority orders what waits and the lane
// has workers of its own (workers.ts), but a high-priority job that has started still shares the
// process's one thread and its database connections with every normal job beside it, and under a
// load its fanout is written far slower than when idle (docs/DESIGN.md, "Priority lanes"). So while
// one runs, normal jobs wait before they start: the ones already running finish, no new one begins.
// Below both, the campaign lane: a broadcast's work waits at its turns while any send's job runs.
import { highPriority } from '../domain/fanout.ts';

/**
 * How long a normal job waits at most for the high-priority work in this process to end. Normal
 * work is slowed while high-priority work runs, never stopped: under a steady stream of high-priority
 * sends each normal worker still starts a job every half second or so.
 */
const normalWaitMs = 500;

/** The turn of work that waits for nothing: high-priority work, or work outside the lanes. */
export const noWait = (): Promise<void> => Promise.resolve();

/**
 * How long campaign work (a broadcast's walk and pushes) waits at most, at each of its turns, for
 * the transactional work running in this process to end: a broadcast is slowed by sends, never
 * stopped by them.
 */
const campaignWaitMs = 250;

export class LaneGate {
  #high = 0;
  /** Transactional jobs (high or normal) running here: campaign work waits for them at its turns. */
  #transactional = 0;
  #waiting = new Set<() => void>();
  #campaignWaiting = new Set<() => void>();
  readonly #maxWaitMs: number;
  readonly #campaignMaxWaitMs: number;

  constructor(maxWaitMs = normalWaitMs, campaignMaxWaitMs = campaignWaitMs) {
    this.#maxWaitMs = maxWaitMs;
    this.#campaignMaxWaitMs = campaignMaxWaitMs;
  }

  /** Runs transactional work (a send's fanout or pushes, either priority): campaign work waits at its turns while it runs. */
  async transactional<T>(work: () => Promise<T>): Promise<T> {
    this.#transactional += 1;
    try {
      return await work();
    } finally {
      this.#transactional -= 1;
      if (this.#transactional === 0) for (const open of [...this.#campaignWaiting]) open();
    }
  }

  /** A campaign job's turn: at once when no transactional work runs here, else when it ends or after its bound. */
  campaignTurn(): Promise<void> {
    if (this.#transactional === 0) return Promise.resolve();
    return waitAtMost(this.#campaignWaiting, this.#campaignMaxWaitMs);
  }

  /** Runs high-priority work: normal jobs wait at their start (turn) until it, and any other, has ended. */
  async high<T>(work: () => Promise<T>): Promise<T> {
    this.#high += 1;
    try {
      return await work();
    } finally {
      this.#high -= 1;
      if (this.#high === 0) for (const open of [...this.#waiting]) open();
    }
  }

  /** A normal job's turn: at once when no high-priority work runs here, else when it ends or after maxWaitMs. */
  turn(): Promise<void> {
    if (this.#high === 0) return Promise.resolve();
    return waitAtMost(this.#waiting, this.#maxWaitMs);
  }
}

/** Resolves when opened (by whoever holds `waiting`) or after `maxWaitMs`. */
function waitAtMost(waiting: Set<() => void>, maxWaitMs: number): Promise<void> {
  return new Promise((resolve) => {
    const open = () => {
      clearTimeout(timer);
      waiting.delete(open);
      resolve();
    };
    const timer = setTimeout(open, maxWaitMs);
    waiting.add(open);
  });
}

/**
 * Runs a fetch of jobs in its lane: high-priority work at once, holding normal work back while it
 * runs; normal work after its turn, passing `run` the turn to wait again between its steps (a
 * batch of fanouts between its transactions: fanout-job.ts runFanouts). Campaign work (the campaign
 * lane's queues) takes its turns behind all of it: between a walk's batches and before a broadcast's
 * deliver job, it waits while a send's job runs in this process.
 */
export function runInLane(
  gate: LaneGate,
  jobs: readonly { priority: number }[],
  run: (turn: () => Promise<void>) => Promise<void>,
  lane: 'transactional' | 'campaign' = 'transactional',
): Promise<void> {
  if (lane === 'campaign') {
    const turn = () => gate.campaignTurn();
    return turn().then(() => run(turn));
  }
  if (jobs.some((job) => job.priority >= highPriority)) return gate.transactional(() => gate.high(() => run(noWait)));
  const turn = () => gate.turn();
  return gate.transactional(() => turn().then(() => run(turn)));
}
