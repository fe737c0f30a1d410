#!/bin/sh
# merge_bench — issue 15's benchmark: continuous batching across requests.
# One local cluster (1 worker x 2 threads, 64 slots), the same stream of
# requests run twice: with merged rounds (workers.merge: true, the forks
# of every request share each forward) and with merging off (one decode
# job at a time: before issue 15). Clients: `quorum ask --file
# --concurrency C` (C requests in flight). Every sample runs the full
# --max-new-tokens (end-of-generation ignored); the prefix cache is off.
# Reports, side by side: wall time, total tokens/s (samples x tokens /
# wall), per-request latency p50/p99 (the coordinator's accept-to-reply
# total_ms), time to first sample p50/p99 (accept to the first sample's
# result, first_sample_ms), and a single request alone; checks that the two runs give
# every request the same answer and vote table (exit 1 if not; the
# samples' bytes are checked by tests/test_batch.c and test_cluster_merge.c).
#
#   sh bench/merge_bench.sh [BUILD_DIR]        (make bench-merge)
#   env: BENCH_MODEL   GGUF (default BUILD_DIR/models/qwen2.5-0.5b-q8_0.gguf)
#        BENCH_CLIENTS concurrent requests (default 16)
#        BENCH_N       samples per request, or a list cycled over the
#                      requests, e.g. "1 2 4 8 16" (default 4)
#        BENCH_TOKENS  tokens per sample (default 64)
#        BENCH_SLOTS   the worker's slots: live forks a round (default 64)
#        BENCH_KEEP=1  keeps the temp dir
set -u
B=${1:-${B:-build}}
Q=$B/quorum
MODEL=${BENCH_MODEL:-$B/models/qwen2.5-0.5b-q8_0.gguf}
C=${BENCH_CLIENTS:-16}
NS=${BENCH_N:-4}
K=${BENCH_TOKENS:-64}
SLOTS=${BENCH_SLOTS:-64}
PY=/usr/bin/python3
T_RUN=1800

for b in "$Q" "$B/coordinator" "$B/worker" "$PY"; do
	[ -x "$b" ] || { echo "merge_bench: $b is missing" >&2; exit 1; }
done
[ -f "$MODEL" ] || { echo "merge_bench: no model $MODEL" >&2; exit 1; }
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-mbench.XXXXXX")
coord=""
fail=0

stop_cluster() {
	if [ -n "$coord" ] && kill -0 "$coord" 2>/dev/null; then
		kill -TERM "$coord" 2>/dev/null
		i=0
		while kill -0 "$coord" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
		done
		kill -KILL "$coord" 2>/dev/null
	fi
	[ -n "$coord" ] && wait "$coord" 2>/dev/null
	coord=""
}
cleanup() {
	trap - EXIT INT TERM
	stop_cluster
	if [ "$fail" -ne 0 ] || [ -n "${BENCH_KEEP:-}" ]; then
		echo "merge_bench: files in $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'fail=1; exit 1' INT TERM

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }

# The questions: C lines, each its own prompt (the prefix cache is off
# anyway), N cycled from NS.
i=0
: >"$tmp/q.jsonl"
while [ $i -lt "$C" ]; do
	echo "{\"id\": $i, \"question\": \"Tom has $((i + 3)) apples and buys $((2 * i + 5)) more. How many apples does he have now?\"}" >>"$tmp/q.jsonl"
	i=$((i + 1))
done

# start_cluster MERGE
start_cluster() {
	cport=$(free_port); wport=$(free_port)
	while [ "$wport" = "$cport" ]; do wport=$(free_port); done
	EP=tcp://127.0.0.1:$cport
	cat >"$tmp/c-$1.yaml" <<EOF
model:
  path: $MODEL
cluster:
  name: mb$$$1
coordinator:
  client_endpoint: $EP
  worker_endpoint: tcp://127.0.0.1:$wport
kv:
  block_tokens: 16
  blocks: 4096
  dtype: f16
limits:
  max_n: 64
  queue_depth: 256
  request_timeout_ms: $((T_RUN * 1000))
heartbeat:
  interval_ms: 250
  liveness: 40
workers:
  local: 1
  threads: 2
  slots: $SLOTS
  merge: $1
prefix_cache:
  entries: 0
EOF
	"$B/coordinator" --config "$tmp/c-$1.yaml" >"$tmp/coord-$1.log" 2>&1 &
	coord=$!
	i=0
	while [ $i -lt 720 ]; do
		nw=$("$Q" status --endpoint "$EP" --timeout 0.5 --retries 0 2>/dev/null |
			sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
		[ "${nw:-0}" -ge 1 ] && return 0
		kill -0 "$coord" 2>/dev/null || break
		sleep 0.25; i=$((i + 1))
	done
	echo "merge_bench: cluster (merge $1) did not start" >&2
	tail -n 20 "$tmp/coord-$1.log" >&2
	fail=1
	return 1
}

SAMP="--seed 1 --temperature 0.7 --top-k 40 --top-p 0.95 --max-new-tokens $K --ignore-eos --stop none"

# run MERGE: the stream (requests with N cycled over NS, C in flight),
# then one request alone
run() {
	tag=$1
	start_cluster "$tag" || exit 1
	# warm-up (not measured): pages in the model
	timeout $T_RUN "$Q" ask --endpoint "$EP" -n 1 --max-new-tokens 2 \
		--timeout $T_RUN "warm up" >/dev/null 2>&1
	t0=$(now)
	# one ask --file per distinct N, all at once: C requests in flight
	nn=0
	for n in $NS; do nn=$((nn + 1)); done
	k=0
	pids=""
	for n in $NS; do
		awk -v k=$k -v nn=$nn '(NR - 1) % nn == k' "$tmp/q.jsonl" \
			>"$tmp/q-$tag-$k.jsonl"
		cnt=$(wc -l <"$tmp/q-$tag-$k.jsonl")
		timeout $T_RUN "$Q" ask --endpoint "$EP" \
			--file "$tmp/q-$tag-$k.jsonl" --concurrency "$cnt" -n "$n" \
			$SAMP --timeout $T_RUN --out "$tmp/out-$tag-$k.jsonl" \
			>"$tmp/ask-$tag-$k.log" 2>&1 &
		pids="$pids $!"
		k=$((k + 1))
	done
	for p in $pids; do wait "$p" || { echo "merge_bench: ask failed" >&2; fail=1; }; done
	t1=$(now)
	cat "$tmp"/out-$tag-*.jsonl >"$tmp/out-$tag.jsonl"
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }' >"$tmp/wall-$tag"
	load >"$tmp/load-$tag"
	# a single request alone (N = the first of NS)
	n1=$(echo $NS | cut -d' ' -f1)
	t0=$(now)
	timeout $T_RUN "$Q" ask --endpoint "$EP" -n "$n1" $SAMP --timeout $T_RUN \
		"A lone question: what is 12 plus 30?" >"$tmp/alone-$tag.json" 2>&1 ||
		{ echo "merge_bench: lone ask failed" >&2; fail=1; }
	t1=$(now)
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }' >"$tmp/alone-wall-$tag"
	stop_cluster
}

