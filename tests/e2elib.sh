# e2elib — what the end-to-end shell tests share (sourced, not run): the
# build and binaries, a temporary directory and a unique cluster name,
# the ok/FAIL lines and their counts, free loopback ports, bounded waits
# on events (workers registered, a log line), and one exit path that
# stops every process the test started, removes its shared memory, keeps
# the logs of a failed run and prints the summary line tests/run.sh reads
# ("NAME: N passed, N failed").
#
#   E2E=name                     the test's name (for messages, the summary)
#   . "$(dirname "$0")/e2elib.sh" BUILD_DIR
#   e2e_init PREFIX              (after any settings of its own)
#   pid=$(…) ; e2e_track "$pid"  stopped at exit, the latest first
#   e2e_finish                   the summary, exit 0 or 1
#
# Sets B, ROOT, Q, PY, tmp, name, passed, failed. A test whose binaries
# are not built exits 77 (skipped, never a pass). E2E_KEEP=1 keeps tmp.

B=${1:-${B:-build}}
ROOT=${QUORUM_ROOT:-.}
Q=$B/quorum
PY=/usr/bin/python3
passed=0
failed=0
e2e_pids=""
e2e_wpids=""
e2e_done=""

ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1"; }
check() { # check NAME COMMAND...: passes when COMMAND exits 0
	n=$1; shift
	if "$@"; then ok "$n"; else bad "$n"; fi
}

# e2e_init PREFIX: the binaries are built, tmp and name exist, the exit
# path is set.
e2e_init() {
	for b in "$Q" "$B/coordinator" "$B/worker"; do
		if [ ! -x "$b" ]; then
			echo "$E2E: SKIP: $b is not built (make B=$B)"
			exit 77
		fi
	done
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-$1.XXXXXX")
	name="$1$$"
	trap e2e_cleanup EXIT
	trap 'exit 1' INT TERM
}

e2e_track() { e2e_pids="$1 $e2e_pids"; }

# e2e_note_workers EP: the pids of the workers registered at EP; any of
# them still running once the test's own processes are stopped outlived
# its coordinator: reported and killed at exit.
e2e_note_workers() {
	e2e_wpids=$(timeout 10 "$Q" status --endpoint "$1" --json 2>/dev/null |
		$PY -c 'import json,sys; print(" ".join(str(w["pid"]) for w in json.load(sys.stdin)["workers"] if w["pid"]))' 2>/dev/null)
}

e2e_stop() { # e2e_stop PID: TERM, up to 10 s, then KILL
	[ -n "$1" ] || return 0
	if kill -0 "$1" 2>/dev/null; then
		kill -TERM "$1" 2>/dev/null
		i=0
		while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
		done
		kill -KILL "$1" 2>/dev/null
	fi
	wait "$1" 2>/dev/null
}

e2e_cleanup() {
	trap - EXIT INT TERM
	for p in $e2e_pids; do e2e_stop "$p"; done
	for p in $e2e_wpids; do
		grep -q "worker" "/proc/$p/cmdline" 2>/dev/null || continue
		echo "$E2E: worker $p outlived the coordinator" >&2
		kill -TERM "$p" 2>/dev/null
		sleep 0.5
		kill -KILL "$p" 2>/dev/null
	done
	for f in /dev/shm/*"$name"*; do
		[ -e "$f" ] || continue
		echo "$E2E: shared memory left behind: $f" >&2
		rm -f "$f"
	done
	if [ "$failed" -ne 0 ] || [ -n "${E2E_KEEP:-}" ]; then
		echo "$E2E: logs and outputs in $tmp" >&2
		for l in "$tmp"/*.log; do
			[ -s "$l" ] && { echo "== $l" >&2; tail -n 15 "$l" >&2; }
		done
	else
		rm -rf "$tmp"
	fi
	[ -n "$e2e_done" ] || echo "$E2E: $passed passed, $failed failed"
}

e2e_finish() {
	echo "$E2E: $passed passed, $failed failed"
	e2e_done=1
	[ "$failed" -eq 0 ] && exit 0
	exit 1
}

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# e2e_endpoints: two distinct free loopback ports, the coordinator's
# client (cport, EP) and worker (wport) endpoints
e2e_endpoints() {
	cport=$(free_port); wport=$(free_port)
	while [ "$wport" = "$cport" ]; do wport=$(free_port); done
	EP=tcp://127.0.0.1:$cport
}

# e2e_conf_head MODEL NAME: a cluster config's model, cluster and
# coordinator sections on e2e_endpoints' ports; the test appends the rest
e2e_conf_head() {
	cat <<EOF
model:
  path: $1
cluster:
  name: $2
coordinator:
  client_endpoint: $EP
  worker_endpoint: tcp://127.0.0.1:$wport
EOF
}

# e2e_wait_workers EP N SECS PID: 0 once the coordinator at EP has N
# workers registered; 1 when PID (the coordinator) exits or SECS pass.
e2e_wait_workers() {
	i=0
	while [ $i -lt $(($3 * 4)) ]; do
		kill -0 "$4" 2>/dev/null || return 1
		nw=$("$Q" status --endpoint "$1" --timeout 0.5 --retries 0 \
			2>/dev/null |
			sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
		[ "${nw:-0}" -ge "$2" ] && return 0
		sleep 0.25; i=$((i + 1))
	done
	return 1
}

# e2e_wait_log FILE TEXT SECS PID: 0 once FILE holds TEXT; 1 when PID
# exits first or SECS pass.
e2e_wait_log() {
	i=0
	while [ $i -lt $(($3 * 4)) ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$4" 2>/dev/null || return 1
		sleep 0.25; i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
