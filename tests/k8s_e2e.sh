#!/bin/sh
# k8s_e2e — the Kubernetes manifests (deploy/k8s/base), played for real
# with `podman kube play` from the image `make image` built: a coordinator
# pod, two worker pods of two worker processes each (different node names:
# one KV copy between them, shared memory inside each), a gateway pod.
# tests/k8s_podman.py makes podman's adjustments (no Services or DNS:
# host network and loopback ports; the StatefulSet as two Pods; the
# downward API resolved; probes dropped) and checks the manifests' and
# the overlays' required fields; `kubectl kustomize` renders the base and
# both overlays when kubectl is installed. Then:
#   1. a question through the gateway and through `quorum ask`: the
#      samples, their answers and the vote equal `quorum run`'s in one
#      process, byte for byte;
#   2. one worker pod deleted while a request runs: the same reply;
#   3. `podman kube down`: no container, pod, volume or shared-memory
#      segment of the test left.
# Podman that cannot run here is a failure, never a skip.
#
#   sh tests/k8s_e2e.sh BUILD_DIR IMAGE_TAG
#   env: CONTAINERS_CONF (the Makefile points it at deploy/containers/),
#        K8S_KEEP=1 keeps the logs
set -u
B=${1:-build}
IMAGE=${2:-localhost/quorum:latest}
PY=/usr/bin/python3
Q=$B/quorum
PODMAN=${PODMAN:-podman}
t_start=$(date +%s)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1 ($(($(date +%s) - t_start)) s)"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1 ($(($(date +%s) - t_start)) s)"; }
die() { bad "$1"; echo "k8s_e2e: $passed passed, $failed failed"; exit 1; }

command -v "$PODMAN" >/dev/null || die "podman is not installed (make deploy-deps)"
[ -x "$Q" ] || die "$Q is not built"
"$PODMAN" image exists "$IMAGE" || die "image $IMAGE missing (make image)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-k8s.XXXXXX")
name="k8s$$"
vol="quorum-model"
played=""
play=""     # the manifests played (cleanup's kube down), and
down=""     # the same less a pod deleted by hand
bg=""
free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
cport=$(free_port); wport=$(free_port); hport=$(free_port)
EP=tcp://127.0.0.1:$cport
URL=http://127.0.0.1:$hport