echo "merge_bench: model $MODEL"
echo "merge_bench: $C concurrent requests, N in {$NS}, $K tokens/sample (EOS ignored); 1 worker x 2 threads, $SLOTS slots"
echo "merge_bench: CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load at start $(load)"
for MERGE in false true; do
	echo "merge_bench: merge $MERGE ..." >&2
	run $MERGE
done

$PY - "$tmp" "$K" <<'EOF'
import json, sys
tmp, k = sys.argv[1], int(sys.argv[2])
def stats(tag):
    lat, first, toks, texts, ok = [], [], 0, {}, 0
    for line in open(f"{tmp}/out-{tag}.jsonl"):
        o = json.loads(line)
        if o.get("status") not in ("OK", "STATUS_OK"):
            continue
        ok += 1
        lat.append(o["timings"]["total_ms"])
        if o["timings"].get("first_sample_ms") is not None:
            first.append(o["timings"]["first_sample_ms"])
        toks += o["n"] * k          # every sample runs k tokens
        texts[o["id"]] = (o["answer"], o["votes"])
    lat.sort()
    first.sort()
    pct = lambda p, v=lat: v[min(len(v) - 1, int(p / 100.0 * len(v)))] if v else 0
    wall = float(open(f"{tmp}/wall-{tag}").read())
    alone = float(open(f"{tmp}/alone-wall-{tag}").read())
    load = open(f"{tmp}/load-{tag}").read().strip()
    return dict(ok=ok, wall=wall, tps=toks / wall, p50=pct(50), p99=pct(99),
                f50=pct(50, first), f99=pct(99, first),
                alone=alone, load=load, texts=texts, toks=toks)
a, b = stats("false"), stats("true")
print("| | one job at a time (merge: false) | merged rounds (merge: true) | ratio |")
print("|---|---|---|---|")
print(f"| requests OK | {a['ok']} | {b['ok']} | |")
print(f"| tokens | {a['toks']} | {b['toks']} | |")
print(f"| wall time | {a['wall']:.1f} s | {b['wall']:.1f} s | {a['wall']/b['wall']:.2f}x |")
print(f"| total tokens/s | {a['tps']:.1f} | {b['tps']:.1f} | {b['tps']/a['tps']:.2f}x |")
print(f"| request latency p50 | {a['p50']/1e3:.2f} s | {b['p50']/1e3:.2f} s | {a['p50']/max(b['p50'],1e-9):.2f}x lower |")
print(f"| request latency p99 | {a['p99']/1e3:.2f} s | {b['p99']/1e3:.2f} s | {a['p99']/max(b['p99'],1e-9):.2f}x lower |")
print(f"| time to first sample p50 | {a['f50']/1e3:.2f} s | {b['f50']/1e3:.2f} s | {a['f50']/max(b['f50'],1e-9):.2f}x lower |")
print(f"| time to first sample p99 | {a['f99']/1e3:.2f} s | {b['f99']/1e3:.2f} s | {a['f99']/max(b['f99'],1e-9):.2f}x lower |")
print(f"| one request alone (wall) | {a['alone']:.2f} s | {b['alone']:.2f} s | {b['alone']/a['alone']:.3f} |")
print(f"| load average after the stream | {a['load']} | {b['load']} | |")
same = a["texts"] == b["texts"] and len(a["texts"]) > 0
print("merge_bench: the same answers and votes in both runs:", "yes" if same else "NO")
sys.exit(0 if same else 1)
EOF
[ $? -eq 0 ] || fail=1
exit $fail
