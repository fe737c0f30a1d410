#!/bin/sh
# build.sh — builds quorum's OCI image with podman, FROM scratch: the three
# programs (stripped), exactly the shared libraries they link (the ldd
# closure, taken from this Debian 12 machine's installed packages; which
# package each comes from is written to /usr/share/quorum/image-packages.txt
# in the image), a statically linked busybox (Debian's busybox-static) for
# /bin/sh and the few commands the Kubernetes probes and init containers
# run, the shipped model and a default config, /etc/passwd with the
# non-root user quorum (uid 10001), /tmp and /dev/shm. No image registry is
# contacted: the image has no base.
#
#   sh deploy/image/build.sh BUILD_DIR TAG
#   env: QUORUM_VERSION, QUORUM_GIT, QUORUM_SOURCE (labels; the Makefile
#        passes them)
set -eu
B=${1:-build}
TAG=${2:-localhost/quorum:latest}
VERSION=${QUORUM_VERSION:-$(cat VERSION)}
GIT=${QUORUM_GIT:-unknown}
SOURCE=${QUORUM_SOURCE:-unknown}
LICENSE=${QUORUM_LICENSE:-NOASSERTION}
PODMAN=${PODMAN:-podman}

for p in coordinator worker quorum; do
	[ -x "$B/$p" ] || { echo "image: $B/$p is not built" >&2; exit 1; }
done
[ -x /bin/busybox ] || { echo "image: /bin/busybox missing (busybox-static)" >&2; exit 1; }

out=$B/image
rm -rf "$out"
R=$out/rootfs
mkdir -p "$R/usr/bin" "$R/usr/lib/x86_64-linux-gnu" "$R/usr/lib64" \
	"$R/usr/sbin" "$R/etc/quorum" "$R/usr/share/quorum/models" \
	"$R/usr/share/doc/quorum" "$R/var/lib/quorum" "$R/tmp" "$R/dev/shm" \
	"$R/proc" "$R/sys" "$R/run"
# merged /usr, as Debian 12
ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"
ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"

for p in coordinator worker quorum; do
	strip --strip-unneeded -o "$R/usr/bin/$p" "$B/$p"
done

deb_of() { # the Debian package that ships a file (dpkg may know it without /usr)
	{ dpkg -S "$1" 2>/dev/null || dpkg -S "${1#/usr}" 2>/dev/null; } |
		head -n 1 | cut -d: -f1
}

# the libraries: every path ldd names, copied under that path (the file
# itself, not the symlink), and the package that ships it
: >"$out/libs"
for p in coordinator worker quorum; do
	ldd "$B/$p" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p'
done | sort -u >"$out/libs"
while read -r lib; do
	real=$(readlink -f "$lib")
	# Debian 12: /lib is /usr/lib; keep everything under /usr
	dest=$(printf '%s' "$lib" | sed 's|^/lib64/|/usr/lib64/|; s|^/lib/|/usr/lib/|')
	mkdir -p "$R$(dirname "$dest")"
	cp "$real" "$R$dest"
	strip --strip-unneeded "$R$dest" 2>/dev/null || true
	pkg=$(deb_of "$real")
	ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo "?")
	echo "$dest $pkg $ver"
done <"$out/libs" >"$R/usr/share/quorum/image-packages.txt"
echo "/bin/busybox busybox-static $(dpkg-query -W -f='${Version}' busybox-static)" \
	>>"$R/usr/share/quorum/image-packages.txt"

cp /bin/busybox "$R/usr/bin/busybox"
for a in sh cat cp install grep ls sleep mkdir rm id env test wget; do
	ln -s busybox "$R/usr/bin/$a"
done

cp models/arith.gguf models/arith.gguf.sha256 "$R/usr/share/quorum/models/"
cp models/README.md "$R/usr/share/doc/quorum/model-card.md"
cp README.md "$R/usr/share/doc/quorum/README.md"
cp deploy/image/cluster.yaml "$R/etc/quorum/cluster.yaml"

cat >"$R/etc/passwd" <<EOF
root:x:0:0:root:/root:/usr/sbin/nologin
quorum:x:10001:10001:quorum:/var/lib/quorum:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$R/etc/group" <<EOF
root:x:0:
quorum:x:10001:
nogroup:x:65534:
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$R/etc/nsswitch.conf"
chmod 1777 "$R/tmp" "$R/dev/shm"
chown 10001:10001 "$R/var/lib/quorum"

# one layer, reproducible order and owners
tar --sort=name --numeric-owner --mtime=@0 -C "$R" -cf "$out/rootfs.tar" .
cat >"$out/Containerfile" <<EOF
FROM scratch
ADD rootfs.tar /
ENV PATH=/usr/bin
USER 10001:10001
WORKDIR /var/lib/quorum
EXPOSE 7700 7701 8080
CMD ["quorum", "--help"]
EOF
set -- \
	org.opencontainers.image.title=quorum \
	"org.opencontainers.image.description=self-consistency LLM answers: coordinator, worker, quorum CLI and HTTP gateway" \
	"org.opencontainers.image.version=$VERSION" \
	"org.opencontainers.image.revision=$GIT" \
	"org.opencontainers.image.source=$SOURCE" \
	"org.opencontainers.image.licenses=$LICENSE"
args=""
for kv in "$@"; do
	args="$args --label \"$kv\" --annotation \"$kv\""
done
eval "$PODMAN build --format oci --pull=never --network=none $args -t \"$TAG\" -f \"$out/Containerfile\" \"$out\"" >&2
size=$($PODMAN image inspect --format '{{.Size}}' "$TAG")
echo "image: $TAG $(( (size + 524287) / 1048576 )) MB ($size bytes), version $VERSION, git $GIT" >&2
