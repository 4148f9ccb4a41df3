// The order test files start in. Jest starts its slowest files first when a cache from an earlier
// run tells it which they are; a clean checkout (CI) has none, and it falls back to file size, which
// left the slowest files to start last and run alone at the end. The files below are the slowest
// (they spawn Herald processes, databases or Chromium); they start first, in this order, the others
// after them by size. `processes` (the crash, chaos, broadcast and webhook-crash suites one after
// another) is the longest by far: it starts first.
import Sequencer from '@jest/test-sequencer';

const slowestFirst = [
  'processes',
  'embedded',
  'dashboard',
  'dashboard-campaigns',
  'sdk-package',
  'scheduling',
  'observability',
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
