#!/bin/sh
# Runs each cmocka test binary given, then prints one summary line.
passed=0; failed=0; bad=""
for t in "$@"; do
	out=$("$t" 2>&1); rc=$?
	printf '%s\n' "$out"
	p=$(printf '%s\n' "$out" | sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
	f=$(printf '%s\n' "$out" | sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
	passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
	if [ $rc -ne 0 ] && [ -z "$f" ]; then failed=$((failed + 1)); bad="$bad $t"; fi
done
[ -n "$bad" ] && echo "crashed or exited non-zero:$bad"
echo "tests: $passed passed, $failed failed"
[ $failed -eq 0 ]
