#!/bin/sh
# restart_e2e — issue 24, drain without silence, with real processes: a
# coordinator (1 local worker, a tiny synthesized model) and the HTTP
# gateway on free loopback ports; a stream of requests through
# `quorum ask` and through the gateway while the coordinator is stopped
# (SIGTERM) and a successor started on the same endpoint. Every request
# must be answered — the reference bytes of its (question, seed), or a
# typed error — well within its client's timeout. Then a frame over
# limits.max_message_bytes gets a TOO_LONG reply, not a dropped
# connection. The processes are always stopped (trap); every wait is
# bounded and waits on an event (a status reply, a log line, an exit).
#
#   sh tests/restart_e2e.sh [BUILD_DIR]       (default build; B=... works too)
#   env: QUORUM_ROOT (default ., the repository), E2E_KEEP=1 keeps the temp dir
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# a binary is not built (not a pass).
set -u
E2E=restart_e2e
. "$(dirname "$0")/e2elib.sh"
T_READY=90      # seconds for a coordinator's worker to register
T_CLIENT=40     # a client's own timeout (s): ask --timeout, curl
T_BOUND=20      # every request answered within this (s)
N_REQ=10        # requests of each kind in the stream
e2e_init rst

# ---- the model and the config ---------------------------------------------
model=$tmp/tiny.gguf
timeout 300 "$Q" mkmodel --shape tiny --type q8_0 \
	--tokenizer "$ROOT/models/arith.gguf" \
	-o "$model" >/dev/null || { bad "mkmodel"; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
cport=$(free_port); wport=$(free_port); hport=$(free_port)
EP=tcp://127.0.0.1:$cport
{
	e2e_conf_head "$model" "$name"
	cat <<EOF
kv:
  block_tokens: 16
  blocks: 512
  dtype: f16
sampling:
  n: 4
  max_new_tokens: 16
  stop: none
limits:
  max_n: 8
  request_timeout_ms: 60000
  # small, so that an oversized frame is cheap to make (20000 bytes)
  max_message_bytes: 16384
workers:
  local: 1
  threads: 1
  slots: 8
http:
  listen: 127.0.0.1:$hport
EOF
} >"$tmp/cluster.yaml"

# start_coord LOG: a coordinator in the background ($coord), ready when
# its worker has registered
start_coord() {
	timeout -s TERM 600 "$B/coordinator" --config "$tmp/cluster.yaml" \
		>"$1" 2>&1 &
	coord=$!
	e2e_track "$coord"
	e2e_wait_workers "$EP" 1 "$T_READY" "$coord"
}

start_coord "$tmp/coordinator1.log" || { bad "coordinator 1 ready"; exit 1; }
ok "coordinator 1 ready"
timeout -s TERM 600 "$Q" serve --config "$tmp/cluster.yaml" \
	--endpoint "$EP" >"$tmp/serve.log" 2>&1 &
gw=$!
e2e_track "$gw"
e2e_wait_log "$tmp/serve.log" "listening on" 60 "$gw" ||
	{ bad "gateway started"; exit 1; }
ok "gateway started"
URL=http://127.0.0.1:$hport/v1/chat/completions
MODEL=$(curl -s --max-time 10 "http://127.0.0.1:$hport/v1/models" |
	$PY -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')

QUESTION="A farmer has 17 sheep and buys 23 more. How many sheep are there?"
ask() { # ask OUT SEED: --json reply into OUT, "rc ms" into OUT.t
	t0=$(now_ms)
	timeout $((T_CLIENT + 10)) "$Q" ask --endpoint "$EP" --json \
		--timeout $T_CLIENT --retries 2 -n 4 --seed "$2" \
		--max-new-tokens 16 "$QUESTION" >"$1" 2>"$1.err"
	echo "$? $(($(now_ms) - t0))" >"$1.t"
}
post() { # post OUT SEED: the HTTP reply into OUT, "code ms" into OUT.t
	t0=$(now_ms)
	code=$(curl -s -o "$1" -w '%{http_code}' --max-time $T_CLIENT \
		-H 'Content-Type: application/json' -d "{\"model\":\"$MODEL\",\
\"n\":4,\"seed\":$2,\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\
\"content\":\"$QUESTION\"}]}" "$URL")
	echo "$code $(($(now_ms) - t0))" >"$1.t"
}

# ---- the reference bytes, before any restart ---------------------------------
for s in 1 2 3; do
	ask "$tmp/ref$s.json" $s
	post "$tmp/gref$s.json" $s
done
cat >"$tmp/texts.py" <<'EOF'
import json, sys
# the bytes a reply stands for: the sample texts (ask --json) or the
# choices' contents (HTTP), in index order
d = json.load(open(sys.argv[1]))
if "samples" in d:
    if d.get("status") != "STATUS_OK":
        sys.exit(1)
    print(json.dumps([s["text"] for s in sorted(d["samples"], key=lambda s: s["index"])]))
else:
    if "choices" not in d:
        sys.exit(1)
    print(json.dumps([c["message"]["content"] for c in sorted(d["choices"], key=lambda c: c["index"])]))
EOF
refs_ok=1
for s in 1 2 3; do
	$PY "$tmp/texts.py" "$tmp/ref$s.json" >"$tmp/ref$s.txt" || refs_ok=0
	$PY "$tmp/texts.py" "$tmp/gref$s.json" >"$tmp/gref$s.txt" || refs_ok=0
done
check "reference replies (ask and HTTP) before the restart" [ $refs_ok -eq 1 ]

# ---- a stream of requests across a restart -----------------------------------
(
	k=1
	while [ $k -le $N_REQ ]; do
		s=$((k % 3 + 1))
		ask "$tmp/a$k.json" $s &
		post "$tmp/h$k.json" $s &
		sleep 0.15
		k=$((k + 1))
	done
	wait
) &
gen=$!
e2e_track "$gen"
sleep 0.6
t_stop=$(now_ms)
kill -TERM "$coord"
i=0
while kill -0 "$coord" 2>/dev/null && [ $i -lt 200 ]; do
	sleep 0.05; i=$((i + 1))
done
check "coordinator 1 exits on SIGTERM" [ $i -lt 200 ]
wait "$coord" 2>/dev/null
t_down=$(now_ms)
start_coord "$tmp/coordinator2.log" || { bad "coordinator 2 ready"; exit 1; }
t_up=$(now_ms)
ok "coordinator 2 ready"
echo "# drain and exit $((t_down - t_stop)) ms, successor ready after $((t_up - t_down)) ms"
i=0
while kill -0 "$gen" 2>/dev/null && [ $i -lt $(((T_CLIENT + 20) * 10)) ]; do
	sleep 0.1; i=$((i + 1))
done
wait "$gen" 2>/dev/null
gen=""

cat >"$tmp/judge.py" <<'EOF'
import json, os, sys
tmp, n, bound = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def ref(kind, s):
    return open(os.path.join(tmp, "%s%d.txt" % (kind, s))).read().strip()
errs, same, typed, worst = [], 0, 0, 0
for k in range(1, n + 1):
    s = k % 3 + 1
    for kind, f, r in (("ask", "a%d.json" % k, "ref"), ("http", "h%d.json" % k, "gref")):
        p = os.path.join(tmp, f)
        try:
            rc, ms = open(p + ".t").read().split()
            rc, ms = int(rc), int(ms)
        except Exception:
            errs.append("%s %d: never finished" % (kind, k)); continue
        worst = max(worst, ms)
        if ms > bound * 1000:
            errs.append("%s %d: %d ms" % (kind, k, ms))
        try:
            d = json.load(open(p))
        except Exception:
            errs.append("%s %d: no JSON reply (%d)" % (kind, k, rc)); continue
        if kind == "ask":
            st = d.get("status")
            if st == "STATUS_OK":
                got = json.dumps([x["text"] for x in sorted(d["samples"], key=lambda x: x["index"])])
                if got == ref(r, s): same += 1
                else: errs.append("ask %d: bytes differ" % k)
            elif st and st.startswith("STATUS_") and d.get("error"):
                typed += 1
            else:
                errs.append("ask %d: %r %r" % (k, st, d.get("error")))
        else:
            if rc == 200 and "choices" in d:
                got = json.dumps([c["message"]["content"] for c in sorted(d["choices"], key=lambda c: c["index"])])
                if got == ref(r, s): same += 1
                else: errs.append("http %d: bytes differ" % k)
            elif rc >= 400 and isinstance(d.get("error"), dict) and d["error"].get("message"):
                typed += 1
            else:
                errs.append("http %d: %d %r" % (k, rc, d))
print("# %d identical, %d typed errors, slowest %d ms" % (same, typed, worst))
if errs:
    print("\n".join(errs)); sys.exit(1)
EOF
check "every request across the restart answered (same bytes or a typed error) within ${T_BOUND}s" \
	$PY "$tmp/judge.py" "$tmp" $N_REQ $T_BOUND

# after the restart: both paths serve the reference bytes
ask "$tmp/after.json" 2
post "$tmp/hafter.json" 2
check "ask after the restart: the reference bytes" sh -c \
	"$PY '$tmp/texts.py' '$tmp/after.json' | cmp -s - '$tmp/ref2.txt'"
check "HTTP after the restart: the reference bytes" sh -c \
	"$PY '$tmp/texts.py' '$tmp/hafter.json' | cmp -s - '$tmp/gref2.txt'"

# ---- a frame over limits.max_message_bytes -----------------------------------
big=$($PY -c 'print("9" * 20000)')
t0=$(now_ms)
timeout 30 "$Q" ask --endpoint "$EP" --json --timeout 10 --retries 0 \
	"$big" >"$tmp/big.json" 2>"$tmp/big.err"
t1=$(now_ms)
check "an oversized frame: TOO_LONG naming the limit, in $((t1 - t0)) ms" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["status"] == "STATUS_TOO_LONG" and "max_message_bytes" in (d["error"] or "") else 1)' "$tmp/big.json"
check "the coordinator still serves after it" sh -c \
	"timeout 30 '$Q' status --endpoint '$EP' --timeout 5 --retries 0 >/dev/null"

e2e_finish
