/*
 * batch — the merged decode loop: the live forks of any number of jobs
 * (requests) decoded in lockstep rounds, one forward for all; and
 * sc_batch_decode_job, its single-job use (a worker's DecodeJob).
 *
 * Owns: sc_batch (batch.c). Callers: worker/wk.c, tests/; sc_run_many
 * (run.h) runs its questions as jobs of one batch.
 */
#ifndef QUORUM_SC_BATCH_H
#define QUORUM_SC_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "sc/engine.h"
#include "sc/params.h"
#include "sc/fork.h"

typedef struct {
	uint32_t blocks_mapped;    /* prefix blocks read in place, per fork */
	uint32_t blocks_copied;    /* tail blocks copied on first append */
	uint64_t gen_tokens;
	double decode_ms;
} sc_decode_stats;

/* Called after each lockstep round (e.g. to send heartbeats or poll for a
 * cancel); a non-zero return stops the decode with that code. */
typedef int (*sc_round_cb)(void *ctx);

/* Called after each lockstep round with the n samples of the decode (in
 * idx order): each one's text so far (len bytes, finished ones whole). Only
 * reads; the texts are the ones the samples end with, so watching them
 * changes no byte. Valid only during the call. */
typedef void (*sc_text_cb)(void *ctx, const sc_sample *s, int n);

/* Decodes samples idx[0..n) from root in batched lockstep. */
int sc_batch_decode_job(sc_engine *e, const sc_root_ref *root, const int *idx, int n,
	      const sc_params *p, sc_sample_cb on_sample, sc_round_cb on_round,
	      void *ctx, sc_decode_stats *st);
/* sc_batch_decode_job, with on_text (NULL: none) after every round (streaming). */
int sc_batch_decode_job_text(sc_engine *e, const sc_root_ref *root, const int *idx,
		   int n, const sc_params *p, sc_sample_cb on_sample,
		   sc_round_cb on_round, sc_text_cb on_text, void *ctx,
		   sc_decode_stats *st);

/*
 * ---- the merged decode loop: continuous batching across jobs ---------
 *
 * A batch is one decode loop over the live forks of any number of jobs
 * (requests). Each round (sc_batch_round):
 *   1. admission: forks start round-robin across the jobs, one per job per
 *      pass, in each job's index order, while fewer than max_live forks
 *      are live and the pool can hold each new fork's worst case;
 *   2. every live fork draws its next token (finished ones report
 *      on_sample and free their blocks at once);
 *   3. one forward for all live forks of all jobs (max_batch rows per
 *      call); sc_engine_params.max_batch bounds a call, not the batch;
 *   4. up to prefill_tokens prompt tokens of prefill jobs go in (in
 *      arrival order), so a long prompt never stalls running samples;
 *   5. on_text of each job with live forks; jobs that ended get on_done.
 * The forward pass is batch-invariant, so a sample's bytes are the same
 * whichever jobs share its rounds, in whatever order they arrived, and
 * however prompts are chunked: sc_batch_decode_job and sc_run are single-job uses
 * of this loop.
 *
 * KV blocks: a fork is admitted only when the pool's free blocks, less
 * the worst-case blocks every live fork (and started prefill) may still
 * take, cover its own worst case (its copy of the root's partly filled
 * tail plus max_new tokens: ceil((root_tokens % B + max_new) / B)), so a
 * running fork never fails for lack of blocks. A job that cannot start
 * while nothing else runs (nothing will free blocks) ends with QERR_FULL.
 *
 * Single-threaded: call everything from the thread that drives the rounds;
 * callbacks run inside sc_batch_round and must not call sc_batch_*. */

typedef struct sc_batch sc_batch;

typedef struct {
	int max_live;         /* forks per round at most (>= 1) */
	int prefill_tokens;   /* prompt tokens prefilled per round (< 1: the
			       * engine's prefill_chunk; more than that is
			       * refused: QERR_RANGE) */
	/* called after every forward of a round (NULL: none), e.g. to send
	 * a heartbeat that fell due during a long round; it must only read
	 * (no sc_batch_* call) */
	void (*on_forward)(void *ctx);
	void *ctx;
} sc_batch_params;

typedef struct {
	uint64_t gen_tokens;  /* sampled tokens (incl. final stop tokens) */
	uint32_t blocks_mapped;  /* root blocks read in place, per fork */
	uint32_t blocks_copied;  /* tail blocks copied on first append */
	uint32_t prefill_chunks; /* rounds that prefilled part of its prompt */
	uint64_t rounds;      /* rounds the job took part in */
	double prefill_ms, decode_ms;
} sc_job_stats;

/* The job ended (once per job): rc 0, the error of the job alone (a
 * callback's non-zero return, QERR_FULL, QERR_CANCELLED from
 * sc_batch_cancel...), or of a forward it shared. */
typedef void (*sc_done_cb)(void *ctx, uint32_t job, int rc,
			   const sc_job_stats *st);
/* A prefill job's root is complete and kept (sc_root_get/release);
 * a non-zero return releases it and ends the job with that code. */
typedef int (*sc_ready_cb)(void *ctx, uint32_t job, uint32_t root_id);

typedef struct {
	sc_sample_cb on_sample;   /* a sample finished (may be NULL) */
	sc_text_cb on_text;       /* after each round with live forks */
	sc_ready_cb on_ready;     /* prefill jobs */
	sc_done_cb on_done;       /* always called, exactly once */
	void *ctx;
} sc_job_cbs;

/* A batch over e's pool (a fixed pool: pool_name or pool_blocks set). */
int sc_batch_new(sc_engine *e, const sc_batch_params *p, sc_batch **out);
/* Ends every job left (QERR_CANCELLED, on_done called) and frees b. */
void sc_batch_free(sc_batch **b);
/* Adds a job decoding samples idx[0..n) from root (checked as sc_batch_decode_job
 * does; root->logits and idx are copied, the root's blocks must stay
 * held until the job ends). Its forks join at the next round. */
int sc_batch_decode(sc_batch *b, const sc_root_ref *root, const int *idx,
		    int n, const sc_params *p, const sc_job_cbs *cb,
		    uint32_t *job);
/* Adds a job prefilling prompt (copied) into a root kept for the caller:
 * on_ready, then on_done. */
int sc_batch_prefill(sc_batch *b, const int32_t *prompt, size_t n,
		     const sc_job_cbs *cb, uint32_t *job);
/* As sc_batch_prefill, starting from root base_id's first n_base tokens
 * (checked as sc_root_prefill_from does; they are held from this call
 * on): only prompt[n_base..n) is prefilled, the root is bit-identical. */
int sc_batch_prefill_from(sc_batch *b, uint32_t base_id, uint32_t n_base,
			  const int32_t *prompt, size_t n,
			  const sc_job_cbs *cb, uint32_t *job);
/* Ends job now with rc (its forks' blocks free at once; on_done called).
 * QERR_MISSING when no such job is in the batch. */
int sc_batch_cancel(sc_batch *b, uint32_t job, int rc);
/* One round (see above). Returns 0; a job's errors end that job only. */
int sc_batch_round(sc_batch *b);
int sc_batch_jobs(const sc_batch *b);      /* jobs in the batch */
int sc_batch_live(const sc_batch *b);      /* forks live now */
uint64_t sc_batch_rounds(const sc_batch *b); /* rounds run so far */

#endif
