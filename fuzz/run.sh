#!/bin/sh
# Runs each libFuzzer target for a bounded time; fails when one finds a
# crash, a leak, UB, a timeout or an out-of-memory input.
#
#   sh fuzz/run.sh BUILD_DIR SECONDS TARGET...    (make fuzz / make fuzz-ci)
#
# FUZZ_JOBS targets (default 2) run at once, each fuzzer one process.
#
# Per target: seeds from fuzz/corpus/<t>/ (read only), the growing corpus
# in BUILD_DIR/corpus/<t>/, findings in BUILD_DIR/crashes/<t>/ (cleared at
# the start of a run; reproduce one with BUILD_DIR/fuzz_<t> FILE), the log
# in BUILD_DIR/fuzz_<t>.log. Ends with "fuzz: N passed, N failed".
set -u
fb=$1; secs=$2; shift 2
passed=0; failed=0
jobs=${FUZZ_JOBS:-2}
# Target $1 to its log, then its exit status to BUILD_DIR/fuzz_$1.rc.
fuzz_one() {
	t=$1
	mkdir -p "$fb/corpus/$t" "$fb/crashes/$t"
	rm -f "$fb/crashes/$t"/* "$fb/fuzz_$t.rc"
	# the gguf seeds hold whole quantized models (40 KB with a row of 256)
	maxlen=8192
	[ "$t" = gguf ] && maxlen=65536
	# hard bound on top of libFuzzer's own: startup, merge, final report
	timeout -k 10 $((secs + 120)) "$fb/fuzz_$t" -max_total_time="$secs" \
		-timeout=25 -rss_limit_mb=4096 -max_len=$maxlen \
		-print_final_stats=1 -artifact_prefix="$fb/crashes/$t/" \
		"$fb/corpus/$t" "fuzz/corpus/$t" >"$fb/fuzz_$t.log" 2>&1
	echo $? >"$fb/fuzz_$t.rc"
}
# up to $jobs at once, waiting for the oldest (all run $secs)
targets=$*
pids=""
for t in $targets; do
	fuzz_one "$t" &
	pids="$pids $!"
	set -- $pids
	if [ $# -ge "$jobs" ]; then
		wait "$1"; shift; pids=$*
	fi
done
wait
for t in $targets; do
	rc=$(cat "$fb/fuzz_$t.rc" 2>/dev/null || echo lost)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$fb/fuzz_$t.log")
	found=$(ls "$fb/crashes/$t" | wc -l)
	if [ "$rc" = 0 ] && [ "$found" -eq 0 ] && [ -n "$runs" ]; then
		echo "fuzz_$t: ok, ${secs}s, $runs runs," \
			"corpus $(ls "$fb/corpus/$t" | wc -l) files"
		passed=$((passed + 1))
	else
		echo "fuzz_$t: FAILED (exit $rc, $found finding(s) in" \
			"$fb/crashes/$t/); log $fb/fuzz_$t.log:"
		grep -A 30 -m 1 'ERROR\|==[0-9]*==\|runtime error\|fuzz_[a-z]*: ' \
			"$fb/fuzz_$t.log" | head -n 40
		failed=$((failed + 1))
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
