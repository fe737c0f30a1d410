/*
 * kv — the paged KV cache (see kv.h for the region layout): the block
 * pool with its free list and reference counts in one shared-memory
 * region, sequences' page tables, fork (share every block) and the
 * copy-on-write of a shared partly filled tail block, the window parts
 * of blocks (sliding-window layers' rows, released on their own),
 * read-only links to other workers' pools on this host. Owns the pool's
 * region through shm;
 * callers: infer/fwd.c (rows), sc/ (sequences, roots), worker/, tests.
 */
#include "infer/kv.h"

#include "format/ggml.h"
#include "format/quant.h"
#include "kernels/kern.h"
#include "qerr.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(kv_shm_header) == 88, "kv_shm_header layout");
_Static_assert(offsetof(kv_shm_header, win_blocks) == 80, "layout");
_Static_assert(offsetof(kv_shm_header, owner) == 64, "layout");
_Static_assert(offsetof(kv_shm_header, n_layers) == 16, "layout");
_Static_assert(offsetof(kv_shm_header, data_offset) == 56, "layout");
_Static_assert(sizeof(kv_shm_header) <= KV_DATA_OFFSET, "header fits");

struct kv_pool {
	kv_params params;
	shm_region region;
	unsigned char *data;  /* region base + data_offset */
	uint64_t stride;      /* bytes between blocks */
	size_t half_bytes;    /* one layer's K (or V) rows: B * row_bytes */
	size_t row_bytes;     /* kv_row_bytes(dtype, kv_dim) */
	/* With windows (params.win_pattern > 0), else wdata/wmap NULL: */
	unsigned char *wdata; /* window slot 0 */
	uint64_t wstride;     /* bytes between window slots */
	uint32_t *wmap;       /* [n_blocks] in the region: window slot of a
			       * block, KV_NO_BLOCK when released */
	uint64_t full_bytes, win_bytes; /* payload of a block's two parts */
	int readonly;
	char *shm_name;       /* POSIX shm name when created named */
	kv_pool *linked[KV_MAX_SLOTS]; /* borrowed read-only pools, slot >= 1 */
	/* Owner only (NULL when read-only): */
	uint32_t *ref;        /* [n_blocks] reference counts */
	uint32_t *free_ids;   /* [n_blocks] stack of free ids */
	uint32_t n_free;
	uint32_t *wref;       /* [n_blocks] holders seeing a block's window
			       * part (windows only) */
	uint32_t *wfree_ids;  /* [n_wslots] stack of free window slots */
	uint32_t n_wfree, n_wslots;
	kv_stats stats;
};

_Static_assert(sizeof(ggml_block_q8_0) == 34, "block_q8_0 is ggml's");

size_t kv_row_bytes(int dtype, int kv_dim)
{
	if (kv_dim < 1)
		return 0;
	switch (dtype) {
	case KV_F32:
		return (size_t)kv_dim * 4;
	case KV_F16:
		return (size_t)kv_dim * 2;
	case KV_Q8_0:
		if (kv_dim % KV_Q8_BLOCK)
			return 0;
		return (size_t)(kv_dim / KV_Q8_BLOCK) * sizeof(ggml_block_q8_0);
	default:
		return 0;
	}
}

uint32_t kv_ggml_type(int dtype)
{
	switch (dtype) {
	case KV_F32:
		return GGML_TYPE_F32;
	case KV_F16:
		return GGML_TYPE_F16;
	case KV_Q8_0:
		return GGML_TYPE_Q8_0;
	default:
		return UINT32_MAX;
	}
}

static const char *const dtype_names[] = {"f32", "f16", "q8_0"};

const char *kv_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < 3 ? dtype_names[dtype] : "?";
}

int kv_dtype_from_name(const char *name)
{
	for (int i = 0; name && i < 3; i++)
		if (!strcmp(name, dtype_names[i]))
			return i;
	return -1;
}

void kv_row_put(int dtype, const float *x, void *row, int n)
{
	switch (dtype) {
	case KV_F16:
		kern_f32_to_f16_row(x, row, n);
		break;
	case KV_Q8_0:
		quant_q8_0_ref_row(x, row, n);
		break;
	default:
		memcpy(row, x, (size_t)n * sizeof(float));
	}
}

