#!/bin/sh
# Runs each test given — cmocka binaries, or shell scripts (*.sh, called
# with the build directory $QUORUM_BUILD and ending with a line
# "NAME: N passed, N failed"; exit 77 means skipped) — then prints one
# summary line, with each test's run time in seconds.
#
#   sh tests/run.sh [-j JOBS] TEST...
#
# With -j (default 1) up to JOBS tests run at once, in the order given
# (put the slow ones first); each one's output is printed whole when it
# ends. The tests can share a machine: each picks free ports, and names
# its temp files, shared memory and namespaces after its pid (the
# cluster tests wait on events, so a busy neighbour only slows them).
#
# A test still running after QUORUM_TEST_TIMEOUT seconds (default 1200)
# is killed with its process group and counted as failed, by name: a hung
# test ends the run with a report instead of holding it until CI's limit.
# (The tests wait on events; the limit is far above any test's time on a
# loaded 2-core machine and only catches a hang.)
jobs=1
limit=${QUORUM_TEST_TIMEOUT:-1200}
if [ "${1:-}" = -j ]; then jobs=$2; shift 2; fi
case "$jobs" in ''|*[!0-9]*|0) echo "run.sh: -j wants a count" >&2; exit 2 ;; esac
passed=0; failed=0; skipped=0; bad=""
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT

# Test number $1 ($2) in the background: its output to $dir/$1.log (a
# file, not a pipe: a process a crashed test left behind, holding its
# stdout, cannot make this wait forever), then its exit status and run
# time; .rc appears last, so it marks the test done.
start() {
	(
		t0=$(date +%s)
		case "$2" in
		*.sh) timeout -k 10 "$limit" sh "$2" "${QUORUM_BUILD:-build}" \
			>"$dir/$1.log" 2>&1; rc=$? ;;
		*) timeout -k 10 "$limit" "$2" >"$dir/$1.log" 2>&1; rc=$? ;;
		esac
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			echo "run.sh: $2 still running after ${limit}s:" \
			     "killed (hung?)" >>"$dir/$1.log"
			rc=124
		fi
		echo $(($(date +%s) - t0)) >"$dir/$1.time"
		echo $rc >"$dir/$1.rc.tmp"
		mv "$dir/$1.rc.tmp" "$dir/$1.rc"
	) &
}

# Prints test $1's output and adds its counts.
finish() {
	rc=$(cat "$dir/$1.rc")
	out=$(cat "$dir/$1.log")
	printf '%s\n' "$out"
	case "$2" in
	*.sh)
		p=$(printf '%s\n' "$out" | sed -n 's/^[a-z_0-9]*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' | tail -n 1)
		f=$(printf '%s\n' "$out" | sed -n 's/^[a-z_0-9]*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' | tail -n 1)
		[ "$f" = 0 ] && f="" ;;
	*)
		# a binary may run several groups: their counts add up
		p=$(printf '%s\n' "$out" | sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s += $1} END {if (NR) print s}')
		f=$(printf '%s\n' "$out" | sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s += $1} END {if (NR) print s}') ;;
	esac
	passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
	# exit 77: the script could not run here (e.g. not root); never a pass
	if [ "$rc" -eq 77 ]; then skipped=$((skipped + 1)); return; fi
	if [ "$rc" -eq 124 ]; then failed=$((failed + 1)); bad="$bad $2(timeout)"
	elif [ "$rc" -ne 0 ] && [ -z "$f" ]; then failed=$((failed + 1)); bad="$bad $2"; fi
}

# Reaps the tests that have ended; sets running to how many have not.
reap() {
	running=0; j=0
	for u in "$@"; do
		j=$((j + 1))
		[ -e "$dir/$j.started" ] && [ ! -e "$dir/$j.done" ] || continue
		if [ -e "$dir/$j.rc" ]; then
			finish $j "$u"; : >"$dir/$j.done"
		else
			running=$((running + 1))
		fi
	done
}

i=0
for t in "$@"; do
	i=$((i + 1))
	while reap "$@"; [ $running -ge $jobs ]; do sleep 0.2; done
	: >"$dir/$i.started"
	start $i "$t"
done
while reap "$@"; [ $running -gt 0 ]; do sleep 0.2; done
wait

timings=""; i=0
for t in "$@"; do
	i=$((i + 1))
	timings="$timings $(basename "$t")=$(cat "$dir/$i.time")s"
done
echo "times:$timings"
[ -n "$bad" ] && echo "crashed, skipped or exited non-zero:$bad"
if [ $skipped -gt 0 ]; then
	echo "tests: $passed passed, $failed failed, $skipped skipped"
else
	echo "tests: $passed passed, $failed failed"
fi
[ $failed -eq 0 ]
