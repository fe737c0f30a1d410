#!/bin/sh
# vs_llama — quorum bench against llama.cpp's llama-batched-bench on the
# same GGUF files, the two programs alternating: for each file and each
# N, ROUNDS rounds of (quorum, llama.cpp), each program's best prefill
# and best decode kept. A shared machine's speed moves from one minute
# to the next (other tenants), so one run of each can differ by 2x;
# alternating and keeping the best of each compares the two at their
# least disturbed. Prints one markdown row per (file, N): prefill tok/s
# (prompt tokens / prefill seconds) and decode tok/s (N x NEW / decode
# seconds) of both, and the ratios. Each round's numbers go to stderr
# ("q" quorum, "l" llama.cpp: prefill tok/s, decode tok/s), to see how
# far the machine moved.
#
#   LLAMA_BENCH=/path/to/llama-batched-bench sh bench/vs_llama.sh FILE...
#   env: BENCH_NS      sample counts (default "1 8 32")
#        BENCH_ROUNDS  rounds per (file, N) (default 3)
#        BENCH_NEW     new tokens per sample (default 64)
#        BENCH_THREADS threads of both (default 2)
#        BENCH_PROMPT  prompt tokens (default 200)
#        BENCH_KV      KV cache type of both: f16 (default) or q8_0 (llama.cpp
#                      then runs with flash attention, which its quantized V
#                      cache needs)
#        QUORUM        quorum binary (default build/quorum)
# llama.cpp is not part of this project: build it yourself (CPU, f16 KV
# here as in quorum's default). quorum bench warms up untimed first, as
# llama-batched-bench does; its prompt is ~200 tokens (llama.cpp's
# exactly 200), its decode time includes sampling (llama.cpp's does not
# sample).
set -u
Q=${QUORUM:-build/quorum}
L=${LLAMA_BENCH:?set LLAMA_BENCH to llama.cpp\'s llama-batched-bench}
NS=${BENCH_NS:-1 8 32}
R=${BENCH_ROUNDS:-3}
NEW=${BENCH_NEW:-64}
T=${BENCH_THREADS:-2}
P=${BENCH_PROMPT:-200}
KV=${BENCH_KV:-f16}
case "$KV" in
f16) LKV="-ctk f16 -ctv f16" ;;
q8_0) LKV="-ctk q8_0 -ctv q8_0 -fa on" ;;
*) echo "BENCH_KV = $KV: must be f16 or q8_0" >&2; exit 2 ;;
esac
# -pps -kvu: the prompt once, then N answers
CTX=$(( P + NEW * ${NS##* } + 512 ))
[ $# -ge 1 ] || { echo "usage: LLAMA_BENCH=... $0 FILE.gguf..." >&2; exit 2; }

echo "| file | N | quorum prefill | llama.cpp prefill | ratio | quorum decode | llama.cpp decode | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for f in "$@"; do
	for n in $NS; do
		for i in $(seq "$R"); do
			# quorum: prompt tokens from its header, then N's row
			"$Q" bench --model "$f" --prompt-tokens "$P" --new "$NEW" \
				--ns "$n" --modes batched --threads "$T" \
				--kv-type "$KV" 2>&1 |
				awk '/^prompt /{p=$2} /batched/{print "q", p/$4, $5}'
			# -pps: the prompt is prefilled once and shared, as
			# quorum's forks share it
			"$L" -m "$f" -c "$CTX" -b 2048 -ub 512 -npp "$P" \
				-ntg "$NEW" -npl "$n" -pps -kvu -t "$T" -tb "$T" \
				$LKV 2>&1 |
				awk -F'|' -v p="$P" '$2+0 == p {print "l", $7+0, $9+0}'
		done | while read -r line; do
			echo "$line" >&2
			echo "$line"
		done | awk -v f="$(basename "$f" .gguf)" -v n="$n" '
			{ if ($2 > pp[$1]) pp[$1] = $2; if ($3 > tg[$1]) tg[$1] = $3 }
			END {
				if (!pp["q"] || !pp["l"]) { print "| " f " | " n " | failed |"; exit 1 }
				printf "| %s | %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n",
				       f, n, pp["q"], pp["l"], pp["q"] / pp["l"],
				       tg["q"], tg["l"], tg["q"] / tg["l"]
			}'
	done
done