/* Sizes derived from params; every product checked. */
typedef struct {
	uint64_t block_bytes, stride, total;
	uint64_t win_bytes, wstride, win_offset, wmap_offset; /* 0: none */
	uint32_t n_wslots; /* window slots (0: none) */
} kv_sizes;

/* Layers of each class under params p: windowed iff l % w != w - 1. */
static int n_windowed(const kv_params *p)
{
	int w = p->win_pattern;

	return w > 0 ? p->n_layers - p->n_layers / w : 0;
}

static int sizes_of(const kv_params *p, kv_sizes *z)
{
	uint64_t b;
	size_t rb;

	if (!p)
		return qerr_fail(QERR_ARG, "kv: NULL params");
	if (p->dtype != KV_F32 && p->dtype != KV_F16 && p->dtype != KV_Q8_0)
		return qerr_fail(QERR_ARG, "kv: unknown dtype %d", p->dtype);
	if (p->n_layers < 1 || p->kv_dim < 1 || p->block_tokens < 1)
		return qerr_fail(QERR_RANGE,
				 "kv: n_layers %d, kv_dim %d, block_tokens %d "
				 "must all be >= 1",
				 p->n_layers, p->kv_dim, p->block_tokens);
	if (p->n_blocks < 1 || p->n_blocks > KV_MAX_BLOCKS)
		return qerr_fail(QERR_RANGE, "kv: n_blocks %u out of range "
				 "1..%u", p->n_blocks, KV_MAX_BLOCKS);
	/* 1 would leave no layer windowed: one layout per pool, so refused */
	if (p->win_pattern < 0 || p->win_pattern == 1 ||
	    p->win_pattern > 65536)
		return qerr_fail(QERR_RANGE, "kv: win_pattern %d must be 0 or "
				 "in 2..65536", p->win_pattern);
	if (p->win_blocks > p->n_blocks || (p->win_blocks && !p->win_pattern))
		return qerr_fail(QERR_RANGE, "kv: %u window slots for %u "
				 "blocks%s", p->win_blocks, p->n_blocks,
				 p->win_pattern ? "" : " without windows");
	rb = kv_row_bytes(p->dtype, p->kv_dim);
	if (!rb)
		return qerr_fail(QERR_ARG, "kv: kv_dim %d is not a multiple of "
				 "%d, as %s rows need", p->kv_dim, KV_Q8_BLOCK,
				 kv_dtype_name(p->dtype));
	/* a part = its layers * 2 * B * row bytes (n_layers is an int and
	 * rb * B * 2 fits 64 bits as checked, so the split cannot overflow
	 * where the whole did not) */
	b = rb;
	if (__builtin_mul_overflow(b, (uint64_t)p->block_tokens, &b) ||
	    __builtin_mul_overflow(b, (uint64_t)2 * (uint64_t)p->n_layers,
				   &b) ||
	    b > UINT64_MAX - 2 * KV_BLOCK_ALIGN)
		goto overflow;
	z->win_bytes = b / (uint64_t)p->n_layers * (uint64_t)n_windowed(p);
	z->block_bytes = b - z->win_bytes;
	z->stride = (z->block_bytes + KV_BLOCK_ALIGN - 1) / KV_BLOCK_ALIGN *
		    KV_BLOCK_ALIGN;
	z->wstride = (z->win_bytes + KV_BLOCK_ALIGN - 1) / KV_BLOCK_ALIGN *
		     KV_BLOCK_ALIGN;
	if (__builtin_mul_overflow(z->stride, (uint64_t)p->n_blocks,
				   &z->total) ||
	    __builtin_add_overflow(z->total, (uint64_t)KV_DATA_OFFSET,
				   &z->total))
		goto overflow;
	z->win_offset = z->wmap_offset = 0;
	z->n_wslots = 0;
	if (z->win_bytes) {
		uint64_t w, m = (uint64_t)p->n_blocks * 4;

		z->n_wslots = p->win_blocks ? p->win_blocks : p->n_blocks;
		z->win_offset = z->total;
		if (__builtin_mul_overflow(z->wstride, (uint64_t)z->n_wslots,
					   &w) ||
		    __builtin_add_overflow(z->total, w, &z->wmap_offset) ||
		    __builtin_add_overflow(z->wmap_offset, m, &z->total))
			goto overflow;
	}
	if (z->total > (uint64_t)INT64_MAX || z->total > (uint64_t)SIZE_MAX)
		goto overflow;
	return QERR_OK;
overflow:
	return qerr_fail(QERR_RANGE,
			 "kv: pool of %u blocks x %d layers x %d tokens x "
			 "kv_dim %d is too large",
			 p->n_blocks, p->n_layers, p->block_tokens, p->kv_dim);
}

