#!/bin/sh
# Installs the Debian packages quorum builds and tests with, when missing
# (with the argument `train`: those the training scripts need; `deploy`:
# those `make image`, `make deb` and their tests need; `sdk`: Node and npm
# for `make test-sdk`).
# As root it runs apt-get; otherwise it prints the exact command to run.
set -eu
PKGS="build-essential pkg-config libzmq3-dev libprotobuf-c-dev protobuf-c-compiler
libyaml-dev libcmocka-dev libjansson-dev libpcre2-dev libmicrohttpd-dev
python3-zmq python3-protobuf protobuf-compiler iproute2
clang-14 libclang-rt-14-dev strace chromium curl"
# `deps.sh train`: what `make train` / `make eval-arith` need instead
# (Debian's PyTorch, with OpenBLAS: the reference BLAS is ~10x slower)
if [ "${1:-}" = train ]; then
	PKGS="python3-torch python3-numpy libopenblas0-pthread python3-matplotlib"
fi
# `deps.sh deploy`: the container image, the Kubernetes test under
# podman (runc: crun fails on these machines' cgroups; catatonit: the
# pods' infra containers), the Debian package
# (dpkg-shlibdeps from dpkg-dev computes its Depends:, lintian checks it)
# and the clean Debian rootfs its install test runs in (mmdebstrap)
if [ "${1:-}" = deploy ]; then
	PKGS="podman runc catatonit busybox-static mmdebstrap dpkg-dev lintian
python3-yaml binutils"
fi
# `deps.sh sdk`: Node.js and npm (`make test-sdk` runs the official
# openai npm package); a node and npm already on PATH will do
if [ "${1:-}" = sdk ]; then
	command -v node >/dev/null && command -v npm >/dev/null && exit 0
	PKGS="nodejs npm"
fi
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "quorum: missing packages:$missing" >&2
	echo "run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "quorum: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
