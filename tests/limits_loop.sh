#!/bin/sh
# limits_loop — the machine's limits (quorum bench --roofline,
# kern_measure_limits) are measured by loops of independent chains that
# must run from registers, and enough of them to cover the instruction's
# latency: a chain kept in memory puts a store and
# a load around every step, and the loop then measures store forwarding,
# not the multiply units (gcc 12 did so with an array of chains, and the
# roofline showed an AMD EPYC Zen 5's int8 peak at a third of its rate
# and the matmuls at 108-145% of it). Checked on the built program's
# code: in each kern_*_peak_int8 / kern_*_peak_f32, the loop holds at
# least ten multiply-add instructions (sixteen vpdpbusd in the VNNI
# build's: ten ran an Intel Xeon, family 6 model 167, at 91-93% of the
# rate twelve or more reach) and no memory operand.
#
#   sh tests/limits_loop.sh [BUILD_DIR]
# Exit status: 0 all hold, 1 one is broken, 77 no objdump or no
# $B/quorum built.
set -u
B=${1:-${B:-build}}
PY=/usr/bin/python3

if [ ! -x "$B/quorum" ] || ! command -v objdump >/dev/null; then
	echo "limits_loop: SKIP: no $B/quorum or no objdump"
	exit 77
fi

objdump -d --no-show-raw-insn "$B/quorum" | $PY -c '
import re, sys

funcs, cur = {}, None
for line in sys.stdin:
    m = re.match(r"^([0-9a-f]+) <(kern_\w+_peak_(?:int8|f32))>:", line)
    if m:
        cur = m.group(2)
        funcs[cur] = []
        continue
    if not line.strip():
        cur = None
        continue
    m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
    if cur and m:
        funcs[cur].append((int(m.group(1), 16), m.group(2), m.group(3)))

passed = failed = 0
def check(name, problems):
    global passed, failed
    if problems:
        failed += 1
        print("FAIL - %s" % name)
        for p in problems:
            print("       %s" % p)
    else:
        passed += 1
        print("ok   - %s" % name)

want = {"kern_vnni_peak_int8": 16, "kern_avx2_peak_int8": 10,
        "kern_avx2_peak_f32": 10, "kern_avx512_peak_f32": 10}
for name, least in want.items():
    ins = funcs.get(name)
    if not ins:
        check(name, ["not in %s/quorum" % sys.argv[1]])
        continue
    # the loop: the body of the backward jump that spans the most
    # multiply-adds
    best, body = -1, []
    for addr, op, args in ins:
        t = re.match(r"([0-9a-f]+) <", args)
        if op.startswith("j") and t and int(t.group(1), 16) < addr:
            b = [i for i in ins if int(t.group(1), 16) <= i[0] <= addr]
            n = sum(1 for i in b if re.match(r"v(pdpbusd|pmaddwd|pmaddubsw|fmadd)", i[1]))
            if n > best:
                best, body = n, b
    problems = []
    if best < least:
        problems.append("no loop of %d multiply-adds (%d)" % (least, max(best, 0)))
    for addr, op, args in body:
        if "(" in args and not op.startswith("j") and not op.startswith("nop"):
            problems.append("%x: %s %s: a memory operand in the loop" % (addr, op, args))
    check("%s: %d multiply-adds a round, registers only" % (name, best), problems)

print("limits_loop: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
' "$B"
