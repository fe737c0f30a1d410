/*
 * prompt: template recognition from tokenizer.chat_template, byte-exact
 * renderings of every family (with and without a system prompt, thinking
 * on and off), the tokens matching the rendering, and the fallback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "text/prompt.h"
#include "qerr.h"
#include "testutil.h"
#include "text/tok.h"

/* ---- recognition -------------------------------------------------------- */

static void test_detect(void **state)
{
	static const struct {
		const char *tmpl; /* the discriminating part of real templates */
		int family, known;
	} cases[] = {
		{"{% for message in messages %}{{'<|im_start|>' + message['role']"
		 " + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}",
		 PROMPT_CHATML, 1},
		{"{%- if enable_thinking is defined and enable_thinking is false "
		 "%}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
		 "<|im_start|>assistant", PROMPT_QWEN3, 1},
		{"{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
		 "<start_of_turn>user\\n", PROMPT_GEMMA, 1},
		{"{{ bos_token }}{% for message in messages %}{% if "
		 "message['role'] == 'user' %}{{ '[INST] ' + message['content'] "
		 "+ ' [/INST]' }}{% endif %}{% endfor %}", PROMPT_MISTRAL, 1},
		{"{{- '[AVAILABLE_TOOLS] [' }}{{- '[INST] ' + message['content']"
		 " + '[/INST]' }}", PROMPT_MISTRAL_V3, 1},
		{"{{- bos_token }}{{- ' [INST] ' + system_message }}",
		 PROMPT_MISTRAL_V1, 1},
		{"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}"
		 "{{- '[INST]' + message['content'] + '[/INST]' }}",
		 PROMPT_MISTRAL_V7, 1},
		{"{% if loop.index0 == 0 %}{{ bos_token + '[INST] <<SYS>>\\n' + "
		 "system_message + '\\n<</SYS>>\\n\\n' }}", PROMPT_LLAMA2_SYS, 1},
		{"{{- '<|start_header_id|>' + message['role'] + "
		 "'<|end_header_id|>\\n\\n' }}", PROMPT_LLAMA3, 1},
		{"{{- \"<|start|>system<|message|>\" }}{{- \"<|channel|>final"
		 "<|message|>\" }}", PROMPT_HARMONY, 1},
		{"{% for m in messages %}### {{ m.role }}: {{ m.content }}"
		 "{% endfor %}", PROMPT_PLAIN, 0},
		{NULL, PROMPT_PLAIN, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int known = -1;
		int fam = prompt_family_of_template(cases[i].tmpl, &known);

		if (fam != cases[i].family || known != cases[i].known)
			fail_msg("case %zu: family %s known %d, want %s %d", i,
				 prompt_family_name(fam), known,
				 prompt_family_name(cases[i].family),
				 cases[i].known);
	}
	for (int f = 0; f < PROMPT_N_FAMILIES; f++)
		assert_int_equal(prompt_family_from_name(prompt_family_name(f)),
				 f);
	assert_int_equal(prompt_family_from_name("llama2"), PROMPT_MISTRAL);
	assert_int_equal(prompt_family_from_name("vicuna"), -1);
	assert_int_equal(prompt_family_from_name("gpt-oss"), PROMPT_HARMONY);
	assert_int_equal(prompt_effort_from_name("low"), PROMPT_EFFORT_LOW);
	assert_int_equal(prompt_effort_from_name("medium"),
			 PROMPT_EFFORT_MEDIUM);
	assert_int_equal(prompt_effort_from_name("high"), PROMPT_EFFORT_HIGH);
	assert_int_equal(prompt_effort_from_name("High"), -1);
	assert_int_equal(prompt_effort_from_name(""), -1);
	assert_int_equal(prompt_effort_from_name(NULL), -1);
	for (int e = PROMPT_EFFORT_LOW; e <= PROMPT_EFFORT_HIGH; e++)
		assert_int_equal(prompt_effort_from_name(prompt_effort_name(e)),
				 e);
}

/* ---- renderings ----------------------------------------------------------- */

#define SYS "Think.\n"
#define Q " What is 2+3? "

static void test_render(void **state)
{
	static const struct {
		int family, think;
		const char *system; /* "" = none */
		const char *want;
	} cases[] = {
		{PROMPT_CHATML, -1, SYS,
		 "<|im_start|>system\n" SYS "<|im_end|>\n<|im_start|>user\n" Q
		 "<|im_end|>\n<|im_start|>assistant\n"},
		{PROMPT_CHATML, -1, "",
		 "<|im_start|>user\n" Q "<|im_end|>\n<|im_start|>assistant\n"},
		/* qwen3 thinks by default: the model opens <think> itself */
		{PROMPT_QWEN3, -1, SYS,
		 "<|im_start|>system\n" SYS "<|im_end|>\n<|im_start|>user\n" Q
		 "<|im_end|>\n<|im_start|>assistant\n"},
		{PROMPT_QWEN3, 1, "",
		 "<|im_start|>user\n" Q "<|im_end|>\n<|im_start|>assistant\n"},
		{PROMPT_QWEN3, 0, SYS,
		 "<|im_start|>system\n" SYS "<|im_end|>\n<|im_start|>user\n" Q
		 "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{PROMPT_QWEN3, 0, "",
		 "<|im_start|>user\n" Q "<|im_end|>\n<|im_start|>assistant\n"
		 "<think>\n\n</think>\n\n"},
		/* thinking is a qwen3 switch only */
		{PROMPT_CHATML, 0, "",
		 "<|im_start|>user\n" Q "<|im_end|>\n<|im_start|>assistant\n"},
		{PROMPT_LLAMA3, -1, SYS,
		 "<|start_header_id|>system<|end_header_id|>\n\nThink."
		 "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
		 "What is 2+3?<|eot_id|><|start_header_id|>assistant"
		 "<|end_header_id|>\n\n"},
		{PROMPT_LLAMA3, -1, "",
		 "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?"
		 "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{PROMPT_GEMMA, -1, SYS,
		 "<start_of_turn>user\nThink.\n\nWhat is 2+3?<end_of_turn>\n"
		 "<start_of_turn>model\n"},
		{PROMPT_GEMMA, -1, "",
		 "<start_of_turn>user\nWhat is 2+3?<end_of_turn>\n"
		 "<start_of_turn>model\n"},
		{PROMPT_MISTRAL, -1, SYS, "[INST] " SYS "\n" Q " [/INST]"},
		{PROMPT_MISTRAL, -1, "", "[INST] " Q " [/INST]"},
		{PROMPT_MISTRAL_V1, -1, SYS, " [INST] " SYS "\n\n" Q " [/INST]"},
		{PROMPT_MISTRAL_V3, -1, SYS, "[INST] " SYS "\n\n" Q "[/INST]"},
		{PROMPT_MISTRAL_V3, -1, "", "[INST] " Q "[/INST]"},
		{PROMPT_MISTRAL_V7, -1, SYS,
		 "[SYSTEM_PROMPT] " SYS "[/SYSTEM_PROMPT][INST] " Q "[/INST]"},
		{PROMPT_MISTRAL_V7, -1, "", "[INST] " Q "[/INST]"},
		{PROMPT_LLAMA2_SYS, -1, SYS,
		 "[INST] <<SYS>>\n" SYS "\n<</SYS>>\n\n" Q " [/INST]"},
		{PROMPT_PLAIN, -1, SYS, SYS "\n\nQuestion: " Q "\nAnswer:"},
		{PROMPT_PLAIN, -1, "", "Question: " Q "\nAnswer:"},
	};
	char *got;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(prompt_render(cases[i].family, cases[i].think,
					       cases[i].system, Q, &got), 0);
		if (strcmp(got, cases[i].want))
			fail_msg("case %zu (%s): got\n[%s]\nwant\n[%s]", i,
				 prompt_family_name(cases[i].family), got,
				 cases[i].want);
		free(got);
	}
	/* NULL system: the default one */
	assert_int_equal(prompt_render(PROMPT_GEMMA, -1, NULL, "Q?", &got), 0);
	assert_string_equal(got, "<start_of_turn>user\n" PROMPT_DEFAULT_SYSTEM
			    "\n\nQ?<end_of_turn>\n<start_of_turn>model\n");
	free(got);
}

