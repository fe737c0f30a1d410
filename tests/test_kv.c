/*
 * Tests for kv (paged KV pool, forks, copy-on-write) and shm (regions).
 *
 * Most pool behaviour is driven by a table of named scripts: each op
 * (append, fork, free, expected exhaustion) states the exact free-block
 * count and copy-on-write count it must leave. After every op the harness
 * recomputes every block's refcount from the live page tables and compares
 * it with the pool, and reads back every token of every live sequence:
 * each append writes values derived from (append tag, token, layer, K/V,
 * dim), so a sequence reading a sibling's rows is caught. Every script
 * runs for f32 and f16 and must end with the pool fully free.
 */
#include "infer/kv.h"
#include "qerr.h"
#include "infer/shm.h"
#include "format/ggml.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

/* ---- harness ---------------------------------------------------------- */

#define MAX_SEQ 16
#define N_LAYERS 3
#define KV_DIM 5 /* odd on purpose: rows not multiples of 8 bytes */
#define KV_DIM_Q8 64 /* q8_0: two blocks, 68 bytes, not a multiple of 8 */

typedef struct {
	kv_pool *p;
	kv_seq s[MAX_SEQ];
	int live[MAX_SEQ];
	uint32_t *tag[MAX_SEQ]; /* [n_tokens]: tag of the append that wrote */
	uint32_t next_tag;
	size_t es; /* element bytes; 1: a q8_0 row seen as its bytes */
	int units; /* elements (bytes) per row */
} sim;

static uint32_t val(uint32_t tag, uint32_t t, int l, int kv, int d)
{
	uint32_t x = tag * 0x9E3779B1u ^ t * 0x85EBCA77u ^
		     (uint32_t)l * 0xC2B2AE3Du ^ (uint32_t)kv * 0x27D4EB2Fu ^
		     (uint32_t)d * 0x165667B1u;

	x ^= x >> 15;
	x *= 0x2C1B3C6Du;
	x ^= x >> 12;
	x *= 0x297A2D39u;
	x ^= x >> 15;
	return x;
}

static void put(void *row, size_t es, int d, uint32_t v)
{
	if (es == 4)
		((uint32_t *)row)[d] = v;
	else if (es == 2)
		((uint16_t *)row)[d] = (uint16_t)v;
	else
		((uint8_t *)row)[d] = (uint8_t)v;
}

static uint32_t get(const void *row, size_t es, int d)
{
	return es == 4 ? ((const uint32_t *)row)[d]
	       : es == 2 ? ((const uint16_t *)row)[d]
			 : ((const uint8_t *)row)[d];
}

static uint32_t expect_val(size_t es, uint32_t v)
{
	return es == 4 ? v : es == 2 ? (uint16_t)v : (uint8_t)v;
}

/* kv_params.win_pattern of the scripts' pools (2: layers 0 and 2 in
 * window parts, layer 1 in the blocks) */
static int sim_win_pattern;

static void sim_new(sim *m, int block_tokens, uint32_t n_blocks, int dtype)
{
	int kvd = dtype == KV_Q8_0 ? KV_DIM_Q8 : KV_DIM;
	kv_params kp = {N_LAYERS, kvd, block_tokens, n_blocks, dtype,
			sim_win_pattern, 0};
	int i;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < MAX_SEQ; i++)
		kv_seq_init(&m->s[i]);
	assert_int_equal(kv_pool_new(&kp, &m->p), QERR_OK);
	/* the pool moves rows as bytes: a q8_0 row is checked byte by byte */
	m->es = dtype == KV_Q8_0 ? 1 : kv_row_bytes(dtype, 1);
	m->units = (int)(kv_row_bytes(dtype, kvd) / m->es);
}

/* Writes n new tokens (already reserved) of seq i with a fresh tag. */
static void sim_write(sim *m, int i, uint32_t n)
{
	kv_seq *s = &m->s[i];
	uint32_t tag = ++m->next_tag, t;
	int l, d;

	m->tag[i] = realloc(m->tag[i], (s->n_tokens + n + 1) * sizeof(uint32_t));
	assert_non_null(m->tag[i]);
	for (t = s->n_tokens; t < s->n_tokens + n; t++) {
		for (l = 0; l < N_LAYERS; l++) {
			void *k = kv_seq_k_row(m->p, s, l, t);
			void *v = kv_seq_v_row(m->p, s, l, t);

			for (d = 0; d < m->units; d++) {
				put(k, m->es, d, val(tag, t, l, 0, d));
				put(v, m->es, d, val(tag, t, l, 1, d));
			}
		}
		m->tag[i][t] = tag;
	}
}

/* Refcounts recomputed from the live tables; every token read back. */
static void sim_check(sim *m, const char *where)
{
	const kv_params *kp = kv_pool_params(m->p);
	uint32_t *count = calloc(kp->n_blocks, sizeof(uint32_t));
	uint32_t b, used = 0, t;
	kv_stats st;
	int i, l, d;

	assert_non_null(count);
	for (i = 0; i < MAX_SEQ; i++) {
		if (!m->live[i])
			continue;
		assert_true(m->s[i].n_tokens <= kv_seq_capacity(m->p, &m->s[i]));
		for (b = 0; b < m->s[i].n_blocks; b++)
			count[m->s[i].blocks[b]]++;
	}
	for (b = 0; b < kp->n_blocks; b++) {
		if (kv_block_refcount(m->p, b) != count[b])
			fail_msg("%s: block %u refcount %u, tables hold %u",
				 where, b, kv_block_refcount(m->p, b), count[b]);
		used += count[b] != 0;
	}
	assert_int_equal(kv_pool_free_blocks(m->p), kp->n_blocks - used);
	kv_pool_stats(m->p, &st);
	assert_int_equal(st.in_use, used);
	/* nothing dropped: every held block has its window part */
	assert_int_equal(st.win_in_use, sim_win_pattern ? used : 0);
	assert_true(st.peak >= st.in_use);
	assert_int_equal(st.allocs - st.frees, used);
	free(count);

	for (i = 0; i < MAX_SEQ; i++) {
		if (!m->live[i])
			continue;
		for (t = 0; t < m->s[i].n_tokens; t++)
			for (l = 0; l < N_LAYERS; l++) {
				const void *k = kv_seq_k_row(m->p, &m->s[i], l, t);
				const void *v = kv_seq_v_row(m->p, &m->s[i], l, t);
				uint32_t tag = m->tag[i][t];

				for (d = 0; d < m->units; d++) {
					uint32_t wk = expect_val(m->es, val(tag, t, l, 0, d));
					uint32_t wv = expect_val(m->es, val(tag, t, l, 1, d));

					if (get(k, m->es, d) != wk ||
					    get(v, m->es, d) != wv)
						fail_msg("%s: seq %d token %u layer %d "
							 "dim %d: wrong data",
							 where, i, t, l, d);
				}
			}
	}
}

static void sim_append(sim *m, int i, uint32_t n)
{
	m->live[i] = 1;
	assert_int_equal(kv_seq_reserve(m->p, &m->s[i], n), QERR_OK);
	assert_true(kv_seq_capacity(m->p, &m->s[i]) >= m->s[i].n_tokens + n);
	sim_write(m, i, n);
	kv_seq_commit(&m->s[i], n);
}

static void sim_fork(sim *m, int dst, int src)
{
	assert_false(m->live[dst]);
	m->live[src] = 1;
	assert_int_equal(kv_seq_fork(m->p, &m->s[src], &m->s[dst]), QERR_OK);
	m->live[dst] = 1;
	m->tag[dst] = malloc((m->s[src].n_tokens + 1) * sizeof(uint32_t));
	assert_non_null(m->tag[dst]);
	if (m->s[src].n_tokens)
		memcpy(m->tag[dst], m->tag[src],
		       m->s[src].n_tokens * sizeof(uint32_t));
}

