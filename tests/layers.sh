#!/bin/sh
# layers — the house rules of the source tree, checked on the tree and the
# built programs (README, "Layout"):
#   1. common/'s wings include only their own and lower wings:
#      qerr < format < kernels < text < infer < sc < net < conf;
#   2. no include circle between folders (a folder may include itself);
#   3. the coordinator never runs a model, so it links no engine code:
#      none of the kernels', KV cache's, forward pass's, sampler's, model
#      loader's or self-consistency engine's symbols is in build/coordinator;
#   4. every .c file of the programs and the library opens with a comment
#      saying what it is for.
#
#   sh tests/layers.sh [BUILD_DIR]
# Exit status: 0 all hold, 1 one is broken, 77 build/coordinator not built.
set -u
B=${1:-${B:-build}}
ROOT=${QUORUM_ROOT:-.}
PY=/usr/bin/python3

if [ ! -x "$B/coordinator" ]; then
	echo "layers: SKIP: $B/coordinator is not built"
	exit 77
fi

$PY - "$ROOT" "$B/coordinator" <<'EOF'
import os, re, subprocess, sys

root, coord = sys.argv[1], sys.argv[2]
passed = failed = 0

def check(name, problems):
    global passed, failed
    if problems:
        failed += 1
        print("FAIL - %s" % name)
        for p in problems[:20]:
            print("       %s" % p)
    else:
        passed += 1
        print("ok   - %s" % name)

SRC_DIRS = ("common", "coordinator", "worker", "tools")
RANK = {"qerr": 0, "format": 1, "kernels": 2, "text": 3, "infer": 4,
        "sc": 5, "net": 6, "conf": 7}
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

files = []
for d in SRC_DIRS:
    for dp, _, fs in os.walk(os.path.join(root, d)):
        files += [os.path.join(dp, f) for f in fs if f.endswith((".c", ".h"))]

def rel(p):
    return os.path.relpath(p, root)

def wing(path):  # common/<wing>/... -> wing; common/qerr.* -> qerr
    parts = rel(path).split(os.sep)
    if parts[0] != "common":
        return None
    return "qerr" if len(parts) == 2 else parts[1]

def folder(path):  # the folder a file stands in, common's wings apart
    parts = rel(path).split(os.sep)
    if parts[0] == "common":
        return "common/" + wing(path)
    return "/".join(parts[:-1])

def resolve(src, inc):
    """The project file an #include "inc" in src names, or None."""
    for base in (os.path.dirname(src), os.path.join(root, "common"), root):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(p):
            return p
    return None

edges = {}
layer_bad = []
for f in files:
    text = open(f, encoding="utf-8", errors="replace").read()
    for inc in INC.findall(text):
        t = resolve(f, inc)
        if t is None:
            continue  # generated (proto, the status page) or a system file
        a, b = folder(f), folder(t)
        if a != b:
            edges.setdefault(a, set()).add(b)
        wf, wt = wing(f), wing(t)
        if wf and wt and RANK.get(wt, 99) > RANK.get(wf, 99):
            layer_bad.append("%s includes %s (%s is above %s)"
                             % (rel(f), inc, wt, wf))
        if wf and not wt:
            layer_bad.append("%s includes %s, outside common/"
                             % (rel(f), inc))
check("common/'s wings include only their own and lower wings",
      layer_bad)

# folders that include each other, directly or around a longer loop
cycles = []
def reach(a, seen):
    for b in edges.get(a, ()):
        if b not in seen:
            seen.add(b)
            reach(b, seen)
    return seen
for a in sorted(edges):
    if a in reach(a, set()):
        cycles.append("%s reaches itself through %s"
                      % (a, ", ".join(sorted(edges[a]))))
check("no include circle between folders", cycles)

ENGINE = re.compile(r"^(kern_|kv_|fwd_|samp_|model_|tpool_|sc_engine|"
                    r"sc_batch|sc_run|sc_root|sc_fork|sc_cache)")
out = subprocess.run(["nm", "--defined-only", coord], capture_output=True,
                     text=True).stdout
syms = sorted({l.split()[-1] for l in out.splitlines()
               if len(l.split()) == 3 and ENGINE.match(l.split()[-1])})
check("the coordinator links no engine code (nm)",
      ["%s is linked in" % s for s in syms])

bare = []
for f in files:
    if f.endswith(".c"):
        with open(f, encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
        if not first.startswith("/*"):
            bare.append("%s opens with %r" % (rel(f), first.strip()[:40]))
check("every .c file opens with a comment saying what it is for", bare)

print("layers: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
EOF
