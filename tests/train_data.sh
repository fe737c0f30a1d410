#!/bin/sh
# train_data — the arithmetic problem generators, the committed held-out
# sets, the shipped model's tokenizer files and checksum
# (train/test_problems.py; Debian's /usr/bin/python3, no PyTorch needed),
# then, where that Python has PyTorch, that a stopped and resumed training
# run gives the weights of an unbroken one (train/test_resume.py).
# Prints "train_data: N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	echo "train_data: $PY is missing"
	echo "train_data: 0 passed, 1 failed"
	exit 1
fi
out=$("$PY" train/test_problems.py)
rc=$?
echo "$out" | grep -v '^train_data:'
p=$(echo "$out" | sed -n 's/^train_data: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f=$(echo "$out" | sed -n 's/^train_data: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
[ -n "$p" ] || { p=0; f=1; }
if "$PY" -c "import torch" 2>/dev/null; then
	out=$("$PY" train/test_resume.py 2>&1)
	if [ "$?" -eq 0 ]; then
		p=$((p + 1))
	else
		f=$((f + 1))
	fi
	echo "$out" | grep -v '^train_resume:'
else
	echo "[SKIP] case_resume_bit_identical: $PY has no PyTorch (not counted)"
fi
echo "train_data: $p passed, $f failed"
[ "$rc" -eq 0 ] && [ "$f" -eq 0 ]