static void sim_free(sim *m, int i)
{
	kv_seq_free(m->p, &m->s[i]);
	assert_null(m->s[i].blocks);
	assert_int_equal(m->s[i].n_blocks, 0);
	assert_int_equal(m->s[i].n_tokens, 0);
	m->live[i] = 0;
	free(m->tag[i]);
	m->tag[i] = NULL;
}

/* Frees everything; the pool must be fully free. */
static void sim_end(sim *m)
{
	const kv_params *kp = kv_pool_params(m->p);
	kv_stats st;
	uint32_t b;
	int i;

	for (i = 0; i < MAX_SEQ; i++)
		if (m->live[i])
			sim_free(m, i);
		else
			free(m->tag[i]);
	assert_int_equal(kv_pool_free_blocks(m->p), kp->n_blocks);
	for (b = 0; b < kp->n_blocks; b++)
		assert_int_equal(kv_block_refcount(m->p, b), 0);
	kv_pool_stats(m->p, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.allocs, st.frees);
	assert_true(st.peak <= kp->n_blocks);
	kv_pool_free(&m->p);
	assert_null(m->p);
}

/* ---- scripted scenarios ----------------------------------------------- */

enum { OP_END, OP_APPEND, OP_FORK, OP_FREE, OP_FULL, OP_RC, OP_SAME, OP_DIFF };

typedef struct {
	int op;
	int a;
	uint32_t b;   /* n / src / block index (a: the sequence) */
	uint32_t c, d; /* want free, want cow / want refcount / need, have */
} op_t;

/* Every mutating op states the free blocks and total COW copies after it. */
#define APPEND(s, n, fr, cw) {OP_APPEND, s, n, fr, cw}
#define FORK(dst, src, fr, cw) {OP_FORK, dst, src, fr, cw}
#define FREE(s, fr, cw) {OP_FREE, s, 0, fr, cw}
/* reserve(s, n) must fail: "need NEED blocks, HAVE free", nothing changes */
#define FULL(s, n, need, have) {OP_FULL, s, n, need, have}
#define RC(s, i, want) {OP_RC, s, i, want, 0}
#define SAME(s1, s2, i) {OP_SAME, s1, s2, (uint32_t)(i), 0}
#define DIFF(s1, s2, i) {OP_DIFF, s1, s2, (uint32_t)(i), 0}

typedef struct {
	const char *name;
	int block_tokens;
	uint32_t n_blocks;
	op_t ops[48];
} scenario;

static const scenario scenarios[] = {
	{"prefill 20 tokens, B=16", 16, 64, {
		APPEND(0, 20, 62, 0), RC(0, 0, 1), RC(0, 1, 1),
		APPEND(0, 12, 62, 0), APPEND(0, 1, 61, 0)}},
	{"fork shares every block, fork appends into shared partial tail",
	 16, 64, {
		APPEND(0, 20, 62, 0), FORK(1, 0, 62, 0),
		RC(0, 0, 2), RC(0, 1, 2), SAME(0, 1, 0), SAME(0, 1, 1),
		APPEND(1, 1, 61, 1), RC(0, 1, 1), RC(1, 1, 1), RC(1, 0, 2),
		SAME(0, 1, 0), DIFF(0, 1, 1),
		APPEND(1, 1, 61, 1), APPEND(0, 1, 61, 1)}},
	{"parent appends first, then fork writes in place", 16, 64, {
		APPEND(0, 20, 62, 0), FORK(1, 0, 62, 0),
		APPEND(0, 3, 61, 1), RC(1, 1, 1), RC(0, 1, 1),
		APPEND(1, 3, 61, 1), APPEND(0, 13, 60, 1), DIFF(0, 1, 1)}},
	{"fork appends first, then parent writes in place", 16, 64, {
		APPEND(0, 20, 62, 0), FORK(1, 0, 62, 0),
		APPEND(1, 3, 61, 1), APPEND(0, 3, 61, 1),
		APPEND(1, 20, 60, 1), APPEND(0, 20, 59, 1)}},
	{"append at a block boundary allocates, never copies", 16, 64, {
		APPEND(0, 16, 63, 0), FORK(1, 0, 63, 0),
		APPEND(1, 1, 62, 0), APPEND(0, 1, 61, 0),
		RC(0, 0, 2), RC(0, 1, 1), RC(1, 1, 1), SAME(0, 1, 0),
		DIFF(0, 1, 1)}},
	{"append that fills the copied tail exactly, then crosses", 16, 64, {
		APPEND(0, 10, 63, 0), FORK(1, 0, 63, 0),
		APPEND(1, 6, 62, 1), RC(1, 0, 1), APPEND(1, 1, 61, 1),
		APPEND(0, 6, 61, 1), APPEND(0, 1, 60, 1)}},
	{"fork of a fork", 16, 64, {
		APPEND(0, 20, 62, 0), FORK(1, 0, 62, 0), FORK(2, 1, 62, 0),
		RC(2, 0, 3), RC(2, 1, 3),
		APPEND(2, 1, 61, 1), APPEND(1, 1, 60, 2),
		APPEND(0, 1, 60, 2), RC(0, 0, 3), RC(0, 1, 1),
		FREE(1, 61, 2), RC(0, 0, 2), FREE(0, 62, 2), RC(2, 0, 1)}},
	{"fork of a fork after divergence", 16, 64, {
		APPEND(0, 20, 62, 0), FORK(1, 0, 62, 0),
		APPEND(1, 5, 61, 1), FORK(2, 1, 61, 1),
		RC(2, 0, 3), RC(2, 1, 2), RC(0, 1, 1),
		APPEND(2, 1, 60, 2), APPEND(1, 1, 60, 2),
		FREE(0, 61, 2), RC(1, 0, 2)}},
	{"block size 1: nothing is ever copied", 1, 64, {
		APPEND(0, 5, 59, 0), FORK(1, 0, 59, 0),
		APPEND(1, 1, 58, 0), APPEND(0, 1, 57, 0),
		RC(0, 4, 2), RC(1, 5, 1), RC(0, 5, 1), FORK(2, 1, 57, 0),
		RC(2, 0, 3), RC(2, 5, 2),
		FREE(1, 57, 0), RC(2, 5, 1), FREE(0, 58, 0),
		APPEND(2, 3, 55, 0), FREE(2, 64, 0)}},
	{"many forks of one root: 12 copies, last reference writes in place",
	 16, 64, {
		APPEND(0, 20, 62, 0),
		FORK(1, 0, 62, 0), FORK(2, 0, 62, 0), FORK(3, 0, 62, 0),
		FORK(4, 0, 62, 0), FORK(5, 0, 62, 0), FORK(6, 0, 62, 0),
		FORK(7, 0, 62, 0), FORK(8, 0, 62, 0), FORK(9, 0, 62, 0),
		FORK(10, 0, 62, 0), FORK(11, 0, 62, 0), FORK(12, 0, 62, 0),
		RC(0, 0, 13), RC(0, 1, 13),
		APPEND(1, 1, 61, 1), APPEND(2, 1, 60, 2), APPEND(3, 1, 59, 3),
		APPEND(4, 1, 58, 4), APPEND(5, 1, 57, 5), APPEND(6, 1, 56, 6),
		APPEND(7, 1, 55, 7), APPEND(8, 1, 54, 8), APPEND(9, 1, 53, 9),
		APPEND(10, 1, 52, 10), APPEND(11, 1, 51, 11),
		APPEND(12, 1, 50, 12), RC(0, 1, 1), RC(12, 0, 13),
		APPEND(0, 1, 50, 12), SAME(0, 12, 0),
		APPEND(5, 11, 50, 12), APPEND(5, 1, 49, 12)}},
	{"root freed first: the fork owns the last reference", 16, 64, {
		APPEND(0, 20, 62, 0), FORK(1, 0, 62, 0), FREE(0, 62, 0),
		RC(1, 1, 1), APPEND(1, 1, 62, 0)}},
	{"multi-block append from a shared partial tail", 16, 64, {
		APPEND(0, 10, 63, 0), FORK(1, 0, 63, 0),
		APPEND(1, 40, 59, 1), RC(0, 0, 1), RC(1, 3, 1),
		APPEND(0, 40, 56, 1)}},
	{"zero-token reserve on a shared tail copies nothing", 16, 64, {
		APPEND(0, 10, 63, 0), FORK(1, 0, 63, 0),
		APPEND(1, 0, 63, 0), RC(1, 0, 2), APPEND(0, 0, 63, 0)}},
	{"fork of an empty root", 16, 64, {
		FORK(1, 0, 64, 0), APPEND(1, 3, 63, 0), APPEND(0, 3, 62, 0),
		DIFF(0, 1, 0)}},
	{"exhausted by the copy: nothing changes, then succeeds", 4, 6, {
		APPEND(0, 10, 3, 0), FORK(1, 0, 3, 0), FORK(2, 0, 3, 0),
		APPEND(1, 10, 0, 1), FULL(2, 1, 1, 0), FULL(0, 1, 1, 0),
		FREE(1, 3, 1), APPEND(2, 1, 2, 2), RC(0, 2, 1),
		APPEND(0, 1, 2, 2)}},
	{"exhausted by fresh blocks: nothing changes, then succeeds", 4, 4, {
		APPEND(0, 8, 2, 0), FULL(0, 9, 3, 2), FULL(0, UINT32_MAX - 7, 0, 0),
		APPEND(0, 6, 0, 0), FULL(0, 3, 1, 0), FORK(1, 0, 0, 0),
		FULL(1, 1, 1, 0), FREE(0, 0, 0), APPEND(1, 1, 0, 0),
		APPEND(1, 1, 0, 0), FULL(1, 1, 1, 0), FREE(1, 4, 0),
		APPEND(0, 16, 0, 0)}},
	{"exhausted by copy plus fresh blocks", 4, 5, {
		APPEND(0, 6, 3, 0), FORK(1, 0, 3, 0), FULL(1, 11, 4, 3),
		APPEND(1, 10, 0, 1), FREE(0, 1, 1), FREE(1, 5, 1)}},
};