int kv_params_check(const kv_params *p, uint64_t *region_bytes)
{
	kv_sizes z;
	int rc = sizes_of(p, &z);

	if (!rc && region_bytes)
		*region_bytes = z.total;
	return rc;
}

static void layout(kv_pool *kp, const kv_sizes *z)
{
	kp->data = (unsigned char *)kp->region.base + KV_DATA_OFFSET;
	kp->stride = z->stride;
	kp->row_bytes = kv_row_bytes(kp->params.dtype, kp->params.kv_dim);
	kp->half_bytes = kp->row_bytes * (size_t)kp->params.block_tokens;
	kp->full_bytes = z->block_bytes;
	kp->win_bytes = z->win_bytes;
	kp->wstride = z->wstride;
	kp->n_wslots = z->n_wslots;
	kp->wdata = z->win_bytes ? (unsigned char *)kp->region.base +
					   z->win_offset
				 : NULL;
	kp->wmap = z->win_bytes ? (uint32_t *)((unsigned char *)
						       kp->region.base +
					       z->wmap_offset)
				: NULL;
}

static int pool_new(const kv_params *p, const char *name, kv_pool **out)
{
	kv_pool *kp = NULL;
	kv_shm_header *h;
	kv_sizes z;
	uint32_t i;
	int rc;

	if (!out)
		return qerr_fail(QERR_ARG, "kv_pool_new: NULL out");
	*out = NULL;
	rc = sizes_of(p, &z);
	if (rc)
		return rc;
	kp = calloc(1, sizeof(*kp));
	if (!kp)
		return qerr_fail(QERR_NOMEM, "kv_pool_new: pool struct");
	kp->params = *p;
	kp->region.fd = -1;
	kp->ref = calloc(p->n_blocks, sizeof(*kp->ref));
	kp->free_ids = malloc((size_t)p->n_blocks * sizeof(*kp->free_ids));
	if (z.win_bytes) {
		kp->wref = calloc(p->n_blocks, sizeof(*kp->wref));
		kp->wfree_ids = malloc((size_t)z.n_wslots *
				       sizeof(*kp->wfree_ids));
	}
	if (!kp->ref || !kp->free_ids ||
	    (z.win_bytes && (!kp->wref || !kp->wfree_ids))) {
		rc = qerr_fail(QERR_NOMEM, "kv_pool_new: tables for %u blocks",
			       p->n_blocks);
		goto fail;
	}
	if (name) {
		kp->shm_name = strdup(name);
		if (!kp->shm_name) {
			rc = qerr_fail(QERR_NOMEM, "kv_pool_new: name");
			goto fail;
		}
		rc = shm_create_named(name, KV_MAGIC, KV_VERSION, z.total,
				      &kp->region);
		if (rc) {
			free(kp->shm_name);
			kp->shm_name = NULL; /* not ours: never unlink it */
		}
	} else {
		rc = shm_create("quorum-kv", KV_MAGIC, KV_VERSION, z.total,
				&kp->region);
	}
	if (rc)
		goto fail;
	h = kp->region.base;
	h->n_layers = (uint32_t)p->n_layers;
	h->kv_dim = (uint32_t)p->kv_dim;
	h->block_tokens = (uint32_t)p->block_tokens;
	h->n_blocks = p->n_blocks;
	h->dtype = (uint32_t)p->dtype;
	h->win_pattern = (uint32_t)p->win_pattern;
	h->win_blocks = p->win_blocks;
	h->reserved = 0;
	h->block_bytes = z.block_bytes;
	h->block_stride = z.stride;
	h->data_offset = KV_DATA_OFFSET;
	/* Unknown owner (pid 0) if /proc is unreadable: never swept. */
	(void)shm_owner_self(&h->owner);
	layout(kp, &z);
	/* Stack popped from the top: hand out low ids first (locality). */
	for (i = 0; i < p->n_blocks; i++)
		kp->free_ids[i] = p->n_blocks - 1 - i;
	kp->n_free = p->n_blocks;
	if (kp->wmap) {
		for (i = 0; i < p->n_blocks; i++)
			kp->wmap[i] = KV_NO_BLOCK;
		for (i = 0; i < z.n_wslots; i++)
			kp->wfree_ids[i] = z.n_wslots - 1 - i;
		kp->n_wfree = z.n_wslots;
	}
	*out = kp;
	return QERR_OK;
fail:
	kv_pool_free(&kp);
	return rc;
}

