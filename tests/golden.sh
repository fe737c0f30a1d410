#!/bin/sh
# golden — pins the bytes quorum answers with, so that a change meant to
# keep behaviour (a refactor, a faster kernel) is checked against the
# replies of the code before it: `quorum run --json` on the shipped model
# and on synthesized Q4_K_M and Q8_0 models, the same questions through a
# local cluster (`quorum ask --json`), and through the HTTP gateway
# (`/v1/chat/completions`, plain and streamed). Each reply is reduced to
# its deterministic fields (timings, ids, clock times, cache hits and
# paths dropped; see norm.py below) and hashed; the hashes are compared
# with tests/golden.sha256. The contract says a sample's bytes depend only
# on (model, prompt, params, seed, index), so the pins hold on every ISA,
# thread count and machine.
#
#   sh tests/golden.sh [BUILD_DIR]
#   env: GOLDEN_UPDATE=1 rewrites tests/golden.sha256 (only for a change
#        that is meant to change replies; say so in its commit)
#
# Exit status: 0 all match, 1 a mismatch or a failed step, 77 not built.
set -u
E2E=golden
. "$(dirname "$0")/e2elib.sh"
PINS=$ROOT/tests/golden.sha256
e2e_init gold

# The deterministic part of a reply: run/ask JSON objects, a chat
# completion, or an SSE stream (its data: lines, in order).
cat >"$tmp/norm.py" <<'EOF'
import json, sys
DROP = {"timings", "id", "created", "prefix", "model", "kv",
        "system_fingerprint", "request_id", "endpoint", "worker",
        "prefill_worker"}
# in a cluster, how many samples were still in flight when the stopping
# rule fired follows the workers' timing: what the rule decided over,
# and so every sample and the answer, does not
if len(sys.argv) > 2 and sys.argv[2] == "cluster":
    DROP |= {"started", "finished", "cancelled", "tokens_generated",
             "tokens_saved_est"}
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
raw = open(sys.argv[1], encoding="utf-8").read()
if raw.lstrip().startswith("data:") or "\ndata:" in raw:
    # chunk boundaries and the interleaving of choices follow the
    # tokens' arrival: keep each choice's text and finish, and the rest
    text, finish, other = {}, {}, []
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        d = line[5:].strip()
        if d == "[DONE]":
            other.append(d)
            continue
        c = strip(json.loads(d))
        for ch in c.pop("choices", []):
            i = str(ch["index"])
            text[i] = text.get(i, "") + (ch.get("delta", {}).get("content") or "")
            if ch.get("finish_reason"):
                finish[i] = ch["finish_reason"]
        if [k for k in c if k not in ("object",)]:
            other.append(c)
    out = {"text": text, "finish": finish, "other": other}
else:
    out = strip(json.loads(raw))
sys.stdout.write(json.dumps(out, sort_keys=True, separators=(",", ":")))
EOF

record() { # record CASE FILE [cluster]: the normalized reply's hash
	if h=$($PY "$tmp/norm.py" "$2" ${3:-} | sha256sum | cut -d' ' -f1) &&
	   [ -s "$2" ]; then
		echo "$1 $h" >>"$tmp/got"
	else
		bad "$1: no reply to hash"
	fi
}

# ---- the models ------------------------------------------------------------
ARITH=$ROOT/models/arith.gguf
QWEN=$ROOT/data/tokenizers/qwen2/tokenizer.json
timeout 300 "$Q" mkmodel --shape small --type q4_k_m --tokenizer "$ARITH" \
	-o "$tmp/q4km.gguf" >"$tmp/mk1.log" 2>&1 || bad "mkmodel q4_k_m"
timeout 300 "$Q" mkmodel --shape tiny --type q8_0 --tokenizer "$QWEN" \
	-o "$tmp/q8.gguf" >"$tmp/mk2.log" 2>&1 || bad "mkmodel q8_0"
for m in q4km q8; do
	echo "mkmodel-$m $(sha256sum <"$tmp/$m.gguf" | cut -d' ' -f1)" >>"$tmp/got"
done

Q1="Mia has 45 stickers. She gives 12 to her brother and then buys 3 packs of 8. How many stickers does she have now?"
Q2="A farmer has 17 sheep and buys 23 more. How many sheep are there?"

