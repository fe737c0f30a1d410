/*
 * engine — the self-consistency engine's state and memory: what a request
 * runs on, and what outlives a request.
 *
 * Owns: struct sc_engine (model, tokenizer, threads, the forward and the
 * sampler), the KV pool (made once when fixed — named or sized — else
 * grown per request) and the KV accounting. sc_run's prefix cache is
 * cache.c's, the roots a worker keeps root.c's (both on this state).
 *
 * Callers: the public API (worker/wk.c for the cluster building blocks;
 * tools/ and tests/ for the engine's life), and the other parts of sc/
 * through sc_int.h: batch.c (roots, views, the prefix cache when a job
 * ends), run.c (pool growth, the prefix cache). It calls none of them.
 */
#include "sc/engine.h"

#include "sc/sc_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/fwd.h"
#include "kernels/tpool.h"
#include "qerr.h"
#include "sc/pfx.h"

/* A pool for e of kp's blocks, named or not; a pool the machine cannot
 * hold (shm_room) says how many blocks of how many tokens it was. */
static int pool_new(sc_engine *e, const kv_params *kp, const char *name)
{
	int rc = name ? kv_pool_new_named(kp, name, &e->pool)
		      : kv_pool_new(kp, &e->pool);
	char d[400];

	if (rc == QERR_NOMEM) {
		/* the detail is rewritten: copied out first */
		snprintf(d, sizeof(d), "%s", qerr_detail());
		rc = qerr_fail(rc, "a KV pool of %u blocks of %d tokens: %s",
			       kp->n_blocks, kp->block_tokens, d);
	}
	return rc;
}

