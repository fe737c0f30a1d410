#!/bin/sh
# Runs each test given — cmocka binaries, or shell scripts (*.sh, called
# with the build directory $QUORUM_BUILD and ending with a line
# "NAME: N passed, N failed"; exit 77 means skipped) — then prints one
# summary line, with each test's run time in seconds.
passed=0; failed=0; skipped=0; bad=""
timings=""
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
for t in "$@"; do
	t0=$(date +%s)
	# output through a file, not a pipe: a process a crashed test left
	# behind (holding its stdout) cannot make this wait forever
	case "$t" in
	*.sh) sh "$t" "${QUORUM_BUILD:-build}" >"$log" 2>&1; rc=$? ;;
	*) "$t" >"$log" 2>&1; rc=$? ;;
	esac
	out=$(cat "$log")
	printf '%s\n' "$out"
	timings="$timings $(basename "$t")=$(($(date +%s) - t0))s"
	case "$t" in
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
	if [ $rc -eq 77 ]; then skipped=$((skipped + 1)); continue; fi
	if [ $rc -ne 0 ] && [ -z "$f" ]; then failed=$((failed + 1)); bad="$bad $t"; fi
done
echo "times:$timings"
[ -n "$bad" ] && echo "crashed, skipped or exited non-zero:$bad"
if [ $skipped -gt 0 ]; then
	echo "tests: $passed passed, $failed failed, $skipped skipped"
else
	echo "tests: $passed passed, $failed failed"
fi
[ $failed -eq 0 ]
