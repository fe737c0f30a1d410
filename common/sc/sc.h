/*
 * sc — self-consistency in one process: prefill once, fork N, decode the
 * forks in batched lockstep, extract answers, vote.
 *
 * Modes (same bytes in all three — the contract the tests check):
 *   SC_RESET    every sample prefills the prompt from scratch (baseline)
 *   SC_PAGED    one prefill; forks decoded one after another
 *   SC_BATCHED  one prefill; all forks advance together, one M-row forward
 *               per round; forks that stop drop out (ragged compaction)
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
 */
#ifndef QUORUM_SC_H
#define QUORUM_SC_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv.h"
#include "engine/model.h"
#include "engine/samp.h"
#include "sc/stop.h"
#include "text/tok.h"
#include "sc/vote.h"

enum sc_mode { SC_RESET = 0, SC_PAGED = 1, SC_BATCHED = 2 };
enum sc_finish { SC_FINISH_STOP = 0, SC_FINISH_LENGTH = 1,
		 SC_FINISH_FILTERED = 2 };
enum sc_vote { SC_VOTE_MAJORITY = 0, SC_VOTE_CONFIDENCE = 1 };

/* Tokens per confidence window when sc_params.conf_window is 0. */
#define SC_CONF_WINDOW_DEFAULT 16
#define SC_CONF_WINDOW_MAX 4096

typedef struct {
	const char *pool_name;/* NULL: anonymous pool sized per request; else
			       * a POSIX shm pool of pool_blocks blocks that
			       * other processes on this host can map */
	uint32_t pool_blocks;
	int n_threads;        /* default 2 */
	int block_tokens;     /* KV block size, default 16 */
	int kv_dtype;         /* KV_F16 (default, as the cluster) or KV_F32 */
	int max_batch;        /* rows per decode forward, default 64 */
	int prefill_chunk;    /* rows per prefill forward, default 256 */
	/* sc_run's prefix cache: the roots of up to this many recent prompts
	 * stay in the pool between runs, and a prompt sharing the first
	 * blocks of one (few-shot exemplars, a system prompt) forks them and
	 * prefills only the rest — the same bytes as a fresh prefill (the
	 * forward is chunking-invariant). Cached prompts give way, least
	 * recently used first, whenever a run needs their blocks; not used in
	 * reset mode. 0 (default): off, the pool is free between runs. */
	int prefix_cache;
} sc_engine_params;

#define SC_ENGINE_DEFAULTS ((sc_engine_params){NULL, 0, 2, 16, KV_F16, 64, 256, 0})

/* Stop strings (OpenAI's "stop"): a sample ends at the first occurrence
 * of any of them in its text, which is cut before it (finish "stop").
 * Each is 1..SC_STOP_STR_LEN bytes without NUL; at most SC_STOP_STR_MAX. */
#define SC_STOP_STR_MAX 4
#define SC_STOP_STR_LEN 64

typedef struct {
	int n;
	uint8_t len[SC_STOP_STR_MAX];
	char s[SC_STOP_STR_MAX][SC_STOP_STR_LEN];
} sc_stop_strs;

/* Adds a stop string of len bytes; QERR_RANGE (with a detail naming what
 * is wrong) when there are SC_STOP_STR_MAX already, or it is empty, over
 * SC_STOP_STR_LEN bytes or holds a NUL. */
int sc_stop_strs_add(sc_stop_strs *q, const char *s, size_t len);

typedef struct {
	samp_params sp;
	uint64_t seed;
	int n;                /* samples: the budget N */
	int max_new;          /* new tokens per sample */
	int mode;             /* enum sc_mode */
	int ignore_eos;
	stop_rule stop;       /* early stopping (zero: none; see stop.h) */
	int vote;             /* enum sc_vote (zero: majority) */
	int conf_window;      /* tokens per group-confidence window (0:
			       * SC_CONF_WINDOW_DEFAULT) */
	/* DeepConf's online filter (sc_run only; 0: off): once samples
	 * 0..filter_warmup-1 (the warm-up) have finished, the threshold is
	 * the filter_pct-th percentile (nearest rank below) of their group
	 * confidences; a later sample is cut — finish "filtered", no answer,
	 * its text ends there — as soon as a full window's mean falls below
	 * it (a sample shorter than a window: when its mean is below it at
	 * its end). Samples past the warm-up start only once the threshold
	 * is known, so whether a sample is cut, and where, depends on its
	 * own tokens and the warm-up alone. */
	int filter_warmup;
	double filter_pct;    /* in [0, 100] */
	sc_stop_strs stop_strs; /* none when n is 0 */
	int logprobs;         /* record every drawn token's log-probability
			       * (sc_sample.token_lp) */
} sc_params;

