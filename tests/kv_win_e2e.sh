#!/bin/sh
# kv_win_e2e — sliding windows released across processes (issue 26, part
# 3): a coordinator with 2 local workers on a tiny gemma3 model (8-token
# windows on 3 of its 4 layers), whose pools are split by layer class and
# whose samples release the windowed layers' rows (kv.free_windows, the
# default), gives the same samples, byte for byte, as `quorum run` in one
# process, twice (the second time from the prefix cache): the second
# worker forks the first one's root through its read-only mapping of a
# split pool (the window slots resolved through the region's map).
#
#   sh tests/kv_win_e2e.sh [BUILD_DIR]      (default build)
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# build/coordinator or build/worker is not built (not a pass).
set -u
E2E=kv_win_e2e
. "$(dirname "$0")/e2elib.sh"
T_ASK=240
T_READY=90
e2e_init kvwin

model=$tmp/gemma3.gguf
timeout 300 "$Q" mkmodel --shape tiny-gemma3 --type q8_0 \
	--tokenizer "$ROOT/models/arith.gguf" \
	-o "$model" >/dev/null || { bad "mkmodel"; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
cport=$(free_port); wport=$(free_port)
while [ "$wport" = "$cport" ]; do wport=$(free_port); done
EP=tcp://127.0.0.1:$cport
cat >"$tmp/cluster.yaml" <<EOF
model:
  path: $model
cluster:
  name: $name
coordinator:
  client_endpoint: $EP
  worker_endpoint: tcp://127.0.0.1:$wport
kv:
  block_tokens: 16
  blocks: 512
  free_windows: true
sampling:
  stop: none
workers:
  local: 2
  threads: 1
  slots: 4
EOF

timeout -s TERM 900 "$B/coordinator" --config "$tmp/cluster.yaml" \
	>"$tmp/coordinator.log" 2>&1 &
coord=$!
e2e_track "$coord"
if ! e2e_wait_workers "$EP" 2 "$T_READY" "$coord"; then
	bad "cluster ready within ${T_READY}s (2 workers, split pools)"
	exit 1
fi
ok "cluster ready: 2 workers with window-split KV pools"
e2e_note_workers "$EP"

# the prompt is far longer than the 8-token window and 120 new tokens
# cross several blocks: every fork releases rows, shared and its own
QUESTION="A farmer has 17 sheep and buys 23 more. Then he sells 5 of them and buys 9 goats. How many sheep are there?"
for i in 1 2; do
	timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 200 --json -n 8 \
		--seed 13 --max-new-tokens 120 --ignore-eos "$QUESTION" \
		>"$tmp/ask$i.json" 2>"$tmp/ask$i.err"
	check "ask $i (window-split cluster) exits 0" [ $? -eq 0 ]
done
timeout $T_ASK "$Q" run --model "$model" -n 8 --seed 13 \
	--max-new-tokens 120 --ignore-eos --stop none --json "$QUESTION" \
	>"$tmp/run.json" 2>"$tmp/run.err"
check "quorum run exits 0" [ $? -eq 0 ]
same() { # same A B: the samples' texts are equal
	$PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
t = lambda d: [s["text"] for s in sorted(d["samples"], key=lambda s: s["index"])]
sys.exit(0 if len(t(a)) == 8 and t(a) == t(b) else 1)' "$1" "$2"
}
check "cluster samples = quorum run, byte for byte" \
	same "$tmp/ask1.json" "$tmp/run.json"
check "again (prefix cache) the same bytes" \
	same "$tmp/ask2.json" "$tmp/run.json"
check "both workers decoded samples" $PY -c '
import json, sys
w = {s.get("worker") for s in json.load(open(sys.argv[1]))["samples"]}
sys.exit(0 if len(w - {None}) == 2 else 1)' "$tmp/ask1.json"
check "the run released windowed rows (KV peak under the unshared size)" \
	$PY -c '
import json, sys
k = json.load(open(sys.argv[1]))["kv"]
sys.exit(0 if k["peak_bytes"] < k["unshared_bytes"] / 2 else 1)' "$tmp/run.json"

e2e_finish
