#!/bin/sh
# prefix_bench — issue 16's benchmark: a few-shot prompt (the examples of
# --shots before every question) over a set of different questions, N
# samples each, with the prefix cache on and off: (a) in one process
# (`quorum eval-set --model`, 2 threads), (b) a cluster of 2 local workers
# x 1 thread (`quorum eval-set --endpoint`); then (c) in one process with
# nothing shared (no examples, no system prompt) on and off, the cost of
# looking (off and on alternate BENCH_REPEAT times: the median of the
# pairs' ratios). One run, side by side; prints one table (prompt tokens
# prefilled and reused, wall time, generated tokens per second) and checks
# that each configuration's per-problem results are identical with the
# cache on and off (exit 1 if not).
#
#   sh bench/prefix_bench.sh [BUILD_DIR]     (make bench-prefix)
#   env: BENCH_MODEL  GGUF (default BUILD_DIR/models/qwen2.5-0.5b-q8_0.gguf)
#        BENCH_SHOTS  few-shot file (default bench/shots8.jsonl)
#        BENCH_SET    questions (default the first BENCH_Q of
#                     train/data/test.jsonl)
#        BENCH_Q (40)  BENCH_N (8)  BENCH_TOKENS (64, every sample runs
#        them all: end-of-generation is ignored)  BENCH_REPEAT (3)
#        BENCH_KEEP=1
#        BENCH_PARTS   which of "in cl none" to run (default all)
set -u
B=${1:-${B:-build}}
Q=$B/quorum
PY=/usr/bin/python3
MODEL=${BENCH_MODEL:-$B/models/qwen2.5-0.5b-q8_0.gguf}
SHOTS=${BENCH_SHOTS:-bench/shots8.jsonl}
NQ=${BENCH_Q:-40}
N=${BENCH_N:-8}
K=${BENCH_TOKENS:-64}
T_RUN=7200
PARTS=${BENCH_PARTS:-"in cl none"}
R=${BENCH_REPEAT:-3}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
SAMP="-n $N --seed 1 --temperature 0.7 --top-k 40 --top-p 0.95 --max-new-tokens $K --stop none --ignore-eos"

for b in "$Q" "$B/coordinator" "$B/worker" "$PY"; do
	[ -x "$b" ] || { echo "prefix_bench: $b is missing" >&2; exit 1; }
