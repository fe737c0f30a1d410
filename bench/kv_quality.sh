#!/bin/sh
# kv_quality — how far the KV cache's element type moves the logits:
# `quorum eval --kv-type T --dump-logits` over the same prompt with f32,
# f16 and q8_0 KV, then per pair max |delta| / max |logit| of the last
# position (f32 KV as the reference), and whether the top token agrees.
# Each length is a prefix of one text (a few arithmetic word problems,
# repeated), so longer prompts attend over more quantized rows.
#
#   sh bench/kv_quality.sh MODEL.gguf...
#   env: QUORUM (default build/quorum), KVQ_LENS (default "50 100 200")
set -u
Q=${QUORUM:-build/quorum}
PY=/usr/bin/python3
LENS=${KVQ_LENS:-50 100 200}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
text="Mia has 45 stickers. She gives 12 to her brother and then buys 3 packs of 8. How many stickers does she have now? A farmer has 17 sheep and buys 23 more. How many sheep are there? Tom reads 14 pages a day for 6 days and then 9 pages. How many pages did he read?"
text="$text $text $text $text $text"
echo "| model | prompt | f16 vs f32 | q8_0 vs f32 | q8_0 vs f16 | top-1 same (f16, q8_0) |"
echo "|---|---:|---:|---:|---:|---|"
for m in "$@"; do
	ids=$("$Q" tokenize --model "$m" -- "$text") || exit 1
	for n in $LENS; do
		toks=$(echo "$ids" | tr ' ' '\n' | head -n "$n" | paste -sd, -)
		for kt in f32 f16 q8_0; do
			"$Q" eval --model "$m" --tokens "$toks" --top 1 \
				--kv-type $kt --dump-logits "$tmp/$kt.bin" \
				>/dev/null || exit 1
		done
		$PY - "$tmp" "$(basename "$m" .gguf)" "$n" <<'EOF'
import sys, array
d, name, n = sys.argv[1:4]
def load(k):
    a = array.array("f"); a.frombytes(open(f"{d}/{k}.bin", "rb").read()); return a
f32, f16, q8 = load("f32"), load("f16"), load("q8_0")
def rel(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in b)
top = lambda a: max(range(len(a)), key=lambda i: a[i])
print(f"| {name} | {n} | {rel(f16, f32):.2e} | {rel(q8, f32):.2e} | "
      f"{rel(q8, f16):.2e} | {top(f16) == top(f32)}, {top(q8) == top(f32)} |")
EOF
	done
done
