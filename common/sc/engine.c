/*
 * engine — the self-consistency engine's state and memory: what a request
 * runs on, and what outlives a request.
 *
 * Owns: struct sc_engine (model, tokenizer, threads, the forward and the
 * sampler), the KV pool (made once when fixed — named or sized — else
 * grown per request), sc_run's prefix cache (the roots of recent prompts
 * kept between runs), the roots a worker keeps across calls (sc_root_*:
 * prefill, export/import of rows, prefill from a base root), the linked
 * read-only pools of other workers on this host, and the KV accounting.
 *
 * Callers: the public API (worker/wk.c for the cluster building blocks;
 * tools/ and tests/ for the engine's life), and the other parts of sc/
 * through sc_int.h: batch.c (roots, views, the prefix cache when a job
 * ends), run.c (pool growth, the prefix cache). It calls none of them.
 */
#include "sc/engine.h"

#include "sc/sc_int.h"

#include <stdlib.h>
#include <string.h>

#include "engine/fwd.h"
#include "kernels/tpool.h"
#include "qerr.h"
#include "sc/pfx.h"

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
	if (p->pool_name || p->pool_blocks) {
		/* split by windows whether or not samples release them, so
		 * every worker's pool on a host links with every other's
		 * (a slot per block: the coordinator counts blocks) */
		kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, p->block_tokens,
				p->pool_blocks ? p->pool_blocks : 4096,
				p->kv_dtype, fwd_kv_win_pattern(m), 0};

		rc = p->pool_name ? kv_pool_new_named(&kp, p->pool_name, &e->pool)
				  : kv_pool_new(&kp, &e->pool);
		if (rc)
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
	sc_engine_cache_clear(e);
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
	fwd_free(&e->f);
	tpool_free(&e->tp);
	free(e->masked);
	gbnf_vocab_free(&e->gv);
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
uint32_t sc_blocks_for(const sc_engine *e, uint64_t n)
{
	return (uint32_t)((n + e->p.block_tokens - 1) / e->p.block_tokens);
}

static void cache_room(sc_engine *e, uint64_t need, uint64_t win_need);

static int windows_freed(const sc_engine *e)
{
	return e->p.free_windows && fwd_kv_win_pattern(e->m);
}

uint32_t sc_fork_win_slots(const sc_engine *e, uint32_t need)
{
	uint32_t B = (uint32_t)e->p.block_tokens, w;

	if (!windows_freed(e))
		return need;
	w = ((uint32_t)e->m->cfg.swa_window + B - 1) / B + 1;
	return w < need ? w : need;
}

/* Whether p has at least need blocks and win_need window slots. */
static int pool_fits(const kv_pool *p, uint64_t need, uint64_t win_need)
{
	return kv_pool_params(p)->n_blocks >= need &&
	       (!kv_pool_win_slots(p) || !win_need ||
		kv_pool_win_slots(p) >= win_need);
}

/* A pool of at least need blocks (a fixed pool reports exhaustion as it
 * happens instead). */
int sc_ensure_pool_blocks(sc_engine *e, uint64_t need, uint64_t win_need)
{
	kv_params kp = {e->m->cfg.n_layers, e->m->cfg.kv_dim,
			e->p.block_tokens, 0, e->p.kv_dtype,
			e->p.free_windows ? fwd_kv_win_pattern(e->m) : 0, 0};

	/* cached prompts give way to this one (all of them when the pool is
	 * made anew) */
	cache_room(e, e->fixed_pool || need <= KV_BLOCK_MASK ? need
							      : UINT64_MAX,
		   win_need);
	if (e->fixed_pool)
		return 0;
	if (need > KV_BLOCK_MASK)
		return qerr_fail(QERR_FULL, "KV pool of %llu blocks is too large",
				 (unsigned long long)need);
	if (e->pool && pool_fits(e->pool, need, win_need))
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
	return kv_pool_new(&kp, &e->pool);
}

void sc_track_peak(sc_engine *e)
{
	kv_stats st;

	kv_pool_stats(e->pool, &st);
	if (st.in_use > e->peak_in_use)
		e->peak_in_use = st.in_use;
	if (st.held_bytes > e->peak_bytes)
		e->peak_bytes = st.held_bytes;
}

