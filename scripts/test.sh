#!/usr/bin/env bash
# make test: the whole suite as CI runs it (.ci/run). install, codegen-check and the builds first,
# stopping at the first failure (no test runs then; the fuzzer's environment and Chromium install
# alongside them); then jest (make unit) and schemathesis (make fuzz-ci) side by side, each whatever
# the other did, the fuzz at a lower CPU priority and lint and typecheck at a lower one still. The
# last line of the output is `N passed, M failed`, every jest test and schemathesis test case that ran
# (scripts/test-summary.mjs), a failed lint or typecheck counting as one failed. Exits non-zero
# when a step failed or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

make=${MAKE:-make}
node=node_modules/.bin/node
jest_report=reports/jest-results.json # written by make unit
fuzz_junit=reports/fuzz-junit.xml     # written by scripts/fuzz.sh
fuzz_log=reports/fuzz-output.log      # what make fuzz-ci printed: schemathesis' "Test cases:" line
checks_log=reports/checks.log         # what make lint typecheck printed
lingering_log=reports/lingering-handles.log # what held a test worker jest had to end (test/support/lingering-handles.ts)

# The reports of an earlier run must never be counted.
rm -f "$jest_report" "$fuzz_junit" "$fuzz_log" "$checks_log" "$lingering_log"
mkdir -p reports

status=0
jest_exit=skipped
fuzz_exit=skipped
checks_exit=skipped
fuzz_env_log=reports/fuzz-env.log
browser_log=reports/browser.log
fuzz_pid=''
# What needs nothing of node_modules installs while npm does: the fuzzer's Python environment, and
# Chromium when it is missing (both wait on the network and on the disk more than on a core).
"$make" --no-print-directory fuzz-env >"$fuzz_env_log" 2>&1 &
fuzz_env_pid=$!
"$make" --no-print-directory browser >"$browser_log" 2>&1 &
browser_pid=$!
# The builds the tests run on go two at a time, after codegen-check has rewritten the generated
# code they read. (Each of these depends on install; naming it too would print "Nothing to be done
# for 'install'".)
if "$make" --no-print-directory install \
  && "$make" --no-print-directory codegen-check \
  && "$make" --no-print-directory -j2 --output-sync=target build dashboard \
  && { wait "$browser_pid" || { cat "$browser_log"; false; }; }; then
  # Lint and typecheck need no test and no test needs them: they take the cores the tests leave
  # idle (waiting on Postgres, providers and spawned processes), and never slow a test down.
  nice -n 15 "$make" --no-print-directory -j2 --output-sync=target lint typecheck >"$checks_log" 2>&1 &
  checks_pid=$!
  # A failed install is shown here; make fuzz-ci then tries it again, and says why it failed.
  wait "$fuzz_env_pid" || cat "$fuzz_env_log"
  # The fuzz runs beside jest: its own server and database, and mostly one core, which jest alone
  # leaves idle for much of its run. At a lower CPU priority (above lint's): the tests that time a
  # recovery in seconds get the cores first. Its output is kept and shown once jest is done.
  nice -n 10 "$make" --no-print-directory fuzz-ci >"$fuzz_log" 2>&1 &
  fuzz_pid=$!
  "$make" --no-print-directory unit
  jest_exit=$?
  [ -s "$lingering_log" ] && cat "$lingering_log"
  wait "$fuzz_pid"
  fuzz_exit=$?
  cat "$fuzz_log"
  wait "$checks_pid"
  checks_exit=$?
  cat "$checks_log"
  [ "$jest_exit" = 0 ] && [ "$fuzz_exit" = 0 ] && [ "$checks_exit" = 0 ] || status=1
else
  # Nothing is left running behind a failed step.
  wait "$fuzz_env_pid" "$browser_pid"
  status=1
fi

summary_line='^[0-9]+ passed, [0-9]+ failed$'
if [ -x "$node" ]; then
  summary=$("$node" scripts/test-summary.mjs --jest-report "$jest_report" --jest-exit "$jest_exit" \
    --fuzz-junit "$fuzz_junit" --fuzz-log "$fuzz_log" --fuzz-exit "$fuzz_exit" --checks-exit "$checks_exit") || status=1
else
  summary='' # install failed before Node 24 was there
fi
if [[ "${summary##*$'\n'}" =~ $summary_line ]]; then
  printf '%s\n' "$summary"
else
  # No summary from the script (it crashed, or there is no Node): never end without the line.
  [ -n "$summary" ] && printf '%s\n' "$summary"
  if [ "$jest_exit$fuzz_exit$checks_exit" = skippedskippedskipped ]; then
    echo '0 passed, 0 failed'
  else
    echo 'test: the test summary could not be computed' >&2
    echo '0 passed, 1 failed'
  fi
  status=1
fi
exit "$status"
