/*
 * cache — sc_run's prefix cache (sc_cache_*): the roots of recent prompts
 * kept in the pool between runs, a prompt that shares the first blocks
 * of one forking them and prefilling only the rest, least recently used
 * first out when a run needs the blocks. The engine's state is engine.c's
 * (sc_int.h). Callers: run.c, batch.c (a job starting from, or leaving, a
 * cached prompt), engine.c (room in the pool).
 */
#include "sc/sc_int.h"

#include <stdlib.h>
#include <string.h>

#include "infer/fwd.h"
#include "kernels/tpool.h"
#include "qerr.h"
#include "sc/pfx.h"

/* ---- sc_run's prefix cache --------------------------------------------- */

/* Slots e->cached[0 .. p.prefix_cache): live ones have tokens; entries
 * never move (the index names them by address). */
static void cache_drop(sc_engine *e, struct sc_cached *c)
{
	pfx_remove(e->cache_ix, c, c->tokens, c->n);
	kv_seq_free(e->pool, &c->seq);
	free(c->tokens);
	memset(c, 0, sizeof(*c));
	e->n_cached--;
}

static struct sc_cached *cache_lru(sc_engine *e)
{
	struct sc_cached *old = NULL;

	for (int i = 0; i < e->p.prefix_cache; i++)
		if (e->cached[i].tokens &&
		    (!old || e->cached[i].used < old->used))
			old = &e->cached[i];
	return old;
}

void sc_cache_clear(sc_engine *e)
{
	for (int i = 0; e && e->n_cached && i < e->p.prefix_cache; i++)
		if (e->cached[i].tokens)
			cache_drop(e, &e->cached[i]);
}

int sc_cache_count(const sc_engine *e)
{
	return e->n_cached;
}

/* Evicts cached prompts, least recently used first, until need blocks are
 * free; with a pool too small for need, all of them (it is made anew). A
 * block shared by several cached prompts is free once the last goes. */
void sc_cache_room(sc_engine *e, uint64_t need, uint64_t win_need)
{
	if (!e->n_cached)
		return;
	if (!e->pool || !sc_engine_pool_fits(e->pool, need, win_need)) {
		sc_cache_clear(e);
		return;
	}
	while (e->n_cached &&
	       (kv_pool_free_blocks(e->pool) < need ||
		(kv_pool_win_slots(e->pool) &&
		 kv_pool_free_win_slots(e->pool) < win_need)))
		cache_drop(e, cache_lru(e));
}

static int cache_visit(void *arg, void *owner, size_t shared)
{
	struct sc_cached **best = arg;

	(void)shared;
	*best = owner;
	return 1;
}

/* The root of prompt: forked from the cached prompt sharing its longest
 * block-aligned prefix (at most n - 1 tokens) and prefilled from there,
 * else prefilled whole. *reused: the tokens forked. */
int sc_cache_prefill(sc_engine *e, const int32_t *prompt, size_t n,
		      kv_seq *root, float *logits, int *reused)
{
	struct sc_cached *best = NULL;
	size_t B = (size_t)e->p.block_tokens, k = 0;
	int rc;

	*reused = 0;
	if (e->n_cached)
		k = pfx_longest(e->cache_ix, prompt, n, cache_visit, &best,
				NULL);
	if (k > (n - 1) / B * B)
		k = (n - 1) / B * B;
	if (!k || !best)
		return fwd_prefill(e->f, e->pool, root, prompt, (int)n, logits);
	best->used = ++e->tick;
	if ((rc = kv_seq_fork_prefix(e->pool, &best->seq, (uint32_t)k, root)))
		return rc;
	*reused = (int)k;
	return fwd_prefill(e->f, e->pool, root, prompt + k, (int)(n - k),
			   logits);
}

/* Keeps root (the prompt's, all rows committed) for later prompts: a
 * fork of it (no copy), the least recently used entry giving way. */
void sc_cache_keep(sc_engine *e, const int32_t *prompt, size_t n,
		   const kv_seq *root)
{
	struct sc_cached *c = NULL;

	for (int i = 0; i < e->p.prefix_cache; i++)
		if (e->cached[i].n == n &&
		    !memcmp(e->cached[i].tokens, prompt, n * sizeof(*prompt))) {
			e->cached[i].used = ++e->tick;
			return; /* held already */
		}
	if (e->n_cached == e->p.prefix_cache)
		cache_drop(e, cache_lru(e));
	for (int i = 0; !c && i < e->p.prefix_cache; i++)
		if (!e->cached[i].tokens)
			c = &e->cached[i];
	if (!(c->tokens = malloc(n * sizeof(*prompt))) ||
	    kv_seq_fork(e->pool, root, &c->seq) ||
	    (memcpy(c->tokens, prompt, n * sizeof(*prompt)),
	     pfx_add(e->cache_ix, c, c->tokens, n))) {
		kv_seq_free(e->pool, &c->seq);
		free(c->tokens);
		memset(c, 0, sizeof(*c));
		qerr_clear(); /* not cached: no harm done */
		return;
	}
	c->n = n;
	c->used = ++e->tick;
	e->n_cached++;
}

/* A batched question job j starts from the cached prompt sharing its
 * longest block-aligned prefix (at most n - 1 tokens), as
 * sc_batch_prefill_from starts from a root: the blocks forked into its
 * root, only the rest prefilled. Returns the tokens forked (0: none). */
int sc_cache_start(sc_engine *e, sc_job *j)
{
	struct sc_cached *best = NULL;
	size_t B = (size_t)e->p.block_tokens, k;

	if (!e->n_cached || !j->prompt || j->filled || j->own.n_tokens)
		return 0;
	k = pfx_longest(e->cache_ix, j->prompt, j->n_prompt, cache_visit,
			&best, NULL);
	if (k > (j->n_prompt - 1) / B * B)
		k = (j->n_prompt - 1) / B * B;
	if (!k || !best ||
	    kv_seq_fork_prefix(e->pool, &best->seq, (uint32_t)k, &j->own)) {
		qerr_clear();
		return 0;
	}
	best->used = ++e->tick;
	j->filled = k;
	j->need_root = sc_engine_blocks_for(e, j->n_prompt) - (uint32_t)(k / B);
	return (int)k;
}
