/*
 * fork — one sample of a self-consistency request: its text, answer,
 * confidence and how it ended (sc_sample), as decoding reports it.
 *
 * Sample s draws its first token from the root's last logits and then from
 * its own sequence's logits, with its own RNG seeded from (seed, s) (see
 * samp.h). Because the forward pass is batch-invariant, a sample's tokens
 * depend only on (model, prompt, sampling params, seed, s).
 *
 * Stopping: an end-of-generation token (EOS, <|im_end|>, ...) ends a sample
 * with finish "stop" (the token is not part of the text), max_new tokens
 * with "length". With ignore_eos (benchmarks) end-of-generation tokens are
 * masked out so every sample runs to max_new.
 *
 * Owns: sc_sample (fork.c draws and keeps it). Callers: whoever gets
 * samples back: run.h's results, batch.h's callbacks (worker/wk.c,
 * tools/, tests/).
 */
#ifndef QUORUM_SC_FORK_H
#define QUORUM_SC_FORK_H

#include <stddef.h>
#include <stdint.h>

#include "sc/vote.h"

typedef struct {
	int index;
	char *text;           /* malloc'ed, NUL-terminated (may hold NULs) */
	size_t len;
	size_t settled;       /* text[0..settled) is final: while a sample
			       * runs with stop strings, its last bytes may
			       * still be cut (streaming sends only these) */
	int n_tokens;
	int reasoning_tokens; /* of n_tokens, those whose pieces start before
			       * the content (reasoning.h's
			       * reasoning_content_at): all of them when it
			       * has none, 0 for a text without reasoning */
	int end_step;         /* 1: its last step drew an end token or found
			       * its grammar ended, a decode step n_tokens
			       * does not count (a stop string's last token
			       * is one of n_tokens) */
	int finish;           /* enum sc_finish */
	int has_answer;
	char answer[VOTE_ANSWER_MAX];
	/* CONFIDENCE, from the log-probabilities of the tokens the sampler
	 * drew (samp_sample_lp; end token included), each rounded toward 0
	 * to a multiple of 2^-32 nats so that every sum is an exact integer:
	 * the same bits on every ISA. */
	double mean_logprob;   /* over the sample's drawn tokens */
	double group_conf;     /* DeepConf's lowest group confidence: the
				* least mean log-probability over a window of
				* conf_window consecutive tokens (the mean of
				* all when shorter) */
	uint64_t weight;       /* its weight in a confidence vote:
				* exp(group_conf) in units of 2^-32
				* (mathf_exp), in [0, STOP_WEIGHT_ONE] */
	/* With sc_params.logprobs, per drawn token i < n_token_lp (the
	 * end token included): token_lp[i], its log-probability as summed
	 * into mean_logprob, and token_off[i], the byte of text where its
	 * piece starts (len for an end token, or for tokens a stop string
	 * cut away; its piece ends where the next one starts). malloc'ed;
	 * NULL otherwise. */
	double *token_lp;
	uint32_t *token_off;
	int n_token_lp;
	/* With sc_params.top_logprobs = K > 0 as well, per drawn token i <
	 * n_token_lp: alt_n[i] (0..K) alternatives, the next ones of alt_id
	 * and alt_lp (n_alt in all): samp_sample_top's list, the most
	 * likely first, each log-probability rounded as token_lp[i] is (so
	 * the drawn token among them shows the same value). malloc'ed;
	 * NULL otherwise. */
	uint32_t *alt_n;
	uint32_t *alt_id;
	double *alt_lp;
	size_t n_alt, cap_alt;
} sc_sample;

/* Frees a sample's text and per-token arrays (not the sample). */
void sc_fork_sample_fini(sc_sample *s);

/* Called as each sample finishes (text, answer set; valid only during the
 * call); a non-zero return stops the decode with that code. */
typedef int (*sc_sample_cb)(void *ctx, const sc_sample *s);

const char *sc_fork_finish_name(int finish);

#endif
