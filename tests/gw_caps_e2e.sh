#!/bin/sh
# gw_caps_e2e — the gateway's caps refuse in words (issue 38): every
# connection over a cap gets an HTTP reply before it is closed, never a
# reset, and /metrics counts it.
#  - http.max_in_flight: with 2 completions parked at a coordinator that
#    has no worker yet, a third gets 429 rate_limit_exceeded with
#    Retry-After; once a worker registers, the 2 are answered (200);
#  - http.max_connections_per_ip (8): 64 connections at once from one
#    address, then a request on each: exactly 8 served, 56 answered 429
#    with Retry-After and "Connection: close", each then closed;
#  - http.max_connections (24): 32 connections from 8 loopback addresses
#    (4 each, under the per-address cap): 24 served, 8 answered 503;
#  - /metrics: the refusals by cap, the open connections back to 1;
#  - with the per-address cap full, /health and /metrics still answered
#    (then closed, not counted as refused), another URL 429; with the
#    cap in all full, /metrics answered, /health 503 (full).
# Raw sockets (Python), loopback only; every wait is on an event, bounded.
#
#   sh tests/gw_caps_e2e.sh [BUILD_DIR]      (default build)
#
# Exit status: 0 every check passed, 1 a check failed, 77 skipped because
# the programs are not built (not a pass).
set -u
E2E=gw_caps_e2e
. "$(dirname "$0")/e2elib.sh"
T_READY=90
e2e_init gwcaps
MODEL=$(cd "$ROOT/models" && pwd)/arith.gguf
e2e_endpoints
hport=$(free_port)
{
	e2e_conf_head "$MODEL" "$name"
	cat <<EOF
kv:
  blocks: 256
workers:
  local: 0
  threads: 1
http:
  listen: 127.0.0.1:$hport
  max_connections: 24
  max_connections_per_ip: 8
  max_in_flight: 2
  header_timeout_ms: 600000
  body_timeout_ms: 600000
EOF
} >"$tmp/cluster.yaml"
"$B/coordinator" --config "$tmp/cluster.yaml" >"$tmp/coordinator.log" 2>&1 &
coord=$!
e2e_track "$coord"
"$Q" serve --config "$tmp/cluster.yaml" >"$tmp/gateway.log" 2>&1 &
gwp=$!
e2e_track "$gwp"
if ! e2e_wait_log "$tmp/gateway.log" "listening on" "$T_READY" "$gwp"; then
	bad "the gateway listens within ${T_READY}s"
	e2e_finish
fi

cat >"$tmp/caps.py" <<'PYEOF'
import json, socket, subprocess, sys, time

port = int(sys.argv[1])
phase = sys.argv[2]
WAIT = 90.0   # bounds each wait for an event, never a speed

def conn(src=None):
    s = socket.socket()
    s.settimeout(WAIT)
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def send_get(s, path):
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())

def send_chat(s):
    body = json.dumps({"messages": [{"role": "user", "content": "2+3"}],
                       "n": 2, "max_tokens": 16}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)

