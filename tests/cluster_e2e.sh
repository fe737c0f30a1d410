#!/bin/sh
# cluster_e2e — end-to-end test of issue 5 on one machine: a coordinator
# with 2 local workers on a tiny synthesized model (temp config, free
# loopback ports, a unique cluster name), then `quorum ask` (--json, text,
# --file), `quorum status` and the Python client against it. The cluster
# is always stopped (trap); every step is bounded by `timeout`.
#
#   sh tests/cluster_e2e.sh [BUILD_DIR]       (default build; B=... works too)
#   env: QUORUM_ROOT (default ., the repository), E2E_KEEP=1 keeps the temp dir
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# build/coordinator or build/worker is not built (not a pass).
set -u
E2E=cluster_e2e
. "$(dirname "$0")/e2elib.sh"
T_ASK=180       # seconds, bound of one client command
T_READY=90      # seconds for the workers to register
e2e_init e2e

# ---- the model and the config ---------------------------------------------
# the shipped model's 809-token vocabulary and ChatML template: the same
# engine and transport code as a large vocabulary, without the LM head
# that is nearly all of a tiny model's work per token with Qwen's
model=$tmp/tiny.gguf
timeout 300 "$Q" mkmodel --shape tiny --type q8_0 \
	--tokenizer "$ROOT/models/arith.gguf" \
	-o "$model" >/dev/null || { bad "mkmodel"; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
e2e_endpoints
{
	e2e_conf_head "$model" "$name"
	cat <<EOF
kv:
  block_tokens: 16
  blocks: 1024
  dtype: f16
sampling:
  n: 4
  max_new_tokens: 24
  # every reply holds all n samples (compared with quorum run --stop none)
  stop: none
limits:
  max_n: 16
  request_timeout_ms: 120000
workers:
  local: 2
  threads: 1
  slots: 8
EOF
} >"$tmp/cluster.yaml"

# ---- start and wait ---------------------------------------------------------
timeout -s TERM 900 "$B/coordinator" --config "$tmp/cluster.yaml" \
	>"$tmp/coordinator.log" 2>&1 &
coord=$!
e2e_track "$coord"
if ! e2e_wait_workers "$EP" 2 "$T_READY" "$coord"; then
	bad "cluster ready within ${T_READY}s (2 workers)"
	exit 1
fi
ok "cluster ready: 2 workers registered"
e2e_note_workers "$EP"

# ---- ask --json --------------------------------------------------------------
QUESTION="A farmer has 17 sheep and buys 23 more. How many sheep are there?"
ask_json() { # ask_json OUT ARGS...
	out=$1; shift
	timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 120 --json "$@" \
		>"$out" 2>"$out.err"
}
ask_json "$tmp/a1.json" -n 4 --seed 11 --max-new-tokens 24 "$QUESTION"
check "ask --json exits 0" [ $? -eq 0 ]
cat >"$tmp/check_answer.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2]); k = int(sys.argv[3])
errs = []
def need(c, m):
    if not c: errs.append(m)
need(d["status"] == "STATUS_OK", "status %r" % d["status"])
need(d["error"] is None, "error %r" % d["error"])
need(d["n"] == n, "n %r != %d" % (d["n"], n))
need(len(d["samples"]) == n, "%d samples" % len(d["samples"]))
need(sorted(s["index"] for s in d["samples"]) == list(range(n)), "indices")
voters = sum(1 for s in d["samples"] if s["answer"] is not None)
need(d["voters"] == voters, "voters %r != %d" % (d["voters"], voters))
need(sum(v["count"] for v in d["votes"]) == voters, "vote counts")
if voters == 0:
    need(d["answer"] is None and d["votes"] == [], "no voters but an answer")
else:
    need(d["answer"] == d["votes"][0]["answer"], "answer != top vote")
for s in d["samples"]:
    need(s["finish"] in ("stop", "length"), "finish %r" % s["finish"])
    need(0 <= s["tokens"] <= k, "tokens %r > %d" % (s["tokens"], k))
need(d["timings"] is not None and d["timings"]["total_ms"] is not None, "timings")
need(d["prefix"] is not None, "prefix")
for f in ("seed", "temperature", "top_k", "top_p", "max_new_tokens",
          "votes", "voters", "prompt_tokens", "mode"):
    need(f in d, "field %s missing" % f)
if errs:
    print("\n".join(errs)); sys.exit(1)
EOF
check "ask --json: N samples, answer consistent with votes" \
	$PY "$tmp/check_answer.py" "$tmp/a1.json" 4 24

# same (prompt, params, seed): same bytes, whoever decodes (and the prompt
# now comes from the prefix cache)
ask_json "$tmp/a2.json" -n 4 --seed 11 --max-new-tokens 24 "$QUESTION"
check "ask again exits 0" [ $? -eq 0 ]
check "same seed, same samples (deterministic across workers)" $PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if [s["text"] for s in a["samples"]] == [s["text"] for s in b["samples"]] else 1)' "$tmp/a1.json" "$tmp/a2.json"
check "second ask hits the prefix cache" $PY -c '
import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["prefix"]["cache_hit"] else 1)' "$tmp/a2.json"

