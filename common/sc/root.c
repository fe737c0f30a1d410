/*
 * root — the roots a worker keeps across calls, the cluster's building
 * blocks (sc_root_*): prefill (whole, or from a base root's first blocks,
 * with a progress callback), description, release, export and import of
 * rows, and the read-only views of other workers' pools on this host.
 * The engine's state is engine.c's (sc_int.h). Callers: worker/ (the
 * public API in engine.h), batch.c (views, new roots).
 */
#include "sc/engine.h"

#include "sc/sc_int.h"

#include <stdlib.h>
#include <string.h>

#include "infer/fwd.h"
#include "kernels/tpool.h"
#include "qerr.h"
#include "sc/pfx.h"

/* ---- roots: the cluster building blocks -------------------------------- */

int sc_engine_need_fixed(const sc_engine *e)
{
	if (!e->fixed_pool)
		return qerr_fail(QERR_ARG, "engine has no fixed KV pool (set "
				 "pool_name or pool_blocks)");
	return 0;
}

sc_root *sc_root_find(const sc_engine *e, uint32_t id)
{
	for (int i = 0; i < e->n_roots; i++)
		if (e->roots[i].id == id)
			return &e->roots[i];
	return NULL;
}

/* A new root slot with its logits buffer; the sequence is empty. */
int sc_root_new(sc_engine *e, sc_root **out)
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

/* Commits (keep) or drops the root sc_root_new() handed out. */
void sc_root_end(sc_engine *e, sc_root *r, int keep)
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

	if ((rc = sc_engine_need_fixed(e)))
		return rc;
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if ((rc = sc_root_new(e, &r)))
		return rc;
	if (!(rc = root_tokens(r, prompt, n)))
		rc = fwd_prefill(e->f, e->pool, &r->seq, prompt, (int)n,
				 r->logits);
	sc_root_end(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

int sc_root_get(const sc_engine *e, uint32_t root_id, sc_root_desc *out)
{
	const sc_root *r = sc_root_find(e, root_id);

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
	sc_root *r = sc_root_find(e, root_id);

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

size_t sc_engine_token_kv_bytes(const sc_engine *e)
{
	return (size_t)e->m->cfg.n_layers * 2 * row_bytes(e);
}

int sc_root_export_from(const sc_engine *e, uint32_t root_id, uint32_t from,
			void **bytes, size_t *len)
{
	const sc_root *r = sc_root_find(e, root_id);

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	return sc_root_export_rows(e, root_id, from, r->seq.n_tokens, bytes,
				   len);
}

int sc_root_export_rows(const sc_engine *e, uint32_t root_id, uint32_t from,
			uint32_t to, void **bytes, size_t *len)
{
	const sc_root *r = sc_root_find(e, root_id);
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

	if ((rc = sc_engine_need_fixed(e)))
		return rc;
	rb = row_bytes(e);
	if (n_tokens < 1 || n_tokens > (uint32_t)e->m->cfg.ctx_len ||
	    n_base >= n_tokens ||
	    len != (size_t)(n_tokens - n_base) * e->m->cfg.n_layers * 2 * rb)
		return qerr_fail(QERR_FORMAT, "root import: %zu bytes for "
				 "tokens %u..%u", len, n_base, n_tokens);
	if (n_base && (!(base = sc_root_find(e, base_id)) ||
		       base->seq.n_tokens < n_base))
		return qerr_fail(QERR_MISSING, "root import: no root %u with "
				 "%u tokens to start from", base_id, n_base);
	if ((rc = sc_root_new(e, &r)))
		return rc;
	if (n_base) {
		base = sc_root_find(e, base_id); /* sc_root_new may move the roots */
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
	sc_root_end(e, r, rc == 0);
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
	if ((rc = sc_engine_need_fixed(e)))
		return rc;
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if (chunk < 1)
		chunk = 64;
	if ((rc = sc_root_new(e, &r)))
		return rc;
	if (!(rc = root_tokens(r, prompt, n)))
		rc = prefill_rest(e, r, prompt, n, chunk, on_chunk, ctx);
	sc_root_end(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

/* A prefill of prompt (n tokens) from the first n_base tokens of root
 * base (base_id; NULL: none): QERR_OK, or the error naming what does not
 * fit — the prompt's length, a missing or imported root (its tokens
 * unknown), a prefix out of range or not the prompt's. */
int sc_root_base_check(const sc_engine *e, const sc_root *base,
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

	if ((rc = sc_engine_need_fixed(e)))
		return rc;
	base = sc_root_find(e, base_id);
	if ((rc = sc_root_base_check(e, base, base_id, n_base, prompt, n)))
		return rc;
	if (chunk < 1)
		chunk = 64;
	if ((rc = sc_root_new(e, &r)))
		return rc;
	base = sc_root_find(e, base_id); /* sc_root_new may move the roots */
	if (!(rc = root_tokens(r, prompt, n)) &&
	    !(rc = kv_seq_fork_prefix(e->pool, &base->seq, n_base, &r->seq)))
		rc = prefill_rest(e, r, prompt, n, chunk, on_chunk, ctx);
	sc_root_end(e, r, rc == 0);
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
				hole = i; /* left by sc_root_unlink_pool */
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

int sc_root_unlink_pool(sc_engine *e, const char *pool_name)
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
