/*
 * fuzz_gbnf — libFuzzer target: grammars and schemas from arbitrary bytes.
 *
 * Input: the bytes before the first NUL are a GBNF grammar (or, when the
 * input starts with '{', a JSON schema made one; with '/', a regular
 * expression, the rest of those bytes, made one); the bytes after it are
 * a text stepped through the grammar's matcher, one byte at a time, each
 * state's allowed-token mask taken over the GPT-2 vocabulary
 * ($QUORUM_ROOT/data/tokenizer-vectors/, loaded once).
 *
 * Properties beyond "no crash, no leak, no UB, bounded time": a refused
 * grammar, schema or pattern leaves a message naming it ("grammar:L:C:
 * ...", "schema...: ...", "pattern: ..."); the grammar made of an
 * accepted schema or pattern always parses; stepping a text byte by byte and all at once reach
 * the same state; a state is accepting only when it is not dead.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "qerr.h"
#include "text/constrain.h"
#include "text/gbnf.h"
#include "text/jschema.h"
#include "text/tok.h"

static tok *voc;
static gbnf_vocab *gv;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *root = getenv("QUORUM_ROOT");
	char p[1024];
	gguf_file *g;

	(void)argc;
	(void)argv;
	snprintf(p, sizeof(p), "%s/data/tokenizer-vectors/ggml-vocab-gpt-2.gguf",
		 root ? root : ".");
	if (gguf_open(p, &g) || tok_load(g, &voc) || gbnf_vocab_new(voc, &gv)) {
		fprintf(stderr, "fuzz_gbnf: %s: %s\n", p, qerr_detail());
		abort();
	}
	gguf_close(&g);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t glen = nul ? (size_t)(nul - data) : size;
	const char *text = nul ? (const char *)nul + 1 : "";
	size_t tlen = nul ? size - glen - 1 : 0;
	char *owned = NULL;
	const char *gtext = (const char *)data;
	gbnf *g = NULL;
	gbnf_matcher *m = NULL;
	int s, whole;

	if (glen && data[0] == '{') {
		json_t *js = json_loadb((const char *)data, glen, 0, NULL);

		if (!js)
			return 0;
		if (jschema_to_gbnf(js, &owned)) {
			if (strncmp(qerr_detail(), "schema", 6))
				abort();
			json_decref(js);
			return 0;
		}
		json_decref(js);
		gtext = owned;
		glen = strlen(owned);
	} else if (glen && data[0] == '/') {
		char *re = strndup((const char *)data + 1, glen - 1);

		if (!re)
			return 0;
		if (constrain_regex(re, &owned)) {
			if (strncmp(qerr_detail(), "pattern: ", 9) &&
			    strcmp(qerr_detail(), "out of memory"))
				abort();
			free(re);
			return 0;
		}
		free(re);
		gtext = owned;
		glen = strlen(owned);
	}
	if (gbnf_parse(gtext, glen, &g)) {
		/* a grammar made here must parse */
		if (owned || strncmp(qerr_detail(), "grammar", 7))
			abort();
		free(owned);
		return 0;
	}
	if (gbnf_matcher_new(g, gv, &m))
		abort();
	s = gbnf_start(m);
	whole = gbnf_step(m, s, text, tlen);
	for (size_t i = 0; i < tlen && s != GBNF_DEAD; i++) {
		s = gbnf_step(m, s, text + i, 1);
		if (s != GBNF_DEAD && (i & 7) == 0)
			(void)gbnf_allowed(m, s);
	}
	if (s != whole || (s == GBNF_DEAD && gbnf_accepting(m, s)))
		abort();
	gbnf_matcher_free(&m);
	gbnf_free(&g);
	free(owned);
	return 0;
}
