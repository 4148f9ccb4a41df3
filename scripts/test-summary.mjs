// The last line of `make test` (scripts/test.sh): `N passed, M failed`, counting every test that ran,
// the jest tests and the schemathesis test cases. One line per tool comes before it, with what
// each counted and from where. Exits 1 when M > 0, else 0. A missing or unreadable report counts
// as nothing run; a step that exited non-zero but has no failure counted counts as 1 failed, so
// M > 0 whenever a test step failed. Lint and typecheck (which ran beside the tests) count
// nothing when they pass and 1 failed when they do not.
//
// Usage: node scripts/test-summary.mjs --jest-report FILE --jest-exit CODE
//          --fuzz-junit FILE --fuzz-log FILE --fuzz-exit CODE --checks-exit CODE
// CODE is the step's exit status, or `skipped` when it did not run (an earlier step failed).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: options } = parseArgs({
  options: {
    'jest-report': { type: 'string', default: 'reports/jest-results.json' },
    'jest-exit': { type: 'string', default: 'skipped' },
    'fuzz-junit': { type: 'string', default: 'reports/fuzz-junit.xml' },
    'fuzz-log': { type: 'string', default: 'reports/fuzz-output.log' },
    'fuzz-exit': { type: 'string', default: 'skipped' },
    'checks-exit': { type: 'string', default: 'skipped' },
  },
});

function readOrNull(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

// jest --json: numPassedTests / numFailedTests, plus 1 per failed suite with no failed test in it
// (a suite that could not run, or whose hooks threw: numFailedTestSuites > 0 with 0 failed tests).
function jestCounts(file) {
  const text = readOrNull(file);
  if (text === null) return { passed: 0, failed: 0, note: `no ${file}` };
  let results;
  try {
    results = JSON.parse(text);
  } catch (error) {
    return { passed: 0, failed: 0, note: `unreadable ${file}: ${error.message}` };
  }
  const brokenSuites = (results.testResults ?? []).filter(
    (suite) => suite.status === 'failed' && !(suite.assertionResults ?? []).some((test) => test.status === 'failed'),
  ).length;
  const skipped = (results.numPendingTests ?? 0) + (results.numTodoTests ?? 0);
  return {
    passed: results.numPassedTests ?? 0,
    failed: (results.numFailedTests ?? 0) + brokenSuites,
    note: `${file}${brokenSuites ? `; ${brokenSuites} suite(s) failed outside a test` : ''}${skipped ? `; ${skipped} skipped` : ''}`,
  };
}

// The JUnit report of schemathesis 4 has one <testcase> per API operation (plus one "Stateful
// tests"), not one per generated case: 12 testcases for the 2,338 cases of a make fuzz-ci run. So
// the cases come from the summary schemathesis prints, e.g.
//   Test cases:
//     2338 generated, 2338 passed, 16 skipped
//     2338 generated, 3 found 4 unique failures, 1 errored, 16 skipped
// `generated` includes the errored and the skipped cases (sent, but no check applied to the
// response), and "passed" is printed as `generated`, skipped ones included. Here: failed = cases
// with failures + errored cases; passed = generated - failed - skipped; skipped count in neither.
// (Schemathesis counts a case as failing only when it finds a failure not already seen.) The JUnit
// is the fallback when that line is missing, and catches failures that belong to no case (an
// operation's schema error, an after-run check): counted 1 per failing operation when no case failed.
function junitCounts(file) {
  const xml = readOrNull(file);
  if (xml === null) return null;
  let tests = 0;
  let failed = 0;
  let skipped = 0;
  // ElementTree escapes < and > in attributes and text, so a testcase ends at its first </testcase>.
  for (const [, body = ''] of xml.matchAll(/<testcase\b[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    tests += 1;
    if (/<(failure|error)\b/.test(body)) failed += 1;
    else if (/<skipped\b/.test(body)) skipped += 1;
  }
  return { tests, failed, skipped };
}

function fuzzCaseCounts(file) {
  const text = readOrNull(file);
  if (text === null) return null;
  // eslint-disable-next-line no-control-regex -- colour codes, should the output be a terminal's
  const lines = text.replace(/\x1b\[[0-9;]*m/g, '').split('\n');
  const heading = lines.findLastIndex((line) => line.trim() === 'Test cases:');
  if (heading < 0) return null;
  const line = lines[heading + 1] ?? '';
  if (line.includes('No test cases were generated')) return { passed: 0, failed: 0, skipped: 0 };
  const count = (pattern) => Number(line.match(pattern)?.[1] ?? 0);
  const generated = line.match(/(\d+) generated/);
  if (!generated) return null;
  const failed = count(/(\d+) found \d+ unique failures?/) + count(/(\d+) errored/);
  const skipped = count(/(\d+) skipped/);
  return { passed: Math.max(0, Number(generated[1]) - failed - skipped), failed, skipped };
}

function fuzzCounts(junitFile, logFile) {
  const cases = fuzzCaseCounts(logFile);
  const junit = junitCounts(junitFile);
  if (cases) {
    const extra = cases.failed === 0 && junit?.failed ? junit.failed : 0;
    return {
      passed: cases.passed,
      failed: cases.failed + extra,
      note: `test cases from ${logFile}${cases.skipped ? `; ${cases.skipped} skipped` : ''}${extra ? `; ${extra} failing operation(s) in ${junitFile}` : ''}`,
    };
  }
  if (junit) {
    return {
      passed: junit.tests - junit.failed - junit.skipped,
      failed: junit.failed,
      note: `no "Test cases:" line in ${logFile}: operations from ${junitFile}`,
    };
  }
  return { passed: 0, failed: 0, note: `no ${junitFile}` };
}

function step(name, exit, count) {
  if (exit === 'skipped') return { name, passed: 0, failed: 0, note: 'not run' };
  let counts;
  try {
    counts = count();
  } catch (error) {
    counts = { passed: 0, failed: 0, note: `could not count: ${error.message}` };
  }
  if (exit !== '0' && counts.failed === 0) {
    counts.failed = 1;
    counts.note += `; exited ${exit} with no failure counted: 1 failed`;
  }
  return { name, ...counts };
}

const steps = [
  step('jest', options['jest-exit'], () => jestCounts(options['jest-report'])),
  step('schemathesis', options['fuzz-exit'], () => fuzzCounts(options['fuzz-junit'], options['fuzz-log'])),
  step('lint and typecheck', options['checks-exit'], () => ({ passed: 0, failed: 0, note: 'reports/checks.log' })),
];
for (const { name, passed, failed, note } of steps) console.log(`${name}: ${passed} passed, ${failed} failed (${note})`);
const passed = steps.reduce((sum, s) => sum + s.passed, 0);
const failed = steps.reduce((sum, s) => sum + s.failed, 0);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