done
[ -f "$MODEL" ] || { echo "prefix_bench: no model $MODEL" >&2; exit 1; }
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-pbench.XXXXXX")
SET=${BENCH_SET:-$tmp/set.jsonl}
[ -n "${BENCH_SET:-}" ] || head -n "$NQ" train/data/test.jsonl >"$SET"
coord=""
fail=0
cleanup() {
	if [ -n "$coord" ]; then
		kill -TERM "$coord" 2>/dev/null
		wait "$coord" 2>/dev/null
	fi
	if [ "$fail" -ne 0 ] || [ -n "${BENCH_KEEP:-}" ]; then
		echo "prefix_bench: files in $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'fail=1; exit 1' INT TERM

load() { cut -d' ' -f1-3 /proc/loadavg; }

# evs TAG ARGS...: eval-set --json into TAG.json, per problem into TAG.out
evs() {
	_t=$1; shift
	echo "prefix_bench: $_t (load $(load)) ..." >&2
	echo "$(load)" >"$tmp/$_t.load"
	if ! timeout $T_RUN "$Q" eval-set --file "$SET" $SAMP --json \
		--out "$tmp/$_t.out" "$@" >"$tmp/$_t.json" 2>"$tmp/$_t.err"; then
		echo "prefix_bench: $_t failed:" >&2
		tail -n 5 "$tmp/$_t.err" >&2
		fail=1
		exit 1
	fi
}

# warm-up (not measured)
timeout $T_RUN "$Q" run --model "$MODEL" -n 1 --max-new-tokens 1 "2 + 2?" \
	>/dev/null 2>&1

if has in; then
evs in-off --model "$MODEL" --threads 2 --shots "$SHOTS" --no-prefix-cache
evs in-on --model "$MODEL" --threads 2 --shots "$SHOTS"
fi

free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
if has cl; then
cport=$(free_port); wport=$(free_port)
while [ "$wport" = "$cport" ]; do wport=$(free_port); done
EP=tcp://127.0.0.1:$cport
cat >"$tmp/c.yaml" <<EOF
model:
  path: $MODEL
cluster:
  name: pb$$
coordinator:
  client_endpoint: $EP
  worker_endpoint: tcp://127.0.0.1:$wport
kv:
  block_tokens: 16
  blocks: 2048
  dtype: f16
limits:
  max_n: 64
  request_timeout_ms: $((T_RUN * 1000))
heartbeat:
  interval_ms: 1000
  liveness: 120
workers:
  local: 2
  threads: 1
  slots: 64
prefix_cache:
  entries: 16
EOF
"$B/coordinator" --config "$tmp/c.yaml" >"$tmp/coordinator.log" 2>&1 &
coord=$!
i=0
while [ $i -lt 600 ]; do
	nw=$("$Q" status --endpoint "$EP" --timeout 0.5 --retries 0 2>/dev/null |
		sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
	[ "${nw:-0}" -ge 2 ] && break
	sleep 0.25; i=$((i + 1))
done
[ "${nw:-0}" -ge 2 ] || { echo "prefix_bench: workers not ready" >&2; fail=1; exit 1; }
# the bypassing run leaves no roots: the cached run starts cold
evs cl-off --endpoint "$EP" --timeout $T_RUN --shots "$SHOTS" --no-prefix-cache
evs cl-on --endpoint "$EP" --timeout $T_RUN --shots "$SHOTS"
"$Q" status --endpoint "$EP" >"$tmp/status" 2>&1
kill -TERM "$coord"; wait "$coord" 2>/dev/null; coord=""
fi

if has none; then
i=1
while [ $i -le "$R" ]; do
	evs none$i-off --model "$MODEL" --threads 2 --system '' \
		--no-prefix-cache
	evs none$i-on --model "$MODEL" --threads 2 --system ''
	i=$((i + 1))
done
fi

for p in $PARTS; do
	[ "$p" = none ] && p=none1
	if ! cmp -s "$tmp/$p-off.out" "$tmp/$p-on.out"; then
		echo "prefix_bench: $p: results differ with the cache on" >&2
		fail=1
	fi
done

$PY - "$tmp" "$MODEL" "$SHOTS" "$N" "$K" "$PARTS" "$R" <<'EOF'
import json, sys
tmp, model, shots, n, k, parts, rep = sys.argv[1:8]
rows = [("in", "in process, 2 threads, %s" % shots.split("/")[-1]),
        ("cl", "cluster 2 workers x 1 thread, %s" % shots.split("/")[-1]),
        ("none", "in process, nothing shared (no examples, no system)")]
print("model %s; N %s, up to %s tokens per sample" % (model.split("/")[-1], n, k))
print("| config | cache | problems | prompt tokens prefilled | reused | wall s | generated tok/s | load (1/5/15 min) |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for tag, what in rows:
    if tag not in parts.split():
        continue
    ratios = []
    for i in range(1, int(rep) + 1) if tag == "none" else [""]:
        t = "%s%s" % (tag, i)
        w = {}
        for c in ("off", "on"):
            j = json.load(open("%s/%s-%s.json" % (tmp, t, c)))
            r = j["results"][0]
            w[c] = r["wall_s"]
            print("| %s | %s | %d | %d | %d | %.1f | %.1f | %s |" % (
                what, c, r["problems"], j["prompt_tokens_prefilled"],
                j["prompt_tokens_reused"], r["wall_s"],
                r["generated_tokens"] / r["wall_s"] if r["wall_s"] else 0,
                open("%s/%s-%s.load" % (tmp, t, c)).read().strip()))
        ratios.append(w["off"] / w["on"])
        print("|  | on/off | | | | %.3fx faster | | |" % ratios[-1])
    if len(ratios) > 1:
        print("|  | median of %d pairs | | | | %.3fx faster | | |" % (
            len(ratios), sorted(ratios)[len(ratios) // 2]))
EOF
exit $fail