typedef struct {
	kv_seq s;
	uint32_t blocks[64];
	uint32_t *refs;
	uint32_t n_free;
	kv_stats st;
} snapshot;

static void snap(sim *m, int i, snapshot *sn)
{
	uint32_t nb = kv_pool_params(m->p)->n_blocks, b;

	sn->s = m->s[i];
	assert_true(m->s[i].n_blocks <= 64);
	if (m->s[i].n_blocks)
		memcpy(sn->blocks, m->s[i].blocks,
		       m->s[i].n_blocks * sizeof(uint32_t));
	sn->refs = malloc(nb * sizeof(uint32_t));
	assert_non_null(sn->refs);
	for (b = 0; b < nb; b++)
		sn->refs[b] = kv_block_refcount(m->p, b);
	sn->n_free = kv_pool_free_blocks(m->p);
	kv_pool_stats(m->p, &sn->st);
}

static void snap_same(sim *m, int i, snapshot *sn)
{
	uint32_t nb = kv_pool_params(m->p)->n_blocks, b;
	kv_stats st;

	assert_ptr_equal(m->s[i].blocks, sn->s.blocks);
	assert_int_equal(m->s[i].n_blocks, sn->s.n_blocks);
	assert_int_equal(m->s[i].cap, sn->s.cap);
	assert_int_equal(m->s[i].n_tokens, sn->s.n_tokens);
	if (m->s[i].n_blocks)
		assert_memory_equal(m->s[i].blocks, sn->blocks,
				    m->s[i].n_blocks * sizeof(uint32_t));
	for (b = 0; b < nb; b++)
		assert_int_equal(kv_block_refcount(m->p, b), sn->refs[b]);
	assert_int_equal(kv_pool_free_blocks(m->p), sn->n_free);
	kv_pool_stats(m->p, &st);
	assert_memory_equal(&st, &sn->st, sizeof(st));
	free(sn->refs);
}

static void run_scenario(const scenario *sc, int dtype)
{
	char where[256];
	sim m;
	const op_t *o;
	kv_stats st;
	int k;

	sim_new(&m, sc->block_tokens, sc->n_blocks, dtype);
	for (k = 0, o = sc->ops; o->op != OP_END; o++, k++) {
		snprintf(where, sizeof(where), "%s [%s] op %d", sc->name,
			 kv_dtype_name(dtype), k);
		switch (o->op) {
		case OP_APPEND:
			sim_append(&m, o->a, (uint32_t)o->b);
			break;
		case OP_FORK:
			sim_fork(&m, o->a, o->b);
			break;
		case OP_FREE:
			sim_free(&m, o->a);
			break;
		case OP_FULL: {
			snapshot sn;
			char want[128];

			m.live[o->a] = 1;
			snap(&m, o->a, &sn);
			qerr_clear();
			if (o->b > UINT32_MAX / 2) { /* token count overflow */
				assert_int_equal(kv_seq_reserve(m.p, &m.s[o->a],
								 (uint32_t)o->b),
						 QERR_RANGE);
			} else {
				assert_int_equal(kv_seq_reserve(m.p, &m.s[o->a],
								 (uint32_t)o->b),
						 QERR_FULL);
				snprintf(want, sizeof(want),
					 "KV pool exhausted: need %u blocks, "
					 "%u free",
					 o->c, o->d);
				assert_string_equal(qerr_detail(), want);
			}
			snap_same(&m, o->a, &sn);
			break;
		}
		case OP_RC:
			if (kv_block_refcount(m.p, m.s[o->a].blocks[o->b]) != o->c)
				fail_msg("%s: seq %d block %u refcount %u, want %u",
					 where, o->a, o->b,
					 kv_block_refcount(m.p,
							   m.s[o->a].blocks[o->b]),
					 o->c);
			continue;
		case OP_SAME:
		case OP_DIFF:
			if ((m.s[o->a].blocks[o->c] == m.s[o->b].blocks[o->c]) !=
			    (o->op == OP_SAME))
				fail_msg("%s: seqs %d and %u block %u should %s",
					 where, o->a, o->b, o->c,
					 o->op == OP_SAME ? "be shared"
							  : "differ");
			continue;
		}
		sim_check(&m, where);
		if (o->op != OP_FULL) {
			kv_pool_stats(m.p, &st);
			if (kv_pool_free_blocks(m.p) != o->c || st.cow != o->d)
				fail_msg("%s: free %u cow %llu, want free %u "
					 "cow %u",
					 where, kv_pool_free_blocks(m.p),
					 (unsigned long long)st.cow, o->c, o->d);
		}
	}
	sim_end(&m);
}

static void test_scenario(void **state)
{
	const scenario *sc = *state;

	run_scenario(sc, KV_F32);
	run_scenario(sc, KV_F16);
	run_scenario(sc, KV_Q8_0);
	/* the same scripts on a pool split by layer class */
	sim_win_pattern = 2;
	run_scenario(sc, KV_F16);
	run_scenario(sc, KV_Q8_0);
	sim_win_pattern = 0;
}

/* ---- parameters and layout -------------------------------------------- */

