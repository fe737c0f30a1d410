/*
 * prompt — renders a question (with a system prompt and few-shot turns)
 * in the model's chat template and tokenizes it (see prompt.h for the
 * families and how they are recognised). Callers: sc users in tools/,
 * the coordinator (it builds every prompt), tests.
 */
#include "text/prompt.h"

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
	[PROMPT_HARMONY] = "harmony",
};

static const char *const effort_names[] = {"low", "medium", "high"};

const char *prompt_effort_name(int think)
{
	if (think < PROMPT_EFFORT_LOW || think > PROMPT_EFFORT_HIGH)
		return "medium";
	return effort_names[think - PROMPT_EFFORT_LOW];
}

int prompt_effort_from_name(const char *name)
{
	for (int i = 0; name && i < 3; i++)
		if (!strcmp(name, effort_names[i]))
			return PROMPT_EFFORT_LOW + i;
	return -1;
}

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
	if (!strcmp(name, "gpt-oss"))   /* llama.cpp's name for it */
		return PROMPT_HARMONY;
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
	if (family == PROMPT_HARMONY)
		return PROMPT_EFFORT_MEDIUM;   /* gpt-oss's default */
	return family == PROMPT_QWEN3; /* Qwen3 thinks unless told not to */
}

int prompt_family_of_template(const char *tmpl, int *recognised)
{
	int fam = PROMPT_PLAIN, known = 1;
#define HAS(x) (strstr(tmpl, x) != NULL)
	if (!tmpl) {
		known = 0;
	} else if (HAS("<|start|>") && HAS("<|channel|>")) {
		fam = PROMPT_HARMONY;
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

/* gpt-oss's vocabulary: a GGUF without a (recognised) template that
 * carries it is a harmony model. */
static int harmony_vocab(const tok *t)
{
	return tok_find(t, "<|start|>") >= 0 &&
	       tok_find(t, "<|channel|>") >= 0 &&
	       tok_find(t, "<|message|>") >= 0;
}

static int family_of(const tok *t, int *recognised, int *by_vocab)
{
	int known, fam = prompt_family_of_template(tok_chat_template(t),
						   &known);

	*by_vocab = 0;
	if (!known && harmony_vocab(t)) {
		fam = PROMPT_HARMONY;
		known = *by_vocab = 1;
	}
	if (recognised)
		*recognised = known;
	return fam;
}

int prompt_family(const tok *t)
{
	int v;

	return family_of(t, NULL, &v);
}

int prompt_style_resolve(const tok *t, const char *name, int think,
			 prompt_style *out)
{
	const char *tmpl = tok_chat_template(t);
	int forced = name && *name, fam, known, by_vocab = 0;

	memset(out, 0, sizeof(*out));
	if (forced) {
		fam = prompt_family_from_name(name);
		if (fam < 0)
			return qerr_fail(QERR_ARG, "unknown template '%.64s' "
					 "(known: " PROMPT_FAMILY_LIST ")",
					 name);
		known = 1;
	} else {
		fam = family_of(t, &known, &by_vocab);
	}
	out->family = fam;
	out->recognised = known;
	if (fam == PROMPT_HARMONY) {
		out->think = think >= PROMPT_EFFORT_LOW ? think
						       : PROMPT_EFFORT_MEDIUM;
		if (think == PROMPT_THINK_ON || think == PROMPT_THINK_OFF)
			snprintf(out->warning, sizeof(out->warning),
				 "template harmony has no thinking switch; "
				 "--think has no effect (see "
				 "--reasoning-effort)");
	} else if (think >= PROMPT_EFFORT_LOW) {
		out->think = prompt_think_default(fam);
		snprintf(out->warning, sizeof(out->warning),
			 "template %s has no reasoning effort; "
			 "--reasoning-effort has no effect",
			 prompt_family_name(fam));
	} else if (!prompt_family_thinks(fam)) {
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
	snprintf(out->note, sizeof(out->note), "%s (%s)%s%s",
		 prompt_family_name(fam),
		 forced ? "forced" : by_vocab ? "the vocabulary's harmony tokens"
		 : known ? "tokenizer.chat_template" : "fallback",
		 fam == PROMPT_HARMONY ? ", reasoning "
		 : !prompt_family_thinks(fam) ? ""
		 : out->think ? ", thinking on" : ", thinking off",
		 fam == PROMPT_HARMONY ? prompt_effort_name(out->think) : "");
	return 0;
}

/* ---- rendering ---------------------------------------------------------- */

/* A family's conversation, turn by turn (NULL texts are empty):
 *   [BOS] [sys_open S sys_close]
 *   for each turn (the shots', then the question's):
 *     user_open [fold_open S fold_sep  (first turn, system folded in)] Q
 *     user_close, then for a shot: asst_open A asst_close,
 *                 for the question: gen (the assistant's turn starts)
 * With no shot this is the single-turn rendering of the header comment. */
typedef struct {
	int bos;
	const char *head;                 /* always, after BOS */
	const char *sys_open, *sys_close; /* system as its own turn */
	const char *sys_tail;   /* after S, tokenized with it as llama.cpp
				 * does with the whole text (no special
				 * token between them) */
	int fold;                         /* else folded into the first turn */
	const char *fold_open, *fold_sep;
	const char *user_open, *user_close;
	const char *asst_open, *asst_close;
	const char *gen;
} turns;

/* gpt-oss's system message (no "Current date:" line: a prompt's bytes
 * must not depend on the day) */
#define HARMONY_HEAD(effort)                                                \
	"<|start|>system<|message|>You are ChatGPT, a large language model " \
	"trained by OpenAI.\nKnowledge cutoff: 2024-06\n\nReasoning: "       \
	effort "\n\n# Valid channels: analysis, commentary, final. Channel " \
	"must be included for every message.<|end|>"

static turns turns_of(int fam, int think)
{
	turns t = {0};

	switch (fam) {
	case PROMPT_CHATML:
	case PROMPT_QWEN3:
		t.sys_open = "<|im_start|>system\n";
		t.sys_close = "<|im_end|>\n";
		t.user_open = "<|im_start|>user\n";
		t.user_close = "<|im_end|>\n<|im_start|>assistant\n";
		t.asst_close = "<|im_end|>\n";
		if (fam == PROMPT_QWEN3 && !think)
			t.gen = "<think>\n\n</think>\n\n";
		break;
	case PROMPT_LLAMA3:
		t.bos = 1;
		t.sys_open = "<|start_header_id|>system<|end_header_id|>\n\n";
		t.sys_close = "<|eot_id|>";
		t.user_open = "<|start_header_id|>user<|end_header_id|>\n\n";
		t.user_close = "<|eot_id|><|start_header_id|>assistant"
			       "<|end_header_id|>\n\n";
		t.asst_close = "<|eot_id|>";
		break;
	case PROMPT_GEMMA:
		t.bos = 1;
		t.fold = 1;
		t.fold_sep = "\n\n";
		t.user_open = "<start_of_turn>user\n";
		t.user_close = "<end_of_turn>\n<start_of_turn>model\n";
		t.asst_close = "<end_of_turn>\n";
		break;
	case PROMPT_MISTRAL:
	case PROMPT_MISTRAL_V1:
	case PROMPT_MISTRAL_V3:
	case PROMPT_LLAMA2_SYS:
		t.bos = 1;
		t.fold = 1;
		t.user_open = fam == PROMPT_MISTRAL_V1 ? " [INST] " : "[INST] ";
		if (fam == PROMPT_LLAMA2_SYS)
			t.fold_open = "<<SYS>>\n";
		t.fold_sep = fam == PROMPT_MISTRAL ? "\n"
			     : fam == PROMPT_LLAMA2_SYS ? "\n<</SYS>>\n\n"
							: "\n\n";
		t.user_close = fam == PROMPT_MISTRAL_V3 ? "[/INST]" : " [/INST]";
		t.asst_open = fam == PROMPT_MISTRAL_V3 ? NULL : " ";
		t.asst_close = "</s>";
		break;
	case PROMPT_MISTRAL_V7:
		t.bos = 1;
		t.sys_open = "[SYSTEM_PROMPT] ";
		t.sys_close = "[/SYSTEM_PROMPT]";
		t.user_open = "[INST] ";
		t.user_close = "[/INST]";
		t.asst_close = "</s>";
		break;
	case PROMPT_HARMONY:
		t.head = think == PROMPT_EFFORT_LOW ? HARMONY_HEAD("low")
			 : think == PROMPT_EFFORT_HIGH ? HARMONY_HEAD("high")
						       : HARMONY_HEAD("medium");
		t.sys_open = "<|start|>developer<|message|># Instructions\n\n";
		t.sys_tail = "\n\n";
		t.sys_close = "<|end|>";
		t.user_open = "<|start|>user<|message|>";
		t.user_close = "<|end|><|start|>assistant";
		t.asst_open = "<|channel|>final<|message|>";
		t.asst_close = "<|end|>";
		break;
	default: /* plain */
		t.bos = 1;
		t.sys_close = "\n\n";
		t.user_open = "Question: ";
		t.user_close = "\nAnswer:";
		t.asst_open = " ";
		t.asst_close = "\n\n";
		break;
	}
	return t;
}

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

/* The text of a user segment (system prompt, question, a shot's answer),
 * trimmed where the family trims. */
static void user_text(int fam, const char *text, const char **a, size_t *n)
{
	if (fam == PROMPT_LLAMA3 || fam == PROMPT_GEMMA) {
		trim(text, a, n);
	} else {
		*a = text;
		*n = strlen(text);
	}
}

/* Receives the pieces of a rendering in order: kind 0 the BOS token, 1
 * template text (special tokens recognised), 2 user text. */
typedef int (*emit_fn)(void *ctx, int kind, const char *text, size_t len);

static int lit(emit_fn emit, void *ctx, const char *text)
{
	return text && *text ? emit(ctx, 1, text, strlen(text)) : 0;
}

static int user(emit_fn emit, void *ctx, int fam, const char *text)
{
	const char *a;
	size_t n;

	user_text(fam, text, &a, &n);
	return emit(ctx, 2, a, n);
}

/* An earlier assistant turn's text as the family's template shows it:
 * Qwen3's drops the reasoning of the turns before the question (what
 * precedes the last </think>, and the newlines after it), so a
 * conversation sent back with its thinking is the prompt Qwen3's own
 * template makes. */
static const char *answer_shown_in(int fam, const char *a)
{
	const char *t, *end = NULL;

	if (fam != PROMPT_QWEN3)
		return a;
	for (t = a; (t = strstr(t, "</think>")); t += 8)
		end = t + 8;
	if (!end)
		return a;
	while (*end == '\n')
		end++;
	return end;
}

/* User text and a template tail as one plain-text piece. */
static int user_tail(emit_fn emit, void *ctx, int fam, const char *text,
		     const char *tail)
{
	const char *a;
	size_t n, m;
	char *buf;
	int rc;

	if (!tail)
		return user(emit, ctx, fam, text);
	user_text(fam, text, &a, &n);
	m = strlen(tail);
	if (!(buf = malloc(n + m + 1)))
		return qerr_fail(QERR_NOMEM, "prompt: out of memory");
	memcpy(buf, a, n);
	memcpy(buf + n, tail, m + 1);
	rc = emit(ctx, 2, buf, n + m);
	free(buf);
	return rc;
}

static const char *sys_or_default(const char *system)
{
	return system ? system : PROMPT_DEFAULT_SYSTEM;
}

static int walk(int fam, int think, const char *system,
		const prompt_shot *shots, size_t n_shots, const char *question,
		emit_fn emit, void *ctx)
{
	turns t;
	int rc = 0, has_sys;

	system = sys_or_default(system);
	has_sys = system[0] != '\0';
	/* an effort only means something to harmony, on/off only to the
	 * families with a thinking switch */
	if (think == PROMPT_THINK_DEFAULT ||
	    (fam == PROMPT_HARMONY) != (think >= PROMPT_EFFORT_LOW))
		think = prompt_think_default(fam);
	t = turns_of(fam, think);
	if (t.bos)
		rc = emit(ctx, 0, NULL, 0);
	if (!rc)
		rc = lit(emit, ctx, t.head);
	if (!rc && has_sys && !t.fold) {
		if (!(rc = lit(emit, ctx, t.sys_open)) &&
		    !(rc = user_tail(emit, ctx, fam, system, t.sys_tail)))
			rc = lit(emit, ctx, t.sys_close);
	}
	for (size_t i = 0; !rc && i <= n_shots; i++) {
		int last = i == n_shots;

		rc = lit(emit, ctx, t.user_open);
		if (!rc && i == 0 && has_sys && t.fold &&
		    !(rc = lit(emit, ctx, t.fold_open)) &&
		    !(rc = user(emit, ctx, fam, system)))
			rc = lit(emit, ctx, t.fold_sep);
		if (!rc)
			rc = user(emit, ctx, fam,
				  last ? question : shots[i].question);
		if (!rc)
			rc = lit(emit, ctx, t.user_close);
		if (!rc && last)
			rc = lit(emit, ctx, t.gen);
		else if (!rc && !(rc = lit(emit, ctx, t.asst_open)) &&
			 !(rc = user(emit, ctx, fam,
				     answer_shown_in(fam, shots[i].answer))))
			rc = lit(emit, ctx, t.asst_close);
	}
	return rc;
}

typedef struct {
	int32_t *ids;
	size_t n, cap;
	const tok *t;
	int family;
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

/* An emit_fn: tokens of each piece (template text with special tokens
 * recognised, user text as plain text). */
static int emit_tokens(void *ctx, int kind, const char *text, size_t len)
{
	idbuf *b = ctx;
	int32_t *ids;
	size_t n;
	int rc;

	if (kind == 0) {
		int32_t bos = tok_bos(b->t);
		/* plain follows the vocabulary's add_bos flag; the chat
		 * templates write their bos_token themselves */
		if (bos >= 0 && (b->family != PROMPT_PLAIN ||
				 tok_add_bos(b->t)))
			return push(b, &bos, 1);
		return 0;
	}
	if ((rc = tok_encode(b->t, text, len, kind == 1, 0, &ids, &n)))
		return rc;
	rc = push(b, ids, n);
	free(ids);
	return rc;
}

int prompt_build_shots(const tok *t, int family, int think,
		       const char *system, const prompt_shot *shots,
		       size_t n_shots, const char *question, int32_t **ids,
		       size_t *n)
{
	idbuf b = {NULL, 0, 0, t, family};
	int rc;

	*ids = NULL;
	*n = 0;
	for (size_t i = 0; i < n_shots; i++)
		if (!shots[i].question || !shots[i].answer)
			return qerr_fail(QERR_ARG, "few-shot example %zu has "
					 "no question or answer", i + 1);
	if ((rc = walk(family, think, system, shots, n_shots, question,
		       emit_tokens, &b))) {
		free(b.ids);
		return rc;
	}
	*ids = b.ids;
	*n = b.n;
	return 0;
}

int prompt_build_style(const tok *t, int family, int think,
		       const char *system, const char *question,
		       int32_t **ids, size_t *n)
{
	return prompt_build_shots(t, family, think, system, NULL, 0, question,
				  ids, n);
}

typedef struct {
	char *buf;
	size_t n, cap;
} textbuf;

static int emit_text(void *ctx, int kind, const char *text, size_t len)
{
	textbuf *b = ctx;

	if (kind == 0)
		return 0; /* no BOS in the text */
	if (b->n + len + 1 > b->cap) {
		size_t nc = (b->n + len + 1) * 2;
		char *nb = realloc(b->buf, nc);

		if (!nb)
			return qerr_fail(QERR_NOMEM, "prompt: out of memory");
		b->buf = nb;
		b->cap = nc;
	}
	memcpy(b->buf + b->n, text, len);
	b->n += len;
	b->buf[b->n] = '\0';
	return 0;
}

int prompt_render_shots(int family, int think, const char *system,
			const prompt_shot *shots, size_t n_shots,
			const char *question, char **out)
{
	textbuf b = {NULL, 0, 0};
	int rc;

	*out = NULL;
	if ((rc = emit_text(&b, 1, "", 0)) ||
	    (rc = walk(family, think, system, shots, n_shots, question,
		       emit_text, &b))) {
		free(b.buf);
		return rc;
	}
	*out = b.buf;
	return 0;
}

int prompt_render(int family, int think, const char *system,
		  const char *question, char **out)
{
	return prompt_render_shots(family, think, system, NULL, 0, question,
				   out);
}

int prompt_build(const tok *t, const char *system, const char *question,
		 int32_t **ids, size_t *n)
{
	return prompt_build_style(t, prompt_family(t), PROMPT_THINK_DEFAULT,
				  system, question, ids, n);
}