# ---- quorum run --------------------------------------------------------------
run_case() { # run_case CASE MODEL ARGS...
	c=$1; m=$2; shift 2
	if timeout 300 "$Q" run --model "$m" --json "$@" >"$tmp/$c.json" \
		2>"$tmp/$c.log"; then
		record "$c" "$tmp/$c.json"
	else
		bad "$c: quorum run failed"
	fi
}
run_case run-arith "$ARITH" -n 8 --max-new-tokens 64 --stop none "$Q1"
run_case run-arith-t1 "$ARITH" -n 6 --max-new-tokens 48 --temperature 1 \
	--top-k 0 --top-p 1 --seed 7 --logprobs --stop none "$Q2"
run_case run-arith-exact "$ARITH" -n 16 --max-new-tokens 64 "$Q2"
run_case run-arith-reset "$ARITH" -n 3 --max-new-tokens 32 --mode reset \
	--kv-type f32 "$Q2"
run_case run-q4km "$tmp/q4km.gguf" -n 4 --max-new-tokens 24 --stop none \
	--logprobs "$Q1"
run_case run-q4km-f32act "$tmp/q4km.gguf" -n 2 --max-new-tokens 16 \
	--activations f32 --stop none "$Q2"
run_case run-q8 "$tmp/q8.gguf" -n 4 --max-new-tokens 24 --stop none \
	--seed 3 "$Q1"
# the speed switches change no byte: without the packed copies, without
# the tiles' prefetch, and with a value that is neither 0 nor 1 (named on
# stderr, the switch left on)
for sw in "QUORUM_PACK=0" "QUORUM_PREFETCH=0" "QUORUM_PREFETCH=off"; do
	for m in q8 q4km; do
		if timeout 300 env "$sw" "$Q" run --model "$tmp/$m.gguf" --json \
			-n 4 --max-new-tokens 24 --stop none --seed 3 "$Q1" \
			>"$tmp/sw.json" 2>"$tmp/sw.log" &&
		   timeout 300 "$Q" run --model "$tmp/$m.gguf" --json -n 4 \
			--max-new-tokens 24 --stop none --seed 3 "$Q1" \
			>"$tmp/sw0.json" 2>/dev/null &&
		   [ -s "$tmp/sw.json" ] && [ "$($PY "$tmp/norm.py" "$tmp/sw.json")" = \
			"$($PY "$tmp/norm.py" "$tmp/sw0.json")" ]; then
			ok "$sw $m: the same bytes"
		else
			bad "$sw $m: the reply differs from the default run's"
		fi
	done
done
if grep -q "QUORUM_PREFETCH=off is neither 0 nor 1" "$tmp/sw.log"; then
	ok "QUORUM_PREFETCH=off: named on stderr"
else
	bad "QUORUM_PREFETCH=off: not named on stderr"
fi
# an ISA of no name is a typo, said; the run goes on the best ISA, the
# same bytes (every ISA gives them)
if timeout 300 env QUORUM_ISA=avx-512 "$Q" run --model "$tmp/q8.gguf" --json \
	-n 4 --max-new-tokens 24 --stop none --seed 3 "$Q1" \
	>"$tmp/isa.json" 2>"$tmp/isa.log" &&
   grep -q "QUORUM_ISA=avx-512 is none of" "$tmp/isa.log" &&
   timeout 300 "$Q" run --model "$tmp/q8.gguf" --json -n 4 \
	--max-new-tokens 24 --stop none --seed 3 "$Q1" >"$tmp/isa0.json" \
	2>/dev/null &&
   [ -s "$tmp/isa.json" ] && [ "$($PY "$tmp/norm.py" "$tmp/isa.json")" = \
	"$($PY "$tmp/norm.py" "$tmp/isa0.json")" ]; then
	ok "QUORUM_ISA=avx-512: named on stderr, the same bytes"
else
	bad "QUORUM_ISA=avx-512: not named, or the reply differs"
fi
printf '%s\n' "{\"question\": \"$Q1\", \"id\": \"a\"}" \
	"{\"question\": \"$Q2\", \"id\": \"b\", \"answer\": \"40\"}" \
	>"$tmp/qs.jsonl"