static const struct {
	const char *name;
	kv_params p;
	int want;
} param_cases[] = {
	{"ok f32", {2, 8, 16, 4, KV_F32, 0, 0}, QERR_OK},
	{"ok f16, B=1, one block", {1, 1, 1, 1, KV_F16, 0, 0}, QERR_OK},
	{"zero layers", {0, 8, 16, 4, KV_F32, 0, 0}, QERR_RANGE},
	{"negative layers", {-1, 8, 16, 4, KV_F32, 0, 0}, QERR_RANGE},
	{"zero kv_dim", {2, 0, 16, 4, KV_F32, 0, 0}, QERR_RANGE},
	{"zero block_tokens", {2, 8, 0, 4, KV_F32, 0, 0}, QERR_RANGE},
	{"negative block_tokens", {2, 8, -16, 4, KV_F32, 0, 0}, QERR_RANGE},
	{"zero blocks", {2, 8, 16, 0, KV_F32, 0, 0}, QERR_RANGE},
	{"n_blocks is the no-block id", {2, 8, 16, UINT32_MAX, KV_F32, 0, 0},
	 QERR_RANGE},
	{"ok q8_0", {2, 64, 16, 4, KV_Q8_0, 0, 0}, QERR_OK},
	{"q8_0 kv_dim not whole blocks", {2, 48, 16, 4, KV_Q8_0, 0, 0}, QERR_ARG},
	{"dtype 3", {2, 8, 16, 4, 3, 0, 0}, QERR_ARG},
	{"dtype -1", {2, 8, 16, 4, -1, 0, 0}, QERR_ARG},
	{"ok windows (pattern 3)", {4, 8, 16, 4, KV_F16, 3, 0}, QERR_OK},
	{"ok windows, every layer windowed", {2, 8, 16, 4, KV_F16, 6, 0},
	 QERR_OK},
	{"win_pattern 1 leaves no window", {2, 8, 16, 4, KV_F16, 1, 0},
	 QERR_RANGE},
	{"win_pattern -2", {2, 8, 16, 4, KV_F16, -2, 0}, QERR_RANGE},
	{"ok 2 window slots for 4 blocks", {4, 8, 16, 4, KV_F16, 3, 2},
	 QERR_OK},
	{"5 window slots for 4 blocks", {4, 8, 16, 4, KV_F16, 3, 5},
	 QERR_RANGE},
	{"window slots without windows", {4, 8, 16, 4, KV_F16, 0, 2},
	 QERR_RANGE},
	{"block size overflows uint64",
	 {INT_MAX, INT_MAX, INT_MAX, 1, KV_F32, 0, 0}, QERR_RANGE},
	{"total size overflows uint64",
	 {1 << 20, 1 << 20, 1 << 10, UINT32_MAX - 1, KV_F32, 0, 0}, QERR_RANGE},
	{"total size overflows off_t",
	 {1 << 16, 1 << 16, 1 << 8, 1u << 30, KV_F16, 0, 0}, QERR_RANGE},
};

static void test_params(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(param_cases) / sizeof(param_cases[0]); i++) {
		kv_pool *p = (kv_pool *)&p; /* must be reset to NULL */
		uint64_t bytes = 0;
		int rc = kv_pool_new(&param_cases[i].p, &p);

		if (rc != param_cases[i].want)
			fail_msg("%s: rc %d (%s), want %d", param_cases[i].name,
				 rc, qerr_detail(), param_cases[i].want);
		assert_int_equal(kv_params_check(&param_cases[i].p, &bytes),
				 param_cases[i].want);
		if (rc == QERR_OK) {
			assert_int_equal(kv_pool_bytes(p), bytes);
			kv_pool_free(&p);
		} else {
			assert_null(p);
		}
	}
	assert_int_equal(kv_pool_new(NULL, &(kv_pool *){NULL}), QERR_ARG);
	assert_int_equal(kv_row_bytes(KV_F32, 5), 20);
	assert_int_equal(kv_row_bytes(KV_F16, 5), 10);
	/* ggml's block_q8_0: f16 scale + 32 int8 */
	assert_int_equal(kv_row_bytes(KV_Q8_0, 896), 28 * 34);
	assert_int_equal(kv_row_bytes(KV_Q8_0, 33), 0);
	assert_int_equal(kv_row_bytes(KV_F16, 0), 0);
	assert_int_equal(kv_row_bytes(7, 8), 0);
	for (int d = KV_F32; d <= KV_Q8_0; d++)
		assert_int_equal(kv_dtype_from_name(kv_dtype_name(d)), d);
	assert_int_equal(kv_dtype_from_name("q4"), -1);
	assert_int_equal(kv_ggml_type(KV_Q8_0), GGML_TYPE_Q8_0);
	assert_int_equal(kv_ggml_type(9), UINT32_MAX);
	kv_pool_free(NULL);
}

static void test_layout(void **state)
{
	static const kv_params cases[] = {
		{3, 5, 16, 7, KV_F32, 0, 0}, {3, 5, 16, 7, KV_F16, 0, 0},
		{1, 1, 1, 3, KV_F16, 0, 0},  {24, 128, 16, 4, KV_F32, 0, 0},
		{3, 64, 16, 7, KV_Q8_0, 0, 0}, {24, 128, 16, 4, KV_Q8_0, 0, 0},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const kv_params *c = &cases[i];
		uint64_t half = (uint64_t)c->block_tokens *
				(c->dtype == KV_Q8_0 ? c->kv_dim / 32 * 34
						     : c->kv_dim * (c->dtype ==
								    KV_F32 ? 4 : 2));
		uint64_t stride = (2 * half * c->n_layers + 63) / 64 * 64;
		kv_pool *p = NULL;
		unsigned char *b0;
		uint32_t b;
		int l;

		assert_int_equal(kv_pool_new(c, &p), QERR_OK);
		assert_memory_equal(kv_pool_params(p), c, sizeof(*c));
		assert_int_equal(kv_pool_bytes(p),
				 KV_DATA_OFFSET + stride * c->n_blocks);
		assert_int_equal(kv_pool_free_blocks(p), c->n_blocks);
		assert_true(kv_pool_fd(p) >= 0);
		assert_false(kv_pool_readonly(p));
		b0 = kv_k(p, 0, 0);
		assert_int_equal((uintptr_t)b0 % 64, 0);
		for (b = 0; b < c->n_blocks; b++)
			for (l = 0; l < c->n_layers; l++) {
				unsigned char *k = kv_k(p, b, l);
				unsigned char *v = kv_v(p, b, l);

				assert_int_equal(k - b0,
						 b * stride + (uint64_t)l * 2 * half);
				assert_int_equal(v - k, half);
				/* region starts zeroed */
				assert_int_equal(k[0] | v[half - 1], 0);
			}
		assert_int_equal(kv_block_refcount(p, c->n_blocks), 0);
		kv_pool_free(&p);
	}
}

/* ---- sequence contract details ---------------------------------------- */

static void test_fork_shares_committed_only(void **state)
{
	kv_params kp = {1, 4, 4, 8, KV_F32, 0, 0};
	kv_pool *p = NULL;
	kv_seq a, b, c, d;

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &p), QERR_OK);
	kv_seq_init(&a);
	/* 6 committed + 6 reserved: blocks 0,1 hold commits, 2 is private */
	assert_int_equal(kv_seq_reserve(p, &a, 6), QERR_OK);
	kv_seq_commit(&a, 6);
	assert_int_equal(kv_seq_reserve(p, &a, 6), QERR_OK);
	assert_int_equal(a.n_blocks, 3);
	assert_int_equal(kv_pool_free_blocks(p), 5);
	/* reserving what is already reserved allocates nothing */
	assert_int_equal(kv_seq_reserve(p, &a, 5), QERR_OK);
	assert_int_equal(kv_pool_free_blocks(p), 5);
	assert_int_equal(kv_seq_fork(p, &a, &b), QERR_OK);
	assert_int_equal(b.n_blocks, 2);
	assert_int_equal(b.n_tokens, 6);
	assert_int_equal(kv_block_refcount(p, a.blocks[1]), 2);
	assert_int_equal(kv_block_refcount(p, a.blocks[2]), 1);
	assert_int_equal(kv_seq_fork(p, &a, &a), QERR_ARG);
	kv_seq_commit(&a, 6);
	assert_int_equal(a.n_tokens, 12);
	/* a's block 1 is full now: b's append copies (b sees 2 rows) */
	assert_int_equal(kv_seq_reserve(p, &b, 1), QERR_OK);
	assert_int_equal(kv_block_refcount(p, a.blocks[1]), 1);
	kv_seq_init(&c);
	assert_int_equal(kv_seq_fork(p, &c, &d), QERR_OK); /* empty src */
	assert_int_equal(d.n_blocks, 0);
	assert_null(d.blocks);
	kv_seq_free(p, &d);
	kv_seq_free(p, &a);
	kv_seq_free(p, &b);
	kv_seq_free(p, &c);
	assert_int_equal(kv_pool_free_blocks(p), 8);
	kv_pool_free(&p);
}