cm_names() { # the ConfigMaps of the played manifests
	$PY -c 'import sys, yaml; print(" ".join(d["metadata"]["name"] for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "ConfigMap"))' \
		"$play" 2>/dev/null
}
fill_model() { # the model volume (the PersistentVolumeClaim quorum-model), from the image
	"$PODMAN" volume create "$vol" >/dev/null &&
		timeout 120 "$PODMAN" run --rm --network none -u 0 -v "$vol:/dst" "$IMAGE" \
			cp /usr/share/quorum/models/arith.gguf /dst/model.gguf >"$tmp/fill.log" 2>&1
}
workers_up() { # workers_up N [STATUS-ARGS]: the coordinator lists N workers within 120 s (nw: how many)
	n=$1; shift; i=0; nw=0
	while [ $i -lt 480 ]; do
		nw=$("$Q" status --endpoint "$EP" "$@" --timeout 0.5 --retries 0 2>/dev/null |
			sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
		[ "${nw:-0}" -ge "$n" ] && return 0
		sleep 0.25; i=$((i + 1))
	done
	return 1
}
health_up() { # the gateway's /health answers 200 within 60 s
	i=0
	until $PY -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
		"$URL/health" 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 240 ] || return 1
		sleep 0.25
	done
}
cleanup() {
	trap - EXIT INT TERM
	[ -n "$bg" ] && kill "$bg" 2>/dev/null
	if [ -n "$played" ]; then
		y=$play; [ -n "$down" ] && [ -f "$down" ] && y=$down
		timeout 120 "$PODMAN" kube down "$y" >/dev/null 2>&1
		for p in quorum-coordinator-pod-0 quorum-gateway-pod-0 quorum-worker-0 quorum-worker-1; do
			"$PODMAN" pod exists "$p" 2>/dev/null &&
				timeout 60 "$PODMAN" pod rm -f -t 5 "$p" >/dev/null 2>&1
		done
	fi
	for v in "$vol" $(cm_names) quorum-worker-0-shm quorum-worker-1-shm; do
		"$PODMAN" volume exists "$v" 2>/dev/null &&
			"$PODMAN" volume rm -f "$v" >/dev/null 2>&1
	done
	if [ "$failed" -ne 0 ] || [ -n "${K8S_KEEP:-}" ]; then
		echo "k8s_e2e: outputs kept in $tmp" >&2
		for l in "$tmp"/*.log; do
			[ -f "$l" ] && { echo "== $l" >&2; tail -n 15 "$l" >&2; }
		done
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# what the test owns must not be there before it starts
for p in quorum-coordinator-pod-0 quorum-gateway-pod-0 quorum-worker-0 quorum-worker-1; do
	"$PODMAN" pod exists "$p" 2>/dev/null && die "a pod $p is already there"
done
"$PODMAN" volume exists "$vol" 2>/dev/null && die "a volume $vol is already there"
"$PODMAN" ps -a --format '{{.Names}}' >"$tmp/ctr-before"
"$PODMAN" volume ls --format '{{.Name}}' >"$tmp/vol-before"

# ---- the manifests, offline ------------------------------------------------------
# the API key, made as the README's step 3 makes it (the base has none)
KEY=$("$Q" keygen --api-key "$tmp/api-keys" 2>"$tmp/keygen.log") && [ -n "$KEY" ] ||
	die "quorum keygen --api-key: $(cat "$tmp/keygen.log")"
play=$tmp/play.yaml
if $PY tests/k8s_podman.py deploy/k8s/base "$tmp/play.yaml" --image "$IMAGE" \
	--name "$name" --client-port "$cport" --worker-port "$wport" \
	--http-port "$hport" --secrets-dir "$tmp/secrets" \
	--secret "quorum-api-keys/api-keys=$tmp/api-keys" 2>"$tmp/render.log"; then
	ok "manifests: required fields (base, overlays), rendered for podman"
else
	die "manifests: $(cat "$tmp/render.log")"
fi
if command -v kubectl >/dev/null; then
	r=0
	for k in base overlays/curve overlays/large overlays/large-curve; do
		kubectl kustomize "deploy/k8s/$k" >"$tmp/kustomize-$(basename "$k").yaml" \
			2>"$tmp/kustomize.log" || r=1
	done
	[ $r -eq 0 ] && ok "kubectl kustomize renders base, curve, large, large-curve" ||
		bad "kubectl kustomize: $(cat "$tmp/kustomize.log")"
	# the components combine: with CURVE on, every container of every
	# workload mounts the keys and the workers' probes have a client key,
	# the large component's extra workers too
	if [ $r -eq 0 ] && why=$($PY tests/k8s_podman.py --check-rendered "$tmp" 2>&1); then
		ok "components combine: CURVE keys in every container of base, curve, large, large-curve; no Secret in any; overlays/curve rendered as kubectl does"
	elif [ $r -eq 0 ]; then
		bad "components: $why"
	fi
else
	echo "note: kubectl not installed: the overlays were checked field by field only"
fi

# ---- the model volume (the PersistentVolumeClaim quorum-model) --------------------
fill_model || die "filling the model volume: $(tail -n 3 "$tmp/fill.log")"

# ---- play -----------------------------------------------------------------------
played=1
if timeout 300 "$PODMAN" kube play "$tmp/play.yaml" >"$tmp/play.log" 2>&1; then
	ok "podman kube play: coordinator, 2 worker pods x 2 workers, gateway"
else
	die "podman kube play: $(tail -n 5 "$tmp/play.log")"
fi
# readiness: what the probes would wait on — the coordinator lists the 4
# workers (the workers' readiness), /health answers 200 (the gateway's)
workers_up 4 || die "4 workers registered within 120 s (got ${nw:-none})"
"$Q" status --endpoint "$EP" >"$tmp/status.txt" 2>&1
hosts=$(awk '$1 ~ /^quorum-worker-/ {print $2}' "$tmp/status.txt" | sort -u | tr '\n' ' ')
[ "$hosts" = "node-a node-b " ] && ok "4 workers registered, host labels from the node names: $hosts" ||
	bad "host labels: '$hosts'"
health_up || die "gateway /health 200 within 60 s"
ok "gateway /health 200"

# ---- the same bytes as one process ------------------------------------------------
cat >"$tmp/proj.py" <<'EOF'
# The deterministic content of a reply — each sample's index, text,
# answer and finish, the majority and the votes — from `quorum run/ask
# --json` or a chat completion, as canonical JSON.
import json, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))
if "choices" in r:
    q = r["quorum"]
    samples = [{"index": c["index"], "text": c["message"]["content"],
                "answer": q["answers"][k], "finish": c["finish_reason"]}
               for k, c in enumerate(r["choices"])]
    out = {"answer": q["answer"], "votes": q["votes"], "samples": samples}
else:
    samples = [{"index": s["index"], "text": s["text"],
                "answer": s.get("answer"), "finish": s["finish"]}
               for s in r["samples"]]
    out = {"answer": r["answer"], "votes": r["votes"], "samples": samples}
sys.stdout.write(json.dumps(out, sort_keys=True, separators=(",", ":")))
EOF
post() { # post OUT JSON-BODY: the chat completion with the API key
	$PY - "$URL/v1/chat/completions" "$2" "$KEY" >"$1" 2>"$1.log" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(),
    headers={"Content-Type": "application/json",
             "Authorization": "Bearer " + sys.argv[3]})
with urllib.request.urlopen(req, timeout=300) as r:
    sys.stdout.write(r.read().decode())
EOF
}
same() { # same CASE A B: projections equal byte for byte
	if $PY "$tmp/proj.py" "$2" >"$2.p" 2>>"$tmp/proj.log" &&
	   $PY "$tmp/proj.py" "$3" >"$3.p" 2>>"$tmp/proj.log" &&
	   [ -s "$2.p" ] && cmp -s "$2.p" "$3.p"; then
		ok "$1 ($(wc -c <"$2.p") bytes of samples, answer $(sed -n 's/.*"answer":\("[^"]*"\|null\),"samples".*/\1/p' "$2.p"))"
	else
		bad "$1: $2.p and $3.p differ"
	fi
}
# the gateway serves the model under its own id (/v1/models); another
# name would be answered 404 model_not_found
MID=$(curl -s --max-time 10 -H "Authorization: Bearer $KEY" \
	"$URL/v1/models" |
	$PY -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])' 2>/dev/null)