def read_reply(s):
    """(status, headers, body, closed after it); raises on a reset."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed before a reply")
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    code = int(lines[0].split()[1])
    hdr = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        hdr[k.strip().lower()] = v.strip()
    n = int(hdr.get("content-length", "0"))
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    closed = False
    if hdr.get("connection", "").lower() == "close":
        s.settimeout(WAIT)
        closed = s.recv(1) == b""
    return code, hdr, rest[:n], closed

def metric(name):
    s = conn()
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    code, hdr, body, _ = read_reply(s)
    s.close()
    out = {}
    for l in body.decode().splitlines():
        if l.startswith(name):
            k, v = l.rsplit(" ", 1)
            out[k] = float(v)
    return out

def wait_metric(name, want):
    end = time.time() + WAIT
    while time.time() < end:
        if metric(name).get(name) == want:
            return True
        time.sleep(0.05)
    return False

def hold(srcs):
    """a connection from each of srcs, each known admitted: its keep-alive
    GET /health answered and the connection kept (one the gateway took
    as past a cap, as a closing one of a phase before may still count,
    is closed after its reply: tried again); None past WAIT"""
    held = []
    end = time.time() + WAIT
    for src in srcs:
        while True:
            if time.time() > end:
                return None
            s = conn(src)
            send_get(s, "/health")
            code, hdr, body, closed = read_reply(s)
            if code == 200 and not closed:
                held.append(s)
                break
            s.close()
            time.sleep(0.05)
    return held

REFUSED = "quorum_http_connections_refused_total"

def refused(cap):
    return metric(REFUSED).get('%s{cap="%s"}' % (REFUSED, cap), 0.0)

def burst(srcs, per_src, cap, want_refused):
    """every connection opened, and all of them accepted (the refusals
    are counted as the gateway accepts: none is read and closed before
    the last is in, which would let a late one in), then a request on
    each; /metrics answers past the caps, uncounted"""
    base = refused(cap)
    socks = [conn(src) for src in srcs for _ in range(per_src)]
    end = time.time() + WAIT
    while time.time() < end and refused(cap) < base + want_refused:
        time.sleep(0.05)
    for s in socks:
        send_get(s, "/")
    res = []
    for s in socks:
        try:
            res.append(read_reply(s))
        except OSError as e:
            res.append(("reset", {}, str(e).encode(), False))
        s.close()
    return res

def report(res, refused_code, want_ok, want_refused):
    codes = [r[0] for r in res]
    resets = sum(1 for c in codes if c == "reset")
    refused = [r for r in res if r[0] == refused_code]
    ok = len(res) - resets - len(refused)
    print("replies:", ok, "served,", len(refused), "x", refused_code, ",",
          resets, "resets")
    good = (resets == 0 and ok == want_ok and len(refused) == want_refused
            and all(r[1].get("retry-after", "").isdigit() and r[3]
                    and json.loads(r[2])["error"]["code"] in
                    ("rate_limit_exceeded", "server_busy") for r in refused))
    if refused:
        print("a refusal:", refused[0][0], refused[0][1].get("retry-after"),
              refused[0][2].decode()[:200])
    return good

if phase == "inflight":
    a, b = conn(), conn()
    send_chat(a); send_chat(b)
    if not wait_metric("quorum_http_in_flight", 2):
        print("the 2 completions are not in flight"); sys.exit(1)
    c = conn(); send_chat(c)
    code, hdr, body, _ = read_reply(c)
    print("third:", code, hdr.get("retry-after"), body.decode()[:160])
    if not (code == 429 and hdr.get("retry-after", "").isdigit() and
            json.loads(body)["error"]["code"] == "rate_limit_exceeded"):
        sys.exit(1)
    # the worker starts now (the script's caller), and the 2 are served
    print("parked", flush=True)
    sys.stdin.readline()
    codes = [read_reply(x)[0] for x in (a, b)]
    print("parked ones:", codes)
    sys.exit(0 if codes == [200, 200] else 1)
elif phase == "per_ip":
    sys.exit(0 if report(burst(["127.0.0.1"], 64, "max_connections_per_ip",
                               56), 429, 8, 56) else 1)
elif phase == "global":
    srcs = ["127.0.0.%d" % i for i in range(2, 10)]
    sys.exit(0 if report(burst(srcs, 4, "max_connections", 8), 503, 24, 8)
             else 1)
elif phase == "idle":
    sys.exit(0 if wait_metric("quorum_http_connections_open", 1) else 1)
elif phase == "probe":
    # 8 held from one address: the per-address cap is full
    held = hold([None] * 8)
    if held is None:
        print("8 connections not held"); sys.exit(1)
    key = 'quorum_http_connections_refused_total{cap="max_connections_per_ip"}'
    # metric() itself connects from the same address: past the cap, and
    # answered all the same
    before = metric("quorum_http_connections_refused_total").get(key)
    got = []
    for path in ("/health", "/metrics", "/"):
        s = conn()
        send_get(s, path)
        code, hdr, body, closed = read_reply(s)
        s.close()
        got.append((path, code, closed))
    after = metric("quorum_http_connections_refused_total").get(key)
    for s in held:
        s.close()
    print("past the cap:", got, "refused", before, "->", after)
    sys.exit(0 if got == [("/health", 200, True), ("/metrics", 200, True),
                          ("/", 429, True)] and after == before + 1 else 1)
elif phase == "probe_all":
    # 24 held from 6 addresses (4 each): the cap in all is full
    held = hold(["127.0.0.%d" % i for i in range(10, 16) for _ in range(4)])
    if held is None:
        print("24 connections not held"); sys.exit(1)
    got = []
    for path in ("/metrics", "/health"):
        s = conn("127.0.0.20")
        send_get(s, path)
        code, hdr, body, closed = read_reply(s)
        s.close()
        got.append((path, code, closed))
    for s in held:
        s.close()
    print("past the cap in all:", got)
    sys.exit(0 if got == [("/metrics", 200, True), ("/health", 503, True)]
             else 1)
elif phase == "metrics":
    m = metric("quorum_http_connections_refused_total")
    print(m)
    ip = m.get('quorum_http_connections_refused_total{cap="max_connections_per_ip"}')
    al = m.get('quorum_http_connections_refused_total{cap="max_connections"}')
    sys.exit(0 if ip == 56 and al == 8 else 1)
PYEOF

# max_in_flight: the worker is started once 2 completions are parked
mkfifo "$tmp/go"
$PY "$tmp/caps.py" "$hport" inflight <"$tmp/go" >"$tmp/inflight.log" 2>&1 &
py=$!
exec 9>"$tmp/go"
if e2e_wait_log "$tmp/inflight.log" "^parked" "$T_READY" "$py"; then
	ok "max_in_flight: a third completion gets 429 with Retry-After"
	"$B/worker" --config "$tmp/cluster.yaml" --id w0 --threads 1 \
		>"$tmp/worker.log" 2>&1 &
	e2e_track $!
	echo go >&9
	wait "$py"
	check "max_in_flight: the 2 parked completions are served once a \
worker registers" test $? -eq 0
else
	bad "max_in_flight: a third completion gets 429 with Retry-After"
fi
exec 9>&-
sed 's/^/  /' "$tmp/inflight.log"
e2e_wait_workers "$EP" 1 "$T_READY" "$coord" ||
	bad "the worker registers within ${T_READY}s"

check "max_connections_per_ip: 64 at once from one address: 8 served, \
56 answered 429 (Retry-After, closed), no reset" \
	sh -c "$PY '$tmp/caps.py' $hport per_ip >'$tmp/per_ip.log' 2>&1"
sed 's/^/  /' "$tmp/per_ip.log"
check "the connections close: 1 open (the probe's)" \
	$PY "$tmp/caps.py" "$hport" idle
check "max_connections: 32 from 8 addresses: 24 served, 8 answered 503 \
(Retry-After, closed), no reset" \
	sh -c "$PY '$tmp/caps.py' $hport global >'$tmp/global.log' 2>&1"
sed 's/^/  /' "$tmp/global.log"
check "/metrics: 56 refused per address, 8 in all" \
	sh -c "$PY '$tmp/caps.py' $hport metrics >'$tmp/metrics.log' 2>&1"
check "past the per-address cap, /health and /metrics are answered (then \
closed, not counted as refused), another URL 429" \
	sh -c "$PY '$tmp/caps.py' $hport probe >'$tmp/probe.log' 2>&1"
sed 's/^/  /' "$tmp/probe.log"
check "past the cap in all, /metrics is answered (then closed), /health \
503 (full)" \
	sh -c "$PY '$tmp/caps.py' $hport probe_all >'$tmp/probe_all.log' 2>&1"
sed 's/^/  /' "$tmp/probe_all.log"
e2e_note_workers "$EP"
e2e_finish
