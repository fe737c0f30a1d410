/*
 * prompt — builds the token sequence of a question from a chat template.
 *
 * Families, chosen from the vocabulary (and so from the model file):
 *   chatml  (<|im_start|>/<|im_end|> present: Qwen and others)
 *     <|im_start|>system\n{system}<|im_end|>\n
 *     <|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n
 *   llama3  (<|start_header_id|> present)
 *     <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n
 *     {system}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n
 *     {question}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
 *   plain   (anything else): [BOS]{system}\n\nQuestion: {question}\nAnswer:
 *
 * The template text is tokenized with special tokens recognised; the
 * system prompt and the question are tokenized as plain text, so a user
 * can never inject control tokens.
 */
#ifndef QUORUM_PROMPT_H
#define QUORUM_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "tok.h"

enum prompt_family { PROMPT_CHATML = 0, PROMPT_LLAMA3, PROMPT_PLAIN };

#define PROMPT_DEFAULT_SYSTEM                                                \
	"You are a careful problem solver. Reason step by step, then give "  \
	"the final answer on the last line as \\boxed{ANSWER}."

int prompt_family(const tok *t);
const char *prompt_family_name(int family);

/* Tokens of the prompt (malloc'ed *ids, *n). system NULL: the default. */
int prompt_build(const tok *t, const char *system, const char *question,
		 int32_t **ids, size_t *n);

#endif