typedef struct {
	int index;
	char *text;           /* malloc'ed, NUL-terminated (may hold NULs) */
	size_t len;
	size_t settled;       /* text[0..settled) is final: while a sample
			       * runs with stop strings, its last bytes may
			       * still be cut (streaming sends only these) */
	int n_tokens;
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
} sc_sample;

/* Frees a sample's text and per-token arrays (not the sample). */
void sc_sample_fini(sc_sample *s);

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

typedef struct sc_engine sc_engine;

/* The model (borrowed) and tokenizer (borrowed) stay alive while e does. */
int sc_engine_new(const model *m, const tok *t, const sc_engine_params *p,
		  sc_engine **out);
void sc_engine_free(sc_engine **e);

int sc_params_check(const sc_params *p);
/* Runs the samples of one prompt: all N, or with p->stop a prefix 0..k-1
 * of them decided in index order (stop.h). In batched mode at most
 * stop_min_prefix(rule, N) forks are in flight (N for none): samples start
 * in index order as others finish; when the rule fires the forks in
 * flight are cancelled and their KV blocks freed at once, and samples not
 * started never are. The reported samples, their bytes and the vote do
 * not depend on the mode, batch or threads. On error nothing leaks and
 * the KV pool is back to free. */
int sc_run(sc_engine *e, const int32_t *prompt, size_t n_prompt,
	   const sc_params *p, sc_result *out);
void sc_result_fini(sc_result *r);

/* A sample's weight in a confidence vote from its group confidence:
 * exp(g) (mathf_exp, float) in units of 2^-32, in [0, STOP_WEIGHT_ONE]
 * — the same bits wherever it is computed (the coordinator does). */
uint64_t sc_conf_weight(double group_conf);
int sc_vote_parse(const char *s);      /* -1 when unknown */
const char *sc_vote_name(int vote);

/* Drops every prompt sc_run's prefix cache holds (their blocks return to
 * the pool), and the number it holds. */
void sc_engine_cache_clear(sc_engine *e);
int sc_engine_cache_count(const sc_engine *e);

/* KV blocks held right now (0 between requests unless the prefix cache
 * holds prompts). */
uint32_t sc_engine_kv_in_use(const sc_engine *e);
uint32_t sc_engine_kv_free(const sc_engine *e);

/*
 * ---- building blocks for the cluster ---------------------------------
 *
 * A worker keeps prefilled roots across calls (sc_root_*) and decodes any
 * subset of a request's sample indices from a root (sc_decode) — its own,
 * or another worker's on the same host mapped read-only by pool name. The
 * bytes of sample s are the same wherever and with whatever other samples
 * it is decoded. These calls need an engine with a fixed pool
 * (pool_name or pool_blocks set).
 */

typedef struct {
	uint32_t n_tokens;
	uint32_t n_blocks;
	const uint32_t *blocks;    /* block ids in the owner's pool */
	const float *logits;       /* (vocab) last-row logits */
	const char *pool_name;     /* the owner's pool (NULL: anonymous) */
} sc_root_desc;

/* Prefills prompt into a new root kept until sc_root_release. */
int sc_root_prefill(sc_engine *e, const int32_t *prompt, size_t n,
		    uint32_t *root_id);
/* Describes a root (pointers valid until it is released). */
int sc_root_get(const sc_engine *e, uint32_t root_id, sc_root_desc *out);
int sc_root_release(sc_engine *e, uint32_t root_id);
/* Roots held now. */
int sc_root_count(const sc_engine *e);
/* A root's K/V rows as bytes, for hosts that cannot map the pool:
 * layout per token t, per layer l: K row then V row (kv_dim elements of
 * the pool dtype). *bytes is malloc'ed. */
int sc_root_export(const sc_engine *e, uint32_t root_id, void **bytes,
		   size_t *len);
/* sc_root_export of rows from .. n_tokens - 1 only (from < n_tokens):
 * for a host that holds a root sharing the first from tokens. */
int sc_root_export_from(const sc_engine *e, uint32_t root_id, uint32_t from,
			void **bytes, size_t *len);
/* sc_root_export of rows from .. to - 1 only (from < to <= n_tokens): a
 * chunk of a transfer, imported with sc_root_import_from(n_tokens = to)
 * on top of a root of the first from tokens. */
int sc_root_export_rows(const sc_engine *e, uint32_t root_id, uint32_t from,
			uint32_t to, void **bytes, size_t *len);
/* Bytes one token's rows take in an export (every layer's K and V). */
size_t sc_token_kv_bytes(const sc_engine *e);
/* A root of n_tokens: the first n_base forked from root base_id (which
 * holds them: the same tokens, as the caller knows), rows n_base.. from
 * bytes (sc_root_export_from's). n_base 0: all from bytes. */
int sc_root_import_from(sc_engine *e, uint32_t base_id, uint32_t n_base,
			uint32_t n_tokens, const void *bytes, size_t len,
			const float *logits, uint32_t *root_id);
