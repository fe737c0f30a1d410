#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"

static const char *const family_names[PROMPT_N_FAMILIES] = {
	[PROMPT_CHATML] = "chatml",	[PROMPT_LLAMA3] = "llama3",
	[PROMPT_PLAIN] = "plain",	[PROMPT_QWEN3] = "qwen3",
	[PROMPT_GEMMA] = "gemma",	[PROMPT_MISTRAL] = "mistral",
	[PROMPT_MISTRAL_V1] = "mistral-v1",
	[PROMPT_MISTRAL_V3] = "mistral-v3",
	[PROMPT_MISTRAL_V7] = "mistral-v7",
	[PROMPT_LLAMA2_SYS] = "llama2-sys",
};

const char *prompt_family_name(int family)
{
	if (family < 0 || family >= PROMPT_N_FAMILIES)
		return "plain";
	return family_names[family];
}

int prompt_family_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < PROMPT_N_FAMILIES; i++)
		if (!strcmp(name, family_names[i]))
			return i;
	if (!strcmp(name, "llama2"))
		return PROMPT_MISTRAL;
	return -1;
}

int prompt_family_thinks(int family)
{
	return family == PROMPT_QWEN3;
}

int prompt_think_default(int family)
{
	return family == PROMPT_QWEN3; /* Qwen3 thinks unless told not to */
}

int prompt_family_of_template(const char *tmpl, int *recognised)
{
	int fam = PROMPT_PLAIN, known = 1;
#define HAS(x) (strstr(tmpl, x) != NULL)
	if (!tmpl) {
		known = 0;
	} else if (HAS("<|im_start|>")) {
		fam = HAS("enable_thinking") || HAS("<think>") ? PROMPT_QWEN3
							       : PROMPT_CHATML;
	} else if (!strncmp(tmpl, "mistral", 7) || HAS("[INST]")) {
		if (HAS("[SYSTEM_PROMPT]"))
			fam = PROMPT_MISTRAL_V7;
		else if (HAS("' [INST] ' + system_message") ||
			 HAS("[AVAILABLE_TOOLS]"))
			fam = HAS(" [INST]") ? PROMPT_MISTRAL_V1
					     : PROMPT_MISTRAL_V3;
		else if (HAS("<<SYS>>"))
			fam = PROMPT_LLAMA2_SYS;
		else
			fam = PROMPT_MISTRAL;
	} else if (HAS("<start_of_turn>")) {
		fam = PROMPT_GEMMA;
	} else if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) {
		fam = PROMPT_LLAMA3;
	} else {
		known = 0;
	}
#undef HAS
	if (recognised)
		*recognised = known;
	return fam;
}

int prompt_family(const tok *t)
{
	return prompt_family_of_template(tok_chat_template(t), NULL);
}

int prompt_style_resolve(const tok *t, const char *name, int think,
			 prompt_style *out)
{
	const char *tmpl = tok_chat_template(t);
	int forced = name && *name, fam, known;

	memset(out, 0, sizeof(*out));
	if (forced) {
		fam = prompt_family_from_name(name);
		if (fam < 0)
			return qerr_fail(QERR_ARG, "unknown template '%.64s' "
					 "(known: " PROMPT_FAMILY_LIST ")",
					 name);
		known = 1;
	} else {
		fam = prompt_family_of_template(tmpl, &known);
	}
	out->family = fam;
	out->recognised = known;
	if (!prompt_family_thinks(fam)) {
		out->think = 0;
		if (think == PROMPT_THINK_ON)
			snprintf(out->warning, sizeof(out->warning),
				 "template %s has no thinking switch; "
				 "--think on has no effect",
				 prompt_family_name(fam));
	} else {
		out->think = think == PROMPT_THINK_DEFAULT
				     ? prompt_think_default(fam)
				     : think == PROMPT_THINK_ON;
	}
	if (!known)
		snprintf(out->warning, sizeof(out->warning),
			 "%s; using the plain template",
			 tmpl ? "tokenizer.chat_template not recognised"
			      : "the model has no tokenizer.chat_template");
	snprintf(out->note, sizeof(out->note), "%s (%s)%s",
		 prompt_family_name(fam),
		 forced ? "forced" : known ? "tokenizer.chat_template"
					   : "fallback",
		 !prompt_family_thinks(fam) ? ""
		 : out->think ? ", thinking on" : ", thinking off");
	return 0;
}

