/*
 * prompt — builds the token sequence of a question from a chat template.
 *
 * The family is recognised from the model's own tokenizer.chat_template
 * with llama.cpp's rules (first match wins):
 *   <|start|> and <|channel|>      -> harmony (gpt-oss)
 *   contains <|im_start|>          -> qwen3 when it also mentions
 *                                     enable_thinking or <think>, else chatml
 *   starts "mistral" or has [INST] -> mistral-v7 ([SYSTEM_PROMPT]),
 *                                     mistral-v1 (' [INST] ' + system_message),
 *                                     mistral-v3 ([AVAILABLE_TOOLS]),
 *                                     llama2-sys (<<SYS>>), else mistral
 *   contains <start_of_turn>       -> gemma
 *   <|start_header_id|> and <|end_header_id|> -> llama3
 * A vocabulary with harmony's <|start|>, <|channel|> and <|message|>
 * tokens and no recognised template (a gpt-oss GGUF without one) is
 * harmony. Anything else (or no template) falls back to plain, and
 * prompt_style_resolve says so (never silently ChatML). A family may be
 * forced by name (--template, prompt.template).
 *
 * Renderings (S = system prompt, Q = question; [x] only when S is not
 * empty; BOS = the vocabulary's BOS token when it has one):
 *   chatml      [<|im_start|>system\nS<|im_end|>\n]<|im_start|>user\nQ
 *               <|im_end|>\n<|im_start|>assistant\n
 *   qwen3       as chatml; with thinking off the answer starts after an
 *               empty block: ...assistant\n<think>\n\n</think>\n\n
 *   llama3      BOS[<|start_header_id|>system<|end_header_id|>\n\nS
 *               <|eot_id|>]<|start_header_id|>user<|end_header_id|>\n\nQ
 *               <|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
 *   gemma       BOS<start_of_turn>user\n[S\n\n]Q<end_of_turn>\n
 *               <start_of_turn>model\n     (no system role: S is folded
 *               into the first user turn)
 *   mistral     BOS[INST] [S\n]Q [/INST]   (Mistral v0.1/v0.2, Llama 2
 *               without system role)
 *   mistral-v1  BOS [INST] [S\n\n]Q [/INST]
 *   mistral-v3  BOS[INST] [S\n\n]Q[/INST]
 *   mistral-v7  BOS[[SYSTEM_PROMPT] S[/SYSTEM_PROMPT]][INST] Q[/INST]
 *   llama2-sys  BOS[INST] [<<SYS>>\nS\n<</SYS>>\n\n]Q [/INST]
 *   harmony     H[<|start|>developer<|message|># Instructions\n\nS\n\n<|end|>]
 *               <|start|>user<|message|>Q<|end|><|start|>assistant
 *               where H is gpt-oss's system message with the reasoning
 *               effort E (low|medium|high, default medium):
 *               <|start|>system<|message|>You are ChatGPT, a large
 *               language model trained by OpenAI.\nKnowledge cutoff:
 *               2024-06\n\nReasoning: E\n\n# Valid channels: analysis,
 *               commentary, final. Channel must be included for every
 *               message.<|end|>   (gpt-oss's template without its
 *               "Current date:" line: prompts must not depend on the day);
 *               a shot's answer is <|channel|>final<|message|>A<|end|>.
 *               The model answers <|channel|>analysis<|message|>...<|end|>
 *               <|start|>assistant<|channel|>final<|message|>...<|return|>;
 *               vote_extract takes the final channel only.
 *   plain       [BOS if the vocabulary adds one][S\n\n]Question: Q\nAnswer:
 * Few-shot turns (a conversation's earlier turns) come before Q as the
 * family's user and assistant turns; qwen3 shows an earlier answer
 * without its reasoning (up to its last </think>), as Qwen3's template
 * does. As llama.cpp, S and Q are trimmed of surrounding whitespace for
 * llama3 and gemma. Template text is tokenized with special tokens recognised;
 * S and Q as plain text, so a user can never inject control tokens.
 * (Harmony's <|start|>, <|channel|>, <|message|>, <|constrain|> and
 * <|end|> are user-defined tokens, as llama.cpp makes them: those are
 * matched in any text, S and Q too.)
 */
#ifndef QUORUM_PROMPT_H
#define QUORUM_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "text/tok.h"

enum prompt_family {
	PROMPT_CHATML = 0,
	PROMPT_LLAMA3,
	PROMPT_PLAIN,
	PROMPT_QWEN3,
	PROMPT_GEMMA,
	PROMPT_MISTRAL,
	PROMPT_MISTRAL_V1,
	PROMPT_MISTRAL_V3,
	PROMPT_MISTRAL_V7,
	PROMPT_LLAMA2_SYS,
	PROMPT_HARMONY,
	PROMPT_N_FAMILIES
};

