#include "prompt.h"

#include <stdlib.h>
#include <string.h>

#include "qerr.h"

int prompt_family(const tok *t)
{
	if (tok_find(t, "<|im_start|>") >= 0 && tok_find(t, "<|im_end|>") >= 0)
		return PROMPT_CHATML;
	if (tok_find(t, "<|start_header_id|>") >= 0 &&
	    tok_find(t, "<|end_header_id|>") >= 0 &&
	    tok_find(t, "<|eot_id|>") >= 0)
		return PROMPT_LLAMA3;
	return PROMPT_PLAIN;
}

const char *prompt_family_name(int family)
{
	switch (family) {
	case PROMPT_CHATML: return "chatml";
	case PROMPT_LLAMA3: return "llama3";
	default: return "plain";
	}
}

typedef struct {
	int32_t *ids;
	size_t n, cap;
} idbuf;

/* Appends the tokens of text (special tokens recognised when special). */
static int put(const tok *t, idbuf *b, const char *text, int special,
	       int add_bos)
{
	int32_t *ids;
	size_t n;
	int rc = tok_encode(t, text, strlen(text), special, add_bos, &ids, &n);

	if (rc)
		return rc;
	if (b->n + n > b->cap) {
		size_t nc = (b->n + n) * 2 + 16;
		int32_t *nb = realloc(b->ids, nc * sizeof(*nb));

		if (!nb) {
			free(ids);
			return qerr_fail(QERR_NOMEM, "prompt: out of memory");
		}
		b->ids = nb;
		b->cap = nc;
	}
	if (n)
		memcpy(b->ids + b->n, ids, n * sizeof(*ids));
	b->n += n;
	free(ids);
	return 0;
}

/* A template is a list of parts: literal template text (special tokens
 * recognised), or the system prompt / question (plain text). */
enum { LIT, SYS, QUES, END };

typedef struct {
	int kind;
	const char *text;
	int add_bos;
} part;

static const part tmpl_chatml[] = {
	{LIT, "<|im_start|>system\n", 0}, {SYS, 0, 0},
	{LIT, "<|im_end|>\n<|im_start|>user\n", 0}, {QUES, 0, 0},
	{LIT, "<|im_end|>\n<|im_start|>assistant\n", 0}, {END, 0, 0},
};

static const part tmpl_llama3[] = {
	{LIT, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n",
	 0},
	{SYS, 0, 0},
	{LIT, "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n", 0},
	{QUES, 0, 0},
	{LIT, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	 0},
	{END, 0, 0},
};

static const part tmpl_plain[] = {
	{SYS, 0, 1}, {LIT, "\n\nQuestion: ", 0}, {QUES, 0, 0},
	{LIT, "\nAnswer:", 0}, {END, 0, 0},
};

int prompt_build(const tok *t, const char *system, const char *question,
		 int32_t **ids, size_t *n)
{
	const int fam = prompt_family(t);
	const part *p = fam == PROMPT_CHATML ? tmpl_chatml :
			fam == PROMPT_LLAMA3 ? tmpl_llama3 : tmpl_plain;
	idbuf b = {0};
	int rc = 0;

	*ids = NULL;
	*n = 0;
	if (!system)
		system = PROMPT_DEFAULT_SYSTEM;
	for (; p->kind != END && !rc; p++) {
		const char *text = p->kind == LIT ? p->text :
				   p->kind == SYS ? system : question;

		rc = put(t, &b, text, p->kind == LIT, p->add_bos);
	}
	if (rc) {
		free(b.ids);
		return rc;
	}
	*ids = b.ids;
	*n = b.n;
	return 0;
}