[ -n "$MID" ] || bad "GET /v1/models: no model id"
QN="Mia has 45 stickers. She gives 12 to her brother and then buys 3 packs of 8. How many stickers does she have now?"
MODEL=models/arith.gguf
timeout 300 "$Q" run --model "$MODEL" --json -n 8 --max-new-tokens 64 --seed 11 \
	--stop none "$QN" >"$tmp/run.json" 2>"$tmp/run.log" || bad "quorum run"
post "$tmp/http.json" "{\"model\":\"$MID\",\"n\":8,\"max_tokens\":64,\"seed\":11,\"messages\":[{\"role\":\"user\",\"content\":\"$QN\"}]}" ||
	bad "POST /v1/chat/completions: $(tail -n 2 "$tmp/http.json.log")"
same "gateway reply = quorum run" "$tmp/run.json" "$tmp/http.json"
timeout 300 "$Q" ask --endpoint "$EP" --timeout 120 --json -n 8 \
	--max-new-tokens 64 --seed 11 --stop none "$QN" >"$tmp/ask.json" 2>"$tmp/ask.log" ||
	bad "quorum ask"
same "quorum ask reply = quorum run" "$tmp/run.json" "$tmp/ask.json"

# ---- a worker pod deleted mid-request -------------------------------------------------
Q2="A farmer has 17 sheep and buys 23 more. Then he sells 9 of them. How many sheep are there?"
# every sample runs to max_tokens (ignore_eos): long enough to be seen in
# flight on a loaded machine
timeout 300 "$Q" run --model "$MODEL" --json -n 32 --max-new-tokens 400 --seed 5 --ignore-eos \
	--temperature 1 --stop none "$Q2" >"$tmp/run2.json" 2>"$tmp/run2.log" || bad "quorum run (2)"
