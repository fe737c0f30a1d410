#!/bin/sh
# deb_install — the Debian package on a clean Debian 12: a minimal rootfs
# (mmdebstrap --variant=apt, from the mirror this machine's apt uses;
# cached as BUILD_DIR/cache/bookworm-apt.tar) imported into podman, then in
# one container on podman's bridge network (the mirror reachable, its
# loopback its own) with a 512 MB /dev/shm (the packaged config's two
# workers hold 96 MiB of KV pool each; podman's default is 64 MB):
#   1. apt-get install ./quorum_*.deb pulls the dependencies and creates
#      the system user quorum;
#   2. `quorum run` on the shipped model: its samples, byte for byte, are
#      those of this tree's build/quorum run;
#   3. the coordinator unit's ExecStartPre and ExecStart, as the user
#      quorum in /var/lib/quorum: its 2 local workers register, a question
#      is answered, SIGTERM stops it and its workers;
#   4. apt-get purge --autoremove: the file tree, passwd/group/shadow and
#      /dev/shm are as before the install.
#
#   sh tests/deb_install.sh BUILD_DIR DEB
#   env: CONTAINERS_CONF (the Makefile points it at deploy/containers/),
#        DEB_MIRROR (default: the first Debian mirror of /etc/apt)
set -u
B=${1:-build}
DEB=${2:?usage: deb_install.sh BUILD_DIR DEB}
PODMAN=${PODMAN:-podman}
PY=/usr/bin/python3
t_start=$(date +%s)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1 ($(($(date +%s) - t_start)) s)"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1 ($(($(date +%s) - t_start)) s)"; }
die() { bad "$1"; echo "deb_install: $passed passed, $failed failed"; exit 1; }

command -v "$PODMAN" >/dev/null || die "podman is not installed (make deploy-deps)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (make deploy-deps)"
[ -f "$DEB" ] || die "$DEB missing (make deb)"

mirror=${DEB_MIRROR:-$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
	sed -n 's|^URIs: *\(http[^ ]*/debian\)/*$|\1|p' | head -n 1)}
[ -n "$mirror" ] || mirror=$(sed -n 's|^deb \(http[^ ]*/debian\)/* bookworm .*|\1|p' \
	/etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

tmp=$(mktemp -d "${TMPDIR:-/tmp}/quorum-deb.XXXXXX")
base="localhost/quorum-debtest:$$"
ctr="quorum-debtest-$$"
cleanup() {
	trap - EXIT INT TERM
	"$PODMAN" rm -f -t 0 "$ctr" >/dev/null 2>&1
	"$PODMAN" image exists "$base" 2>/dev/null && "$PODMAN" rmi -f "$base" >/dev/null 2>&1
	if [ "$failed" -ne 0 ]; then
		echo "deb_install: outputs kept in $tmp" >&2
		tail -n 40 "$tmp/inner.log" >&2 2>/dev/null
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- a clean Debian 12 ---------------------------------------------------------
cache=$B/cache/bookworm-apt.tar
if [ ! -s "$cache" ]; then
	mkdir -p "$B/cache"
	timeout 600 mmdebstrap --variant=apt --format=tar --quiet bookworm "$cache.tmp" \
		"deb $mirror bookworm main" >"$tmp/mmdebstrap.log" 2>&1 ||
		die "mmdebstrap: $(tail -n 5 "$tmp/mmdebstrap.log")"
	mv "$cache.tmp" "$cache"
fi
"$PODMAN" import -q "$cache" "$base" >/dev/null 2>"$tmp/import.log" ||
	die "podman import: $(cat "$tmp/import.log")"
ok "clean Debian 12 rootfs ($(du -m "$cache" | cut -f1) MB, mirror $mirror)"

# ---- what this tree's build answers -------------------------------------------------
QN="Mia has 45 stickers. She gives 12 to her brother and then buys 3 packs of 8. How many stickers does she have now?"
RUNARGS="-n 4 --max-new-tokens 48 --seed 3 --stop none"
# shellcheck disable=SC2086
timeout 300 "$B/quorum" run --model models/arith.gguf --json $RUNARGS "$QN" \
	>"$tmp/run-host.json" 2>"$tmp/run-host.log" || bad "quorum run here"

mkdir -p "$tmp/in" "$tmp/out"
cp "$DEB" "$tmp/in/"
cat >"$tmp/in/inner.sh" <<EOF
#!/bin/sh
# runs inside the clean container; each step prints STEP ok|FAIL
set -u
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin
step() { if [ "\$2" -eq 0 ]; then echo "STEP ok \$1"; else echo "STEP FAIL \$1"; fi; }
snap() { # the file tree and the account files
	find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run \\
		-o -path /tmp -o -path /in -o -path /out -o -path /var/lib/dpkg \\
		-o -path /var/lib/apt -o -path /var/cache -o -path /var/log \\) -prune \\
		-o -print | grep -v -e '^/etc/ld.so.cache\$' -e '^/etc/[a-z]*-\$' | sort
	cat /etc/passwd /etc/group /etc/shadow /etc/gshadow
	ls -a /dev/shm
}
apt-get update -qq >/dev/null 2>&1
snap >/out/before.txt
apt-get install -y -qq --no-install-recommends /in/$(basename "$DEB") >/out/install.log 2>&1
step "apt-get install ./$(basename "$DEB")" \$?
getent passwd quorum >/out/user.txt; step "system user quorum" \$?
test -f /etc/quorum/cluster.yaml && dpkg-query -W -f='\${Conffiles}' quorum | grep -q /etc/quorum/cluster.yaml
step "/etc/quorum/cluster.yaml is a conffile" \$?
quorum --version >/out/version.txt; step "quorum --version" \$?
quorum run --model /usr/share/quorum/models/arith.gguf --json $RUNARGS "$QN" >/out/run.json 2>/out/run.log
step "quorum run on the shipped model" \$?

# the coordinator unit's commands, as its User= in its WorkingDirectory=
unit=/lib/systemd/system/quorum-coordinator.service
pre=\$(sed -n 's/^ExecStartPre=//p' \$unit)
cmd=\$(sed -n 's/^ExecStart=//p' \$unit)
user=\$(sed -n 's/^User=//p' \$unit)
wd=\$(sed -n 's/^WorkingDirectory=//p' \$unit)
cd "\$wd" && setpriv --reuid="\$user" --regid="\$user" --init-groups \$pre >/out/check-config.txt 2>&1
step "ExecStartPre (\$pre) as \$user" \$?
setpriv --reuid="\$user" --regid="\$user" --init-groups \$cmd >/out/coordinator.log 2>&1 &
coord=\$!
i=0; nw=0
while [ \$i -lt 480 ]; do
	kill -0 \$coord 2>/dev/null || break
	nw=\$(quorum status --timeout 0.5 --retries 0 2>/dev/null | sed -n 's/^cluster .*: \([0-9]*\) worker(s)\$/\1/p')
	[ "\${nw:-0}" -ge 2 ] && break
	sleep 0.25; i=\$((i + 1))
done
[ "\${nw:-0}" -ge 2 ]; step "ExecStart (\$cmd) as \$user: 2 local workers registered" \$?
owner=\$(stat -c %U /proc/\$coord 2>/dev/null)
[ "\$owner" = "\$user" ]; step "the coordinator runs as \$owner" \$?
quorum ask --timeout 120 --json $RUNARGS "$QN" >/out/ask.json 2>/out/ask.log
step "quorum ask through the unit's coordinator" \$?
kill -TERM \$coord
i=0
while kill -0 \$coord 2>/dev/null && [ \$i -lt 150 ]; do sleep 0.2; i=\$((i + 1)); done
wait \$coord; rc=\$?
left=""
for p in /proc/[0-9]*; do
	case \$(readlink \$p/exe 2>/dev/null) in /usr/bin/coordinator|/usr/bin/worker) left="\$left \${p#/proc/}";; esac