static void test_stats(void **state)
{
	kv_params kp = {2, 4, 4, 16, KV_F32, 0, 0};
	kv_pool *p = NULL;
	kv_seq a, b;
	kv_stats st;

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &p), QERR_OK);
	kv_seq_init(&a);
	assert_int_equal(kv_seq_reserve(p, &a, 10), QERR_OK);
	kv_seq_commit(&a, 10);
	assert_int_equal(kv_seq_fork(p, &a, &b), QERR_OK);
	assert_int_equal(kv_seq_reserve(p, &b, 1), QERR_OK);
	kv_seq_free(p, &a);
	kv_pool_stats(p, &st);
	assert_int_equal(st.allocs, 4);
	assert_int_equal(st.cow, 1);
	/* 2 rows (10 % 4) x 4 dims x 4 bytes, K and V, 2 layers */
	assert_int_equal(st.cow_bytes, 2 * 4 * 4 * 2 * 2);
	assert_int_equal(st.forks, 1);
	assert_int_equal(st.peak, 4);
	assert_int_equal(st.in_use, 3);
	assert_int_equal(st.frees, 1);
	kv_seq_free(p, &b);
	kv_pool_stats(p, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.peak, 4);
	kv_pool_free(&p);
}

/* ---- read-only attachment --------------------------------------------- */

/* Permissions of the /proc/self/maps entry containing addr ("r--s"). */
static int maps_perms(const void *addr, char perms[5])
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char pr[5];

		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			memcpy(perms, pr, 5);
			found = 1;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Writes one byte at addr in a child; returns the child's fate. */
static int child_write_signal(void *addr)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* cmocka catches it otherwise */
		signal(SIGBUS, SIG_DFL);
		*(volatile unsigned char *)addr = 0x5a;
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* q8_0 rows: kv_row_put's bits (ggml's reference rounding, checked by
 * hand: ties away from zero, d = amax / 127), and a reader that attaches
 * the region sees the same bytes. */
static void test_q8_rows(void **state)
{
	kv_params kp = {2, 64, 4, 8, KV_Q8_0, 0, 0};
	kv_pool *own = NULL, *ro = NULL;
	float x[64] = {0};
	const uint8_t *b;
	kv_seq s;

	(void)state;
	/* block 0: amax 127 -> d 1.0 (f16 0x3c00), q = roundf(x) */
	x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.5f;
	x[4] = -0.49f, x[5] = -127.0f, x[6] = 126.5f;
	/* block 1: amax 254 -> d 2.0 (0x4000), q = roundf(x / 2) */
	x[32] = 254.0f, x[33] = 3.0f, x[34] = -5.0f, x[35] = 1.0f;
	assert_int_equal(kv_pool_new(&kp, &own), QERR_OK);
	kv_seq_init(&s);
	assert_int_equal(kv_seq_reserve(own, &s, 5), QERR_OK);
	kv_row_put(KV_Q8_0, x, kv_seq_k_row(own, &s, 1, 4), 64);
	kv_seq_commit(&s, 5);
	b = kv_seq_k_row(own, &s, 1, 4);
	assert_int_equal(b[0] | b[1] << 8, 0x3c00);
	assert_int_equal((int8_t)b[2], 127);
	assert_int_equal((int8_t)b[3], 3);
	assert_int_equal((int8_t)b[4], -3);
	assert_int_equal((int8_t)b[5], 1);
	assert_int_equal((int8_t)b[6], 0);
	assert_int_equal((int8_t)b[7], -127);
	assert_int_equal((int8_t)b[8], 127);
	assert_int_equal(b[34] | b[35] << 8, 0x4000);
	assert_int_equal((int8_t)b[36], 127);
	assert_int_equal((int8_t)b[37], 2); /* 1.5 -> 2 */
	assert_int_equal((int8_t)b[38], -3); /* -2.5 -> -3 */
	assert_int_equal((int8_t)b[39], 1); /* 0.5 -> 1 */

	assert_int_equal(kv_pool_attach_ro(kv_pool_fd(own), &ro), QERR_OK);
	assert_memory_equal(kv_pool_params(ro), &kp, sizeof(kp));
	assert_memory_equal(kv_seq_k_row(ro, &s, 1, 4), b, 68);
	/* a fork's copy-on-write tail copies whole q8_0 rows */
	{
		kv_seq t;

		assert_int_equal(kv_seq_fork(own, &s, &t), QERR_OK);
		assert_int_equal(kv_seq_reserve(own, &t, 1), QERR_OK);
		assert_true(t.blocks[1] != s.blocks[1]);
		assert_memory_equal(kv_seq_k_row(own, &t, 1, 4), b, 68);
		kv_seq_free(own, &t);
	}
	kv_seq_free(own, &s);
	kv_pool_free(&ro);
	kv_pool_free(&own);
}

static void test_attach_ro(void **state)
{
	kv_params kp = {2, 3, 4, 8, KV_F16, 0, 0};
	kv_pool *own = NULL, *ro = NULL, *ro2 = NULL;
	kv_seq s, t;
	char perms[5] = "";
	char path[64];
	uint16_t *w;
	const uint16_t *r;
	int fd;
	void *m;

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &own), QERR_OK);
	kv_seq_init(&s);
	assert_int_equal(kv_seq_reserve(own, &s, 5), QERR_OK);
	w = kv_seq_k_row(own, &s, 1, 4);
	w[2] = 0x1234;
	kv_seq_commit(&s, 5);

	assert_int_equal(kv_pool_attach_ro(kv_pool_fd(own), &ro), QERR_OK);
	assert_true(kv_pool_readonly(ro));
	assert_memory_equal(kv_pool_params(ro), &kp, sizeof(kp));
	assert_int_equal(kv_pool_bytes(ro), kv_pool_bytes(own));
	r = (const uint16_t *)kv_seq_k_row(ro, &s, 1, 4);
	assert_int_equal(r[2], 0x1234);
	assert_ptr_not_equal(r, w);

	/* written after attach: visible through MAP_SHARED */
	assert_int_equal(kv_seq_reserve(own, &s, 1), QERR_OK);
	w = kv_seq_v_row(own, &s, 0, 5);
	w[0] = 0xbeef;
	kv_seq_commit(&s, 1);
	assert_int_equal(((const uint16_t *)kv_seq_v_row(ro, &s, 0, 5))[0],
			 0xbeef);

	/* mapped PROT_READ, and a write faults (in a child) */
	assert_true(maps_perms(r, perms));
	assert_string_equal(perms, "r--s");
	assert_true(maps_perms(w, perms));
	assert_string_equal(perms, "rw-s");
	assert_int_equal(child_write_signal((void *)r), SIGSEGV);
	assert_int_equal(child_write_signal(w), 0);
	/* the fd is sealed: nobody can map it writable any more */
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
		 kv_pool_fd(own), 0);
	assert_ptr_equal(m, MAP_FAILED);

	/* mutating calls refuse */
	assert_int_equal(kv_seq_reserve(ro, &s, 1), QERR_ARG);
	kv_seq_init(&t);
	assert_int_equal(kv_seq_fork(ro, &s, &t), QERR_ARG);
	assert_null(t.blocks);
	assert_int_equal(kv_pool_free_blocks(ro), 0);
	assert_int_equal(kv_block_refcount(ro, s.blocks[0]), 0);
	assert_int_equal(kv_block_refcount(own, s.blocks[0]), 1);

	/* the way another process would get it: /proc/PID/fd/N, O_RDONLY */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(),
		 kv_pool_fd(own));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(kv_pool_attach_ro(fd, &ro2), QERR_OK);
	close(fd); /* the pool holds its own descriptor */
	assert_int_equal(((const uint16_t *)kv_seq_k_row(ro2, &s, 1, 4))[2],
			 0x1234);
	kv_pool_free(&ro2);

	kv_pool_free(&ro);
	assert_null(ro);
	kv_seq_free(own, &s);
	assert_int_equal(kv_pool_free_blocks(own), 8);
	kv_pool_free(&own);
	assert_int_equal(kv_pool_attach_ro(-1, &ro), QERR_ARG);
}