/* ---- tokens on real vocabularies ------------------------------------------ */

static tok *vocab(const char *dir, char *path, size_t cap)
{
	char tj[1024];
	mkmodel_opts o = {0};
	mkmodel_info info;
	gguf_file *g;
	tok *t = NULL;

	snprintf(tj, sizeof(tj), "%s", dir[0] == '/' ? dir : tu_data(dir));
	snprintf(path, cap, "%s/prompt-vocab-%d.gguf", tu_tmpdir(),
		 (int)getpid());
	o.shape = "tiny";
	o.wtype = GGML_TYPE_F32;
	o.tokenizer = tj;
	o.vocab_only = 1;
	o.out = path;
	if (mkmodel_write(&o, &info) || gguf_open(path, &g))
		fail_msg("%s: %s", dir, qerr_detail());
	if (tok_load(g, &t))
		fail_msg("%s: %s", dir, qerr_detail());
	gguf_close(&g);
	unlink(path);
	return t;
}

/* The tokens are the rendering's, template text with special tokens, the
 * user text without (here it holds none), BOS where the family has one. */
static void check_tokens(const tok *t, int fam, int think, const char *sys,
			 const char *q)
{
	int32_t *a, *b;
	size_t na, nb;
	char *text;
	int bos = fam != PROMPT_CHATML && fam != PROMPT_QWEN3 &&
		  fam != PROMPT_HARMONY &&
		  tok_bos(t) >= 0 && (fam != PROMPT_PLAIN || tok_add_bos(t));

	assert_int_equal(prompt_build_style(t, fam, think, sys, q, &a, &na),
			 0);
	assert_int_equal(prompt_render(fam, think, sys, q, &text), 0);
	assert_int_equal(tok_encode(t, text, strlen(text), 1, 0, &b, &nb), 0);
	if (na != nb + (size_t)bos || (bos && a[0] != tok_bos(t)) ||
	    memcmp(a + bos, b, nb * sizeof(*b))) {
		for (size_t i = 0; i < na; i++)
			fprintf(stderr, "%d ", a[i]);
		fprintf(stderr, "\n");
		for (size_t i = 0; i < nb; i++)
			fprintf(stderr, "%d ", b[i]);
		fprintf(stderr, "\n");
		fail_msg("%s: %zu tokens, rendering gives %zu (+%d BOS)",
			 prompt_family_name(fam), na, nb, bos);
	}
	free(a);
	free(b);
	free(text);
}

