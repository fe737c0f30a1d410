#!/bin/sh
# kv_win_e2e — sliding windows and experts across processes (issues 26,
# part 3, and 27). Two clusters, each against `quorum run` in one
# process, byte for byte, twice (the second time from the prefix cache):
#  - tiny gemma3 (8-token windows on 3 of its 4 layers): a coordinator
#    with 2 local workers whose pools are split by layer class and whose
#    samples release the windowed layers' rows (kv.free_windows, the
#    default); the second worker forks the first one's root through its
#    read-only mapping of a split pool (the window slots resolved through
#    the region's map);
#  - tiny gpt-oss (experts, attention sinks, alternating windows): one
#    local worker and one started with another --host label, so the
#    prompt's rows reach the other host as copies; both decode batches
#    whose rows are grouped by expert round by round.
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

same() { # same A B: the samples' texts are equal
	$PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
t = lambda d: [s["text"] for s in sorted(d["samples"], key=lambda s: s["index"])]
sys.exit(0 if len(t(a)) == 8 and t(a) == t(b) else 1)' "$1" "$2"
}

# the prompt is far longer than the 8-token window and 120 new tokens
# cross several blocks: every fork releases rows, shared and its own
QUESTION="A farmer has 17 sheep and buys 23 more. Then he sells 5 of them and buys 9 goats. How many sheep are there?"

# cluster_case SHAPE LOCAL_WORKERS OTHER_HOST: a cluster of 2 workers,
# LOCAL_WORKERS of them the coordinator's, the rest (OTHER_HOST 1) one
# started here under another host label
cluster_case() {
	shape=$1; nloc=$2; other=$3; d=$tmp/$shape
	mkdir -p "$d"
	model=$d/model.gguf
	timeout 300 "$Q" mkmodel --shape "$shape" --type q8_0 \
		--tokenizer "$ROOT/models/arith.gguf" \
		-o "$model" >/dev/null || { bad "$shape: mkmodel"; return; }
	model=$(cd "$d" && pwd)/model.gguf
	e2e_endpoints
	{
		e2e_conf_head "$model" "$name-$nloc"
		cat <<EOF
kv:
  block_tokens: 16
  blocks: 512
  free_windows: true
sampling:
  stop: none
workers:
  local: $nloc
  threads: 1
  slots: 4
EOF
	} >"$d/cluster.yaml"
	timeout -s TERM 900 "$B/coordinator" --config "$d/cluster.yaml" \
		>"$d/coordinator.log" 2>&1 &
	coord=$!
	e2e_track "$coord"
	if [ "$other" = 1 ]; then
		timeout -s TERM 900 "$B/worker" --config "$d/cluster.yaml" \
			--id far1 --host far-host --threads 1 \
			>"$d/far.log" 2>&1 &
		e2e_track $!
	fi
	if ! e2e_wait_workers "$EP" 2 "$T_READY" "$coord"; then
		bad "$shape: cluster ready within ${T_READY}s (2 workers)"
		return
	fi
	ok "$shape: cluster ready: 2 workers, $nloc on the coordinator's host"
	e2e_note_workers "$EP"
	for i in 1 2; do
		timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 200 --json \
			-n 8 --seed 13 --max-new-tokens 120 --ignore-eos \
			"$QUESTION" >"$d/ask$i.json" 2>"$d/ask$i.err"
		check "$shape: ask $i exits 0" [ $? -eq 0 ]
	done
	timeout $T_ASK "$Q" run --model "$model" -n 8 --seed 13 \
		--max-new-tokens 120 --ignore-eos --stop none --json \
		"$QUESTION" >"$d/run.json" 2>"$d/run.err"
	check "$shape: quorum run exits 0" [ $? -eq 0 ]
	check "$shape: cluster samples = quorum run, byte for byte" \
		same "$d/ask1.json" "$d/run.json"
	check "$shape: again (prefix cache) the same bytes" \
		same "$d/ask2.json" "$d/run.json"
	check "$shape: both workers decoded samples" $PY -c '
import json, sys
w = {s.get("worker") for s in json.load(open(sys.argv[1]))["samples"]}
sys.exit(0 if len(w - {None}) == 2 else 1)' "$d/ask1.json"
	check "$shape: the run released windowed rows (KV peak under half the unshared size)" \
		$PY -c '
import json, sys
k = json.load(open(sys.argv[1]))["kv"]
sys.exit(0 if k["peak_bytes"] < k["unshared_bytes"] / 2 else 1)' "$d/run.json"
	if [ "$other" = 1 ]; then
		check "$shape: the other host received the prompt's rows as copies" \
			$PY -c '
import json, sys
p = json.load(open(sys.argv[1])).get("prefix") or {}
sys.exit(0 if (p.get("blocks_transferred") or 0) > 0 else 1)' "$d/ask1.json"
	fi
}

cluster_case tiny-gemma3 2 0
cluster_case tiny-gptoss 1 1

e2e_finish
