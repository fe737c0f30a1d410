#!/bin/sh
# kv_q8_e2e — the 8-bit KV cache across processes (issue 26): a coordinator
# with 2 local workers whose pools are kv.dtype q8_0 (shared-memory pools,
# cross-worker forks and copies of q8_0 blocks) gives the same samples,
# byte for byte, as `quorum run --kv-type q8_0` in one process, twice (the
# second time from the prefix cache); a worker started with another KV
# dtype is refused with a message naming both; a model whose head size is
# not a multiple of 32 gets a clear error.
#
#   sh tests/kv_q8_e2e.sh [BUILD_DIR]      (default build)
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# build/coordinator or build/worker is not built (not a pass).
set -u
E2E=kv_q8_e2e
. "$(dirname "$0")/e2elib.sh"
T_ASK=240
T_READY=90
e2e_init kvq8

# tiny: head_dim 32, one q8_0 block per head
model=$tmp/tiny.gguf
timeout 300 "$Q" mkmodel --shape tiny --type q8_0 \
	--tokenizer "$ROOT/models/arith.gguf" \
	-o "$model" >/dev/null || { bad "mkmodel"; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
e2e_endpoints
conf() { # conf DTYPE LOCAL_WORKERS
	e2e_conf_head "$model" "$name"
	cat <<EOF
kv:
  block_tokens: 16
  blocks: 512
  dtype: $1
sampling:
  stop: none
workers:
  local: $2
  threads: 1
  slots: 8
EOF
}
conf q8_0 2 >"$tmp/cluster.yaml"
conf f16 0 >"$tmp/f16.yaml"

timeout -s TERM 900 "$B/coordinator" --config "$tmp/cluster.yaml" \
	>"$tmp/coordinator.log" 2>&1 &
coord=$!
e2e_track "$coord"
if ! e2e_wait_workers "$EP" 2 "$T_READY" "$coord"; then
	bad "cluster ready within ${T_READY}s (2 workers, q8_0 pools)"
	exit 1
fi
ok "cluster ready: 2 workers with q8_0 KV pools"
e2e_note_workers "$EP"

QUESTION="A farmer has 17 sheep and buys 23 more. How many sheep are there?"
for i in 1 2; do
	timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 200 --json -n 6 \
		--seed 11 --max-new-tokens 40 "$QUESTION" \
		>"$tmp/ask$i.json" 2>"$tmp/ask$i.err"
	check "ask $i (q8_0 cluster) exits 0" [ $? -eq 0 ]
done
for kt in q8_0 f16; do
	timeout $T_ASK "$Q" run --model "$model" --kv-type $kt -n 6 --seed 11 \
		--max-new-tokens 40 --stop none --json "$QUESTION" \
		>"$tmp/run-$kt.json" 2>"$tmp/run-$kt.err"
	check "run --kv-type $kt exits 0" [ $? -eq 0 ]
done
same() { # same A B: the samples' texts are equal
	$PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
t = lambda d: [s["text"] for s in sorted(d["samples"], key=lambda s: s["index"])]
sys.exit(0 if len(t(a)) == 6 and t(a) == t(b) else 1)' "$1" "$2"
}
check "cluster q8_0 samples = quorum run --kv-type q8_0, byte for byte" \
	same "$tmp/ask1.json" "$tmp/run-q8_0.json"
check "again (prefix cache) the same bytes" \
	same "$tmp/ask2.json" "$tmp/run-q8_0.json"
check "the second ask hits the prefix cache" $PY -c '
import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["prefix"]["cache_hit"] else 1)' "$tmp/ask2.json"
# informational: whether 40 tokens of this tiny model differ at all
if same "$tmp/run-q8_0.json" "$tmp/run-f16.json"; then
	echo "note - q8_0 and f16 KV give the same 6 texts on this model"
else
	echo "note - q8_0 and f16 KV texts differ (as expected of a lossy cache)"
fi

# a worker with an f16 pool: refused, both dtypes named
timeout -s TERM 120 "$B/worker" --config "$tmp/f16.yaml" --id wf16 \
	--connect "tcp://127.0.0.1:$wport" >"$tmp/worker-f16.log" 2>&1 &
wf=$!
e2e_track "$wf"
check "an f16 worker is refused, naming both dtypes" e2e_wait_log \
	"$tmp/worker-f16.log" \
	"KV dtype f16 of the worker differs from the config's kv.dtype q8_0" \
	60 "$wf"
timeout 30 "$Q" status --endpoint "$EP" --json >"$tmp/s.json" 2>&1
check "still 2 workers registered" $PY -c '
import json, sys
sys.exit(0 if len(json.load(open(sys.argv[1]))["workers"]) == 2 else 1)' "$tmp/s.json"

# a model whose heads are not whole 32-element blocks: a clear error
timeout 300 "$Q" mkmodel --shape tiny-qwen3 --type f32 \
	--tokenizer "$ROOT/models/arith.gguf" -o "$tmp/q3.gguf" >/dev/null ||
	bad "mkmodel tiny-qwen3"
timeout $T_ASK "$Q" run --model "$tmp/q3.gguf" --kv-type q8_0 -n 1 \
	--max-new-tokens 2 "What is 2+2?" >/dev/null 2>"$tmp/q3.err"
check "run --kv-type q8_0 on head_dim 48 exits 1" [ $? -eq 1 ]
check "... naming the head size" grep -q \
	"needs a head size that is a multiple of 32; this model's head_dim is 48" \
	"$tmp/q3.err"

e2e_finish