/* The reasoning setting of a prompt (the "think" argument below): the
 * template's default, thinking forced off/on (qwen3), or a reasoning
 * effort (harmony). A value a family does not know gives its default. */
enum prompt_think { PROMPT_THINK_DEFAULT = -1, PROMPT_THINK_OFF = 0,
		    PROMPT_THINK_ON = 1, PROMPT_EFFORT_LOW = 2,
		    PROMPT_EFFORT_MEDIUM = 3, PROMPT_EFFORT_HIGH = 4 };

/* The accepted reasoning efforts, for messages. */
#define PROMPT_EFFORT_LIST "low, medium, high"

/* Why think (qwen3's) and a reasoning effort (harmony's) are not given
 * together: one setting reaches the template, so the config
 * (prompt.think with prompt.reasoning_effort), the command line
 * (--think with --reasoning-effort), the coordinator (an Ask with both)
 * and the HTTP gateway refuse the pair, saying this. */
#define PROMPT_THINK_EFFORT_CLASH "one is qwen3's, the other harmony's"

#define PROMPT_DEFAULT_SYSTEM                                                \
	"You are a careful problem solver. Reason step by step, then give "  \
	"the final answer on the last line as \\boxed{ANSWER}."

/* The template names --template and prompt.template accept. */
#define PROMPT_FAMILY_LIST                                                   \
	"chatml, qwen3, llama3, gemma, mistral, mistral-v1, mistral-v3, "    \
	"mistral-v7, llama2-sys, harmony, plain"

/* The family of a chat template text (NULL: none); *recognised (may be
 * NULL) is 0 when the text is absent or unknown (the result is then
 * PROMPT_PLAIN). */
int prompt_family_of_template(const char *tmpl, int *recognised);
/* The family of the model's tokenizer.chat_template. */
int prompt_family(const tok *t);
const char *prompt_family_name(int family);
/* A family by name (also "llama2" for mistral, "gpt-oss" for harmony),
 * or -1. */
int prompt_family_from_name(const char *name);
/* "low" / "medium" / "high" <-> PROMPT_EFFORT_*; -1 for another name
 * (NULL too); a value that is no effort is named "medium". */
int prompt_effort_from_name(const char *name);
const char *prompt_effort_name(int think);
/* 1 when the family has a thinking switch (qwen3), and its default. */
int prompt_family_thinks(int family);
int prompt_think_default(int family);

/* How a model's prompts are built: resolved once per model. */
typedef struct {
	int family;      /* enum prompt_family */
	int think;       /* effective thinking: 0/1 (0 for families without);
			  * harmony: its PROMPT_EFFORT_* */
	int recognised;  /* the template was recognised (or forced) */
	char note[160];  /* how it was chosen, for a log line, e.g.
			  * "qwen3 (tokenizer.chat_template), thinking on" */
	char warning[160]; /* "" or why the choice needs the user's eye
			    * (unknown template, --think without effect) */
} prompt_style;

/* Resolves the style of t's model: name NULL/"" = from the template, else
 * that family (QERR_ARG naming the accepted ones when unknown); think is
 * enum prompt_think. */
int prompt_style_resolve(const tok *t, const char *name, int think,
			 prompt_style *out);

/* Tokens of the prompt (malloc'ed *ids, *n). system NULL: the default;
 * "": no system prompt. think: enum prompt_think (qwen3 only). */
int prompt_build_style(const tok *t, int family, int think,
		       const char *system, const char *question,
		       int32_t **ids, size_t *n);
/* The same, as text (special tokens as their text, no BOS): what the
 * tokens spell; malloc'ed, NUL-terminated. */
int prompt_render(int family, int think, const char *system,
		  const char *question, char **out);

/* A worked example shown before the question (few-shot prompting). */
typedef struct {
	const char *question;
	const char *answer;   /* the solution, as the assistant's turn */
} prompt_shot;

/* As prompt_build_style with n_shots examples rendered as prior turns of
 * the conversation, in the family's own turn syntax: each shot a user
 * turn (its question) and a finished assistant turn (its answer), then
 * the question's user turn and the assistant's opening. Families without
 * a system role fold S into the first user turn (the first shot's);
 * mistral-family assistant turns end with </s>, plain's are
 * "Question: Q\nAnswer: A\n\n". Shot texts are plain text like Q. The
 * same shots and system prompt give the same first tokens for every
 * question: the prefix the cache shares. QERR_ARG: a shot without
 * question or answer. */
int prompt_build_shots(const tok *t, int family, int think,
		       const char *system, const prompt_shot *shots,
		       size_t n_shots, const char *question, int32_t **ids,
		       size_t *n);
int prompt_render_shots(int family, int think, const char *system,
			const prompt_shot *shots, size_t n_shots,
			const char *question, char **out);

/* prompt_build_style with the family of t's template and its defaults. */
int prompt_build(const tok *t, const char *system, const char *question,
		 int32_t **ids, size_t *n);

#endif