static void test_tokens(void **state)
{
	char path[1024];
	tok *qw, *ll;
	prompt_style st;
	int32_t *a;
	size_t na;

	(void)state;
	/* data/tokenizers/qwen2 is Qwen3's tokenizer: its template thinks */
	qw = vocab("data/tokenizers/qwen2/tokenizer.json", path, sizeof(path));
	ll = vocab("data/tokenizers/llama3/tokenizer.json", path, sizeof(path));
	assert_int_equal(prompt_family(qw), PROMPT_QWEN3);
	assert_int_equal(prompt_family(ll), PROMPT_LLAMA3);
	for (int think = 0; think < 2; think++) {
		check_tokens(qw, PROMPT_QWEN3, think, SYS, Q);
		check_tokens(qw, PROMPT_QWEN3, think, "", Q);
	}
	check_tokens(ll, PROMPT_LLAMA3, -1, "Think.", Q);
	check_tokens(ll, PROMPT_LLAMA3, -1, "", Q);
	/* (plain is left out: its segments are tokenized apart, so "?" and
	 * "\n" do not merge as they would in the rendering's one text) */
	/* <think> is one token of Qwen3's vocabulary, never split */
	assert_int_equal(prompt_build_style(qw, PROMPT_QWEN3, 0, "", "x", &a,
					    &na), 0);
	assert_true(na >= 6);
	assert_int_equal(a[na - 4], tok_find(qw, "<think>"));
	assert_int_equal(a[na - 2], tok_find(qw, "</think>"));
	free(a);
	/* a question cannot inject control tokens */
	assert_int_equal(prompt_build_style(qw, PROMPT_QWEN3, 1, "",
					    "<|im_end|>", &a, &na), 0);
	for (size_t i = 3; i + 5 < na; i++)
		assert_int_not_equal(a[i], tok_find(qw, "<|im_end|>"));
	free(a);

	/* resolution: the template's default, forced, unknown */
	assert_int_equal(prompt_style_resolve(qw, NULL, PROMPT_THINK_DEFAULT,
					      &st), 0);
	assert_int_equal(st.family, PROMPT_QWEN3);
	assert_int_equal(st.think, 1);
	assert_string_equal(st.warning, "");
	assert_non_null(strstr(st.note, "thinking on"));
	assert_int_equal(prompt_style_resolve(qw, NULL, PROMPT_THINK_OFF, &st),
			 0);
	assert_int_equal(st.think, 0);
	assert_int_equal(prompt_style_resolve(ll, "gemma", PROMPT_THINK_ON,
					      &st), 0);
	assert_int_equal(st.family, PROMPT_GEMMA);
	assert_int_equal(st.think, 0);
	assert_non_null(strstr(st.warning, "no thinking switch"));
	assert_int_equal(prompt_style_resolve(ll, "vicuna", -1, &st), QERR_ARG);
	assert_non_null(strstr(qerr_detail(), "mistral-v7"));
	tok_free(&qw);
	tok_free(&ll);
}

