/*
 * engine — the self-consistency engine: a model and tokenizer with their
 * threads, forward pass, sampler and KV pool, and what outlives a request
 * on them: sc_run's prefix cache, and for the cluster the roots a worker
 * keeps across calls (sc_root_*) and the pools of other workers on this
 * host it reads (linked read-only by name).
 *
 * Owns: sc_engine (engine.c). The requests that run on it: run.h (sc_run,
 * sc_run_many) and batch.h (the merged decode loop, sc_batch_decode_job); a sample:
 * fork.h. Callers: worker/wk.c, tools/ (quorum run, bench, evalset),
 * tests/.
 */
#ifndef QUORUM_SC_ENGINE_H
#define QUORUM_SC_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "infer/kv.h"
#include "infer/model.h"
#include "text/tok.h"

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
	/* Sliding-window models (gemma3, gpt-oss): the pool keeps windowed
	 * layers' rows apart, and each sample releases those of its blocks
	 * that no later row's window reaches (kv_seq_drop_window), so a
	 * chain's windowed layers hold about window + block_tokens rows.
	 * Roots and cached prompts keep every row. Same bytes either way.
	 * 1 (default): on; 0: one class of block, as a model without
	 * windows. */
	int free_windows;
} sc_engine_params;

#define SC_ENGINE_DEFAULTS \
	((sc_engine_params){NULL, 0, 2, 16, KV_F16, 64, 256, 0, 1})

typedef struct sc_engine sc_engine;

/* The model (borrowed) and tokenizer (borrowed) stay alive while e does. */
int sc_engine_new(const model *m, const tok *t, const sc_engine_params *p,
		  sc_engine **out);
void sc_engine_free(sc_engine **e);

/* Drops every prompt sc_run's prefix cache holds (their blocks return to
 * the pool), and the number it holds. */
void sc_cache_clear(sc_engine *e);
int sc_cache_count(const sc_engine *e);

/* KV blocks held right now (0 between requests unless the prefix cache
 * holds prompts); with free_windows a block may hold only its full
 * layers' rows (kv_stats.held_bytes counts bytes). */
uint32_t sc_engine_kv_in_use(const sc_engine *e);
uint32_t sc_engine_kv_free(const sc_engine *e);

/*
 * ---- building blocks for the cluster ---------------------------------
 *
 * A worker keeps prefilled roots across calls (sc_root_*) and decodes any
 * subset of a request's sample indices from a root (sc_batch_decode_job) — its own,
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
size_t sc_engine_token_kv_bytes(const sc_engine *e);
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

/* Drops the read-only mapping of another worker's pool (its owner is
 * gone). Call between decodes; a later sc_batch_decode_job naming the pool maps it
 * again. QERR_MISSING when it is not linked. */
int sc_root_unlink_pool(sc_engine *e, const char *pool_name);

#endif