/* Creates a root from exported rows and its logits. */
int sc_root_import(sc_engine *e, uint32_t n_tokens, const void *bytes,
		   size_t len, const float *logits, uint32_t *root_id);

/* Where a decode starts: a root of this engine (pool_name NULL or equal to
 * this engine's) or of another pool on this host. */
typedef struct {
	const char *pool_name;
	uint32_t n_tokens;
	uint32_t n_blocks;
	const uint32_t *blocks;
	const float *logits;       /* (vocab) */
} sc_root_ref;

typedef struct {
	uint32_t blocks_mapped;    /* prefix blocks read in place, per fork */
	uint32_t blocks_copied;    /* tail blocks copied on first append */
	uint64_t gen_tokens;
	double decode_ms;
} sc_decode_stats;

/* Called as each sample finishes (text, answer set; valid only during the
 * call); a non-zero return stops the decode with that code. */
typedef int (*sc_sample_cb)(void *ctx, const sc_sample *s);
/* Called after each lockstep round (e.g. to send heartbeats or poll for a
 * cancel); a non-zero return stops the decode with that code. */
typedef int (*sc_round_cb)(void *ctx);

/* Called after each lockstep round with the n samples of the decode (in
 * idx order): each one's text so far (len bytes, finished ones whole). Only
 * reads; the texts are the ones the samples end with, so watching them
 * changes no byte. Valid only during the call. */
typedef void (*sc_text_cb)(void *ctx, const sc_sample *s, int n);

/* Decodes samples idx[0..n) from root in batched lockstep. */
int sc_decode(sc_engine *e, const sc_root_ref *root, const int *idx, int n,
	      const sc_params *p, sc_sample_cb on_sample, sc_round_cb on_round,
	      void *ctx, sc_decode_stats *st);
/* sc_decode, with on_text (NULL: none) after every round (streaming). */
int sc_decode_text(sc_engine *e, const sc_root_ref *root, const int *idx,
		   int n, const sc_params *p, sc_sample_cb on_sample,
		   sc_round_cb on_round, sc_text_cb on_text, void *ctx,
		   sc_decode_stats *st);

/* As sc_root_prefill, calling on_chunk(ctx) between prefill forwards of
 * at most chunk rows (chunk < 1: 64) so a long prompt cannot starve
 * heartbeats; a non-zero return stops the prefill with that code (no root
 * is kept). The root is bit-identical to sc_root_prefill's: the forward
 * pass is batch-invariant. on_chunk NULL: same as sc_root_prefill. */
typedef int (*sc_chunk_cb)(void *ctx);
int sc_root_prefill_cb(sc_engine *e, const int32_t *prompt, size_t n,
		       int chunk, sc_chunk_cb on_chunk, void *ctx,
		       uint32_t *root_id);

/* A root for prompt[0..n) that starts from root base_id's first n_base
 * tokens (a prompt sharing a cached one's prefix): the new root forks
 * them (full blocks shared; a block holding the boundary is copied on
 * write) and prefills only prompt[n_base..n), as sc_root_prefill_cb
 * (on_chunk may be NULL). Its rows and logits are bit-identical to a
 * fresh sc_root_prefill of the whole prompt (the forward is chunking-
 * invariant). base_id must be a prefilled root (an imported one's tokens
 * are unknown: QERR_ARG) whose first n_base tokens equal the prompt's
 * (QERR_ARG otherwise), 1 <= n_base < n (QERR_RANGE). The base stays as
 * it was and may be released before or after the new root. */
int sc_root_prefill_from(sc_engine *e, uint32_t base_id, uint32_t n_base,
			 const int32_t *prompt, size_t n, int chunk,
			 sc_chunk_cb on_chunk, void *ctx, uint32_t *root_id);

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
 * however prompts are chunked: sc_decode and sc_run are single-job uses
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
/* Adds a job decoding samples idx[0..n) from root (checked as sc_decode
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

/* Self-consistency over many prompts in merged rounds: question q is
 * sc_run(prompts[q], params[q]) — the same result, bit for bit — but the
 * forks of all questions in flight share each round's forward. At most
 * max_live forks are live (< 1: 64); questions start in order as room
 * frees; prompts are prefilled prefill_tokens per round (< 1: the
 * engine's prefill_chunk) between decode rounds. Batched mode only. As
 * each question ends, in question order, on_result(ctx, q, rc, err, r):
 * err the error's text when rc != 0 (r is zeroed then); r belongs to the
 * callback (sc_result_fini). A non-zero return stops the run with that
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

/* Drops the read-only mapping of another worker's pool (its owner is
 * gone). Call between decodes; a later sc_decode naming the pool maps it
 * again. QERR_MISSING when it is not linked. */
int sc_unlink_pool(sc_engine *e, const char *pool_name);

const char *sc_mode_name(int mode);
int sc_mode_parse(const char *s);      /* -1 when unknown */
const char *sc_finish_name(int finish);

#endif
