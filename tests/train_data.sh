#!/bin/sh
# train_data — the arithmetic problem generator, the committed held-out set,
# the shipped model's tokenizer files and checksum (train/test_problems.py;
# Debian's /usr/bin/python3, no PyTorch needed).
# Prints "train_data: N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	echo "train_data: $PY is missing"
	echo "train_data: 0 passed, 1 failed"
	exit 1
fi
exec "$PY" train/test_problems.py