/* Few-shot examples as prior turns: exact renderings of two families,
 * tokens equal to the rendering's, and the same first tokens (everything
 * up to the question's turn) for every question — the shared prefix. */
static void test_shots(void **state)
{
	static const prompt_shot shots[] = {
		{"What is 2 + 3?", "2 + 3 = 5. \\boxed{5}"},
		{" What is 4 * 2? ", "4 * 2 = 8. \\boxed{8}"},
	};
	char path[1024], *text;
	tok *qw;
	int32_t *a, *b;
	size_t na, nb, same = 0, head;

	(void)state;
	assert_int_equal(prompt_render_shots(PROMPT_CHATML, -1, "S.", shots, 2,
					     "Q?", &text), 0);
	assert_string_equal(text,
		"<|im_start|>system\nS.<|im_end|>\n"
		"<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
		"<|im_start|>assistant\n2 + 3 = 5. \\boxed{5}<|im_end|>\n"
		"<|im_start|>user\n What is 4 * 2? <|im_end|>\n"
		"<|im_start|>assistant\n4 * 2 = 8. \\boxed{8}<|im_end|>\n"
		"<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n");
	free(text);
	/* gemma: the system prompt folds into the first shot's turn, and
	 * the texts are trimmed */
	assert_int_equal(prompt_render_shots(PROMPT_GEMMA, -1, "S.", shots, 2,
					     "Q?", &text), 0);
	assert_string_equal(text,
		"<start_of_turn>user\nS.\n\nWhat is 2 + 3?<end_of_turn>\n"
		"<start_of_turn>model\n2 + 3 = 5. \\boxed{5}<end_of_turn>\n"
		"<start_of_turn>user\nWhat is 4 * 2?<end_of_turn>\n"
		"<start_of_turn>model\n4 * 2 = 8. \\boxed{8}<end_of_turn>\n"
		"<start_of_turn>user\nQ?<end_of_turn>\n<start_of_turn>model\n");
	free(text);
	assert_int_equal(prompt_render_shots(PROMPT_PLAIN, -1, "", shots, 1,
					     "Q?", &text), 0);
	assert_string_equal(text, "Question: What is 2 + 3?\nAnswer: 2 + 3 = "
			    "5. \\boxed{5}\n\nQuestion: Q?\nAnswer:");
	free(text);
	/* Qwen3's template shows an earlier turn without its reasoning
	 * (what precedes the last </think>, and the newlines after it);
	 * ChatML's shows the text as it is */
	{
		static const prompt_shot th[] = {
			{"2 + 3?", "<think>\nadd them\n</think>\n\n5."},
		};

		assert_int_equal(prompt_render_shots(PROMPT_QWEN3, 1, "S.", th,
						     1, "Q?", &text), 0);
		assert_string_equal(text,
			"<|im_start|>system\nS.<|im_end|>\n"
			"<|im_start|>user\n2 + 3?<|im_end|>\n"
			"<|im_start|>assistant\n5.<|im_end|>\n"
			"<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n");
		free(text);
		assert_int_equal(prompt_render_shots(PROMPT_CHATML, -1, "S.",
						     th, 1, "Q?", &text), 0);
		assert_non_null(strstr(text, "assistant\n<think>\nadd them"));
		free(text);
	}
	/* no shots: the single-turn rendering */
	assert_int_equal(prompt_render_shots(PROMPT_CHATML, -1, "S.", NULL, 0,
					     "Q?", &text), 0);
	{
		char *one;

		assert_int_equal(prompt_render(PROMPT_CHATML, -1, "S.", "Q?",
					       &one), 0);
		assert_string_equal(text, one);
		free(one);
	}
	free(text);
	qw = vocab("data/tokenizers/qwen2/tokenizer.json", path, sizeof(path));
	assert_int_equal(prompt_build_shots(qw, PROMPT_QWEN3, 0, "S.", shots, 2,
					    "How many legs have 3 cats?", &a,
					    &na), 0);
	assert_int_equal(prompt_render_shots(PROMPT_QWEN3, 0, "S.", shots, 2,
					     "How many legs have 3 cats?",
					     &text), 0);
	assert_int_equal(tok_encode(qw, text, strlen(text), 1, 0, &b, &nb), 0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na * sizeof(*a));
	free(b);
	free(text);
	assert_int_equal(prompt_build_shots(qw, PROMPT_QWEN3, 0, "S.", shots, 2,
					    "What is 9 - 4?", &b, &nb), 0);
	while (same < na && same < nb && a[same] == b[same])
		same++;
	/* everything through the last shot and "<|im_start|>user\n" */
	assert_int_equal(prompt_render_shots(PROMPT_QWEN3, 0, "S.", shots, 2,
					     "", &text), 0);
	*strstr(strstr(strstr(text, "8}<|im_end|>") + 1,
		       "<|im_start|>user\n"), "user\n") = '\0';
	{
		int32_t *h;

		assert_int_equal(tok_encode(qw, text, strlen(text), 1, 0, &h,
					    &head), 0);
		free(h);
	}
	assert_true(same >= head + 2);
	free(text);
	free(a);
	free(b);
	/* a shot without its answer */
	{
		prompt_shot bad = {"Q", NULL};

		assert_int_equal(prompt_build_shots(qw, PROMPT_QWEN3, 0, "", &bad,
						    1, "Q", &a, &na), QERR_ARG);
	}
	tok_free(&qw);
}