/* ---- rendering ---------------------------------------------------------- */

/* A rendering is a list of segments: the BOS token, literal template text
 * (special tokens recognised), the system prompt, the question. */
enum { SEG_BOS, SEG_LIT, SEG_SYS, SEG_QUES };

typedef struct {
	int kind;
	const char *text;
} seg;

#define MAX_SEGS 12

/* [a, b) of s without surrounding ASCII whitespace. */
static void trim(const char *s, const char **a, size_t *n)
{
	size_t l = strlen(s), i = 0;

	while (i < l && strchr(" \t\n\r\v\f", s[i]))
		i++;
	while (l > i && strchr(" \t\n\r\v\f", s[l - 1]))
		l--;
	*a = s + i;
	*n = l - i;
}

/* The segments of a family's prompt; returns their number. */
static int segments(int fam, int think, int has_sys, seg *s)
{
	int n = 0;
#define S(k, t) (s[n++] = (seg){k, t})
	switch (fam) {
	case PROMPT_CHATML:
	case PROMPT_QWEN3:
		if (has_sys) {
			S(SEG_LIT, "<|im_start|>system\n");
			S(SEG_SYS, NULL);
			S(SEG_LIT, "<|im_end|>\n");
		}
		S(SEG_LIT, "<|im_start|>user\n");
		S(SEG_QUES, NULL);
		S(SEG_LIT, "<|im_end|>\n<|im_start|>assistant\n");
		if (fam == PROMPT_QWEN3 && !think)
			S(SEG_LIT, "<think>\n\n</think>\n\n");
		break;
	case PROMPT_LLAMA3:
		S(SEG_BOS, NULL);
		if (has_sys) {
			S(SEG_LIT, "<|start_header_id|>system"
				   "<|end_header_id|>\n\n");
			S(SEG_SYS, NULL);
			S(SEG_LIT, "<|eot_id|>");
		}
		S(SEG_LIT, "<|start_header_id|>user<|end_header_id|>\n\n");
		S(SEG_QUES, NULL);
		S(SEG_LIT, "<|eot_id|><|start_header_id|>assistant"
			   "<|end_header_id|>\n\n");
		break;
	case PROMPT_GEMMA:
		S(SEG_BOS, NULL);
		S(SEG_LIT, "<start_of_turn>user\n");
		if (has_sys) {
			S(SEG_SYS, NULL);
			S(SEG_LIT, "\n\n");
		}
		S(SEG_QUES, NULL);
		S(SEG_LIT, "<end_of_turn>\n<start_of_turn>model\n");
		break;
	case PROMPT_MISTRAL:
	case PROMPT_MISTRAL_V1:
	case PROMPT_MISTRAL_V3:
	case PROMPT_LLAMA2_SYS:
		S(SEG_BOS, NULL);
		S(SEG_LIT, fam == PROMPT_MISTRAL_V1 ? " [INST] " : "[INST] ");
		if (has_sys) {
			if (fam == PROMPT_LLAMA2_SYS)
				S(SEG_LIT, "<<SYS>>\n");
			S(SEG_SYS, NULL);
			S(SEG_LIT, fam == PROMPT_MISTRAL ? "\n"
				   : fam == PROMPT_LLAMA2_SYS ? "\n<</SYS>>\n\n"
							      : "\n\n");
		}
		S(SEG_QUES, NULL);
		S(SEG_LIT, fam == PROMPT_MISTRAL_V3 ? "[/INST]" : " [/INST]");
		break;
	case PROMPT_MISTRAL_V7:
		S(SEG_BOS, NULL);
		if (has_sys) {
			S(SEG_LIT, "[SYSTEM_PROMPT] ");
			S(SEG_SYS, NULL);
			S(SEG_LIT, "[/SYSTEM_PROMPT]");
		}
		S(SEG_LIT, "[INST] ");
		S(SEG_QUES, NULL);
		S(SEG_LIT, "[/INST]");
		break;
	default: /* plain */
		S(SEG_BOS, NULL);
		if (has_sys) {
			S(SEG_SYS, NULL);
			S(SEG_LIT, "\n\n");
		}
		S(SEG_LIT, "Question: ");
		S(SEG_QUES, NULL);
		S(SEG_LIT, "\nAnswer:");
		break;
	}
#undef S
	return n;
}