int kv_pool_new(const kv_params *p, kv_pool **out)
{
	return pool_new(p, NULL, out);
}

int kv_pool_new_named(const kv_params *p, const char *name, kv_pool **out)
{
	if (!name || name[0] != '/' || strlen(name) > 200)
		return qerr_fail(QERR_ARG, "kv_pool_new_named: bad name");
	return pool_new(p, name, out);
}

/* Field-by-field check of a mapped header against what its params imply;
 * the generic part (magic, version, size <= file) was checked by shm. */
static int header_check(const kv_shm_header *h, uint64_t mapped,
			kv_params *out)
{
	kv_params p;
	kv_sizes z;
	int rc;

	if (h->n_layers > INT32_MAX || h->kv_dim > INT32_MAX ||
	    h->block_tokens > INT32_MAX || h->dtype > INT32_MAX ||
	    h->win_pattern > INT32_MAX)
		return qerr_fail(QERR_FORMAT, "kv region: parameter too large");
	p.n_layers = (int)h->n_layers;
	p.kv_dim = (int)h->kv_dim;
	p.block_tokens = (int)h->block_tokens;
	p.n_blocks = h->n_blocks;
	p.dtype = (int)h->dtype;
	p.win_pattern = (int)h->win_pattern;
	p.win_blocks = h->win_blocks;
	rc = sizes_of(&p, &z);
	if (rc) {
		char why[256]; /* qerr_fail must not format its own buffer */

		snprintf(why, sizeof(why), "%s", qerr_detail());
		return qerr_fail(QERR_FORMAT, "kv region: bad params (%s)",
				 why);
	}
	if (h->reserved != 0 || h->block_bytes != z.block_bytes ||
	    h->block_stride != z.stride || h->data_offset != KV_DATA_OFFSET ||
	    h->h.size != z.total || mapped != z.total)
		return qerr_fail(QERR_FORMAT,
				 "kv region: header inconsistent (size %llu, "
				 "block %llu/%llu, data at %llu; params imply "
				 "%llu, %llu/%llu, %u)",
				 (unsigned long long)h->h.size,
				 (unsigned long long)h->block_bytes,
				 (unsigned long long)h->block_stride,
				 (unsigned long long)h->data_offset,
				 (unsigned long long)z.total,
				 (unsigned long long)z.block_bytes,
				 (unsigned long long)z.stride, KV_DATA_OFFSET);
	*out = p;
	return QERR_OK;
}

static int attach_ro(int fd, const char *name, kv_pool **out)
{
	kv_pool *kp = NULL;
	kv_sizes z;
	int rc;

	if (!out)
		return qerr_fail(QERR_ARG, "kv_pool_attach_ro: NULL out");
	*out = NULL;
	kp = calloc(1, sizeof(*kp));
	if (!kp)
		return qerr_fail(QERR_NOMEM, "kv_pool_attach_ro: pool struct");
	kp->readonly = 1;
	rc = name ? shm_map_name_ro(name, KV_MAGIC, KV_VERSION, 0, &kp->region)
		  : shm_map_fd_ro(fd, KV_MAGIC, KV_VERSION, 0, &kp->region);
	if (rc)
		goto fail;
	if (kp->region.size < sizeof(kv_shm_header)) {
		rc = qerr_fail(QERR_FORMAT, "kv region: %llu bytes, too short",
			       (unsigned long long)kp->region.size);
		goto fail;
	}
	rc = header_check(kp->region.base, kp->region.size, &kp->params);
	if (rc)
		goto fail;
	(void)sizes_of(&kp->params, &z);
	layout(kp, &z);
	*out = kp;
	return QERR_OK;
fail:
	kv_pool_free(&kp);
	return rc;
}

int kv_pool_attach_ro(int fd, kv_pool **out)
{
	return attach_ro(fd, NULL, out);
}

int kv_pool_attach_name_ro(const char *name, kv_pool **out)
{
	if (!name || name[0] != '/')
		return qerr_fail(QERR_ARG, "kv_pool_attach_name_ro: bad name");
	return attach_ro(-1, name, out);
}

