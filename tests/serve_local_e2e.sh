#!/bin/sh
# serve_local_e2e — `quorum serve --model FILE` (issue 38): one command
# serves a model, starting a cluster of its own (a coordinator and its
# local workers, ipc:// endpoints in a private directory), and leaves
# nothing behind however it ends.
#  - ready (/health 200), the coordinator its child and the workers the
#    coordinator's, their pools in /dev/shm, the private directory;
#  - a chat completion returns the bytes `quorum run` gives in one
#    process for the same question, seed and settings;
#  - SIGTERM: exit status 0; no process, pool or directory left;
#  - its coordinator killed under it: it says so and exits 1; the
#    workers and their pools go too;
#  - itself killed (SIGKILL): the coordinator and workers follow it
#    (parent-death signals), their pools go;
#  - bad arguments (both --model and --config, a missing model, a file
#    that is not a model (never said ready), a model no worker can load
#    (the coordinator stops: no restart loop), --workers 0, --endpoint
#    with --model, a --listen port past 65535, an address in use before
#    anything starts): a clear error, nothing left.
#
#   sh tests/serve_local_e2e.sh [BUILD_DIR]      (default build)
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# the programs are not built (not a pass).
set -u
E2E=serve_local_e2e
. "$(dirname "$0")/e2elib.sh"
T_READY=90
T_ASK=240
T_STOP=60
e2e_init servelocal
MODEL=$(cd "$ROOT/models" && pwd)/arith.gguf
QUESTION="What is 17 plus 25?"

# start LOG: `quorum serve --model` with 2 workers on a free port, its
# private directory under $tmp; sets sp (its pid) and port
start() {
	port=$(free_port)
	TMPDIR=$tmp "$Q" serve --model "$MODEL" --workers 2 --threads 1 \
		--listen "127.0.0.1:$port" >"$1" 2>&1 &
	sp=$!
	e2e_track "$sp"
}

# ready: 0 once /health answers 200 (a worker registered); 1 when the
# gateway exits first or T_READY seconds pass
ready() {
	i=0
	while [ $i -lt $((T_READY * 4)) ]; do
		kill -0 "$sp" 2>/dev/null || return 1
		code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 \
			"http://127.0.0.1:$port/health" 2>/dev/null)
		[ "$code" = 200 ] && return 0
		sleep 0.25; i=$((i + 1))
	done
	return 1
}

kids() { pgrep -P "$1" | tr '\n' ' ' | sed 's/ $//'; }

# procs: sets coord (the gateway's one child) and workers (the
# coordinator's children, waited for until 2 run: registering, shown by
# /health, comes before every worker has mapped its pool)
procs() {
	coord=$(kids "$sp")
	i=0
	while [ "$(kids "$coord" | wc -w)" -lt 2 ] && [ $i -lt $((T_READY * 4)) ]; do
		sleep 0.25; i=$((i + 1))
	done
	workers=$(kids "$coord")
}
pools() { ls /dev/shm 2>/dev/null | grep -c "^quorum-serve-$1@"; }
dirs() { ls -d "$tmp"/quorum-serve-* 2>/dev/null | wc -l; }