# ---- ask, text --------------------------------------------------------------
timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 120 -n 3 \
	--max-new-tokens 16 "What is 6*7?" >"$tmp/a3.txt" 2>&1
check "ask (text) exits 0" [ $? -eq 0 ]
check "ask (text) prints the answer line" grep -q '^answer: ' "$tmp/a3.txt"
check "ask (text) prints 3 samples" \
	[ "$(grep -c '^--- sample ' "$tmp/a3.txt")" -eq 3 ]

# ---- typed errors -------------------------------------------------------------
timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 30 -n 17 "too many" \
	>/dev/null 2>"$tmp/a4.err"
rc=$?
check "ask -n over limits.max_n exits 1" [ $rc -eq 1 ]
check "... with STATUS_BAD_REQUEST" grep -q 'STATUS_BAD_REQUEST' "$tmp/a4.err"

# ---- ask --file -----------------------------------------------------------------
cat >"$tmp/q.jsonl" <<'EOF'
{"id": "a", "question": "What is 2+2?", "answer": "4"}
this line is malformed
{"id": "b", "question": "What is 10-3?", "answer": 7}
{"id": "c", "question": "Name a prime number."}
EOF
timeout $T_ASK "$Q" ask --endpoint "$EP" --timeout 120 --file "$tmp/q.jsonl" \
	--concurrency 2 -n 2 --max-new-tokens 16 --out "$tmp/r.jsonl" \
	>"$tmp/file.out" 2>"$tmp/file.err"
check "ask --file exits 1 (a malformed line), as run --file" [ $? -eq 1 ]
check "ask --file reports the malformed line 2" grep -q 'q.jsonl:2:' "$tmp/file.err"
check "ask --file prints the accuracy" grep -q '^accuracy: ' "$tmp/file.out"
check "ask --file: 3 results, in input order, all OK" $PY -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
ok = [x["id"] for x in r] == ["a", "b", "c"] and all(
    x["status"] == "STATUS_OK" and isinstance(x["votes"], list) and
    (x["correct"] is None) == (x["expected"] is None) for x in r)
sys.exit(0 if ok else 1)' "$tmp/r.jsonl"

# ---- quorum run --file: the questions in merged rounds, in one process -------------
timeout $T_ASK "$Q" run --model "$model" --file "$tmp/q.jsonl" -n 3 \
	--max-new-tokens 16 --stop none --max-live 4 --prefill-tokens 5 \
	>"$tmp/run-file.jsonl" 2>"$tmp/run-file.err"
check "run --file exits 1 (a malformed line)" [ $? -eq 1 ]
check "run --file reports the malformed line 2" grep -q 'q.jsonl:2:' "$tmp/run-file.err"
i=0
for q in "What is 2+2?" "What is 10-3?" "Name a prime number."; do
	timeout $T_ASK "$Q" run --model "$model" -n 3 --max-new-tokens 16 \
		--stop none --json "$q" >"$tmp/run-$i.json" 2>/dev/null
	i=$((i + 1))
done
check "run --file: each question's samples are its quorum run's, bit for bit" $PY -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
one = [json.load(open(f)) for f in sys.argv[2:]]
ok = [x["id"] for x in r] == ["a", "b", "c"] and all(
    x["samples"] == y["samples"] and x["votes"] == y["votes"] and
    x["answer"] == y["answer"] for x, y in zip(r, one)) and \
    r[0]["expected"] == "4" and r[2].get("expected") is None
sys.exit(0 if ok else 1)' "$tmp/run-file.jsonl" "$tmp/run-0.json" \
	"$tmp/run-1.json" "$tmp/run-2.json"

# ---- status -----------------------------------------------------------------------
timeout 30 "$Q" status --endpoint "$EP" >"$tmp/s.txt" 2>&1
check "status exits 0" [ $? -eq 0 ]
check "status lists 2 workers" grep -q ': 2 worker(s)$' "$tmp/s.txt"
timeout 30 "$Q" status --endpoint "$EP" --json >"$tmp/s.json" 2>&1
check "status --json: 2 workers, requests served counted" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["status"] == "STATUS_OK" and len(d["workers"]) == 2
         and (d["requests_served"] or 0) >= 6 else 1)' "$tmp/s.json"

# ---- the Python client ------------------------------------------------------------
if $PY -c 'import zmq, google.protobuf' 2>/dev/null && command -v protoc >/dev/null; then
	sh clients/python/gen_pb.sh "$tmp/python" >/dev/null
	QUORUM_PB2_DIR=$tmp/python timeout $T_ASK $PY clients/python/example.py \
		--endpoint "$EP" --timeout 120 --json -n 3 --max-new-tokens 16 \
		"$QUESTION" >"$tmp/py.json" 2>"$tmp/py.err"
	check "python example exits 0" [ $? -eq 0 ]
	check "python client: N samples, status lists 2 workers" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
a, s = d["ask"], d["status"]
ok = (a["status"] == "STATUS_OK" and len(a["samples"]) == 3 and a["n"] == 3
      and (a["answer"] is None) == (a["voters"] == 0)
      and len(s["workers"]) == 2)
sys.exit(0 if ok else 1)' "$tmp/py.json"
else
	echo "skip - python client (apt-get install python3-zmq python3-protobuf protobuf-compiler)"
fi

e2e_finish
