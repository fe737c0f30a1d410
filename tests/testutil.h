/*
 * testutil — helpers shared by the test programs (header-only: every test
 * is its own binary). Paths: QUORUM_ROOT (default ., the repository) holds
 * data/ directory; models are synthesized into build/tmp/ on first use.
 */
#ifndef QUORUM_TESTUTIL_H
#define QUORUM_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "infer/mkmodel.h"
#include "qerr.h"

static inline const char *tu_root(void)
{
	const char *s = getenv("QUORUM_ROOT");

	return s && *s ? s : ".";
}

static inline const char *tu_tmpdir(void)
{
	const char *s = getenv("QUORUM_TMP");

	if (s && *s)
		return s;
	mkdir("build", 0755);
	mkdir("build/tmp", 0755);
	return "build/tmp";
}

/* QUORUM_TEST_QUICK (set by `make test-asan`): the sanitizer run covers
 * every code path but not every combination of the exhaustive matrices
 * (modes x blocks x threads x ISAs) nor the full volume of load tests,
 * which the plain `make test` runs; tests that loop over such a matrix
 * take a diagonal of it. */
static inline int tu_quick(void)
{
	const char *s = getenv("QUORUM_TEST_QUICK");

	return s && *s && strcmp(s, "0");
}

/* The whole file at path, malloc'ed and NUL-terminated (*len, when not
 * NULL, its size without the NUL); NULL when it cannot be read. */
static inline char *tu_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	size_t n = 0, cap = 0, r;

	if (!f)
		return NULL;
	do {
		if (n + 1 >= cap) {
			char *nb = realloc(b, cap = cap ? cap * 2 : 4096);

			if (!nb) {
				free(b);
				fclose(f);
				return NULL;
			}
			b = nb;
		}
		r = fread(b + n, 1, cap - n - 1, f);
		n += r;
	} while (r > 0);
	if (ferror(f)) {
		free(b);
		b = NULL;
	} else {
		b[n] = '\0';
		if (len)
			*len = n;
	}
	fclose(f);
	return b;
}

/* Path of a repository data file in a static buffer (one at a time). */
static inline const char *tu_data(const char *rel)
{
	static char p[1024];

	snprintf(p, sizeof(p), "%s/%s", tu_root(), rel);
	return p;
}

/* The vocabulary of the tests' synthesized chat models: the shipped
 * model's 809-token BPE with its ChatML template. The engine, sampler and
 * transport run the same code as with Qwen's 151,669 tokens, and the LM
 * head — nearly all of a tiny model's work per token with a large
 * vocabulary — shrinks 190 times. Tests of what only a large tokenizer
 * has (the qwen3 thinking template, the tokenizer conformance vectors)
 * name theirs. */
static inline const char *tu_chat_tokenizer(void)
{
	return tu_data("models/arith.gguf");
}

/* Synthesizes (once per process) a model into the temp dir and returns its
 * path in buf. The vocabulary is GPT-2's (50257 tokens) unless tokenizer
 * is given. */
static inline int tu_model(char *buf, size_t cap, const char *arch,
			   const char *shape, uint32_t wtype,
			   const char *tokenizer, uint64_t seed)
{
	mkmodel_opts o = {0};
	mkmodel_info info;
	char tokpath[1024];

	snprintf(tokpath, sizeof(tokpath), "%s",
		 tokenizer ? tokenizer
			   : tu_data("data/tokenizer-vectors/ggml-vocab-gpt-2.gguf"));
	snprintf(buf, cap, "%s/t-%s-%s-%s-%llu-%d.gguf", tu_tmpdir(), arch,
		 shape, ggml_type_name(wtype), (unsigned long long)seed,
		 (int)getpid());
	o.arch = arch;
	o.shape = shape;
	o.wtype = wtype;
	o.tokenizer = tokpath;
	o.seed = seed;
	o.out = buf;
	if (mkmodel_write(&o, &info)) {
		fprintf(stderr, "mkmodel: %s\n", qerr_detail());
		return -1;
	}
	return 0;
}

#endif
