/*
 * usc — universal self-consistency (after Chen et al. 2023), the answer
 * format `select`: when the answers are prose and no two need be equal
 * strings, one more greedy pass of the same model reads the question and
 * the N responses and names the one most consistent with the others; that
 * response's answer is the request's.
 *
 * Owns: the selection prompt (usc_prompt: the question, then each
 * response numbered from 0, then the instruction to reply "Response K"),
 * and reading the pass's reply (usc_pick: the first "Response K" with K a
 * response's number, any case; none: the vote's winner stands and the
 * reply says so). Deterministic: the pass is greedy over a prompt that
 * depends only on the question and the responses' bytes, so the choice is
 * the same in one process and on a cluster. Callers: tools/ (quorum run,
 * eval-set), the coordinator (a second, internal request).
 */
#ifndef QUORUM_USC_H
#define QUORUM_USC_H

#include <stddef.h>

/* The pass's sampling: greedy, this many new tokens at most. */
#define USC_MAX_NEW 48
/* Each response is cut to this many bytes in the prompt. */
#define USC_RESPONSE_MAX 2048

/* The selection question for the N responses texts[i] (lens[i] bytes,
 * NULL for a response without text) to question: malloc'ed,
 * NUL-terminated; NULL when out of memory. */
char *usc_prompt(const char *question, size_t qlen, const char *const *texts,
		 const size_t *lens, int n);

/* The response the reply names (0..n-1), or -1. */
int usc_pick(const char *reply, size_t len, int n);

#endif