post "$tmp/http2.json" "{\"model\":\"$MID\",\"n\":32,\"max_tokens\":400,\"ignore_eos\":true,\"seed\":5,\"temperature\":1,\"messages\":[{\"role\":\"user\",\"content\":\"$Q2\"}]}" &
bg=$!
# in flight: some worker holds busy slots; then its pod goes
i=0; busy=0
while [ $i -lt 400 ]; do
	busy=$("$Q" status --endpoint "$EP" --timeout 0.5 --retries 0 2>/dev/null |
		awk '$1 ~ /^quorum-worker-1-/ && $5 > 0 {n++} END {print n + 0}')
	[ "$busy" -gt 0 ] && break
	kill -0 "$bg" 2>/dev/null || break
	sleep 0.05; i=$((i + 1))
done
if [ "$busy" -gt 0 ]; then
	# a pod's deletion in Kubernetes takes its emptyDir with it
	timeout 60 "$PODMAN" pod rm -f -t 0 quorum-worker-1 >"$tmp/rm.log" 2>&1 &&
		"$PODMAN" volume rm -f quorum-worker-1-shm >>"$tmp/rm.log" 2>&1 &&
		ok "worker pod quorum-worker-1 deleted while it decoded samples" ||
		bad "podman pod rm: $(tail -n 2 "$tmp/rm.log")"
else
	bad "the request never reached quorum-worker-1's workers"
fi
wait "$bg" || bad "POST during the deletion: $(tail -n 2 "$tmp/http2.json.log")"
bg=""
same "reply after losing a worker pod = quorum run" "$tmp/run2.json" "$tmp/http2.json"
# the coordinator drops a lost worker when its heartbeats stop (liveness
# x interval): wait for that, bounded
i=0
while [ $i -lt 120 ]; do
	nw=$("$Q" status --endpoint "$EP" --timeout 2 2>/dev/null |
		sed -n 's/^cluster .*: \([0-9]*\) worker(s)$/\1/p')
	[ "${nw:-0}" -eq 2 ] && break
	sleep 0.25; i=$((i + 1))
done
[ "${nw:-0}" -eq 2 ] && ok "the coordinator dropped the pod's 2 workers" ||
	bad "workers after the deletion: ${nw:-none}, want 2"

# ---- down: nothing left ---------------------------------------------------------------
t0=$(date +%s)
# the deleted pod is gone already (podman's kube down stops at a pod it
# cannot find): down the rest of the same manifests
$PY -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1]))
        if d["metadata"]["name"] != "quorum-worker-1"]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"), sort_keys=False)' \
	"$tmp/play.yaml" "$tmp/down.yaml"
down=$tmp/down.yaml
timeout 120 "$PODMAN" kube down "$tmp/down.yaml" >"$tmp/down.log" 2>&1 ||
	bad "podman kube down: $(tail -n 3 "$tmp/down.log")"
played=""
"$PODMAN" volume rm -f "$vol" >/dev/null 2>&1 || bad "podman volume rm $vol"
# podman 4.3 keeps the volume it made of a ConfigMap after kube down
# (Kubernetes has no such volume): those, and only those, go here
for cm in $(cm_names); do
	"$PODMAN" volume exists "$cm" 2>/dev/null &&
		"$PODMAN" volume rm -f "$cm" >/dev/null 2>&1 &&
		echo "note: removed podman's ConfigMap volume $cm (kept by podman 4.3's kube down)"
done
left=""
for p in quorum-coordinator-pod-0 quorum-gateway-pod-0 quorum-worker-0 quorum-worker-1; do
	"$PODMAN" pod exists "$p" 2>/dev/null && left="$left pod:$p"
