/*
 * bench_tok — tokenizer speed: load time and encode time of a ~4,000-token
 * prompt (English prose, code, numbers, some non-Latin text) for each
 * vocabulary family, in microseconds per 100 tokens.
 *
 * usage: bench_tok [ROOT]   (default $QUORUM_ROOT or ., the repository)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format/gguf.h"
#include "text/hfvocab.h"
#include "qerr.h"
#include "text/tok.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const chunks[] = {
	"Question: A train leaves the station at 3:45 PM traveling at 62 "
	"miles per hour. Another train leaves 30 minutes later at 75 mph. "
	"When does the second train catch up? Let's think step by step.\n\n",
	"def solve(xs: list[int]) -> int:\n    total = 0\n    for i, x in "
	"enumerate(xs):\n        if x % 2 == 0:\n            total += x * i\n"
	"    return total  # O(n)\n\n",
	"The answer is 1,234,567.89 (approximately), i.e. 12.5% more than "
	"last year's figure of 1,097,393. Don't forget: it's what we'd've "
	"expected!\n",
	("Grüße aus München — 東京の天気は晴れです。Привет, мир! 😀 "
	 "naïve café résumé\n"),
	"   Indented   text\twith\ttabs   and    runs of spaces.\r\n",
};

static void run(const char *name, const char *path, const char *text,
		size_t len)
{
	gguf_file *g = NULL;
	tok *t = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	double t0, t1, best = 1e9;
	int iters = 0;

	t0 = now_s();
	if (gguf_open(path, &g) || tok_load(g, &t)) {
		fprintf(stderr, "%s: %s\n", name, qerr_detail());
		gguf_close(&g);
		return;
	}
	t1 = now_s();
	printf("%-10s load %7.1f ms  vocab %6u  pre %s\n", name,
	       (t1 - t0) * 1e3, tok_vocab_size(t), tok_pre_name(t));
	for (double start = now_s(); now_s() - start < 1.0; iters++) {
		double a = now_s(), b;

		free(ids);
		if (tok_encode(t, text, len, 0, 0, &ids, &n)) {
			fprintf(stderr, "%s: %s\n", name, qerr_detail());
			break;
		}
		b = now_s() - a;
		best = b < best ? b : best;
	}
	printf("%-10s encode %zu bytes -> %zu tokens: best %.3f ms, "
	       "%.1f us per 100 tokens (%d runs)\n", name, len, n, best * 1e3,
	       best * 1e6 * 100 / (double)(n ? n : 1), iters);
	free(ids);
	tok_free(&t);
	gguf_close(&g);
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : getenv("QUORUM_ROOT");
	char dir[] = "/tmp/bench_tok.XXXXXX", path[600], json[600];
	static const char *const fam[][2] = {{"qwen2", "qwen2"},
					     {"llama3", "llama-bpe"},
					     {"o200k", "gpt-4o"}};
	size_t len = 0, cap = 1 << 16;
	char *text = malloc(cap);

	if (!root || !*root)
		root = ".";
	if (!text || !mkdtemp(dir))
		return 1;
	/* ~4,000 tokens: the chunks repeated */
	while (len < 15000) {
		for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
			size_t l = strlen(chunks[i]);

			memcpy(text + len, chunks[i], l);
			len += l;
		}
	}
	for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		gguf_writer *w = NULL;
		double t0 = now_s();

		snprintf(json, sizeof(json), "%s/data/tokenizers/%s/tokenizer.json",
			 root, fam[i][0]);
		snprintf(path, sizeof(path), "%s/%s.gguf", dir, fam[i][1]);
		if (gguf_writer_new(&w) || hfvocab_from_json(w, json, NULL, 0, NULL) ||
		    gguf_writer_save(w, path, NULL, NULL)) {
			fprintf(stderr, "%s: %s\n", json, qerr_detail());
			gguf_writer_free(&w);
			return 1;
		}
		gguf_writer_free(&w);
		printf("%-10s hfvocab_from_json + save %.1f ms\n", fam[i][1],
		       (now_s() - t0) * 1e3);
		run(fam[i][1], path, text, len);
		unlink(path);
	}
	rmdir(dir);
	snprintf(path, sizeof(path),
		 "%s/data/tokenizer-vectors/ggml-vocab-gpt-2.gguf", root);
	run("gpt-2", path, text, len);
	snprintf(path, sizeof(path),
		 "%s/data/tokenizer-vectors/ggml-vocab-llama-spm.gguf", root);
	run("llama-spm", path, text, len);
	free(text);
	return 0;
}
