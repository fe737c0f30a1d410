/*
 * run — self-consistency in one process: prefill once, fork N, decode the
 * forks in batched lockstep, extract answers, vote (sc_run); many prompts
 * at once in merged rounds (sc_run_many).
 *
 * Modes (same bytes in all three — the contract the tests check):
 *   SC_RESET    every sample prefills the prompt from scratch (baseline)
 *   SC_PAGED    one prefill; forks decoded one after another
 *   SC_BATCHED  one prefill; all forks advance together, one M-row forward
 *               per round; forks that stop drop out (ragged compaction)
 *
 * Owns: sc_result (run.c). Callers: tools/ (quorum run, bench, evalset),
 * tests/. A sample's bytes: fork.h; the engine: engine.h.
 */
#ifndef QUORUM_SC_RUN_H
#define QUORUM_SC_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "sc/engine.h"
#include "sc/params.h"
#include "sc/fork.h"
#include "sc/stop.h"
#include "sc/vote.h"

typedef struct {
	int n_prompt;
	int n_reused;          /* prompt tokens forked from the prefix cache
				* (prefilled: n_prompt - n_reused, x n in
				* reset mode) */
	int n_prefills;        /* 1, or n in reset mode */
	double prefill_ms, decode_ms;
	uint64_t gen_tokens;   /* sampled tokens (incl. a final stop token) */
	uint64_t kv_peak_bytes;/* peak KV bytes held in the pool */
	uint64_t kv_unshared_bytes; /* what N unshared sequences would hold */
	uint64_t cow_blocks;   /* tail blocks copied on write */
} sc_stats;

/* What early stopping did (sc_run). With rule none nothing is stopped:
 * reported = started = finished = N. */
typedef struct {
	stop_rule rule;
	int fired;             /* the rule stopped before N */
	int budget;            /* N */
	int reported;          /* samples 0..reported-1 (= sc_result.n) */
	int started, finished, cancelled; /* forks begun / run to their end /
					    * stopped before it */
	uint64_t tokens_reported; /* sampled by the reported samples */
	uint64_t tokens_saved; /* estimate: budget * (tokens_reported /
				* reported) - gen_tokens, >= 0 */
	int filtered;          /* reported samples the filter cut */
	double filter_threshold; /* the warm-up's percentile (if armed) */
	double posterior;      /* beta: at the decision */
	uint32_t leader, second; /* the top two counts at the decision */
	int run;               /* window: agreeing samples ending the prefix */
} sc_stop_stats;

typedef struct {
	int n;                 /* samples reported: 0..n-1 (<= the budget) */
	sc_sample *samples;    /* (n) by sample index */
	vote_result vote;      /* over the n reported samples */
	sc_stats stats;
	sc_stop_stats stop;
} sc_result;

/* Runs the samples of one prompt: all N, or with p->stop a prefix 0..k-1
 * of them decided in index order (stop.h). In batched mode at most
 * stop_min_prefix(rule, N) forks are in flight (N for none): samples start
 * in index order as others finish; when the rule fires the forks in
 * flight are cancelled and their KV blocks freed at once, and samples not
 * started never are; with p->stop_waves only samples below the stopper's
 * horizon start (stop_horizon: waves of the fewest that could decide).
 * The reported samples, their bytes and the vote do not depend on the
 * mode, batch, threads or waves. On error nothing leaks and
 * the KV pool is back to free. */
int sc_run(sc_engine *e, const int32_t *prompt, size_t n_prompt,
	   const sc_params *p, sc_result *out);
void sc_run_result_fini(sc_result *r);

/* Self-consistency over many prompts in merged rounds: question q is
 * sc_run(prompts[q], params[q]) — the same result, bit for bit — but the
 * forks of all questions in flight share each round's forward. At most
 * max_live forks are live (< 1: 64); questions start in order as room
 * frees; prompts are prefilled prefill_tokens per round (< 1: the
 * engine's prefill_chunk) between decode rounds. Batched mode only. As
 * each question ends, in question order, on_result(ctx, q, rc, err, r):
 * err the error's text when rc != 0 (r is zeroed then); r belongs to the
 * callback (sc_run_result_fini). A non-zero return stops the run with that
 * code. */
typedef struct {
	const int32_t *prompt;
	size_t n_prompt;
	const sc_params *p;
} sc_question;
typedef int (*sc_result_cb)(void *ctx, int q, int rc, const char *err,
			    sc_result *r);
int sc_run_many(sc_engine *e, const sc_question *qs, int n, int max_live,
		int prefill_tokens, sc_result_cb on_result, void *ctx);

#endif