int kv_region_owner(const void *head, size_t len, shm_owner *out)
{
	kv_shm_header h;

	if (!head || !out)
		return qerr_fail(QERR_ARG, "kv_region_owner: NULL argument");
	if (len < sizeof(h))
		return qerr_fail(QERR_FORMAT, "kv region: short header");
	memcpy(&h, head, sizeof(h));
	if (h.h.magic != KV_MAGIC)
		return qerr_fail(QERR_FORMAT, "kv region: bad magic");
	if (h.h.version != KV_VERSION)
		return qerr_fail(QERR_UNSUPPORTED, "kv region: version %u",
				 h.h.version);
	*out = h.owner;
	return QERR_OK;
}

int kv_region_stale(const char *name, const void *head, size_t len,
		    void *arg)
{
	shm_owner o;

	(void)name;
	(void)arg;
	if (kv_region_owner(head, len, &o) != QERR_OK) {
		qerr_clear();
		return 0;
	}
	return !shm_owner_alive(&o);
}

const char *kv_pool_name(const kv_pool *p)
{
	return p->shm_name;
}

int kv_pool_link(kv_pool *p, int slot, kv_pool *foreign)
{
	const kv_params *a = &p->params, *b;

	if (slot < 1 || slot >= KV_MAX_SLOTS || !foreign || foreign == p)
		return qerr_fail(QERR_ARG, "kv_pool_link: bad slot %d", slot);
	b = &foreign->params;
	/* window slot counts may differ: each pool maps its own blocks */
	if (a->n_layers != b->n_layers || a->kv_dim != b->kv_dim ||
	    a->block_tokens != b->block_tokens || a->dtype != b->dtype ||
	    a->win_pattern != b->win_pattern)
		return qerr_fail(QERR_ARG, "kv_pool_link: pools differ (layers "
				 "%d/%d, kv_dim %d/%d, block %d/%d, dtype "
				 "%d/%d, window pattern %d/%d)", a->n_layers,
				 b->n_layers, a->kv_dim, b->kv_dim,
				 a->block_tokens, b->block_tokens, a->dtype,
				 b->dtype, a->win_pattern, b->win_pattern);
	p->linked[slot] = foreign;
	return QERR_OK;
}

void kv_pool_unlink(kv_pool *p, int slot)
{
	if (slot >= 1 && slot < KV_MAX_SLOTS)
		p->linked[slot] = NULL;
}

int kv_seq_view(kv_seq *s, int slot, const uint32_t *blocks,
		uint32_t n_blocks, uint32_t n_tokens, uint32_t block_tokens)
{
	kv_seq_init(s);
	if (slot < 0 || slot >= KV_MAX_SLOTS || block_tokens < 1 ||
	    (uint64_t)n_blocks * block_tokens < n_tokens ||
	    (n_tokens + block_tokens - 1) / block_tokens != n_blocks)
		return qerr_fail(QERR_ARG, "kv_seq_view: %u blocks cannot hold "
				 "%u tokens of %u", n_blocks, n_tokens,
				 block_tokens);
	if (n_blocks) {
		s->blocks = malloc((size_t)n_blocks * sizeof(*s->blocks));
		if (!s->blocks)
			return qerr_fail(QERR_NOMEM, "kv_seq_view: table");
	}
	for (uint32_t i = 0; i < n_blocks; i++) {
		if (blocks[i] > KV_BLOCK_MASK) {
			kv_seq_free(NULL, s);
			return qerr_fail(QERR_ARG, "kv_seq_view: block id %u",
					 blocks[i]);
		}
		s->blocks[i] = KV_REF(slot, blocks[i]);
	}
	s->n_blocks = s->cap = n_blocks;
	s->n_tokens = n_tokens;
	return QERR_OK;
}

void kv_pool_free(kv_pool **pp)
{
	kv_pool *p;

	if (!pp || !*pp)
		return;
	p = *pp;
	shm_unmap(&p->region);
	if (p->shm_name)
		shm_unlink_name(p->shm_name);
	free(p->shm_name);
	free(p->ref);
	free(p->free_ids);
	free(p->wref);
	free(p->wfree_ids);
	free(p);
	*pp = NULL;
}

const kv_params *kv_pool_params(const kv_pool *p)
{
	return &p->params;
}

