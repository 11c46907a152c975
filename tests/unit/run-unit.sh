#!/usr/bin/env bash
# run-unit.sh [BUILD]: runs the cmocka unit tests (tests/unit/unit.mk
# builds them) on the CPU stand-in for the driver, from the repository
# root (test_calls reads wire/calls.tbl), prints each one's results and
# last "N passed, N failed", counting cmocka's tests. A test program
# that is missing, or dies, counts as one failure.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
B=${1:-build}
PASS=0 FAIL=0
for t in test_handles test_replay test_vmm_place test_shm test_calls; do
	bin=$B/tests/unit/$t
	if [ ! -x "$bin" ]; then
		echo "FAIL $t: $bin is missing (libcmocka-dev, then make unit)"
		FAIL=$((FAIL + 1))
		continue
	fi
	out=$(LD_LIBRARY_PATH=$B/tests/fakecuda UNIT_CLIENT_LIB=$B/tests/unit/libcalls_client.so \
		timeout 120 "$bin" 2>&1)
	rc=$?
	echo "$out"
	p=$(sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -n1)
	f=$(sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -n1)
	PASS=$((PASS + ${p:-0}))
	if [ -n "$f" ]; then
		FAIL=$((FAIL + f))
	elif [ $rc -ne 0 ] || [ -z "$p" ]; then
		echo "FAIL $t: exit $rc without cmocka's summary"
		FAIL=$((FAIL + 1))
	fi
done
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
