#!/usr/bin/env bash
# Runs the built tests with their report line by line, under a deadline (FOLIO_TEST_DEADLINE seconds, 1800 by
# default; the whole suite takes about 4 minutes). Why: XCTest's report to a pipe is block-buffered, so a run that
# hung until CI's limit showed neither the test that hung nor where. Past the deadline this prints the stack of
# every thread of the test process and of the folio processes it started, stops them, and fails.
set -uo pipefail
swift=${SWIFT:-swift}
deadline=${FOLIO_TEST_DEADLINE:-1800}

# The processes started, directly or not, by process $1.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

stdbuf -oL -eL "$swift" test --skip-build "$@" &
tests=$!
(
  for ((second = 0; second < deadline; second++)); do
    sleep 1
    kill -0 "$tests" 2>/dev/null || exit 0
  done
  echo "folio tests: still running after ${deadline} s, so a test hangs (the last 'started' line above names it); every thread's stack follows" >&2
  # Stopped first, so that nothing starts more processes between the stacks and the kill.
  started=$(descendants "$tests")
  kill -STOP $started 2>/dev/null
  started=$(descendants "$tests")
  for pid in $started; do
    case $(readlink "/proc/$pid/exe") in
      *.xctest | */folio)
        echo "=== process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline")" >&2
        gdb -p "$pid" -batch -nx -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread |#|$)' >&2 ;;
    esac
  done
  kill -KILL "$tests" $started 2>/dev/null
) &
watchdog=$!
wait "$tests"
status=$?
wait "$watchdog"
exit "$status"