if timeout 300 "$Q" run --model "$ARITH" -n 4 --max-new-tokens 32 \
	--file "$tmp/qs.jsonl" >"$tmp/run-file.jsonl" 2>"$tmp/run-file.log"; then
	$PY -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))' \
		"$tmp/run-file.jsonl" >"$tmp/run-file.json"
	record run-file "$tmp/run-file.json"
else
	bad "run-file: quorum run --file failed"
fi

# ---- a local cluster and the gateway ----------------------------------------
cport=$(free_port); wport=$(free_port); hport=$(free_port)
EP=tcp://127.0.0.1:$cport
amodel=$(cd "$(dirname "$ARITH")" && pwd)/$(basename "$ARITH")
cat >"$tmp/cluster.yaml" <<EOF
model:
  path: $amodel
cluster:
  name: $name
coordinator:
  client_endpoint: $EP
  worker_endpoint: tcp://127.0.0.1:$wport
sampling:
  n: 4
  max_new_tokens: 32
  stop: none
workers:
  local: 2
  threads: 1
http:
  listen: 127.0.0.1:$hport
  # the requests below name model "x"
  model_aliases: x
EOF
timeout -s TERM 900 "$B/coordinator" --config "$tmp/cluster.yaml" \
	>"$tmp/coordinator.log" 2>&1 &
coord=$!
e2e_track "$coord"
if e2e_wait_workers "$EP" 2 90 "$coord"; then
	ask_case() { # ask_case CASE ARGS...
		c=$1; shift
		if timeout 300 "$Q" ask --endpoint "$EP" --timeout 120 --json \
			"$@" >"$tmp/$c.json" 2>"$tmp/$c.log"; then
			record "$c" "$tmp/$c.json" cluster
		else
			bad "$c: quorum ask failed"
		fi
	}
	ask_case ask-arith -n 8 --max-new-tokens 64 --stop none "$Q1"
	ask_case ask-arith-t1 -n 6 --max-new-tokens 48 --temperature 1 \
		--top-k 0 --top-p 1 --seed 7 --logprobs --stop none "$Q2"
	ask_case ask-arith-exact -n 16 --max-new-tokens 64 --stop exact "$Q2"

	timeout -s TERM 600 "$Q" serve --config "$tmp/cluster.yaml" \
		>"$tmp/serve.log" 2>&1 &
	gw=$!
	e2e_track "$gw"
	e2e_wait_log "$tmp/serve.log" "listening on" 60 "$gw"
	post() { # post CASE JSON-BODY
		$PY - "http://127.0.0.1:$hport/v1/chat/completions" "$2" \
			>"$tmp/$1.json" 2>"$tmp/$1.log" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    sys.stdout.write(r.read().decode())
EOF
		if [ $? -eq 0 ]; then record "$1" "$tmp/$1.json" cluster
		else bad "$1: POST failed"; fi
	}
	if grep -q "listening on" "$tmp/serve.log"; then
		post http-chat "{\"model\":\"x\",\"n\":4,\"max_tokens\":48,\"seed\":5,\"messages\":[{\"role\":\"user\",\"content\":\"$Q2\"}]}"
		post http-stream "{\"model\":\"x\",\"n\":2,\"max_tokens\":24,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}]}"
	else
		bad "quorum serve did not start"
	fi
else
	bad "cluster ready: 2 workers within 90 s"
fi

# ---- compare -----------------------------------------------------------------
if [ -n "${GOLDEN_UPDATE:-}" ]; then
	cp "$tmp/got" "$PINS"
	echo "golden: wrote $PINS"
fi
while read -r c h; do
	want=$(sed -n "s/^$c //p" "$PINS" 2>/dev/null)
	if [ -z "$want" ]; then bad "$c: no pin in $PINS"
	elif [ "$want" = "$h" ]; then ok "$c"
	else bad "$c: reply changed ($h, pinned $want)"; fi
done <"$tmp/got"
while read -r c h; do
	grep -q "^$c " "$tmp/got" || bad "$c: pinned but not produced"
done <"$PINS"
e2e_finish
