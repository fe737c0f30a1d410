#!/bin/sh
# fair_e2e — issue 24, fairness between API keys, with real processes: a
# coordinator (1 local worker with 1 decode slot, so requests wait in its
# queue) and the HTTP gateway with two API keys. 60 concurrent requests
# of one key and 4 of the other: none refused while the queue
# (limits.queue_depth 64) has room — before, one gateway was one client
# and got at most half of it. Then the heavy key runs past
# limits.tokens_per_minute: 429, while the light key is still served.
# The processes are always stopped (trap); every wait is bounded.
#
#   sh tests/fair_e2e.sh [BUILD_DIR]       (default build; B=... works too)
#   env: QUORUM_ROOT (default ., the repository), E2E_KEEP=1 keeps the temp dir
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# a binary is not built (not a pass).
set -u
E2E=fair_e2e
. "$(dirname "$0")/e2elib.sh"
T_READY=90      # seconds for the worker to register
T_REQ=90        # one request's bound (s)
NEW=16          # tokens per request (ignore_eos: exactly these)
TPM=1100        # limits.tokens_per_minute: the 60 (at most 17 tokens each) and a little
e2e_init fair

model=$tmp/tiny.gguf
timeout 300 "$Q" mkmodel --shape tiny --type q8_0 \
	--tokenizer "$ROOT/models/arith.gguf" \
	-o "$model" >/dev/null || { bad "mkmodel"; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
cport=$(free_port); wport=$(free_port); hport=$(free_port)
EP=tcp://127.0.0.1:$cport
HEAVY=heavy-key-$$
LIGHT=light-key-$$
printf '%s\n%s\n' "$HEAVY" "$LIGHT" >"$tmp/keys"
chmod 600 "$tmp/keys"
{
	e2e_conf_head "$model" "$name"
	cat <<EOF
kv:
  block_tokens: 16
  blocks: 512
  dtype: f16
sampling:
  n: 1
  max_new_tokens: $NEW
  stop: none
limits:
  queue_depth: 64
  request_timeout_ms: 90000
  tokens_per_minute: $TPM
workers:
  local: 1
  threads: 1
  slots: 1
http:
  listen: 127.0.0.1:$hport
  api_keys_file: $tmp/keys
  # the 64 clients of this test all come from 127.0.0.1
  max_connections_per_ip: 128
EOF
} >"$tmp/cluster.yaml"

timeout -s TERM 600 "$B/coordinator" --config "$tmp/cluster.yaml" \
	>"$tmp/coordinator.log" 2>&1 &
coord=$!
e2e_track "$coord"
e2e_wait_workers "$EP" 1 "$T_READY" "$coord" || { bad "coordinator ready"; exit 1; }
timeout -s TERM 600 "$Q" serve --config "$tmp/cluster.yaml" \
	>"$tmp/serve.log" 2>&1 &
gw=$!
e2e_track "$gw"
e2e_wait_log "$tmp/serve.log" "listening on" 60 "$gw" ||
	{ bad "gateway started"; exit 1; }
ok "cluster and gateway ready"
URL=http://127.0.0.1:$hport/v1/chat/completions
MODEL=$(curl -s --max-time 10 -H "Authorization: Bearer $HEAVY" \
	"http://127.0.0.1:$hport/v1/models" |
	$PY -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')

post() { # post KEY OUT SEED: the HTTP code into OUT.code, headers OUT.h
	curl -s -o "$2" -D "$2.h" -w '%{http_code}' --max-time $T_REQ \
		-H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' \
		-d "{\"model\":\"$MODEL\",\"n\":1,\"seed\":$3,\"max_tokens\":$NEW,\
\"ignore_eos\":true,\"messages\":[{\"role\":\"user\",\"content\":\
\"What is $3 + $3?\"}]}" "$URL" >"$2.code"
}

# ---- 60 + 4 at once --------------------------------------------------------
# (a subshell: its wait is for these requests only, not the servers)
(
	k=1
	while [ $k -le 60 ]; do
		post "$HEAVY" "$tmp/h$k" $k &
		[ $k -eq 20 ] &&
			for j in 1 2 3 4; do post "$LIGHT" "$tmp/l$j" $j & done
		k=$((k + 1))
	done
	wait
)
codes() { for f in "$@"; do cat "$f"; echo; done | sort | uniq -c | tr -s ' \n' ' '; }
echo "# heavy: $(codes "$tmp"/h*.code); light: $(codes "$tmp"/l*.code)"
n200=0
for f in "$tmp"/h*.code "$tmp"/l*.code; do
	[ "$(cat "$f")" = 200 ] && n200=$((n200 + 1))
done
check "60 + 4 concurrent requests of two keys: all 64 answered 200" \
	[ $n200 -eq 64 ]
n200=0
for f in "$tmp"/l*.code; do
	[ "$(cat "$f")" = 200 ] && n200=$((n200 + 1))
done
check "the light key's 4 requests all succeed" [ $n200 -eq 4 ]

# ---- over tokens_per_minute ------------------------------------------------
# the heavy key has spent 60 x NEW of TPM tokens: within a few more
# requests it is refused (429), the light key is not
k=100
got=""
while [ $k -lt 130 ]; do
	post "$HEAVY" "$tmp/x$k" $k
	if [ "$(cat "$tmp/x$k.code")" = 429 ]; then got=$k; break; fi
	k=$((k + 1))
done
check "the heavy key over limits.tokens_per_minute gets 429" [ -n "$got" ]
if [ -n "$got" ]; then
	check "... naming the limit" grep -q "tokens_per_minute" "$tmp/x$got"
	ra=$(sed -n 's/^[Rr]etry-[Aa]fter: *\([0-9]*\).*/\1/p' "$tmp/x$got.h")
	echo "# 429 after $((got - 100)) more requests; Retry-After: ${ra:-(not sent)}"
fi
post "$LIGHT" "$tmp/l9" 9
check "the light key is still served" [ "$(cat "$tmp/l9.code")" = 200 ]

e2e_finish