done
"$PODMAN" ps -a --format '{{.Names}}' >"$tmp/ctr-after"
"$PODMAN" volume ls --format '{{.Name}}' >"$tmp/vol-after"
for c in $(comm -13 "$tmp/ctr-before" "$tmp/ctr-after" 2>/dev/null); do left="$left container:$c"; done
for v in $(comm -13 "$tmp/vol-before" "$tmp/vol-after" 2>/dev/null); do left="$left volume:$v"; done
for f in /dev/shm/*"$name"*; do [ -e "$f" ] && left="$left shm:$f"; done
[ -z "$left" ] && ok "kube down in $(($(date +%s) - t0)) s: no pod, container, volume or shm segment left" ||
	bad "left after kube down:$left"

# ---- CURVE on: overlays/curve, played ---------------------------------------------
# (its keys made as the README says; every pod mounts them from the
# optional Secret quorum-curve of the base): plaintext gets no answer,
# the workers register with their keys, the gateway answers with its own
{
	CK=$tmp/curve
	mkdir -p "$CK"
	for k in server worker client; do
		"$Q" keygen -o "$CK/$k" >/dev/null 2>>"$tmp/keygen.log" ||
			die "quorum keygen -o $k: $(tail -n 1 "$tmp/keygen.log")"
	done
	cport=$(free_port); wport=$(free_port); hport=$(free_port)
	EP=tcp://127.0.0.1:$cport
	URL=http://127.0.0.1:$hport
	KEYS="--server-key $CK/server.pub --client-key $CK/client.key"
	set --
	for f in server.pub server.key worker.pub worker.key client.pub client.key; do
		set -- "$@" --secret "quorum-curve/$f=$CK/$f"
	done
	play=$tmp/play-curve.yaml
	down=""
	$PY tests/k8s_podman.py deploy/k8s/overlays/curve "$play" --image "$IMAGE" \
		--name "k8c$$" --client-port "$cport" --worker-port "$wport" \
		--http-port "$hport" --secrets-dir "$tmp/secrets-curve" \
		--secret "quorum-api-keys/api-keys=$tmp/api-keys" "$@" \
		2>"$tmp/render-curve.log" ||
		die "overlays/curve for podman: $(cat "$tmp/render-curve.log")"
	fill_model || die "filling the model volume (curve): $(tail -n 3 "$tmp/fill.log")"
	played=1
	timeout 300 "$PODMAN" kube play "$play" >"$tmp/play-curve.log" 2>&1 ||
		die "podman kube play (curve): $(tail -n 5 "$tmp/play-curve.log")"
	# shellcheck disable=SC2086 # KEYS: two options and their files
	workers_up 4 $KEYS && ok "CURVE on (overlays/curve): 4 workers registered with their keys" ||
		die "CURVE: 4 workers registered within 120 s (got ${nw:-none})"
	# a client without the server's key gets nothing from it
	if "$Q" status --endpoint "$EP" --timeout 1 --retries 0 >"$tmp/plain.txt" 2>&1; then
		bad "CURVE: a plaintext client was answered"
	else
		ok "CURVE: a plaintext client gets no answer"
	fi
	health_up || die "CURVE: gateway /health 200 within 60 s"
	post "$tmp/http-curve.json" "{\"model\":\"$MID\",\"n\":8,\"max_tokens\":64,\"seed\":11,\"messages\":[{\"role\":\"user\",\"content\":\"$QN\"}]}" ||
		bad "CURVE: POST /v1/chat/completions: $(tail -n 2 "$tmp/http-curve.json.log")"
	same "CURVE: gateway reply = quorum run" "$tmp/run.json" "$tmp/http-curve.json"
	timeout 120 "$PODMAN" kube down "$play" >"$tmp/down-curve.log" 2>&1 ||
		bad "podman kube down (curve): $(tail -n 3 "$tmp/down-curve.log")"
	played=""
	"$PODMAN" volume rm -f "$vol" >/dev/null 2>&1 || bad "podman volume rm $vol"
	for cm in $(cm_names); do
		"$PODMAN" volume exists "$cm" 2>/dev/null &&
			"$PODMAN" volume rm -f "$cm" >/dev/null 2>&1
	done
	left=""
	for p in quorum-coordinator-pod-0 quorum-gateway-pod-0 quorum-worker-0 quorum-worker-1; do
		"$PODMAN" pod exists "$p" 2>/dev/null && left="$left pod:$p"
	done
	"$PODMAN" volume ls --format '{{.Name}}' >"$tmp/vol-after"
	for v in $(comm -13 "$tmp/vol-before" "$tmp/vol-after" 2>/dev/null); do left="$left volume:$v"; done
	[ -z "$left" ] && ok "CURVE: kube down, nothing left" || bad "left after kube down (curve):$left"
}

echo "k8s_e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
