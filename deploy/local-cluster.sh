#!/bin/sh
# local-cluster — a whole quorum cluster on this machine, for a try-out:
# builds, starts a coordinator with local workers from a temporary config,
# waits until the workers have registered (`quorum status`), asks one
# question, prints the answer, and stops the cluster (also on Ctrl-C or
# failure).
#
#   deploy/local-cluster.sh ["question"]
#   env: B=build        build directory
#        MODEL=PATH     GGUF model (default models/arith.gguf, the
#                       arithmetic model trained for quorum)
#        WORKERS=2      local workers     THREADS=1  threads per worker
#        N=8            samples           MAX_NEW=64 tokens per sample
#        PORT=7700      client endpoint port (worker endpoint: PORT+1)
#        READY_TIMEOUT=120  seconds to wait for the workers
# Exit status: that of `quorum ask` (0 answered, 1 failed, 3 busy), or 1
# when the cluster did not come up.
set -eu
cd "$(dirname "$0")/.."
B=${B:-build}
WORKERS=${WORKERS:-2}
THREADS=${THREADS:-1}
N=${N:-8}
MAX_NEW=${MAX_NEW:-64}
PORT=${PORT:-7700}
READY_TIMEOUT=${READY_TIMEOUT:-120}
QUESTION=${1:-"Mia has 45 stickers. She gives 12 to her brother and then buys 3 packs of 8. How many stickers does she have now?"}
EP=tcp://127.0.0.1:$PORT
Q=$B/quorum

make -s B="$B" all
if [ ! -x "$B/coordinator" ] || [ ! -x "$B/worker" ]; then
	echo "local-cluster: $B/coordinator or $B/worker was not built" >&2
	exit 1
fi
MODEL=${MODEL:-models/arith.gguf}
[ -f "$MODEL" ] || make -s B="$B" "$MODEL"
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")

if "$Q" status --endpoint "$EP" --timeout 0.5 --retries 0 >/dev/null 2>&1; then
	echo "local-cluster: something already answers on $EP (PORT=...)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-local.XXXXXX")
coord=""
stop() {
	trap - EXIT INT TERM
	if [ -n "$coord" ] && kill -0 "$coord" 2>/dev/null; then
		echo "local-cluster: stopping the cluster" >&2
		kill -TERM "$coord" 2>/dev/null || true
		i=0
		while kill -0 "$coord" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
		done
		kill -KILL "$coord" 2>/dev/null || true
		wait "$coord" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 1' INT TERM

cat >"$tmp/cluster.yaml" <<EOF
model:
  path: $MODEL
cluster:
  name: local$$
coordinator:
  client_endpoint: $EP
  worker_endpoint: tcp://127.0.0.1:$((PORT + 1))
workers:
  local: $WORKERS
  threads: $THREADS
EOF

echo "local-cluster: coordinator on $EP with $WORKERS worker(s), model $MODEL" >&2
"$B/coordinator" --config "$tmp/cluster.yaml" 2>"$tmp/coordinator.log" &
coord=$!

i=0
while :; do
	if ! kill -0 "$coord" 2>/dev/null; then
		echo "local-cluster: the coordinator exited:" >&2
		tail -n 20 "$tmp/coordinator.log" >&2
		exit 1
	fi
	nw=$("$Q" status --endpoint "$EP" --timeout 0.5 --retries 0 2>/dev/null |
		sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
	[ "${nw:-0}" -ge "$WORKERS" ] && break
	i=$((i + 1))
	if [ $i -gt $((READY_TIMEOUT * 4)) ]; then
		echo "local-cluster: workers not ready within ${READY_TIMEOUT}s" >&2
		tail -n 20 "$tmp/coordinator.log" >&2
		exit 1
	fi
	sleep 0.25
done
"$Q" status --endpoint "$EP"
echo
rc=0
"$Q" ask --endpoint "$EP" -n "$N" --max-new-tokens "$MAX_NEW" "$QUESTION" || rc=$?
exit $rc