/* ---- corrupted headers ------------------------------------------------ */

static const struct {
	const char *name;
	size_t off;
	int width; /* 4 or 8 */
	int64_t delta;      /* added to the field ... */
	int set;            /* ... or, when set, the field := value */
	uint64_t value;
	int want;
} corrupt_cases[] = {
	{"intact", 0, 4, 0, 0, 0, QERR_OK},
	{"magic", 0, 4, 1, 0, 0, QERR_FORMAT},
	{"version", 4, 4, 1, 0, 0, QERR_UNSUPPORTED},
	{"size beyond the file", 8, 8, 4096, 0, 0, QERR_FORMAT},
	{"size below the data", 8, 8, -64, 0, 0, QERR_FORMAT},
	{"size smaller than a header", 8, 8, 0, 1, 8, QERR_FORMAT},
	{"n_layers + 1", 16, 4, 1, 0, 0, QERR_FORMAT},
	{"n_layers 0", 16, 4, 0, 1, 0, QERR_FORMAT},
	{"kv_dim huge", 20, 4, 0, 1, 0x80000000u, QERR_FORMAT},
	{"block_tokens - 1", 24, 4, -1, 0, 0, QERR_FORMAT},
	{"n_blocks + 1", 28, 4, 1, 0, 0, QERR_FORMAT},
	{"n_blocks 0", 28, 4, 0, 1, 0, QERR_FORMAT},
	{"dtype unknown", 32, 4, 0, 1, 7, QERR_FORMAT},
	{"dtype f32 for f16 data", 32, 4, 0, 1, KV_F32, QERR_FORMAT},
	{"win_pattern 1", 36, 4, 0, 1, 1, QERR_FORMAT},
	{"win_pattern 2 for an unsplit region", 36, 4, 0, 1, 2, QERR_FORMAT},
	{"block_bytes", 40, 8, 2, 0, 0, QERR_FORMAT},
	{"block_stride", 48, 8, 64, 0, 0, QERR_FORMAT},
	{"data_offset", 56, 8, 64, 0, 0, QERR_FORMAT},
	/* the owner only serves stale-region sweeps: readers ignore it */
	{"owner pid", 64, 4, 0, 1, 12345, QERR_OK},
	{"owner start time", 72, 8, 1, 0, 0, QERR_OK},
	{"win_blocks without windows", 80, 4, 0, 1, 1, QERR_FORMAT},
	{"reserved at 84", 84, 4, 0, 1, 1, QERR_FORMAT},
};

static void test_corrupt_header(void **state)
{
	kv_params kp = {2, 3, 4, 8, KV_F16, 0, 0};
	kv_pool *own = NULL, *ro = NULL;
	unsigned char hdr[sizeof(kv_shm_header)];
	size_t i;

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &own), QERR_OK);
	assert_int_equal(pread(kv_pool_fd(own), hdr, sizeof(hdr), 0),
			 (ssize_t)sizeof(hdr));
	for (i = 0; i < sizeof(corrupt_cases) / sizeof(corrupt_cases[0]); i++) {
		shm_region r;
		unsigned char *f;
		int rc;

		/* a forged region of the same size holding the header */
		assert_int_equal(shm_create("kv-forged", KV_MAGIC, KV_VERSION,
					    kv_pool_bytes(own), &r),
				 QERR_OK);
		f = (unsigned char *)r.base + corrupt_cases[i].off;
		memcpy(r.base, hdr, sizeof(hdr));
		if (corrupt_cases[i].width == 4) {
			uint32_t x;

			memcpy(&x, f, 4);
			x = corrupt_cases[i].set
				    ? (uint32_t)corrupt_cases[i].value
				    : x + (uint32_t)corrupt_cases[i].delta;
			memcpy(f, &x, 4);
		} else {
			uint64_t x;

			memcpy(&x, f, 8);
			x = corrupt_cases[i].set
				    ? corrupt_cases[i].value
				    : x + (uint64_t)corrupt_cases[i].delta;
			memcpy(f, &x, 8);
		}
		rc = kv_pool_attach_ro(r.fd, &ro);
		if (rc != corrupt_cases[i].want)
			fail_msg("%s: rc %d (%s), want %d",
				 corrupt_cases[i].name, rc, qerr_detail(),
				 corrupt_cases[i].want);
		if (rc)
			assert_null(ro);
		kv_pool_free(&ro);
		shm_unmap(&r);
		assert_null(r.base);
		assert_int_equal(r.fd, -1);
	}
	kv_pool_free(&own);
}

/* Short, empty and non-regular files: QERR_FORMAT before any page is
 * touched (a mapping beyond EOF would SIGBUS). */
static void test_short_files(void **state)
{
	static const struct {
		const char *name;
		size_t len;
	} cases[] = {
		{"empty", 0},
		{"8 bytes", 8},
		{"header only, no params", 16},
		{"kv header without owner", 64},
		{"kv header, no blocks", sizeof(kv_shm_header)},
	};
	kv_params kp = {1, 1, 1, 1, KV_F32, 0, 0};
	kv_pool *own = NULL, *ro = NULL;
	unsigned char hdr[sizeof(kv_shm_header)];
	shm_region r = {0};
	int pfd[2];
	size_t i;

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &own), QERR_OK);
	assert_int_equal(pread(kv_pool_fd(own), hdr, sizeof(hdr), 0),
			 (ssize_t)sizeof(hdr));
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = memfd_create("kv-short", MFD_CLOEXEC);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, hdr, cases[i].len),
				 (ssize_t)cases[i].len);
		if (kv_pool_attach_ro(fd, &ro) != QERR_FORMAT)
			fail_msg("%s: not rejected", cases[i].name);
		assert_null(ro);
		assert_int_equal(shm_map_fd_ro(fd, KV_MAGIC, KV_VERSION, 0, &r),
				 QERR_FORMAT);
		assert_null(r.base);
		close(fd);
	}
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(kv_pool_attach_ro(pfd[0], &ro), QERR_FORMAT);
	close(pfd[0]);
	close(pfd[1]);
	kv_pool_free(&own);
	shm_unmap(&r); /* harmless on an unmapped region */
}

/* ---- shm ------------------------------------------------------------- */

