#!/bin/sh
# Generates quorum_pb2.py from proto/quorum.proto with Debian's protoc
# (protobuf-compiler, the same release as python3-protobuf: 3.21 on
# bookworm). Generated code is not committed.
#   clients/python/gen_pb.sh [OUT_DIR]      (default: <repo>/build/python)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/python}
command -v protoc >/dev/null 2>&1 || {
	echo "gen_pb.sh: protoc not found: apt-get install protobuf-compiler" >&2
	exit 1
}
mkdir -p "$out"
protoc --proto_path="$root/proto" --python_out="$out" "$root/proto/quorum.proto"
echo "$out/quorum_pb2.py"