int kv_pool_readonly(const kv_pool *p)
{
	return p->readonly;
}

uint32_t kv_pool_free_blocks(const kv_pool *p)
{
	return p->n_free;
}

uint32_t kv_pool_free_win_slots(const kv_pool *p)
{
	return p->readonly ? 0 : p->n_wfree;
}

uint32_t kv_pool_win_slots(const kv_pool *p)
{
	return p->n_wslots;
}

uint32_t kv_block_refcount(const kv_pool *p, uint32_t block)
{
	if (p->readonly || block >= p->params.n_blocks)
		return 0;
	return p->ref[block];
}

void kv_pool_stats(const kv_pool *p, kv_stats *out)
{
	*out = p->stats;
}

int kv_pool_fd(const kv_pool *p)
{
	return p->region.fd;
}

uint64_t kv_pool_bytes(const kv_pool *p)
{
	return p->region.size;
}

int kv_layer_windowed(const kv_pool *p, int layer)
{
	int w = p->params.win_pattern;

	return w > 0 && layer % w != w - 1;
}

void *kv_k(const kv_pool *p, uint32_t block, int layer)
{
	int w;

	if (KV_REF_SLOT(block)) {
		p = p->linked[KV_REF_SLOT(block)];
		assert(p);
		block = KV_REF_BLOCK(block);
	}
	assert(block < p->params.n_blocks);
	assert(layer >= 0 && layer < p->params.n_layers);
	w = p->params.win_pattern;
	if (w > 0) {
		/* layers of a class in order: global l is the (l / w)-th
		 * global one, windowed l has l / w globals below it */
		if (layer % w != w - 1) {
			uint32_t slot = p->wmap[block];

			assert(slot < p->n_wslots); /* not released */
			return p->wdata + slot * p->wstride +
			       (size_t)(layer - layer / w) * 2 * p->half_bytes;
		}
		layer /= w;
	}
	return p->data + block * p->stride +
	       (size_t)layer * 2 * p->half_bytes;
}

void *kv_v(const kv_pool *p, uint32_t block, int layer)
{
	return (unsigned char *)kv_k(p, block, layer) + p->half_bytes;
}

void *kv_seq_k_row(const kv_pool *p, const kv_seq *s, int layer, uint32_t t)
{
	uint32_t b = (uint32_t)p->params.block_tokens;

	assert(t / b < s->n_blocks);
	return (unsigned char *)kv_k(p, s->blocks[t / b], layer) +
	       (size_t)(t % b) * p->row_bytes;
}

void *kv_seq_v_row(const kv_pool *p, const kv_seq *s, int layer, uint32_t t)
{
	uint32_t b = (uint32_t)p->params.block_tokens;

	assert(t / b < s->n_blocks);
	return (unsigned char *)kv_v(p, s->blocks[t / b], layer) +
	       (size_t)(t % b) * p->row_bytes;
}

/* Free list: a stack of ids. Callers check n_free first. */
static uint32_t block_alloc(kv_pool *p)
{
	uint32_t id;

	assert(p->n_free > 0);
	id = p->free_ids[--p->n_free];
	assert(p->ref[id] == 0);
	p->ref[id] = 1;
	p->stats.allocs++;
	if (++p->stats.in_use > p->stats.peak)
		p->stats.peak = p->stats.in_use;
	p->stats.held_bytes += p->full_bytes;
	if (p->wmap) {
		/* kv_seq_reserve checked the slots */
		assert(p->n_wfree > 0 && p->wref[id] == 0);
		p->wmap[id] = p->wfree_ids[--p->n_wfree];
		p->wref[id] = 1;
		p->stats.win_in_use++;
		p->stats.held_bytes += p->win_bytes;
	}
	return id;
}

/* One holder of block id stops seeing its window part. */
static void win_release(kv_pool *p, uint32_t id)
{
	if (!p->wmap)
		return;
	assert(id < p->params.n_blocks && p->wref[id] > 0);
	if (--p->wref[id] == 0) {
		p->wfree_ids[p->n_wfree++] = p->wmap[id];
		p->wmap[id] = KV_NO_BLOCK;
		p->stats.win_in_use--;
		p->stats.held_bytes -= p->win_bytes;
	}
}