static void test_shm_named(void **state)
{
	char name[64];
	shm_region w, r, bad;
	uint64_t size = 3 * 4096;

	(void)state;
	snprintf(name, sizeof(name), "/quorum-test-kv-%d", (int)getpid());
	assert_int_equal(shm_create_named(name, 0xabcd, 3, size, &w), QERR_OK);
	assert_int_equal(shm_create_named(name, 0xabcd, 3, size, &bad),
			 QERR_IO); /* exists */
	((unsigned char *)w.base)[size - 1] = 7;
	assert_int_equal(shm_map_name_ro(name, 0xabcd, 3, size, &r), QERR_OK);
	assert_int_equal(r.size, size);
	assert_false(r.writable);
	assert_int_equal(((unsigned char *)r.base)[size - 1], 7);
	((unsigned char *)w.base)[100] = 9;
	assert_int_equal(((unsigned char *)r.base)[100], 9);
	assert_int_equal(shm_map_name_ro(name, 0xabce, 3, 0, &bad),
			 QERR_FORMAT);
	assert_int_equal(shm_map_name_ro(name, 0xabcd, 4, 0, &bad),
			 QERR_UNSUPPORTED);
	assert_int_equal(shm_map_name_ro(name, 0xabcd, 3, size + 1, &bad),
			 QERR_FORMAT);
	assert_int_equal(shm_map_name_ro("no-slash", 0xabcd, 3, 0, &bad),
			 QERR_ARG);
	shm_unmap(&r);
	assert_int_equal(shm_unlink_name(name), QERR_OK);
	assert_int_equal(shm_map_name_ro(name, 0xabcd, 3, 0, &bad),
			 QERR_MISSING);
	assert_int_equal(((unsigned char *)w.base)[100], 9); /* still mapped */
	shm_unmap(&w);
	shm_unmap(&w);
	assert_int_equal(shm_create("x", 1, 1, 8, &bad), QERR_ARG);
	assert_int_equal(shm_create("x", 1, 1, UINT64_MAX, &bad), QERR_ARG);
}

/* Lack of memory is reported by shm_create, not as SIGBUS later. The
 * child lowers RLIMIT_FSIZE, which fallocate on a memfd honours. */
static void test_shm_create_fails_early(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {1 << 20, 1 << 20};
		kv_params kp = {4, 1024, 16, 64, KV_F32, 0, 0}; /* ~32 MiB */
		kv_pool *p = NULL;
		shm_region r;
		int a, b;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(3);
		a = shm_create("big", 1, 1, 64 << 20, &r);
		b = kv_pool_new(&kp, &p);
		_exit(a == QERR_NOMEM && b == QERR_NOMEM && !p && r.fd == -1
			      ? 0
			      : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- sliding windows: window parts released ------------------------- */

#define WL 3 /* layers: 0 and 2 windowed (pattern 2), 1 global */
#define WD 4 /* kv_dim */
#define WB 4 /* block tokens */

static float wval(uint32_t t, int l, int kv, int d)
{
	return (kv ? -1.0f : 1.0f) * (100.0f * (float)t + 10.0f * l + d);
}

static void wwrite(kv_pool *p, kv_seq *s, uint32_t n)
{
	assert_int_equal(kv_seq_reserve(p, s, n), 0);
	for (uint32_t t = s->n_tokens; t < s->n_tokens + n; t++)
		for (int l = 0; l < WL; l++)
			for (int d = 0; d < WD; d++) {
				((float *)kv_seq_k_row(p, s, l, t))[d] =
					wval(t, l, 0, d);
				((float *)kv_seq_v_row(p, s, l, t))[d] =
					wval(t, l, 1, d);
			}
	kv_seq_commit(s, n);
}

/* Every row s still holds reads back: all rows of the global layer, rows
 * from the window of its next row on on the windowed ones. */
static void wcheck(const kv_pool *p, const kv_seq *s, int window)
{
	for (uint32_t t = 0; t < s->n_tokens; t++)
		for (int l = 0; l < WL; l++) {
			if (kv_layer_windowed(p, l) &&
			    (t / WB < s->w_lo ||
			     (int64_t)t < (int64_t)s->n_tokens + 1 - window))
				continue;
			for (int d = 0; d < WD; d++)
				if (((const float *)kv_seq_k_row(p, s, l, t))[d] !=
					    wval(t, l, 0, d) ||
				    ((const float *)kv_seq_v_row(p, s, l, t))[d] !=
					    wval(t, l, 1, d))
					fail_msg("token %u layer %d dim %d: "
						 "wrong row", t, l, d);
		}
}

/* Window slots the tables imply (blocks some holder still sees) and the
 * pool's count and bytes agree. */
static void wslots(const kv_pool *p, const kv_seq *const *s, int n)
{
	const kv_params *kp = kv_pool_params(p);
	unsigned char seen[64] = {0};
	uint32_t want = 0;
	uint64_t part = 2ull * WB * WD * 4; /* one layer's K and V */
	kv_stats st;

	for (int i = 0; i < n; i++)
		for (uint32_t b = s[i]->w_lo; b < s[i]->n_blocks; b++)
			if (!seen[s[i]->blocks[b]]++)
				want++;
	kv_pool_stats(p, &st);
	assert_int_equal(st.win_in_use, want);
	assert_true(st.held_bytes == st.in_use * part + want * 2 * part);
	assert_int_equal(kp->n_blocks, 64);
}

static void test_window_drop(void **state)
{
	kv_params kp = {WL, WD, WB, 64, KV_F32, 2, 0};
	const int W = 6;
	kv_pool *p, *ro;
	kv_seq root, a, b, c;
	kv_stats st;

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &p), 0);
	assert_true(!kv_layer_windowed(p, 1) && kv_layer_windowed(p, 0) &&
		    kv_layer_windowed(p, 2));
	kv_seq_init(&root);
	wwrite(p, &root, 10); /* blocks of 4 + 4 + 2 rows */
	assert_int_equal(kv_seq_fork(p, &root, &a), 0);
	assert_int_equal(kv_seq_fork(p, &root, &b), 0);
	/* a runs on alone, dropping after each token: its windowed rows
	 * stay bounded, the shared prefix's stay for root and b */
	for (int i = 0; i < 30; i++) {
		uint32_t want_lo;

		wwrite(p, &a, 1);
		(void)kv_seq_drop_window(p, &a, W);
		want_lo = a.n_tokens + 1 > (uint32_t)W
				  ? (a.n_tokens + 1 - W) / WB : 0;
		assert_int_equal(a.w_lo, want_lo);
		wcheck(p, &a, W);
		wcheck(p, &root, 1 << 20);
		wslots(p, (const kv_seq *const[]){&root, &a, &b}, 3);
	}
	/* 40 tokens: a sees blocks 8, 9 only; root and b hold 0..2 */
	assert_int_equal(a.n_tokens, 40);
	assert_int_equal(a.w_lo, 8);
	kv_pool_stats(p, &st);
	/* root's 3, a's copied tail and blocks 3..9 */
	assert_int_equal(st.in_use, 3 + 8);
	assert_int_equal(st.win_in_use, 3 + 2);
	/* dropping again changes nothing */
	assert_int_equal(kv_seq_drop_window(p, &a, W), 0);
	/* a whole fork shares what a still sees; a shorter prefix would
	 * need rows a released */
	assert_int_equal(kv_seq_fork(p, &a, &c), 0);
	assert_int_equal(c.w_lo, 8);
	wslots(p, (const kv_seq *const[]){&root, &a, &b, &c}, 4);
	kv_seq_free(p, &c);
	assert_int_equal(kv_seq_fork_prefix(p, &a, 20, &c), QERR_ARG);
	assert_non_null(strstr(qerr_detail(), "released the window"));
	qerr_clear();
	/* a fork mid-block copies its shared tail, window part included */
	wwrite(p, &a, 2); /* 42: block 10 holds 2 rows */
	(void)kv_seq_drop_window(p, &a, W);
	assert_int_equal(kv_seq_fork(p, &a, &c), 0);
	wwrite(p, &c, 1);
	assert_true(c.blocks[10] != a.blocks[10]);
	wcheck(p, &c, W);
	wcheck(p, &a, W);
	wslots(p, (const kv_seq *const[]){&root, &a, &b, &c}, 4);
	/* another process's view reads a's held rows (wmap in the region) */
	assert_int_equal(kv_pool_attach_ro(kv_pool_fd(p), &ro), 0);
	assert_int_equal(kv_pool_params(ro)->win_pattern, 2);
	wcheck(ro, &a, W);
	kv_pool_free(&ro);
	/* root and b gone: the prefix's window slots go, its blocks stay
	 * (a still holds their global layer's rows) */
	kv_seq_free(p, &root);
	kv_seq_free(p, &b);
	wslots(p, (const kv_seq *const[]){&a, &c}, 2);
	kv_pool_stats(p, &st);
	assert_int_equal(st.in_use, 12);
	wcheck(p, &a, W);
	kv_seq_free(p, &a);
	kv_seq_free(p, &c);
	kv_pool_stats(p, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.win_in_use, 0);
	assert_true(st.held_bytes == 0);
	assert_int_equal(kv_pool_free_blocks(p), 64);
	kv_pool_free(&p);
	/* fewer window slots than blocks: a chain that drops runs on in 4,
	 * one that keeps its rows runs out of slots, not blocks */
	kp.win_blocks = 4;
	assert_int_equal(kv_pool_new(&kp, &p), 0);
	assert_int_equal(kv_pool_win_slots(p), 4);
	kv_seq_init(&a);
	kv_seq_init(&b);
	for (int i = 0; i < 200; i++) {
		wwrite(p, &a, 1);
		(void)kv_seq_drop_window(p, &a, W);
		wcheck(p, &a, W);
	}
	wslots(p, (const kv_seq *const[]){&a}, 1);
	kv_seq_free(p, &a);
	assert_int_equal(kv_seq_reserve(p, &b, 4 * WB), 0);
	kv_seq_commit(&b, 4 * WB);
	assert_int_equal(kv_pool_free_win_slots(p), 0);
	assert_int_equal(kv_seq_reserve(p, &b, 1), QERR_FULL);
	assert_string_equal(qerr_detail(), "KV pool exhausted: need 1 window "
			    "slots, 0 free");
	qerr_clear();
	kv_seq_free(p, &b);
	assert_int_equal(kv_pool_free_win_slots(p), 4);
	kv_pool_free(&p);
	kp.win_blocks = 0;
	/* a pool without windows drops nothing */
	kp.win_pattern = 0;
	assert_int_equal(kv_pool_new(&kp, &p), 0);
	kv_seq_init(&a);
	wwrite(p, &a, 40);
	assert_int_equal(kv_seq_drop_window(p, &a, W), 0);
	assert_int_equal(a.w_lo, 0);
	wcheck(p, &a, 1 << 20);
	kv_seq_free(p, &a);
	kv_pool_free(&p);
}

