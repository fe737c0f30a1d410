#!/bin/sh
# netns_e2e — the cluster across "hosts" (issue 5) and a network partition
# (issue 6), in three network namespaces of its own:
#
#   qnt-PID-c  coordinator, service address 10.231.0.1/32 (on lo)
#       |-- veth 10.231.1.1/30 <-> 10.231.1.2/30 --  qnt-PID-a: workers a1 a2 (--host a)
#       `-- veth 10.231.2.1/30 <-> 10.231.2.2/30 --  qnt-PID-b: workers b1 b2 (--host b)
#
# The hosts reach 10.231.0.1 through their link; nothing else is routed.
# All namespaces share /dev/shm (one kernel), so the test also checks that
# no worker maps a pool of the other host label (/proc/PID/maps).
#
# Checks: samples and answer byte-identical to `quorum run --mode batched`
# (same model, question, N, seed, params); samples decoded on both hosts;
# the prefix copied to the other host once (blocks_transferred ==
# prefix_blocks), not at all for a repeat; then host b's link is taken
# down (coordinator side) while a long request is in flight: it completes,
# identical, via host a; b's workers expire; the link is healed: the same
# b processes register again and serve a new request.
#
#   sh tests/netns_e2e.sh [BUILD_DIR]     (default build; B=... works too)
#   env: QUORUM_ROOT (default ., the repository), E2E_KEEP=1 keeps the temp dir
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped (not
# root, no ip(8), no network namespaces here, or binaries not built).
set -u
B=${1:-${B:-build}}
ROOT=${QUORUM_ROOT:-.}
Q=$B/quorum
PY=/usr/bin/python3
T_READY=60      # seconds for 4 workers to register
# The bounds below only keep a hung run from hanging CI: the checks wait
# on events (replies, registrations), and a loaded machine may take long.
T_ASK=300       # seconds, bound of one client command
T_HEAL=30       # seconds for host b's workers to come back

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1; then
	echo "netns_e2e: skip: needs root and ip(8) (apt-get install iproute2)"
	exit 77
fi
for b in "$Q" "$B/coordinator" "$B/worker" "$PY"; do
	if [ ! -x "$b" ]; then
		echo "netns_e2e: skip: $b is not built (make B=$B)"
		exit 77
	fi
done

t0=$(date +%s%N)
tag="qnt-$$"
NSC=$tag-c; NSA=$tag-a; NSN=$tag-b
VCA=$tag-ca; VAC=$tag-ac; VCB=$tag-cb; VBC=$tag-bc
name="nt$$"                     # cluster name: part of the shm names
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-netns.XXXXXX")
pids=""                         # what we started (ip netns exec -> timeout)
created=""                      # namespaces we created
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1"; }
check() { # check NAME COMMAND...: passes when COMMAND exits 0
	n=$1; shift
	if "$@"; then ok "$n"; else bad "$n"; fi
}
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
summary() { # the last lines, also on an early exit
	echo "netns_e2e: runtime $(ms_since "$t0") ms"
	echo "netns_e2e: $passed passed, $failed failed"
}

cleanup() {
	trap - EXIT INT TERM
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	i=0
	while [ $i -lt 50 ]; do
		alive=""
		for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && break
		sleep 0.1; i=$((i + 1))
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	# anything still running inside our namespaces is ours
	for ns in $created; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			echo "netns_e2e: killing leftover pid $p in $ns" >&2
			kill -KILL "$p" 2>/dev/null
		done
	done
	sleep 0.1
	# deleting a namespace deletes the veth ends inside it
	for ns in $created; do ip netns del "$ns" 2>/dev/null; done
	for v in $VCA $VAC $VCB $VBC; do
		ip link del "$v" 2>/dev/null
	done
	for f in /dev/shm/quorum-"$name"@*; do
		[ -e "$f" ] || continue
		echo "netns_e2e: shared memory left behind: $f" >&2
		rm -f "$f"
	done
	if [ "$failed" -ne 0 ] || [ -n "${E2E_KEEP:-}" ]; then
		echo "netns_e2e: logs in $tmp" >&2
		for l in "$tmp"/*.log; do
			[ -f "$l" ] || continue
			echo "--- $l" >&2
			tail -n 15 "$l" >&2
		done
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- namespaces and links -------------------------------------------------
setup_net() {
	for ns in $NSC $NSA $NSN; do
		ip netns add "$ns" || return 1
		created="$created $ns"
		ip -n "$ns" link set lo up || return 1
	done
	ip -n "$NSC" addr add 10.231.0.1/32 dev lo &&
	ip -n "$NSC" link add "$VCA" type veth peer name "$VAC" netns "$NSA" &&
	ip -n "$NSC" link add "$VCB" type veth peer name "$VBC" netns "$NSN" &&
	ip -n "$NSC" addr add 10.231.1.1/30 dev "$VCA" &&
	ip -n "$NSC" addr add 10.231.2.1/30 dev "$VCB" &&
	ip -n "$NSA" addr add 10.231.1.2/30 dev "$VAC" &&
	ip -n "$NSN" addr add 10.231.2.2/30 dev "$VBC" &&
	ip -n "$NSC" link set "$VCA" up && ip -n "$NSC" link set "$VCB" up &&
	ip -n "$NSA" link set "$VAC" up && ip -n "$NSN" link set "$VBC" up &&
	ip -n "$NSA" route add 10.231.0.1/32 via 10.231.1.1 &&
	ip -n "$NSN" route add 10.231.0.1/32 via 10.231.2.1
}
if ! ip netns add "$tag-probe" 2>"$tmp/probe.err"; then
	echo "netns_e2e: skip: needs root and ip(8): cannot create a network" \
		"namespace here: $(cat "$tmp/probe.err")"
	exit 77
fi
ip netns del "$tag-probe"
if ! setup_net >"$tmp/net.log" 2>&1; then
	bad "network namespaces and veth links set up"
	summary; exit 1
fi

# ---- model, references, config ----------------------------------------------
# the shipped model's 809-token vocabulary and ChatML template: the same
# engine and transport code as a large vocabulary, without the LM head
# that is nearly all of a tiny model's work per token with Qwen's
model=$tmp/tiny.gguf
timeout 600 "$Q" mkmodel --shape tiny --type q8_0 \
	--tokenizer "$ROOT/models/arith.gguf" \
	-o "$model" >/dev/null || { bad "mkmodel"; summary; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")

Q1="A farmer has 17 sheep and buys 23 more. How many sheep are there?"
Q2="Explain how photosynthesis works in detail."
Q3="What is 6*7?"
P="--temperature 0.7 --top-k 40 --top-p 0.95"
# reference: in-process batched decode with the cluster's KV layout
ref() { # ref OUT N SEED MAX_NEW QUESTION [OPTION]
	timeout 600 "$Q" run --model "$model" --mode batched --kv-type f16 \
		--block-tokens 16 --threads 1 --stop none -n "$2" --seed "$3" \
		--max-new-tokens "$4" $P ${6:-} --json "$5" >"$1" 2>"$1.err"
}
# the partition's request runs every sample to its end: long enough that
# the cut lands seconds before the end of the decode
ref "$tmp/r1.json" 8 7 48 "$Q1" &&
	ref "$tmp/r2.json" 32 3 1200 "$Q2" --ignore-eos &&
	ref "$tmp/r3.json" 8 5 48 "$Q3" ||
	{ bad "quorum run references"; summary; exit 1; }

cat >"$tmp/cluster.yaml" <<EOF
model:
  path: $model
cluster:
  name: $name
coordinator:
  client_endpoint: tcp://127.0.0.1:7700
  worker_endpoint: tcp://10.231.0.1:7701
kv:
  block_tokens: 16
  blocks: 2048
  dtype: f16
sampling:
  n: 4
  max_new_tokens: 24
  # every reply holds all n samples (compared with quorum run --stop none)
  stop: none
limits:
  max_n: 64
  request_timeout_ms: 280000
heartbeat:
  # a partition is noticed after 2 s; a shorter liveness flaps workers
  # on a loaded VM (stalls of over 600 ms were seen)
  interval_ms: 200
  liveness: 10
  reconnect_min_ms: 200
  reconnect_max_ms: 1000
workers:
  local: 0
  threads: 1
  slots: 32
EOF

cat >"$tmp/chk.py" <<'EOF'
import json, sys

def load(p):
    with open(p) as f:
        return json.load(f)

def host(wid):
    return (wid or "?")[0]

cmd = sys.argv[1]
if cmd == "same":           # same REF ASK: samples and vote byte-identical
    r, a = load(sys.argv[2]), load(sys.argv[3])
    errs = []
    if sum(s["tokens"] for s in r["samples"]) == 0:
        errs.append("the reference generated no tokens: nothing compared")
    if a.get("status") != "STATUS_OK":
        errs.append("status %r error %r" % (a.get("status"), a.get("error")))
    else:
        rs = {s["index"]: s for s in r["samples"]}
        as_ = {s["index"]: s for s in a["samples"]}
        if sorted(rs) != sorted(as_):
            errs.append("indices %r != %r" % (sorted(as_), sorted(rs)))
        for i in sorted(rs):
            if i not in as_:
                continue
            for k in ("text", "answer", "finish", "tokens"):
                if rs[i][k] != as_[i][k]:
                    errs.append("sample %d (worker %s) %s: %r != %r" %
                                (i, as_[i].get("worker"), k,
                                 as_[i][k], rs[i][k]))
        for k in ("answer", "votes", "n", "voters"):
            if r[k] != a[k]:
                errs.append("%s: %r != %r" % (k, a[k], r[k]))
    for e in errs[:5]:
        print("   ", e)
    sys.exit(1 if errs else 0)
elif cmd == "hosts":        # hosts ASK: host labels that decoded samples
    a = load(sys.argv[2])
    print("".join(sorted({host(s.get("worker")) for s in a["samples"]})))
elif cmd == "prefix":       # prefix ASK KEY
    print(json.dumps(load(sys.argv[2])["prefix"][sys.argv[3]]))
elif cmd == "workers":      # workers STATUS [pid]: "id:pid:busy ..." sorted
    d = load(sys.argv[2])
    f = "%(id)s:%(pid)s" if sys.argv[3:] == ["pid"] else "%(id)s:%(pid)s:%(busy)s"
    print(" ".join(sorted(f % w for w in d.get("workers") or [])))
elif cmd == "maps":         # maps STATUS NAME: pools mapped across hosts
    d = load(sys.argv[2]); name = sys.argv[3]
    ids = {w["id"]: w["host"] for w in d["workers"]}
    pre = "/dev/shm/quorum-%s@" % name
    cross, peer = [], {}
    for w in d["workers"]:
        with open("/proc/%d/maps" % w["pid"]) as f:
            for line in f:
                i = line.find(pre)
                if i < 0:
                    continue
                owner = line[i + len(pre):].strip().rsplit("@", 1)[0]
                if owner == w["id"]:
                    continue
                if ids.get(owner) != w["host"]:
                    cross.append("%s maps %s's pool" % (w["id"], owner))
                else:
                    peer[w["host"]] = peer.get(w["host"], 0) + 1
    for c in cross:
        print("   ", c)
    print("    same-host peer mappings:", peer)
    sys.exit(1 if cross or sorted(peer) != ["a", "b"] else 0)
EOF
chk() { $PY "$tmp/chk.py" "$@"; }

# ---- processes ----------------------------------------------------------------
ip netns exec "$NSC" timeout -s TERM 1200 "$B/coordinator" \
	--config "$tmp/cluster.yaml" >"$tmp/coordinator.log" 2>&1 &
pids="$pids $!"
coord=$!
for w in a1 a2 b1 b2; do
	h=${w%?}
	ns=$NSA; [ "$h" = b ] && ns=$NSN
	ip netns exec "$ns" timeout -s TERM 1200 "$B/worker" \
		--config "$tmp/cluster.yaml" --id "$w" --host "$h" \
		--connect tcp://10.231.0.1:7701 >"$tmp/worker-$w.log" 2>&1 &
	pids="$pids $!"
done

qc() { # quorum SUBCOMMAND ... inside the coordinator's namespace
	sub=$1; shift
	ip netns exec "$NSC" timeout $T_ASK "$Q" "$sub" \
		--endpoint tcp://127.0.0.1:7700 "$@"
}
status_json() { # status_json OUT
	qc status --json --timeout 1 --retries 0 >"$1" 2>/dev/null
}
workers_now() { status_json "$tmp/st.json" && chk workers "$tmp/st.json"; }
wait_workers() { # wait_workers WANT SECONDS: until ids:pids:busy match WANT
	i=0
	while [ $i -lt $(($2 * 10)) ]; do
		kill -0 "$coord" 2>/dev/null || return 1
		now=$(workers_now | sed 's/:[0-9]*:[0-9]*//g')
		[ "$now" = "$1" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "    workers: ${now:-none}, want $1"
	return 1
}
once() { [ "${pb:-0}" -gt 0 ] && [ "$bt" = "$pb" ]; }
ask() { # ask OUT N SEED MAX_NEW QUESTION [OPTION]
	o=$1 n=$2 s=$3 k=$4; shift 4
	qc ask --timeout 280 --retries 0 --json -n "$n" --seed "$s" \
		--max-new-tokens "$k" $P ${2:-} "$1" >"$o" 2>"$o.err"
}

if ! wait_workers "a1 a2 b1 b2" $T_READY; then
	bad "4 workers on 2 hosts registered within ${T_READY}s"
	summary; exit 1
fi
ok "4 workers on 2 hosts registered ($(ms_since "$t0") ms since start)"
status_json "$tmp/s0.json"
pids0=$(chk workers "$tmp/s0.json" pid)

# ---- across hosts ---------------------------------------------------------------
ask "$tmp/a1.json" 8 7 48 "$Q1"
check "ask 1 exits 0" [ $? -eq 0 ]
check "ask 1: samples and vote identical to quorum run" \
	chk same "$tmp/r1.json" "$tmp/a1.json"
check "ask 1: samples decoded on hosts a and b" \
	[ "$(chk hosts "$tmp/a1.json")" = ab ]
pb=$(chk prefix "$tmp/a1.json" prefix_blocks)
bt=$(chk prefix "$tmp/a1.json" blocks_transferred)
check "ask 1: prefix copied to the other host once ($bt of $pb blocks)" \
	once
ask "$tmp/a1b.json" 8 7 48 "$Q1"
check "repeat exits 0" [ $? -eq 0 ]
check "repeat: identical to quorum run" chk same "$tmp/r1.json" "$tmp/a1b.json"
hit=$(chk prefix "$tmp/a1b.json" cache_hit)
bt=$(chk prefix "$tmp/a1b.json" blocks_transferred)
check "repeat: prefix cache hit ($hit), $bt blocks transferred" \
	[ "$hit/$bt" = true/0 ]
check "repeat: samples decoded on hosts a and b" \
	[ "$(chk hosts "$tmp/a1b.json")" = ab ]
status_json "$tmp/s1.json"
check "no worker maps a pool of the other host (and peers on a host do)" \
	chk maps "$tmp/s1.json" "$name"

# ---- partition: host b's link goes down under a long request ---------------------
ask "$tmp/a2.json" 32 3 1200 "$Q2" --ignore-eos &
askp=$!
seen=""
i=0
while [ $i -lt 200 ] && kill -0 $askp 2>/dev/null; do
	# a job of this request assigned to a worker on host b
	if workers_now | tr ' ' '\n' | grep -q '^b[12]:[0-9]*:[1-9]'; then
		seen=1
		break
	fi
	sleep 0.05; i=$((i + 1))
done
ip -n "$NSC" link set "$VCB" down
tcut=$(date +%s%N)
inflight=""
kill -0 $askp 2>/dev/null && inflight=1
wait $askp
rc=$?
tdone=$(ms_since "$tcut")
check "partition hit the request in flight (host b busy: ${seen:-no})" \
	[ "$seen$inflight" = 11 ]
check "request under partition exits 0 (done ${tdone} ms after the cut)" \
	[ $rc -eq 0 ]
check "request under partition: identical to quorum run" \
	chk same "$tmp/r2.json" "$tmp/a2.json"
check "host b's workers expired, host a's kept" wait_workers "a1 a2" 10
check "coordinator logged b1 and b2 expired" \
	[ "$(grep -c 'worker b[12] (host b) removed: heartbeat expired' \
		"$tmp/coordinator.log")" -ge 2 ]

# ---- heal -------------------------------------------------------------------------
ip -n "$NSC" link set "$VCB" up
theal=$(date +%s%N)
if wait_workers "a1 a2 b1 b2" $T_HEAL; then
	ok "link healed: b1 b2 registered again within $(ms_since "$theal") ms"
else
	bad "link healed: b1 b2 registered again within ${T_HEAL}s"
fi
status_json "$tmp/s2.json"
regs() { grep -c "worker $1 registered" "$tmp/coordinator.log"; }
check "b1, b2 registered once each after the heal, none replaced" \
	[ "$(regs b1)/$(regs b2)/$(grep -c 'replaced by' "$tmp/coordinator.log")" = 2/2/0 ]
pids2=$(chk workers "$tmp/s2.json" pid)
check "the same worker processes came back (pids $pids2)" \
	[ "$pids0" = "$pids2" ]
ask "$tmp/a3.json" 8 5 48 "$Q3"
check "ask after heal exits 0" [ $? -eq 0 ]
check "ask after heal: identical to quorum run" \
	chk same "$tmp/r3.json" "$tmp/a3.json"
check "ask after heal: samples decoded on hosts a and b again" \
	[ "$(chk hosts "$tmp/a3.json")" = ab ]
pb=$(chk prefix "$tmp/a3.json" prefix_blocks)
bt=$(chk prefix "$tmp/a3.json" blocks_transferred)
check "ask after heal: prefix copied once ($bt of $pb blocks)" once
status_json "$tmp/s3.json"
check "after heal: still no cross-host pool mapping" \
	chk maps "$tmp/s3.json" "$name"

summary
[ "$failed" -eq 0 ]