static void block_release(kv_pool *p, uint32_t id)
{
	assert(id < p->params.n_blocks && p->ref[id] > 0);
	if (--p->ref[id] == 0) {
		/* every holder released its view of the window part first */
		assert(!p->wmap || p->wref[id] == 0);
		p->free_ids[p->n_free++] = id;
		p->stats.frees++;
		p->stats.in_use--;
		p->stats.held_bytes -= p->full_bytes;
	}
}

/* Releases s's references to block i (its window part if s sees it). */
static void seq_release(kv_pool *p, const kv_seq *s, uint32_t i)
{
	if (KV_REF_SLOT(s->blocks[i]))
		return; /* a linked pool's: not counted */
	if (i >= s->w_lo)
		win_release(p, s->blocks[i]);
	block_release(p, s->blocks[i]);
}

void kv_seq_init(kv_seq *s)
{
	s->blocks = NULL;
	s->n_blocks = 0;
	s->cap = 0;
	s->n_tokens = 0;
	s->w_lo = 0;
}

/* Blocks that hold committed rows. */
static uint32_t blocks_of(const kv_pool *p, uint32_t n_tokens)
{
	uint32_t b = (uint32_t)p->params.block_tokens;

	return n_tokens / b + (n_tokens % b != 0);
}

int kv_seq_fork(kv_pool *p, const kv_seq *src, kv_seq *dst)
{
	if (!src)
		return qerr_fail(QERR_ARG, "kv_seq_fork: bad arguments");
	return kv_seq_fork_prefix(p, src, src->n_tokens, dst);
}

int kv_seq_fork_prefix(kv_pool *p, const kv_seq *src, uint32_t n_tokens,
		       kv_seq *dst)
{
	uint32_t n, i;

	if (!p || !src || !dst || src == dst)
		return qerr_fail(QERR_ARG, "kv_seq_fork: bad arguments");
	kv_seq_init(dst);
	if (p->readonly)
		return qerr_fail(QERR_ARG, "kv_seq_fork: read-only pool");
	if (n_tokens > src->n_tokens)
		return qerr_fail(QERR_RANGE, "kv_seq_fork: prefix of %u tokens "
				 "of a sequence of %u", n_tokens, src->n_tokens);
	if (src->w_lo && n_tokens < src->n_tokens)
		return qerr_fail(QERR_ARG, "kv_seq_fork: a prefix of %u tokens "
				 "of a sequence that released the window rows "
				 "of its first %u blocks", n_tokens, src->w_lo);
	n = blocks_of(p, n_tokens);
	assert(n <= src->n_blocks);
	if (n) {
		dst->blocks = malloc((size_t)n * sizeof(*dst->blocks));
		if (!dst->blocks)
			return qerr_fail(QERR_NOMEM,
					 "kv_seq_fork: table of %u blocks", n);
		memcpy(dst->blocks, src->blocks, (size_t)n * sizeof(uint32_t));
		for (i = 0; i < n; i++) {
			if (KV_REF_SLOT(dst->blocks[i]))
				continue; /* a linked pool's: not counted */
			assert(p->ref[dst->blocks[i]] > 0 &&
			       p->ref[dst->blocks[i]] < UINT32_MAX);
			p->ref[dst->blocks[i]]++;
			if (p->wmap && i >= src->w_lo)
				p->wref[dst->blocks[i]]++;
		}
	}
	dst->n_blocks = dst->cap = n;
	dst->n_tokens = n_tokens;
	dst->w_lo = src->w_lo < n ? src->w_lo : n;
	p->stats.forks++;
	return QERR_OK;
}

/* Copies the first rows rows of every layer's K and V from block src to
 * block dst. */
static void copy_rows(kv_pool *p, uint32_t dst, uint32_t src, uint32_t rows)
{
	size_t n = (size_t)rows * p->row_bytes;
	int l;

	for (l = 0; l < p->params.n_layers; l++) {
		memcpy(kv_k(p, dst, l), kv_k(p, src, l), n);
		memcpy(kv_v(p, dst, l), kv_v(p, src, l), n);
	}
	p->stats.cow_bytes += 2 * (uint64_t)n * (uint64_t)p->params.n_layers;
}