/* A fork in one pool reads another pool's prefix in place (linked slot):
 * full prefix blocks are referenced, only the partly-filled tail block is
 * copied; the owner's refcounts never move. */
static void test_linked_pool(void **state)
{
	kv_params kp = {2, 8, 16, 64, KV_F32, 0, 0};
	char name[64];
	kv_pool *a, *ro, *b;
	kv_seq root, view, f[3];
	kv_stats st;

	(void)state;
	snprintf(name, sizeof(name), "/quorum-test-link-%d", (int)getpid());
	assert_int_equal(kv_pool_new_named(&kp, name, &a), 0);
	assert_string_equal(kv_pool_name(a), name);
	kv_seq_init(&root);
	/* 37 tokens: blocks of 16 + 16 + 5 rows */
	assert_int_equal(kv_seq_reserve(a, &root, 37), 0);
	for (uint32_t t = 0; t < 37; t++)
		for (int l = 0; l < 2; l++)
			for (int d = 0; d < 8; d++) {
				((float *)kv_seq_k_row(a, &root, l, t))[d] =
					1000.0f * t + 10.0f * l + d;
				((float *)kv_seq_v_row(a, &root, l, t))[d] =
					-1000.0f * t - 10.0f * l - d;
			}
	kv_seq_commit(&root, 37);
	assert_int_equal(kv_pool_free_blocks(a), 61);

	assert_int_equal(kv_pool_attach_name_ro(name, &ro), 0);
	assert_int_equal(kv_pool_new(&kp, &b), 0);
	assert_int_equal(kv_pool_link(b, 1, ro), 0);
	assert_int_equal(kv_seq_view(&view, 1, root.blocks, 3, 37, 16), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(kv_seq_fork(b, &view, &f[i]), 0);
		/* first append: copies the 5-row tail, nothing else */
		assert_int_equal(kv_seq_reserve(b, &f[i], 1), 0);
		((float *)kv_seq_k_row(b, &f[i], 0, 37))[0] = (float)i;
		kv_seq_commit(&f[i], 1);
		assert_int_equal(KV_REF_SLOT(f[i].blocks[0]), 1);
		assert_int_equal(KV_REF_SLOT(f[i].blocks[1]), 1);
		assert_int_equal(KV_REF_SLOT(f[i].blocks[2]), 0);
	}
	kv_pool_stats(b, &st);
	assert_int_equal(st.cow, 3);
	assert_int_equal(kv_pool_free_blocks(b), 61);
	/* every fork reads the owner's prefix and its own tail */
	for (int i = 0; i < 3; i++)
		for (uint32_t t = 0; t < 37; t++)
			for (int l = 0; l < 2; l++) {
				assert_true(((float *)kv_seq_k_row(b, &f[i], l,
								   t))[3] ==
					    1000.0f * t + 10.0f * l + 3);
				assert_true(((float *)kv_seq_v_row(b, &f[i], l,
								   t))[7] ==
					    -1000.0f * t - 10.0f * l - 7);
			}
	for (int i = 0; i < 3; i++)
		assert_true(((float *)kv_seq_k_row(b, &f[i], 0, 37))[0] ==
			    (float)i);
	/* the owner's refcounts never moved */
	for (int i = 0; i < 3; i++)
		assert_int_equal(kv_block_refcount(a, root.blocks[i]), 1);
	/* incompatible pools do not link */
	{
		kv_params other = kp;
		kv_pool *c;

		other.kv_dim = 16;
		assert_int_equal(kv_pool_new(&other, &c), 0);
		assert_int_equal(kv_pool_link(b, 2, c), QERR_ARG);
		kv_pool_free(&c);
		/* nor pools split by windows and not */
		other.kv_dim = kp.kv_dim;
		other.win_pattern = 2;
		assert_int_equal(kv_pool_new(&other, &c), 0);
		assert_int_equal(kv_pool_link(b, 2, c), QERR_ARG);
		assert_non_null(strstr(qerr_detail(), "window pattern 0/2"));
		qerr_clear();
		kv_pool_free(&c);
	}
	for (int i = 0; i < 3; i++)
		kv_seq_free(b, &f[i]);
	kv_seq_free(NULL, &view);
	assert_int_equal(kv_pool_free_blocks(b), 64);
	kv_pool_unlink(b, 1);
	kv_pool_free(&b);
	kv_pool_free(&ro);
	kv_seq_free(a, &root);
	assert_int_equal(kv_pool_free_blocks(a), 64);
	kv_pool_free(&a);
	/* the owner's free unlinked the name */
	assert_int_not_equal(kv_pool_attach_name_ro(name, &ro), 0);
}

int main(void)
{
	struct CMUnitTest tests[sizeof(scenarios) / sizeof(scenarios[0]) + 16];
	size_t n = 0, i;

	for (i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		struct CMUnitTest t = {scenarios[i].name, test_scenario, NULL,
				       NULL, (void *)&scenarios[i]};

		tests[n++] = t;
	}
#define ADD(fn) tests[n++] = (struct CMUnitTest)cmocka_unit_test(fn)
	ADD(test_window_drop);
	ADD(test_params);
	ADD(test_layout);
	ADD(test_fork_shares_committed_only);
	ADD(test_stats);
	ADD(test_attach_ro);
	ADD(test_q8_rows);
	ADD(test_corrupt_header);
	ADD(test_short_files);
	ADD(test_shm_named);
	ADD(test_shm_create_fails_early);
	ADD(test_linked_pool);
#undef ADD
	return _cmocka_run_group_tests("kv", tests, n, NULL, NULL);
}