void sc_drop_windows(sc_engine *e, kv_seq *s)
{
	if (e->p.free_windows && e->m->cfg.swa_window > 0)
		(void)kv_seq_drop_window(e->pool, s, e->m->cfg.swa_window);
}

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

void sc_engine_cache_clear(sc_engine *e)
{
	for (int i = 0; e && e->n_cached && i < e->p.prefix_cache; i++)
		if (e->cached[i].tokens)
			cache_drop(e, &e->cached[i]);
}

int sc_engine_cache_count(const sc_engine *e)
{
	return e->n_cached;
}

/* Evicts cached prompts, least recently used first, until need blocks are
 * free; with a pool too small for need, all of them (it is made anew). A
 * block shared by several cached prompts is free once the last goes. */
static void cache_room(sc_engine *e, uint64_t need, uint64_t win_need)
{
	if (!e->n_cached)
		return;
	if (!e->pool || !pool_fits(e->pool, need, win_need)) {
		sc_engine_cache_clear(e);
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
int sc_prefill_cached(sc_engine *e, const int32_t *prompt, size_t n,
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
	j->need_root = sc_blocks_for(e, j->n_prompt) - (uint32_t)(k / B);
	return (int)k;
}

/* ---- roots: the cluster building blocks -------------------------------- */

int sc_need_fixed(const sc_engine *e)
{
	if (!e->fixed_pool)
		return qerr_fail(QERR_ARG, "engine has no fixed KV pool (set "
				 "pool_name or pool_blocks)");
	return 0;
}

sc_root *sc_find_root(const sc_engine *e, uint32_t id)
{
	for (int i = 0; i < e->n_roots; i++)
		if (e->roots[i].id == id)
			return &e->roots[i];
	return NULL;
}

/* A new root slot with its logits buffer; the sequence is empty. */
int sc_new_root(sc_engine *e, sc_root **out)
{
	sc_root *r;

	if (e->n_roots == e->cap_roots) {
		int nc = e->cap_roots ? e->cap_roots * 2 : 8;
		sc_root *nr = realloc(e->roots, (size_t)nc * sizeof(*nr));

		if (!nr)
			return qerr_fail(QERR_NOMEM, "out of memory for roots");
		e->roots = nr;
		e->cap_roots = nc;
	}
	r = &e->roots[e->n_roots];
	memset(r, 0, sizeof(*r));
	kv_seq_init(&r->seq);
	r->logits = malloc((size_t)e->m->cfg.vocab * sizeof(float));
	if (!r->logits)
		return qerr_fail(QERR_NOMEM, "out of memory for root logits");
	r->id = e->next_root++;
	if (!e->next_root)
		e->next_root = 1;
	*out = r;
	return 0;
}

/* Commits (keep) or drops the root sc_new_root() handed out. */
void sc_end_root(sc_engine *e, sc_root *r, int keep)
{
	if (keep) {
		e->n_roots++;
		return;
	}
	kv_seq_free(e->pool, &r->seq);
	free(r->logits);
	free(r->tokens);
}

/* Keeps a copy of the prompt a root was prefilled from (a later prompt
 * sharing its prefix is checked against it). */
static int root_tokens(sc_root *r, const int32_t *prompt, size_t n)
{
	if (!(r->tokens = malloc(n * sizeof(*r->tokens))))
		return qerr_fail(QERR_NOMEM, "out of memory for root tokens");
	memcpy(r->tokens, prompt, n * sizeof(*r->tokens));
	return 0;
}

int sc_root_prefill(sc_engine *e, const int32_t *prompt, size_t n,
		    uint32_t *root_id)
{
	sc_root *r;
	int rc;

	if ((rc = sc_need_fixed(e)))
		return rc;
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if ((rc = sc_new_root(e, &r)))
		return rc;
	if (!(rc = root_tokens(r, prompt, n)))
		rc = fwd_prefill(e->f, e->pool, &r->seq, prompt, (int)n,
				 r->logits);
	sc_end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

int sc_root_get(const sc_engine *e, uint32_t root_id, sc_root_desc *out)
{
	const sc_root *r = sc_find_root(e, root_id);

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	out->n_tokens = r->seq.n_tokens;
	out->n_blocks = r->seq.n_blocks;
	out->blocks = r->seq.blocks;
	out->logits = r->logits;
	out->pool_name = kv_pool_name(e->pool);
	return 0;
}

int sc_root_release(sc_engine *e, uint32_t root_id)
{
	sc_root *r = sc_find_root(e, root_id);

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	kv_seq_free(e->pool, &r->seq);
	free(r->logits);
	free(r->tokens);
	*r = e->roots[--e->n_roots];
	return 0;
}

int sc_root_count(const sc_engine *e)
{
	return e->n_roots;
}

static size_t row_bytes(const sc_engine *e)
{
	const kv_params *kp = kv_pool_params(e->pool);

	return kv_row_bytes(kp->dtype, kp->kv_dim);
}

int sc_root_export(const sc_engine *e, uint32_t root_id, void **bytes,
		   size_t *len)
{
	return sc_root_export_from(e, root_id, 0, bytes, len);
}

size_t sc_token_kv_bytes(const sc_engine *e)
{
	return (size_t)e->m->cfg.n_layers * 2 * row_bytes(e);
}

int sc_root_export_from(const sc_engine *e, uint32_t root_id, uint32_t from,
			void **bytes, size_t *len)
{
	const sc_root *r = sc_find_root(e, root_id);

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	return sc_root_export_rows(e, root_id, from, r->seq.n_tokens, bytes,
				   len);
}

int sc_root_export_rows(const sc_engine *e, uint32_t root_id, uint32_t from,
			uint32_t to, void **bytes, size_t *len)
{
	const sc_root *r = sc_find_root(e, root_id);
	size_t rb, n;
	char *b;

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	if (from >= to || to > r->seq.n_tokens)
		return qerr_fail(QERR_RANGE, "root %u has %u tokens: no rows "
				 "%u..%u", root_id, r->seq.n_tokens, from, to);
	rb = row_bytes(e);
	n = (size_t)(to - from) * e->m->cfg.n_layers * 2 * rb;
	if (!(b = malloc(n ? n : 1)))
		return qerr_fail(QERR_NOMEM, "out of memory exporting a root");
	*bytes = b;
	*len = n;
	for (uint32_t t = from; t < to; t++)
		for (int l = 0; l < e->m->cfg.n_layers; l++) {
			memcpy(b, kv_seq_k_row(e->pool, &r->seq, l, t), rb);
			memcpy(b + rb, kv_seq_v_row(e->pool, &r->seq, l, t), rb);
			b += 2 * rb;
		}
	return 0;
}

int sc_root_import(sc_engine *e, uint32_t n_tokens, const void *bytes,
		   size_t len, const float *logits, uint32_t *root_id)
{
	return sc_root_import_from(e, 0, 0, n_tokens, bytes, len, logits,
				   root_id);
}

int sc_root_import_from(sc_engine *e, uint32_t base_id, uint32_t n_base,
			uint32_t n_tokens, const void *bytes, size_t len,
			const float *logits, uint32_t *root_id)
{
	const char *b = bytes;
	const sc_root *base = NULL;
	sc_root *r;
	size_t rb;
	int rc;

	if ((rc = sc_need_fixed(e)))
		return rc;
	rb = row_bytes(e);
	if (n_tokens < 1 || n_tokens > (uint32_t)e->m->cfg.ctx_len ||
	    n_base >= n_tokens ||
	    len != (size_t)(n_tokens - n_base) * e->m->cfg.n_layers * 2 * rb)
		return qerr_fail(QERR_FORMAT, "root import: %zu bytes for "
				 "tokens %u..%u", len, n_base, n_tokens);
	if (n_base && (!(base = sc_find_root(e, base_id)) ||
		       base->seq.n_tokens < n_base))
		return qerr_fail(QERR_MISSING, "root import: no root %u with "
				 "%u tokens to start from", base_id, n_base);
	if ((rc = sc_new_root(e, &r)))
		return rc;
	if (n_base) {
		base = sc_find_root(e, base_id); /* sc_new_root may move the roots */
		rc = kv_seq_fork_prefix(e->pool, &base->seq, n_base, &r->seq);
	}
	if (!rc)
		rc = kv_seq_reserve(e->pool, &r->seq, n_tokens - n_base);
	if (!rc) {
		for (uint32_t t = n_base; t < n_tokens; t++)
			for (int l = 0; l < e->m->cfg.n_layers; l++) {
				memcpy(kv_seq_k_row(e->pool, &r->seq, l, t), b,
				       rb);
				memcpy(kv_seq_v_row(e->pool, &r->seq, l, t),
				       b + rb, rb);
				b += 2 * rb;
			}
		kv_seq_commit(&r->seq, n_tokens - n_base);
		memcpy(r->logits, logits,
		       (size_t)e->m->cfg.vocab * sizeof(float));
	}
	sc_end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

/* ---- prefill with a progress callback, from a base root ---------------- */

/* Prefills prompt[r->seq.n_tokens .. n) into r in forwards of at most
 * chunk rows, on_chunk (may be NULL) between them; the last one writes
 * r->logits. fwd_prefill continues at the sequence's length, and the
 * forward is chunking-invariant: the rows and logits are those of one
 * forward over the whole prompt, bit for bit. */
static int prefill_rest(sc_engine *e, sc_root *r, const int32_t *prompt,
			size_t n, int chunk, sc_chunk_cb on_chunk, void *ctx)
{
	int rc = 0;

	for (size_t done = r->seq.n_tokens; !rc && done < n;) {
		size_t c = n - done < (size_t)chunk ? n - done : (size_t)chunk;

		rc = fwd_prefill(e->f, e->pool, &r->seq, prompt + done, (int)c,
				 done + c == n ? r->logits : NULL);
		done += c;
		if (!rc && done < n && on_chunk)
			rc = on_chunk(ctx);
	}
	return rc;
}

int sc_root_prefill_cb(sc_engine *e, const int32_t *prompt, size_t n,
		       int chunk, sc_chunk_cb on_chunk, void *ctx,
		       uint32_t *root_id)
{
	sc_root *r;
	int rc = 0;

	if (!on_chunk)
		return sc_root_prefill(e, prompt, n, root_id);
	if ((rc = sc_need_fixed(e)))
		return rc;
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if (chunk < 1)
		chunk = 64;
	if ((rc = sc_new_root(e, &r)))
		return rc;
	if (!(rc = root_tokens(r, prompt, n)))
		rc = prefill_rest(e, r, prompt, n, chunk, on_chunk, ctx);
	sc_end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

/* A prefill of prompt (n tokens) from the first n_base tokens of root
 * base (base_id; NULL: none): QERR_OK, or the error naming what does not
 * fit — the prompt's length, a missing or imported root (its tokens
 * unknown), a prefix out of range or not the prompt's. */
int sc_base_check(const sc_engine *e, const sc_root *base,
		  uint32_t base_id, uint32_t n_base,
		  const int32_t *prompt, size_t n)
{
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if (!base)
		return qerr_fail(QERR_MISSING, "no root %u", base_id);
	if (!base->tokens)
		return qerr_fail(QERR_ARG, "root %u was imported: its tokens "
				 "are unknown here", base_id);
	if (n_base < 1 || n_base >= n || n_base > base->seq.n_tokens)
		return qerr_fail(QERR_RANGE, "shared prefix of %u tokens: the "
				 "root has %u, the prompt %zu", n_base,
				 base->seq.n_tokens, n);
	if (memcmp(base->tokens, prompt, n_base * sizeof(*prompt)))
		return qerr_fail(QERR_ARG, "the prompt does not start with "
				 "root %u's first %u tokens", base_id, n_base);
	return 0;
}

int sc_root_prefill_from(sc_engine *e, uint32_t base_id, uint32_t n_base,
			 const int32_t *prompt, size_t n, int chunk,
			 sc_chunk_cb on_chunk, void *ctx, uint32_t *root_id)
{
	const sc_root *base;
	sc_root *r;
	int rc;

	if ((rc = sc_need_fixed(e)))
		return rc;
	base = sc_find_root(e, base_id);
	if ((rc = sc_base_check(e, base, base_id, n_base, prompt, n)))
		return rc;
	if (chunk < 1)
		chunk = 64;
	if ((rc = sc_new_root(e, &r)))
		return rc;
	base = sc_find_root(e, base_id); /* sc_new_root may move the roots */
	if (!(rc = root_tokens(r, prompt, n)) &&
	    !(rc = kv_seq_fork_prefix(e->pool, &base->seq, n_base, &r->seq)))
		rc = prefill_rest(e, r, prompt, n, chunk, on_chunk, ctx);
	sc_end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

/* ---- linked pools of other workers on this host ------------------------ */

/* Slot of a pool on this host mapped read-only by name (attached once). */
static int linked_slot(sc_engine *e, const char *name, int *slot)
{
	kv_pool *ro;
	int rc, i;

	int hole = -1;

	for (i = 0; i < e->n_linked; i++)
		if (!e->linked[i].name) {
			if (hole < 0)
				hole = i; /* left by sc_unlink_pool */
		} else if (!strcmp(e->linked[i].name, name)) {
			*slot = i + 1;
			return 0;
		}
	if (hole < 0 && e->n_linked == KV_MAX_SLOTS - 1)
		return qerr_fail(QERR_FULL, "too many linked KV pools");
	if ((rc = kv_pool_attach_name_ro(name, &ro)))
		return rc;
	i = hole >= 0 ? hole : e->n_linked;
	if ((rc = kv_pool_link(e->pool, i + 1, ro)) ||
	    !(e->linked[i].name = strdup(name))) {
		kv_pool_free(&ro);
		return rc ? rc : qerr_fail(QERR_NOMEM, "out of memory");
	}
	e->linked[i].pool = ro;
	if (i == e->n_linked)
		e->n_linked++;
	*slot = i + 1;
	return 0;
}

/* Checks a root reference and builds the view forks fork from. */
int sc_root_view(sc_engine *e, const sc_root_ref *root, kv_seq *view)
{
	const char *own = kv_pool_name(e->pool);
	int rc, slot = 0;

	kv_seq_init(view);
	if (root->pool_name && (!own || strcmp(root->pool_name, own)) &&
	    (rc = linked_slot(e, root->pool_name, &slot)))
		return rc;
	if ((rc = kv_seq_view(view, slot, root->blocks, root->n_blocks,
			      root->n_tokens, (uint32_t)e->p.block_tokens)))
		return rc;
	if (slot) {
		/* the view's blocks must exist in the linked pool */
		const kv_pool *lp = e->linked[slot - 1].pool;

		for (uint32_t i = 0; i < root->n_blocks; i++)
			if (root->blocks[i] >= kv_pool_params(lp)->n_blocks) {
				kv_seq_free(NULL, view);
				return qerr_fail(QERR_RANGE, "root block %u is "
						 "outside pool %s",
						 root->blocks[i],
						 root->pool_name);
			}
	} else {
		for (uint32_t i = 0; i < root->n_blocks; i++)
			if (root->blocks[i] >= kv_pool_params(e->pool)->n_blocks ||
			    kv_block_refcount(e->pool, root->blocks[i]) == 0) {
				kv_seq_free(NULL, view);
				return qerr_fail(QERR_RANGE, "root block %u is "
						 "not held", root->blocks[i]);
			}
	}
	return 0;
}

int sc_unlink_pool(sc_engine *e, const char *pool_name)
{
	for (int i = 0; pool_name && i < e->n_linked; i++) {
		if (!e->linked[i].name || strcmp(e->linked[i].name, pool_name))
			continue;
		kv_pool_unlink(e->pool, i + 1);
		kv_pool_free(&e->linked[i].pool);
		free(e->linked[i].name);
		e->linked[i].name = NULL;
		return 0;
	}
	return qerr_fail(QERR_MISSING, "pool %s is not linked",
			 pool_name ? pool_name : "(null)");
}