/* ---- harmony (gpt-oss) ----------------------------------------------------- */

#define H_HEAD(e)                                                            \
	"<|start|>system<|message|>You are ChatGPT, a large language model " \
	"trained by OpenAI.\nKnowledge cutoff: 2024-06\n\nReasoning: " e     \
	"\n\n# Valid channels: analysis, commentary, final. Channel must be " \
	"included for every message.<|end|>"

static void test_harmony(void **state)
{
	static const struct {
		int think;
		const char *system, *want;
	} cases[] = {
		{PROMPT_THINK_DEFAULT, SYS,
		 H_HEAD("medium") "<|start|>developer<|message|># Instructions"
		 "\n\n" SYS "\n\n<|end|><|start|>user<|message|>" Q "<|end|>"
		 "<|start|>assistant"},
		{PROMPT_EFFORT_LOW, "",
		 H_HEAD("low") "<|start|>user<|message|>" Q "<|end|>"
		 "<|start|>assistant"},
		{PROMPT_EFFORT_HIGH, "",
		 H_HEAD("high") "<|start|>user<|message|>" Q "<|end|>"
		 "<|start|>assistant"},
		/* on/off is no effort: the default */
		{PROMPT_THINK_OFF, "",
		 H_HEAD("medium") "<|start|>user<|message|>" Q "<|end|>"
		 "<|start|>assistant"},
	};
	static const prompt_shot shot = {"1+1?", "\\boxed{2}"};
	char path[1024], dir[1024], link[1100], *got, *real;
	tok *o, *bare;
	prompt_style st;
	int32_t *a;
	size_t na;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(prompt_render(PROMPT_HARMONY, cases[i].think,
					       cases[i].system, Q, &got), 0);
		if (strcmp(got, cases[i].want))
			fail_msg("case %zu: got\n[%s]\nwant\n[%s]", i, got,
				 cases[i].want);
		free(got);
	}
	/* a shot's answer is a finished final-channel message */
	assert_int_equal(prompt_render_shots(PROMPT_HARMONY, PROMPT_EFFORT_LOW,
					     "", &shot, 1, "Q?", &got), 0);
	assert_string_equal(got, H_HEAD("low")
		"<|start|>user<|message|>1+1?<|end|><|start|>assistant"
		"<|channel|>final<|message|>\\boxed{2}<|end|>"
		"<|start|>user<|message|>Q?<|end|><|start|>assistant");
	free(got);
	/* an effort means nothing to other families */
	assert_int_equal(prompt_render(PROMPT_CHATML, PROMPT_EFFORT_HIGH, "",
				       "Q", &got), 0);
	assert_string_equal(got, "<|im_start|>user\nQ<|im_end|>\n"
			    "<|im_start|>assistant\n");
	free(got);

	/* o200k with our template: recognised, tokens as rendered */
	o = vocab("data/tokenizers/o200k/tokenizer.json", path, sizeof(path));
	assert_int_equal(prompt_family(o), PROMPT_HARMONY);
	for (int e = PROMPT_EFFORT_LOW; e <= PROMPT_EFFORT_HIGH; e++) {
		check_tokens(o, PROMPT_HARMONY, e, SYS, Q);
		check_tokens(o, PROMPT_HARMONY, e, "", Q);
	}
	assert_int_equal(prompt_build_style(o, PROMPT_HARMONY, -1, "", "x", &a,
					    &na), 0);
	assert_true(na > 4);
	assert_int_equal(a[0], tok_find(o, "<|start|>"));
	assert_int_equal(a[na - 2], tok_find(o, "<|start|>"));
	assert_int_equal(a[na - 1], tok_find(o, "assistant"));
	free(a);
	assert_int_equal(prompt_style_resolve(o, NULL, PROMPT_THINK_DEFAULT,
					      &st), 0);
	assert_int_equal(st.family, PROMPT_HARMONY);
	assert_int_equal(st.think, PROMPT_EFFORT_MEDIUM);
	assert_string_equal(st.warning, "");
	assert_non_null(strstr(st.note, "reasoning medium"));
	assert_int_equal(prompt_style_resolve(o, NULL, PROMPT_EFFORT_HIGH, &st),
			 0);
	assert_int_equal(st.think, PROMPT_EFFORT_HIGH);
	assert_int_equal(prompt_style_resolve(o, NULL, PROMPT_THINK_ON, &st),
			 0);
	assert_int_equal(st.think, PROMPT_EFFORT_MEDIUM);
	assert_non_null(strstr(st.warning, "no thinking switch"));
	assert_int_equal(prompt_style_resolve(o, "chatml", PROMPT_EFFORT_LOW,
					      &st), 0);
	assert_int_equal(st.think, 0);
	assert_non_null(strstr(st.warning, "no reasoning effort"));

	/* the vocabulary alone (no tokenizer_config.json, no template) */
	real = realpath(tu_data("data/tokenizers/o200k/tokenizer.json"), NULL);
	assert_non_null(real);
	snprintf(dir, sizeof(dir), "%s/harmony-bare-%d", tu_tmpdir(),
		 (int)getpid());
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(link, sizeof(link), "%s/tokenizer.json", dir);
	assert_int_equal(symlink(real, link), 0);
	free(real);
	/* an absolute path to the link (realpath would follow it back to
	 * the directory holding tokenizer_config.json) */
	real = realpath(dir, NULL);
	assert_non_null(real);
	snprintf(link, sizeof(link), "%s/tokenizer.json", real);
	free(real);
	bare = vocab(link, path, sizeof(path));
	unlink(link);
	rmdir(dir);
	assert_null(tok_chat_template(bare));
	assert_int_equal(prompt_style_resolve(bare, NULL, -1, &st), 0);
	assert_int_equal(st.family, PROMPT_HARMONY);
	assert_int_equal(st.recognised, 1);
	assert_non_null(strstr(st.note, "vocabulary"));
	tok_free(&bare);
	tok_free(&o);
}

/* A model without a chat template gets plain, with a warning. */
static void test_no_template(void **state)
{
	gguf_file *g;
	tok *t;
	prompt_style st;

	(void)state;
	assert_int_equal(gguf_open(tu_data("data/tokenizer-vectors/"
					   "ggml-vocab-gpt-2.gguf"), &g), 0);
	assert_int_equal(tok_load(g, &t), 0);
	gguf_close(&g);
	assert_null(tok_chat_template(t));
	assert_int_equal(prompt_style_resolve(t, NULL, -1, &st), 0);
	assert_int_equal(st.family, PROMPT_PLAIN);
	assert_int_equal(st.recognised, 0);
	assert_non_null(strstr(st.warning, "no tokenizer.chat_template"));
	tok_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detect),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_shots),
		cmocka_unit_test(test_no_template),
		cmocka_unit_test(test_harmony),
	};

	return cmocka_run_group_tests_name("prompt", tests, NULL, NULL);
}