int sc_engine_new(const model *m, const tok *t, const sc_engine_params *p,
		  sc_engine **out)
{
	sc_engine *e;
	int rc, rows;

	*out = NULL;
	if (p->n_threads < 1 || p->block_tokens < 1 || p->max_batch < 1 ||
	    p->prefill_chunk < 1 || kv_ggml_type(p->kv_dtype) == UINT32_MAX)
		return qerr_fail(QERR_RANGE, "engine: bad parameters");
	if (!kv_row_bytes(p->kv_dtype, m->cfg.head_dim))
		return qerr_fail(QERR_ARG, "engine: a %s KV cache needs a head "
				 "size that is a multiple of %d; this model's "
				 "head_dim is %d", kv_dtype_name(p->kv_dtype),
				 KV_Q8_BLOCK, m->cfg.head_dim);
	if ((int)tok_vocab_size(t) != m->cfg.vocab)
		return qerr_fail(QERR_ARG, "engine: tokenizer has %u tokens, "
				 "the model %d", tok_vocab_size(t),
				 m->cfg.vocab);
	e = calloc(1, sizeof(*e));
	if (!e)
		return qerr_fail(QERR_NOMEM, "engine: out of memory");
	e->m = m;
	e->t = t;
	e->p = *p;
	e->rmark = -1; /* sc_grammar_vocab's, with the first grammar */
	rows = p->max_batch > p->prefill_chunk ? p->max_batch
					       : p->prefill_chunk;
	e->masked = malloc((size_t)m->cfg.vocab * sizeof(float));
	/* end-of-generation ids, listed once (masked for ignore_eos) */
	for (int v = 0, cap = 0; v < m->cfg.vocab; v++) {
		int32_t *ne;

		if (!tok_is_eog(t, v))
			continue;
		if (e->n_eog == cap) {
			cap = cap ? cap * 2 : 16;
			if (!(ne = realloc(e->eog, (size_t)cap * sizeof(*ne)))) {
				free(e->eog);
				e->eog = NULL;
				break;
			}
			e->eog = ne;
		}
		e->eog[e->n_eog++] = v;
	}
	if (e->n_eog == 0 && !e->eog)
		e->eog = malloc(sizeof(int32_t)); /* none: still a valid list */
	if (!e->masked || !e->eog) {
		rc = qerr_fail(QERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	if (p->prefix_cache < 0) {
		rc = qerr_fail(QERR_RANGE, "engine: prefix_cache < 0");
		goto fail;
	}
	if (p->prefix_cache &&
	    ((rc = pfx_new((uint32_t)p->block_tokens, &e->cache_ix)) ||
	     !(e->cached = calloc((size_t)p->prefix_cache,
				  sizeof(*e->cached))))) {
		if (!rc)
			rc = qerr_fail(QERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	if ((rc = tpool_new(p->n_threads, &e->tp)) ||
	    (rc = fwd_new(m, rows, e->tp, &e->f)) ||
	    (rc = samp_new(m->cfg.vocab, &e->sampler)))
		goto fail;
	if (!(e->task_samp = calloc((size_t)p->n_threads,
				    sizeof(*e->task_samp))) ||
	    !(e->task_masked = calloc((size_t)p->n_threads,
				      sizeof(*e->task_masked)))) {
		rc = qerr_fail(QERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	for (int i = 0; i < p->n_threads; i++) {
		if ((rc = samp_new(m->cfg.vocab, &e->task_samp[i])))
			goto fail;
		if (!(e->task_masked[i] = malloc((size_t)m->cfg.vocab *
						 sizeof(float)))) {
			rc = qerr_fail(QERR_NOMEM, "engine: out of memory");
			goto fail;
		}
	}
	if (p->pool_name || p->pool_blocks) {
		/* split by windows whether or not samples release them, so
		 * every worker's pool on a host links with every other's
		 * (a slot per block: the coordinator counts blocks) */
		kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, p->block_tokens,
				p->pool_blocks ? p->pool_blocks : 4096,
				p->kv_dtype, fwd_kv_win_pattern(m), 0};

		if ((rc = pool_new(e, &kp, p->pool_name)))
			goto fail;
		e->fixed_pool = 1;
	}
	e->next_root = 1;
	*out = e;
	return 0;
fail:
	sc_engine_free(&e);
	return rc;
}

void sc_engine_free(sc_engine **ep)
{
	sc_engine *e;

	if (!ep || !*ep)
		return;
	e = *ep;
	sc_cache_clear(e);
	free(e->cached);
	pfx_free(&e->cache_ix);
	for (int i = 0; i < e->n_roots; i++) {
		kv_seq_free(e->pool, &e->roots[i].seq);
		free(e->roots[i].logits);
	}
	free(e->roots);
	for (int i = 0; i < e->n_linked; i++) {
		if (e->pool)
			kv_pool_unlink(e->pool, i + 1);
		kv_pool_free(&e->linked[i].pool);
		free(e->linked[i].name);
	}
	kv_pool_free(&e->pool);
	samp_free(&e->sampler);
	for (int i = 0; e->task_samp && i < e->p.n_threads; i++)
		samp_free(&e->task_samp[i]);
	for (int i = 0; e->task_masked && i < e->p.n_threads; i++)
		free(e->task_masked[i]);
	free(e->task_samp);
	free(e->task_masked);
	fwd_free(&e->f);
	tpool_free(&e->tp);
	free(e->masked);
	gbnf_vocab_free(&e->gv);
	free(e->ws_toks);
	free(e->mark_toks);
	free(e->eog);
	free(e);
	*ep = NULL;
}

uint32_t sc_engine_kv_in_use(const sc_engine *e)
{
	kv_stats st;

	if (!e->pool)
		return 0;
	kv_pool_stats(e->pool, &st);
	return st.in_use;
}

uint32_t sc_engine_kv_free(const sc_engine *e)
{
	return e->pool ? kv_pool_free_blocks(e->pool) : 0;
}

/* ---- the pool ---------------------------------------------------------- */

/* Blocks for n tokens. */
uint32_t sc_engine_blocks_for(const sc_engine *e, uint64_t n)
{
	return (uint32_t)((n + e->p.block_tokens - 1) / e->p.block_tokens);
}


static int windows_freed(const sc_engine *e)
{
	return e->p.free_windows && fwd_kv_win_pattern(e->m);
}

uint32_t sc_engine_win_slots(const sc_engine *e, uint32_t need)
{
	uint32_t B = (uint32_t)e->p.block_tokens, w;

	if (!windows_freed(e))
		return need;
	w = ((uint32_t)e->m->cfg.swa_window + B - 1) / B + 1;
	return w < need ? w : need;
}

/* Whether p has at least need blocks and win_need window slots. */
int sc_engine_pool_fits(const kv_pool *p, uint64_t need, uint64_t win_need)
{
	return kv_pool_params(p)->n_blocks >= need &&
	       (!kv_pool_win_slots(p) || !win_need ||
		kv_pool_win_slots(p) >= win_need);
}

/* A pool of at least need blocks (a fixed pool reports exhaustion as it
 * happens instead). */
int sc_engine_ensure_blocks(sc_engine *e, uint64_t need, uint64_t win_need)
{
	kv_params kp = {e->m->cfg.n_layers, e->m->cfg.kv_dim,
			e->p.block_tokens, 0, e->p.kv_dtype,
			e->p.free_windows ? fwd_kv_win_pattern(e->m) : 0, 0};

	/* cached prompts give way to this one (all of them when the pool is
	 * made anew) */
	sc_cache_room(e, e->fixed_pool || need <= KV_BLOCK_MASK ? need
							      : UINT64_MAX,
		   win_need);
	if (e->fixed_pool)
		return 0;
	if (need > KV_BLOCK_MASK)
		return qerr_fail(QERR_FULL, "KV pool of %llu blocks is too large",
				 (unsigned long long)need);
	if (e->pool && sc_engine_pool_fits(e->pool, need, win_need))
		return 0;
	kv_pool_free(&e->pool);
	/* with a prefix cache, room for cached prompts besides this one */
	if (e->cache_ix && 2 * need <= KV_BLOCK_MASK) {
		need *= 2;
		win_need *= 2;
	}
	kp.n_blocks = (uint32_t)need;
	/* released windows: only the slots the worst case holds at once */
	if (kp.win_pattern && win_need && win_need < need)
		kp.win_blocks = (uint32_t)win_need;
	return pool_new(e, &kp, NULL);
}

void sc_engine_track_peak(sc_engine *e)
{
	kv_stats st;

	kv_pool_stats(e->pool, &st);
	if (st.in_use > e->peak_in_use)
		e->peak_in_use = st.in_use;
	if (st.held_bytes > e->peak_bytes)
		e->peak_bytes = st.held_bytes;
}

void sc_engine_drop_windows(sc_engine *e, kv_seq *s)
{
	if (e->p.free_windows && e->m->cfg.swa_window > 0)
		(void)kv_seq_drop_window(e->pool, s, e->m->cfg.swa_window);
}