int kv_seq_reserve(kv_pool *p, kv_seq *s, uint32_t n_new)
{
	uint32_t b, tail_rows, tail, need_blocks, n_fresh, n_alloc, i;
	uint64_t end;
	int cow;

	if (!p || !s)
		return qerr_fail(QERR_ARG, "kv_seq_reserve: NULL argument");
	if (p->readonly)
		return qerr_fail(QERR_ARG, "kv_seq_reserve: read-only pool");
	if (n_new == 0)
		return QERR_OK;
	b = (uint32_t)p->params.block_tokens;
	end = (uint64_t)s->n_tokens + n_new;
	if (end > UINT32_MAX)
		return qerr_fail(QERR_RANGE,
				 "kv_seq_reserve: %u + %u tokens overflow",
				 s->n_tokens, n_new);
	need_blocks = (uint32_t)(end / b + (end % b != 0));

	tail = s->n_tokens / b;
	tail_rows = s->n_tokens % b;
	/* a shared tail, or one in a linked (read-only) pool, is copied */
	cow = tail_rows != 0 && (KV_REF_SLOT(s->blocks[tail]) ||
				 p->ref[s->blocks[tail]] > 1);
	n_fresh = need_blocks > s->n_blocks ? need_blocks - s->n_blocks : 0;
	n_alloc = n_fresh + (uint32_t)cow;
	if (n_alloc > p->n_free)
		return qerr_fail(QERR_FULL,
				 "KV pool exhausted: need %u blocks, %u free",
				 n_alloc, p->n_free);
	if (p->wmap && n_alloc > p->n_wfree)
		return qerr_fail(QERR_FULL, "KV pool exhausted: need %u window "
				 "slots, %u free", n_alloc, p->n_wfree);
	if (need_blocks > s->cap) {
		/* Grow geometrically so decoding one token at a time is
		 * amortized O(1). */
		uint64_t cap = (uint64_t)s->cap * 2;
		uint32_t *t;

		if (cap < need_blocks)
			cap = need_blocks;
		if (cap < 4)
			cap = 4;
		if (cap > UINT32_MAX)
			cap = UINT32_MAX;
		t = realloc(s->blocks, (size_t)cap * sizeof(*t));
		if (!t)
			return qerr_fail(QERR_NOMEM,
					 "kv_seq_reserve: table of %llu blocks",
					 (unsigned long long)cap);
		s->blocks = t;
		s->cap = (uint32_t)cap;
	}
	/* From here nothing fails. */
	if (cow) {
		uint32_t old = s->blocks[tail], fresh = block_alloc(p);

		copy_rows(p, fresh, old, tail_rows);
		/* was > 1: stays allocated; s sees the tail's window part
		 * (drops stop before the block of the next row) */
		assert(tail >= s->w_lo);
		seq_release(p, s, tail);
		s->blocks[tail] = fresh;
		p->stats.cow++;
	}
	for (i = 0; i < n_fresh; i++)
		s->blocks[s->n_blocks++] = block_alloc(p);
	return QERR_OK;
}

uint32_t kv_seq_capacity(const kv_pool *p, const kv_seq *s)
{
	uint64_t c = (uint64_t)s->n_blocks * (uint64_t)p->params.block_tokens;

	return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

void kv_seq_commit(kv_seq *s, uint32_t n)
{
	assert(n <= UINT32_MAX - s->n_tokens);
	/* Without B only gross misuse is caught: rows and no table. */
	assert(n == 0 || s->n_blocks > 0);
	s->n_tokens += n;
}

void kv_seq_free(kv_pool *p, kv_seq *s)
{
	uint32_t i;

	if (!s)
		return;
	if (p && !p->readonly)
		for (i = 0; i < s->n_blocks; i++)
			seq_release(p, s, i);
	free(s->blocks);
	kv_seq_init(s);
}

uint32_t kv_seq_drop_window(kv_pool *p, kv_seq *s, int window)
{
	uint32_t b, end, i, n = 0;

	if (!p || !s || p->readonly || !p->wmap || window < 1 ||
	    (uint64_t)s->n_tokens + 1 <= (uint64_t)window)
		return 0;
	b = (uint32_t)p->params.block_tokens;
	end = (uint32_t)((uint64_t)s->n_tokens + 1 - (uint64_t)window) / b;
	if (end > s->n_blocks)
		end = s->n_blocks;
	for (i = s->w_lo; i < end; i++) {
		if (KV_REF_SLOT(s->blocks[i]))
			continue;
		win_release(p, s->blocks[i]);
		p->stats.win_drops++;
		n++;
	}
	if (end > s->w_lo)
		s->w_lo = end;
	return n;
}