done
[ \$rc -eq 0 ] && [ -z "\$left" ]; step "SIGTERM: coordinator exited \$rc, no worker left\$left" \$?

cd /
apt-get purge -y -qq --autoremove quorum >/out/purge.log 2>&1
step "apt-get purge --autoremove quorum" \$?
snap >/out/after.txt
diff /out/before.txt /out/after.txt >/out/left.diff
step "after purge: files, users, groups, /dev/shm as before the install" \$?
EOF

# ---- install, run, purge --------------------------------------------------------------
timeout 600 "$PODMAN" run --name "$ctr" --rm --shm-size=512m -v "$tmp/in:/in:ro" -v "$tmp/out:/out" \
	"$base" sh /in/inner.sh >"$tmp/inner.log" 2>&1 ||
	bad "the container exited $?"
while read -r s r rest; do
	[ "$s" = STEP ] || continue
	if [ "$r" = ok ]; then ok "$rest"; else bad "$rest"; fi
done <"$tmp/inner.log"
grep -q '^STEP .* after purge' "$tmp/inner.log" || bad "the container did not get to the end"
[ -s "$tmp/out/left.diff" ] && { echo "left after purge:"; head -n 20 "$tmp/out/left.diff"; }
[ -f "$tmp/out/version.txt" ] && echo "installed: $(cat "$tmp/out/version.txt")"

# the installed program's samples are this build's
cat >"$tmp/proj.py" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))
out = {"answer": r["answer"], "votes": r["votes"],
       "samples": [{k: s.get(k) for k in ("index", "text", "answer", "finish")}
                   for s in r["samples"]]}
sys.stdout.write(json.dumps(out, sort_keys=True, separators=(",", ":")))
EOF
for f in run ask; do
	if [ -s "$tmp/out/$f.json" ] &&
	   $PY "$tmp/proj.py" "$tmp/run-host.json" >"$tmp/a.p" &&
	   $PY "$tmp/proj.py" "$tmp/out/$f.json" >"$tmp/b.p" && cmp -s "$tmp/a.p" "$tmp/b.p"; then
		ok "installed quorum $f = this build's quorum run, byte for byte"
	else
		bad "installed quorum $f differs from this build's quorum run"
	fi
done
echo "deb_install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
