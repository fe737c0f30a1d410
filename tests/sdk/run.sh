#!/bin/sh
# tests/sdk/run.sh BUILD — `make test-sdk`: a loopback cluster on the
# shipped model (coordinator + 2 local workers), two gateways in front
# of it (API key required; the second with http.max_in_flight: 1), and
# sdk.test.mjs driving them with the official openai npm package
# (node_modules from `npm ci` here). Ports: free ones, chosen by the
# kernel. Exit status: the test's.
set -u
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
case $B in /*) ;; *) B=$ROOT/$B ;; esac
Q=$B/quorum
tmp=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cport=$(port); wport=$(port)
EP=tcp://127.0.0.1:$cport
KEY=sk-sdk-test-0123456789
printf '%s\n' "$KEY" >"$tmp/keys"
chmod 600 "$tmp/keys"
conf() { # conf FILE MAX_IN_FLIGHT
	cat >"$1" <<EOT
model:
  path: $ROOT/models/arith.gguf
cluster:
  name: sdk
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
  listen: 127.0.0.1:0
  api_keys_file: $tmp/keys
  max_in_flight: $2
EOT
}
conf "$tmp/a.yaml" 128
conf "$tmp/b.yaml" 1
timeout -s TERM 600 "$B/coordinator" --config "$tmp/a.yaml" \
	>"$tmp/coordinator.log" 2>&1 &
pids="$pids $!"
i=0; nw=0
while [ $i -lt 360 ]; do
	nw=$("$Q" status --endpoint "$EP" --timeout 0.5 --retries 0 2>/dev/null |
		sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
	[ "${nw:-0}" -ge 2 ] && break
	sleep 0.25; i=$((i + 1))
done
[ "${nw:-0}" -ge 2 ] || { echo "sdk: the cluster did not start"; cat "$tmp/coordinator.log"; exit 1; }
for g in a b; do
	timeout -s TERM 600 "$Q" serve --config "$tmp/$g.yaml" \
		>"$tmp/$g.log" 2>&1 &
	pids="$pids $!"
done
for g in a b; do
	i=0
	while [ $i -lt 240 ] && ! grep -q "listening on" "$tmp/$g.log"; do
		sleep 0.25; i=$((i + 1))
	done
	grep -q "listening on" "$tmp/$g.log" ||
		{ echo "sdk: gateway $g did not start"; cat "$tmp/$g.log"; exit 1; }
done
url() { sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$tmp/$1.log"; }
QUORUM_URL=$(url a) QUORUM_URL_ONE=$(url b) QUORUM_KEY=$KEY \
	timeout 300 node "$ROOT/tests/sdk/sdk.test.mjs"
rc=$?
[ $rc -eq 0 ] || tail -20 "$tmp/a.log" "$tmp/b.log"
exit $rc
