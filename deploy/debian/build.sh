#!/bin/sh
# build.sh — builds quorum_<version>_amd64.deb with dpkg-deb from a built
# tree: the programs in /usr/bin (stripped), the systemd units, the
# commented config as the conffile /etc/quorum/cluster.yaml (model: the
# shipped one under /usr/share/quorum), the maintainer scripts of this
# folder (postinst creates the system user quorum) and Depends: computed
# by dpkg-shlibdeps from the programs' libraries. Then lintian, whose
# findings are fixed or overridden with a reason (lintian-overrides).
#
#   sh deploy/debian/build.sh BUILD_DIR
#   env: QUORUM_VERSION, QUORUM_GIT (the Makefile passes them),
#        DEB_MAINTAINER ("Name <address>")
set -eu
B=${1:-build}
VERSION=${QUORUM_VERSION:-$(cat VERSION)}
GIT=${QUORUM_GIT:-unknown}
D=deploy/debian
# the Maintainer: field and changelog signature (DEB_MAINTAINER overrides)
MAINT=${DEB_MAINTAINER:-quorum maintainers <maintainers@quorum.example.org>}
out=$B/deb
R=$out/root
rm -rf "$out"
mkdir -p "$R/DEBIAN" "$R/usr/bin" "$R/lib/systemd/system" "$R/etc/quorum" \
	"$R/usr/share/quorum/models" "$R/usr/share/doc/quorum" \
	"$R/usr/share/lintian/overrides"

for p in coordinator worker quorum; do
	[ -x "$B/$p" ] || { echo "deb: $B/$p is not built" >&2; exit 1; }
	install -m 0755 "$B/$p" "$R/usr/bin/$p"
	strip --strip-unneeded --remove-section=.comment \
		--remove-section=.note "$R/usr/bin/$p"
done

# the units: the ones in deploy/, with the packaged paths
for u in quorum-coordinator.service quorum-worker@.service; do
	sed -e 's|/usr/local/bin/|/usr/bin/|g' \
	    -e 's|file:///usr/local/share/doc/quorum/README.md|file:///usr/share/doc/quorum/README.md.gz|' \
	    -e '/^#   install /d' "deploy/$u" >"$R/lib/systemd/system/$u"
	chmod 0644 "$R/lib/systemd/system/$u"
done

# the conffile: config/cluster.yaml with the shipped model
sed -e 's|^  path: ../build/models/qwen2.5-0.5b-q8_0.gguf$|  path: /usr/share/quorum/models/arith.gguf|' \
    -e 's|^  # GGUF model file (required). Relative to config/, so this is$|  # GGUF model file (required): the shipped quorum-arith model (see|' \
    -e 's|^  # <repo>/build/models/qwen2.5-0.5b-q8_0.gguf.$|  # /usr/share/doc/quorum/model-card.md). Same file on every host.|' \
    config/cluster.yaml >"$R/etc/quorum/cluster.yaml"
grep -q '^  path: /usr/share/quorum/models/arith.gguf$' "$R/etc/quorum/cluster.yaml" ||
	{ echo "deb: config/cluster.yaml's model path moved; update $0" >&2; exit 1; }
chmod 0644 "$R/etc/quorum/cluster.yaml"

install -m 0644 models/arith.gguf models/arith.gguf.sha256 "$R/usr/share/quorum/models/"
install -m 0644 README.md "$R/usr/share/doc/quorum/README.md"
install -m 0644 models/README.md "$R/usr/share/doc/quorum/model-card.md"
install -m 0644 "$D/copyright" "$R/usr/share/doc/quorum/copyright"
gzip -9n "$R/usr/share/doc/quorum/README.md" "$R/usr/share/doc/quorum/model-card.md"
{
	printf 'quorum (%s) unstable; urgency=medium\n\n' "$VERSION"
	printf '  * Built from git %s.\n\n' "$GIT"
	printf ' -- %s  %s\n' "$MAINT" \
		"$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}")"
} | gzip -9n >"$R/usr/share/doc/quorum/changelog.gz"
install -m 0644 "$D/lintian-overrides" "$R/usr/share/lintian/overrides/quorum"

for s in postinst prerm postrm; do
	install -m 0755 "$D/$s" "$R/DEBIAN/$s"
done
echo /etc/quorum/cluster.yaml >"$R/DEBIAN/conffiles"

# Depends: from the programs' libraries (dpkg-shlibdeps wants a
# debian/control beside it: a throwaway one)
mkdir -p "$out/shlibs/debian"
printf 'Source: quorum\n\nPackage: quorum\nArchitecture: any\n' \
	>"$out/shlibs/debian/control"
deps=$(cd "$out/shlibs" && dpkg-shlibdeps -O \
	"$OLDPWD/$R/usr/bin/coordinator" "$OLDPWD/$R/usr/bin/worker" \
	"$OLDPWD/$R/usr/bin/quorum" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$deps" ] || { echo "deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$R" | cut -f1)
sed -e "s|@VERSION@|$VERSION|" -e "s|@MAINTAINER@|$MAINT|" -e "s|@DEPENDS@|adduser, $deps|" \
    -e "s|@SIZE@|$size|" "$D/control.in" >"$R/DEBIAN/control"
(cd "$R" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
	sort -z | xargs -0 md5sum) >"$R/DEBIAN/md5sums"
chmod 0644 "$R/DEBIAN/md5sums" "$R/DEBIAN/control" "$R/DEBIAN/conffiles"

deb=$out/quorum_${VERSION}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$R" "$deb" >&2
echo "deb: $deb ($(du -k "$deb" | cut -f1) KiB), Depends: adduser, $deps" >&2
if command -v lintian >/dev/null; then
	lintian --info --display-info --tag-display-limit 0 "$deb" \
		>"$out/lintian.txt" 2>&1 || true
	if grep -q '^[EW]: ' "$out/lintian.txt"; then
		cat "$out/lintian.txt" >&2
		echo "deb: lintian has errors or warnings (above)" >&2
		exit 1
	fi
	echo "deb: lintian: no error, no warning ($(grep -c '^[IPN]: ' \
		"$out/lintian.txt") info/pedantic lines in $out/lintian.txt)" >&2
fi