/* The text of a user segment (system prompt, question), trimmed where the
 * family trims. */
static void user_text(int fam, const char *text, const char **a, size_t *n)
{
	if (fam == PROMPT_LLAMA3 || fam == PROMPT_GEMMA) {
		trim(text, a, n);
	} else {
		*a = text;
		*n = strlen(text);
	}
}

typedef struct {
	int32_t *ids;
	size_t n, cap;
} idbuf;

static int push(idbuf *b, const int32_t *ids, size_t n)
{
	if (b->n + n > b->cap) {
		size_t nc = (b->n + n) * 2 + 16;
		int32_t *nb = realloc(b->ids, nc * sizeof(*nb));

		if (!nb)
			return qerr_fail(QERR_NOMEM, "prompt: out of memory");
		b->ids = nb;
		b->cap = nc;
	}
	if (n)
		memcpy(b->ids + b->n, ids, n * sizeof(*ids));
	b->n += n;
	return 0;
}

/* Appends the tokens of text (special tokens recognised when special). */
static int put(const tok *t, idbuf *b, const char *text, size_t len,
	       int special)
{
	int32_t *ids;
	size_t n;
	int rc = tok_encode(t, text, len, special, 0, &ids, &n);

	if (rc)
		return rc;
	rc = push(b, ids, n);
	free(ids);
	return rc;
}

static const char *sys_or_default(const char *system)
{
	return system ? system : PROMPT_DEFAULT_SYSTEM;
}

int prompt_build_style(const tok *t, int family, int think,
		       const char *system, const char *question,
		       int32_t **ids, size_t *n)
{
	seg s[MAX_SEGS];
	idbuf b = {0};
	int ns, rc = 0;

	*ids = NULL;
	*n = 0;
	system = sys_or_default(system);
	if (think == PROMPT_THINK_DEFAULT)
		think = prompt_think_default(family);
	ns = segments(family, think, system[0] != '\0', s);
	for (int i = 0; i < ns && !rc; i++) {
		const char *a;
		size_t len;

		switch (s[i].kind) {
		case SEG_BOS: {
			int32_t bos = tok_bos(t);
			/* plain follows the vocabulary's add_bos flag; the chat
			 * templates write their bos_token themselves */
			if (bos >= 0 && (family != PROMPT_PLAIN ||
					 tok_add_bos(t)))
				rc = push(&b, &bos, 1);
			break;
		}
		case SEG_LIT:
			rc = put(t, &b, s[i].text, strlen(s[i].text), 1);
			break;
		default:
			user_text(family, s[i].kind == SEG_SYS ? system
							       : question,
				  &a, &len);
			rc = put(t, &b, a, len, 0);
			break;
		}
	}
	if (rc) {
		free(b.ids);
		return rc;
	}
	*ids = b.ids;
	*n = b.n;
	return 0;
}

int prompt_render(int family, int think, const char *system,
		  const char *question, char **out)
{
	seg s[MAX_SEGS];
	size_t cap = 1, o = 0;
	char *buf = NULL;
	int ns;

	*out = NULL;
	system = sys_or_default(system);
	if (think == PROMPT_THINK_DEFAULT)
		think = prompt_think_default(family);
	ns = segments(family, think, system[0] != '\0', s);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < ns; i++) {
			const char *a = "";
			size_t len = 0;

			if (s[i].kind == SEG_LIT) {
				a = s[i].text;
				len = strlen(a);
			} else if (s[i].kind != SEG_BOS) {
				user_text(family, s[i].kind == SEG_SYS
							  ? system : question,
					  &a, &len);
			}
			if (pass)
				memcpy(buf + o, a, len);
			if (pass)
				o += len;
			else
				cap += len;
		}
		if (!pass && !(buf = malloc(cap)))
			return qerr_fail(QERR_NOMEM, "prompt: out of memory");
	}
	buf[o] = '\0';
	*out = buf;
	return 0;
}

int prompt_build(const tok *t, const char *system, const char *question,
		 int32_t **ids, size_t *n)
{
	return prompt_build_style(t, prompt_family(t), PROMPT_THINK_DEFAULT,
				  system, question, ids, n);
}
