// The order test files start in. Jest starts its slowest files first when a cache from an earlier
// run tells it which they are; a clean checkout (CI) has none, and it falls back to file size, which
// left the slowest files to start last and run alone at the end. The files below are the slowest
// (they spawn Herald processes, databases or Chromium, or wait out a pace or a backoff); they start
// first, in this order, the others after them by size. `processes` (the crash, chaos, broadcast
// and webhook-crash suites one after another) is the longest by far: it starts first.
import Sequencer from '@jest/test-sequencer';

const slowestFirst = [
  'processes',
  'embedded',
  // Files that mostly wait (a pace, a Retry-After, a cache's lifetime, a backoff, an outage) go
  // while the fuzz runs beside jest, which takes the core they leave idle; left to the end, their
  // waits left a core idle once the fuzz was done. Past them, a file that loads the cores (Chromium,
  // tsc, npm) alternates with one that waits, so that two of a kind seldom run at once.
  'throttle',
  'sdk-client',
  'auth',
  'fairness',
  'dashboard',
  'web-push',
  'dashboard-campaigns',
  'outage',
  'sdk-package',
  'webhook-disabling',
  'scheduling',
  'database-bounds',
  'observability',
  'webhooks',
  'priority',
  'fanout',
  'statistics',
].map((name) => `/test/${name}.test.ts`);

const rank = (path) => {
  const index = slowestFirst.findIndex((suffix) => path.endsWith(suffix));
  return index < 0 ? slowestFirst.length : index;
};

export default class SlowestFirst extends Sequencer {
  sort(tests) {
    const bySize = super.sort(tests);
    // Array.prototype.sort is stable: files not named keep the default order among themselves.
    return [...bySize].sort((a, b) => rank(a.path) - rank(b.path));
  }
}