# gone PID...: 0 once none of the processes is running (a zombie is not
# running) within T_STOP seconds
gone() {
	i=0
	while [ $i -lt $((T_STOP * 10)) ]; do
		left=0
		for p in "$@"; do
			st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' \
				"/proc/$p/status" 2>/dev/null)
			[ -n "$st" ] && [ "$st" != Z ] && left=1
		done
		[ $left = 0 ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}

# exited PID: waits (bounded) for the gateway; sets rc to its status
exited() {
	gone "$1" || { rc=timeout; return 1; }
	wait "$1"; rc=$?
}

# --- 1: start, serve, SIGTERM ---------------------------------------------
start "$tmp/serve1.log"
if ! ready; then
	bad "ready within ${T_READY}s"
	e2e_finish
fi
ok "ready: /health 200"
procs
set -- $coord
if [ $# -eq 1 ] && grep -q coordinator "/proc/$1/cmdline" 2>/dev/null; then
	ok "the coordinator is the gateway's child"
else
	bad "the coordinator is the gateway's child (children: $coord)"
fi
check "2 local workers, the coordinator's children ($workers)" \
	test "$(echo $workers | wc -w)" -eq 2
# Only the main thread takes SIGINT, SIGTERM and SIGCHLD (in its
# sigsuspend): a coordinator's end signalled to another thread (ZeroMQ's,
# once) left the gateway waiting. Every other thread blocks all three
# (bits 2, 15, 17 of SigBlk: 0x14002).
unblocked=""
nthreads=0
for task in /proc/$sp/task/*; do
	tid=${task##*/}
	[ "$tid" = "$sp" ] && continue
	nthreads=$((nthreads + 1))
	blk=$(sed -n 's/^SigBlk:[[:space:]]*//p' "$task/status" 2>/dev/null)
	[ -n "$blk" ] || continue
	[ $(( 0x$blk & 0x14002 )) -eq $(( 0x14002 )) ] ||
		unblocked="$unblocked $tid:$blk"
done
check "the gateway's $nthreads other threads block SIGINT, SIGTERM and SIGCHLD ($unblocked)" \
	test -z "$unblocked" -a "$nthreads" -gt 0
check "one private directory" test "$(dirs)" -eq 1
check "its config names ipc:// endpoints" \
	grep -q 'ipc://' "$(ls -d "$tmp"/quorum-serve-*)/cluster.yaml"

BODY='{"messages":[{"role":"user","content":"'"$QUESTION"'"}],"n":4,"seed":7,"temperature":0.9,"max_tokens":40}'
curl -s -m $T_ASK -H 'content-type: application/json' -d "$BODY" \
	-o "$tmp/reply.json" -w '%{http_code}' \
	"http://127.0.0.1:$port/v1/chat/completions" >"$tmp/code"
check "chat completion: 200" test "$(cat "$tmp/code")" = 200
"$Q" run --model "$MODEL" -n 4 --seed 7 --temperature 0.9 \
	--max-new-tokens 40 --stop none --json "$QUESTION" \
	>"$tmp/run.json" 2>"$tmp/run.log"
check "the same 4 samples and answer as quorum run in one process" \
	$PY -c '
import json, sys
h, r = (json.load(open(p)) for p in sys.argv[1:3])
ht = [c["message"]["content"] for c in h["choices"]]
rt = [s["text"] for s in sorted(r["samples"], key=lambda s: s["index"])]
sys.exit(0 if len(ht) == 4 and ht == rt and
	 h["quorum"]["answer"] == r["answer"] else 1)' "$tmp/reply.json" "$tmp/run.json"
check "the 2 workers' pools are in /dev/shm" test "$(pools "$sp")" -eq 2

kill -TERM "$sp"
exited "$sp"
check "SIGTERM: exit status 0 (got $rc)" test "$rc" = 0
check "SIGTERM: the coordinator and workers ended" gone $coord $workers
check "SIGTERM: no pool left" test "$(pools "$sp")" -eq 0
check "SIGTERM: the private directory removed" test "$(dirs)" -eq 0

# --- 2: its coordinator killed -----------------------------------------
start "$tmp/serve2.log"
if ready; then
	procs
	check "second start: 2 workers" test "$(echo $workers | wc -w)" -eq 2
	kill -KILL $coord
	exited "$sp"
	check "coordinator killed: the gateway exits 1 (got $rc)" \
		test "$rc" = 1
	check "coordinator killed: it says so" \
		grep -q "the coordinator .* ended: killed by signal 9" \
		"$tmp/serve2.log"
	check "coordinator killed: its workers end too" gone $workers
	gone $workers
	check "coordinator killed: no pool left" test "$(pools "$sp")" -eq 0
	check "coordinator killed: the private directory removed" \
		test "$(dirs)" -eq 0
else
	bad "second start: ready within ${T_READY}s"
fi

# --- 3: the gateway killed ------------------------------------------------
start "$tmp/serve3.log"
if ready; then
	procs
	check "third start: 2 workers" test "$(echo $workers | wc -w)" -eq 2
	kill -KILL "$sp"
	wait "$sp" 2>/dev/null
	check "gateway killed: the coordinator and workers follow it" \
		gone $coord $workers
	check "gateway killed: no pool left" test "$(pools "$sp")" -eq 0
	# what SIGKILL cannot clean: the directory, its sockets unlinked
	rm -rf "$tmp"/quorum-serve-*
else
	bad "third start: ready within ${T_READY}s"
fi

# --- 4: bad arguments ------------------------------------------------------
TMPDIR=$tmp "$Q" serve --model "$MODEL" --config x.yaml >"$tmp/bad1.log" 2>&1
rc=$?
check "--model with --config: usage error (exit 2, got $rc)" test $rc = 2
check "--model with --config: says to give one" \
	grep -q "one of them" "$tmp/bad1.log"
TMPDIR=$tmp "$Q" serve --model "$tmp/missing.gguf" >"$tmp/bad2.log" 2>&1
rc=$?
check "a missing model: exit 1 (got $rc)" test $rc = 1
check "a missing model: named" grep -q "missing.gguf" "$tmp/bad2.log"
printf 'not a model\n' >"$tmp/bad.gguf"
TMPDIR=$tmp "$Q" serve --model "$tmp/bad.gguf" --listen 127.0.0.1:0 \
	>"$tmp/bad4.log" 2>&1 &
sp=$!
e2e_track "$sp"
exited "$sp"
check "not a GGUF file: exit 1 (got $rc)" test "$rc" = 1
check "not a GGUF file: named, and the coordinator's end told" \
	sh -c "grep -q 'bad.gguf' '$tmp/bad4.log' &&
	       grep -q 'coordinator did not start' '$tmp/bad4.log'"
check "not a GGUF file: never said to be listening (ready)" \
	sh -c "! grep -q 'listening on' '$tmp/bad4.log'"
# a GGUF file the coordinator reads (its vocabulary) but no worker can
# load (output_norm.weight retyped IQ2_XXS, unsupported): the worker
# exits 4 and the coordinator stops, not restarting it forever, so the
# gateway ends in words (it had said ready and answered 503 for good)
$PY -c 'import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n = b"output_norm.weight"
i = d.index(n) + len(n)
nd = struct.unpack_from("<I", d, i)[0]
struct.pack_into("<I", d, i + 4 + 8 * nd, 16)
open(sys.argv[2], "wb").write(d)' "$MODEL" "$tmp/iq2.gguf"
TMPDIR=$tmp "$Q" serve --model "$tmp/iq2.gguf" --listen 127.0.0.1:0 \
	>"$tmp/bad8.log" 2>&1 &
sp=$!
e2e_track "$sp"
exited "$sp"
check "a model no worker can load: exit 1 (got $rc)" test "$rc" = 1
check "a model no worker can load: the worker's reason, once, and the \
coordinator's end told" \
	sh -c "test \$(grep -c 'weight type IQ2_XXS (16) is not supported' \
		'$tmp/bad8.log') = 1 &&
	       grep -q 'cannot be served by its local workers' '$tmp/bad8.log' &&
	       grep -q 'the coordinator .* ended: exit status 1' '$tmp/bad8.log'"
check "a model no worker can load: no pool left" test "$(pools "$sp")" -eq 0
TMPDIR=$tmp "$Q" serve --model "$MODEL" --endpoint tcp://127.0.0.1:1 \
	>"$tmp/bad5.log" 2>&1
rc=$?
check "--endpoint with --model: usage error (exit 2, got $rc)" test $rc = 2
check "--endpoint with --model: says it goes with --config" \
	grep -q "endpoint goes with --config" "$tmp/bad5.log"
TMPDIR=$tmp "$Q" serve --model "$MODEL" --listen 127.0.0.1:99999 \
	>"$tmp/bad6.log" 2>&1
rc=$?
check "--listen with port 99999: usage error (exit 2, got $rc)" test $rc = 2
check "--listen with port 99999: names the flag" \
	grep -q "\-\-listen 127.0.0.1:99999: not HOST:PORT" "$tmp/bad6.log"
# the config's rule, checked here (a port with a leading zero had passed
# the command line and failed under the private config, exit 1)
TMPDIR=$tmp "$Q" serve --model "$MODEL" --listen 127.0.0.1:08080 \
	>"$tmp/bad7.log" 2>&1
rc=$?
check "--listen with port 08080: usage error (exit 2, got $rc)" test $rc = 2
check "--listen with port 08080: names the flag, no private config" \
	sh -c "grep -q '\-\-listen 127.0.0.1:08080: not HOST:PORT' '$tmp/bad7.log' && ! grep -q 'cluster.yaml' '$tmp/bad7.log'"
# an address in use: said at once, nothing started
port=$(free_port)
$PY -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
sys.stdout.write("bound\n"); sys.stdout.flush(); time.sleep(60)' "$port" \
	>"$tmp/holder.out" 2>&1 &
holder=$!
e2e_track "$holder"
i=0
while ! grep -q bound "$tmp/holder.out" 2>/dev/null && [ $i -lt 400 ]; do
	sleep 0.05; i=$((i + 1))
done
TMPDIR=$tmp "$Q" serve --model "$MODEL" --listen "127.0.0.1:$port" \
	>"$tmp/bad7.log" 2>&1
rc=$?
kill "$holder" 2>/dev/null
check "an address in use: exit 1 (got $rc)" test $rc = 1
check "an address in use: said in words" \
	grep -q "cannot listen on 127.0.0.1:$port: Address already in use" \
	"$tmp/bad7.log"
check "an address in use: no coordinator started" \
	sh -c "! grep -q '^coordinator' '$tmp/bad7.log'"
TMPDIR=$tmp "$Q" serve --model "$MODEL" --workers 0 >"$tmp/bad3.log" 2>&1
check "--workers 0: refused" grep -q "workers 0" "$tmp/bad3.log"
check "bad arguments: nothing started, no directory" test "$(dirs)" -eq 0

e2e_finish
