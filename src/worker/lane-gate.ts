// High-priority work first within a worker process. Queue priority orders what waits and the lane
// has workers of its own (workers.ts), but a high-priority job that has started still shares the
// process's one thread and its database connections with every normal job beside it, and under a
// load its fanout is written far slower than when idle (docs/DESIGN.md, "Priority lanes"). So while
// one runs, normal jobs wait before they start: the ones already running finish, no new one begins.
import { highPriority } from '../domain/fanout.ts';

/**
 * How long a normal job waits at most for the high-priority work in this process to end. Normal
 * work is slowed while high-priority work runs, never stopped: under a steady stream of high-priority
 * sends each normal worker still starts a job every half second or so.
 */
const normalWaitMs = 500;

/** The turn of work that waits for nothing: high-priority work, or work outside the lanes. */
export const noWait = (): Promise<void> => Promise.resolve();

export class LaneGate {
  #high = 0;
  #waiting = new Set<() => void>();
  readonly #maxWaitMs: number;

  constructor(maxWaitMs = normalWaitMs) {
    this.#maxWaitMs = maxWaitMs;
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
    return new Promise((resolve) => {
      const open = () => {
        clearTimeout(timer);
        this.#waiting.delete(open);
        resolve();
      };
      const timer = setTimeout(open, this.#maxWaitMs);
      this.#waiting.add(open);
    });
  }
}

/**
 * Runs a fetch of jobs in its lane: high-priority work at once, holding normal work back while it
 * runs; normal work after its turn, passing `run` the turn to wait again between its steps (a
 * batch of fanouts between its transactions: jobs.ts runFanouts).
 */
export function runInLane(gate: LaneGate, jobs: readonly { priority: number }[], run: (turn: () => Promise<void>) => Promise<void>): Promise<void> {
  if (jobs.some((job) => job.priority >= highPriority)) return gate.high(() => run(noWait));
  const turn = () => gate.turn();
  return turn().then(() => run(turn));
}
