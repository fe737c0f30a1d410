/*
 * pfx — the prefix index (see pfx.h): a hash table of chain hashes of
 * full token blocks, each entry naming an owner and its depth, looked up
 * block by block and verified against the tokens. Callers: sc/ (the
 * in-process prefix cache), coordinator/roots.c (the cluster's).
 */
#include "sc/pfx.h"

#include <stdlib.h>
#include <string.h>

#include "qerr.h"

typedef struct node {
	struct node *next;   /* bucket chain */
	uint64_t h;          /* chain hash of blocks 0..depth */
	uint32_t depth;
	void *owner;
	const int32_t *tokens;
} node;

struct pfx {
	uint32_t B;
	node **bucket;       /* (n_buckets), a power of two */
	size_t n_buckets, n_nodes;
};

static uint64_t hash_mask = UINT64_MAX;

void pfx_test_hash_mask(uint64_t mask)
{
	hash_mask = mask;
}

/* h_d from h_{d-1} and block d's tokens (FNV-1a over the tokens' bytes,
 * then a splitmix64 finalizer so nearby chains spread over buckets). */
static uint64_t chain(uint64_t prev, const int32_t *t, uint32_t B)
{
	uint64_t h = prev ^ 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < B; i++) {
		uint32_t v = (uint32_t)t[i];

		for (int k = 0; k < 4; k++) {
			h ^= (v >> (8 * k)) & 0xff;
			h *= 0x100000001b3ull;
		}
	}
	h += 0x9e3779b97f4a7c15ull;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h & hash_mask;
}

int pfx_new(uint32_t block_tokens, pfx **out)
{
	pfx *p;

	*out = NULL;
	if (block_tokens < 1)
		return qerr_fail(QERR_ARG, "prefix index: block_tokens 0");
	if (!(p = calloc(1, sizeof(*p))) ||
	    !(p->bucket = calloc(64, sizeof(*p->bucket)))) {
		free(p);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	p->B = block_tokens;
	p->n_buckets = 64;
	*out = p;
	return 0;
}

void pfx_free(pfx **pp)
{
	pfx *p = *pp;

	if (!p)
		return;
	for (size_t i = 0; i < p->n_buckets; i++)
		for (node *n = p->bucket[i], *nx; n; n = nx) {
			nx = n->next;
			free(n);
		}
	free(p->bucket);
	free(p);
	*pp = NULL;
}

size_t pfx_blocks(const pfx *p)
{
	return p->n_nodes;
}

/* Doubles the table when it is over two nodes a bucket (no failure: a
 * failed growth keeps the old table). */
static void grow(pfx *p)
{
	size_t nb = p->n_buckets * 2;
	node **b;

	if (p->n_nodes <= 2 * p->n_buckets || !(b = calloc(nb, sizeof(*b))))
		return;
	for (size_t i = 0; i < p->n_buckets; i++)
		for (node *n = p->bucket[i], *nx; n; n = nx) {
			nx = n->next;
			n->next = b[n->h & (nb - 1)];
			b[n->h & (nb - 1)] = n;
		}
	free(p->bucket);
	p->bucket = b;
	p->n_buckets = nb;
}

int pfx_add(pfx *p, void *owner, const int32_t *tokens, size_t n)
{
	size_t full = n / p->B;
	node **made;
	uint64_t h = 0;

	if (!full)
		return 0;
	if (!(made = malloc(full * sizeof(*made))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	for (size_t d = 0; d < full; d++)
		if (!(made[d] = malloc(sizeof(node)))) {
			while (d--)
				free(made[d]);
			free(made);
			return qerr_fail(QERR_NOMEM, "out of memory");
		}
	for (size_t d = 0; d < full; d++) {
		node *x = made[d];
		size_t b;

		h = chain(h, tokens + d * p->B, p->B);
		x->h = h;
		x->depth = (uint32_t)d;
		x->owner = owner;
		x->tokens = tokens;
		b = h & (p->n_buckets - 1);
		x->next = p->bucket[b];
		p->bucket[b] = x;
		p->n_nodes++;
	}
	free(made);
	grow(p);
	return 0;
}

void pfx_remove(pfx *p, void *owner, const int32_t *tokens, size_t n)
{
	size_t full = n / p->B;
	uint64_t h = 0;

	for (size_t d = 0; d < full; d++) {
		node **pp;

		h = chain(h, tokens + d * p->B, p->B);
		for (pp = &p->bucket[h & (p->n_buckets - 1)]; *pp;
		     pp = &(*pp)->next)
			if ((*pp)->owner == owner && (*pp)->depth == d) {
				node *x = *pp;

				*pp = x->next;
				free(x);
				p->n_nodes--;
				break;
			}
	}
}

static int has(void *const *v, size_t n, const void *x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

size_t pfx_longest(const pfx *p, const int32_t *tokens, size_t n,
		   pfx_visit_fn visit, void *arg, void **best)
{
	size_t full = n / p->B, longest = 0;
	/* owners accepted at the previous depth (their earlier blocks are
	 * verified) and at this one */
	void **prev = NULL, **cur = NULL;
	size_t n_prev = 0, n_cur = 0, cap = 0;
	uint64_t h = 0;

	if (best)
		*best = NULL;
	for (size_t d = 0; d < full; d++) {
		size_t shared = (d + 1) * p->B;
		void **t;

		h = chain(h, tokens + d * p->B, p->B);
		n_cur = 0;
		for (node *x = p->bucket[h & (p->n_buckets - 1)]; x;
		     x = x->next) {
			size_t from;

			if (x->h != h || x->depth != d || has(cur, n_cur, x->owner))
				continue;
			/* verify: block d only when its earlier blocks were
			 * verified at depth d - 1, else all of them */
			from = has(prev, n_prev, x->owner) ? d * p->B : 0;
			if (memcmp(x->tokens + from, tokens + from,
				   (shared - from) * sizeof(*tokens)))
				continue;
			if (visit && !visit(arg, x->owner, shared))
				continue;
			if (n_cur == cap) {
				size_t nc = cap ? 2 * cap : 8;
				void **a = realloc(prev, nc * sizeof(*a));
				void **b2;

				if (!a)
					goto out;
				prev = a;
				if (!(b2 = realloc(cur, nc * sizeof(*b2))))
					goto out;
				cur = b2;
				cap = nc;
			}
			cur[n_cur++] = x->owner;
		}
		if (!n_cur)
			break;
		longest = shared;
		if (best)
			*best = cur[0];
		t = prev;
		prev = cur;
		cur = t;
		n_prev = n_cur;
	}
out:
	free(prev);
	free(cur);
	return longest;
}
