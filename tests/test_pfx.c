/* pfx: the longest block-aligned cached prefix, over a table of named
 * cases (shared system prompt, shared exemplars, a prefix ending
 * mid-block, identical prompt, no overlap, several owners), each run with
 * the real hash and with every hash forced to collide (a test hook: the
 * tokens decide, never a hash alone); removal, filters, growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc/pfx.h"

#define B 4 /* tokens per block in the tables: one character a token */

/* Owners and prompt are strings, one token per character. */
struct mcase {
	const char *name;
	const char *owners[4];
	const char *prompt;
	size_t shared;          /* expected longest */
	const char *at_longest; /* owners (indices) visited at that depth */
};

static const struct mcase mcases[] = {
	/* system prompt "SYSTEMPROMPT" (12 tokens: 3 blocks) then questions */
	{"shared_system_prompt", {"SYSTEMPROMPTq1:what", NULL},
	 "SYSTEMPROMPTq2:how", 12, "0"},
	/* exemplars after the system prompt: the one holding them wins */
	{"shared_exemplars",
	 {"SYSTEMPROMPTq9", "SYSTEMPROMPTex1ex2ex3ex4q1?", NULL},
	 "SYSTEMPROMPTex1ex2ex3ex4q2??", 24, "1"},
	/* the common part ends mid-block: only its full blocks count */
	{"prefix_ends_mid_block", {"SYSTEMPROMxxxxxx", NULL},
	 "SYSTEMPROMyyyyyy", 8, "0"},
	/* identical: every full block (the partial tail is never indexed) */
	{"identical_prompt", {"SYSTEMPROMPTq1:what", NULL},
	 "SYSTEMPROMPTq1:what", 16, "0"},
	{"no_overlap", {"SYSTEMPROMPTq1", NULL}, "systemprompt", 0, ""},
	{"first_token_differs", {"SYSTEMPROMPTq1", NULL}, "XYSTEMPROMPT", 0, ""},
	/* prompt shorter than a block: nothing to share */
	{"prompt_under_a_block", {"SYSTEMPROMPT", NULL}, "SYS", 0, ""},
	/* the owner is shorter than the prompt: all its full blocks */
	{"owner_is_a_prefix", {"SYSTEMPR", NULL}, "SYSTEMPROMPTq1", 8, "0"},
	/* two owners hold the same longest prefix: both are visited */
	{"two_at_longest", {"SYSTEMPROMPTaaaa", "SYSTEMPROMPTbbbb", "SYSxx"},
	 "SYSTEMPROMPTcccc", 12, "01"},
	/* deeper owner wins over shallower ones */
	{"deepest_wins", {"SYSTxxxx", "SYSTEMPRyyyy", "SYSTEMPROMPTzzzz"},
	 "SYSTEMPROMPTzzzzQ", 16, "2"},
};

static int32_t *toks(const char *s, size_t *n)
{
	size_t len = strlen(s);
	int32_t *t = malloc((len + 1) * sizeof(*t));

	assert_non_null(t);
	for (size_t i = 0; i < len; i++)
		t[i] = (int32_t)(unsigned char)s[i] * 1000 + 7;
	*n = len;
	return t;
}

/* Records the owners visited at each depth. */
typedef struct {
	void *seen[64][8];
	int n_seen[64];
	void *reject;           /* never accepted */
} visits;

static int visit(void *arg, void *owner, size_t shared)
{
	visits *v = arg;
	size_t d = shared / B - 1;

	assert_true(shared % B == 0);
	if (v->n_seen[d] < 8)
		v->seen[d][v->n_seen[d]++] = owner;
	return owner != v->reject;
}

static void run_case(const struct mcase *c)
{
	pfx *p = NULL;
	int32_t *ot[4] = {0}, *pt;
	size_t on[4] = {0}, pn, got;
	int owners[4] = {0, 1, 2, 3}, n_own = 0;
	visits v;
	void *best;

	assert_int_equal(pfx_new(B, &p), 0);
	for (int i = 0; i < 4 && c->owners[i]; i++, n_own++) {
		ot[i] = toks(c->owners[i], &on[i]);
		assert_int_equal(pfx_add(p, &owners[i], ot[i], on[i]), 0);
	}
	pt = toks(c->prompt, &pn);
	memset(&v, 0, sizeof(v));
	got = pfx_longest(p, pt, pn, visit, &v, &best);
	if (got != c->shared)
		fail_msg("%s: shared %zu, want %zu", c->name, got, c->shared);
	if (got) {
		size_t d = got / B - 1;

		assert_int_equal(v.n_seen[d], (int)strlen(c->at_longest));
		for (int k = 0; c->at_longest[k]; k++) {
			int want = c->at_longest[k] - '0', found = 0;

			for (int j = 0; j < v.n_seen[d]; j++)
				found |= v.seen[d][j] == &owners[want];
			if (!found)
				fail_msg("%s: owner %d not at the longest",
					 c->name, want);
		}
		assert_true(best == v.seen[d][0]);
		/* nothing deeper was visited */
		if (d + 1 < 64)
			assert_int_equal(v.n_seen[d + 1], 0);
	} else {
		assert_null(best);
	}
	/* without a visitor: the same length */
	assert_int_equal(pfx_longest(p, pt, pn, NULL, NULL, NULL), got);
	for (int i = 0; i < n_own; i++)
		pfx_remove(p, &owners[i], ot[i], on[i]);
	assert_int_equal(pfx_blocks(p), 0);
	assert_int_equal(pfx_longest(p, pt, pn, NULL, NULL, NULL), 0);
	for (int i = 0; i < n_own; i++)
		free(ot[i]);
	free(pt);
	pfx_free(&p);
	assert_null(p);
}

static void test_table(void **state)
{
	(void)state;
	pfx_test_hash_mask(UINT64_MAX);
	for (size_t i = 0; i < sizeof(mcases) / sizeof(mcases[0]); i++)
		run_case(&mcases[i]);
}

/* Every chain hash 0 (mask 0) or 1 bit: all blocks of a depth collide;
 * the answers are the tokens' alone. */
static void test_table_collisions(void **state)
{
	(void)state;
	pfx_test_hash_mask(0);
	for (size_t i = 0; i < sizeof(mcases) / sizeof(mcases[0]); i++)
		run_case(&mcases[i]);
	pfx_test_hash_mask(1);
	for (size_t i = 0; i < sizeof(mcases) / sizeof(mcases[0]); i++)
		run_case(&mcases[i]);
	pfx_test_hash_mask(UINT64_MAX);
}

/* A collision that a hash-only index would take: owner X differs from
 * the prompt in block 0, agrees in block 1; with every hash equal, depth
 * 1's candidate must still be refused (its block 0 is verified too). */
static void test_collision_refused(void **state)
{
	pfx *p = NULL;
	int32_t *x, *q;
	size_t nx, nq;
	int ox;

	(void)state;
	pfx_test_hash_mask(0);
	assert_int_equal(pfx_new(B, &p), 0);
	x = toks("AAAABBBBCCCC", &nx);
	q = toks("ZAAABBBBCCCC", &nq);
	assert_int_equal(pfx_add(p, &ox, x, nx), 0);
	assert_int_equal(pfx_longest(p, q, nq, NULL, NULL, NULL), 0);
	free(q);
	q = toks("AAAABBBBCCCZ", &nq);
	assert_int_equal(pfx_longest(p, q, nq, NULL, NULL, NULL), 8);
	free(q);
	q = toks("AAAABZBBCCCC", &nq);
	assert_int_equal(pfx_longest(p, q, nq, NULL, NULL, NULL), 4);
	pfx_remove(p, &ox, x, nx);
	assert_int_equal(pfx_blocks(p), 0);
	free(q);
	free(x);
	pfx_free(&p);
	pfx_test_hash_mask(UINT64_MAX);
}

/* A visitor that refuses the deepest owner: the walk settles on the
 * next one (e.g. an owner on an overloaded worker, or another client's). */
static void test_filter(void **state)
{
	pfx *p = NULL;
	int32_t *a, *b, *q;
	size_t na, nb, nq;
	int oa, ob;
	visits v;
	void *best;

	(void)state;
	assert_int_equal(pfx_new(B, &p), 0);
	a = toks("SYSTEMPROMPTex1ex2", &na);
	b = toks("SYSTEMPRq", &nb);
	q = toks("SYSTEMPROMPTex1ex2q3", &nq);
	assert_int_equal(pfx_add(p, &oa, a, na), 0);
	assert_int_equal(pfx_add(p, &ob, b, nb), 0);
	memset(&v, 0, sizeof(v));
	v.reject = &oa;
	assert_int_equal(pfx_longest(p, q, nq, visit, &v, &best), 8);
	assert_ptr_equal(best, &ob);
	memset(&v, 0, sizeof(v));
	assert_int_equal(pfx_longest(p, q, nq, visit, &v, &best), 16);
	assert_ptr_equal(best, &oa);
	pfx_remove(p, &oa, a, na);
	assert_int_equal(pfx_longest(p, q, nq, NULL, NULL, &best), 8);
	assert_ptr_equal(best, &ob);
	pfx_remove(p, &ob, b, nb);
	free(a);
	free(b);
	free(q);
	pfx_free(&p);
}

/* Many owners (the table grows) sharing a long prefix: each finds its
 * own whole prompt, and the shared part is found for a new one. */
static void test_many(void **state)
{
	enum { N = 300, L = 64 };
	static int32_t t[N][L + 8];
	static int own[N];
	int32_t q[L + 8];
	pfx *p = NULL;
	void *best;

	(void)state;
	assert_int_equal(pfx_new(16, &p), 0);
	for (int i = 0; i < N; i++) {
		for (int k = 0; k < L; k++)
			t[i][k] = k;
		for (int k = L; k < L + 8; k++)
			t[i][k] = 1000 + i * 8 + k;
		assert_int_equal(pfx_add(p, &own[i], t[i], L + 8), 0);
	}
	assert_int_equal(pfx_blocks(p), (size_t)N * 4);
	for (int i = 0; i < N; i += 37) {
		/* L + 8 tokens: 4 full blocks, all shared by everyone */
		assert_int_equal(pfx_longest(p, t[i], L + 8, NULL, NULL, &best),
				 L);
		assert_non_null(best);
	}
	for (int k = 0; k < L + 8; k++)
		q[k] = k < L - 3 ? k : -1;
	assert_int_equal(pfx_longest(p, q, L + 8, NULL, NULL, NULL), 48);
	for (int i = 0; i < N; i++)
		pfx_remove(p, &own[i], t[i], L + 8);
	assert_int_equal(pfx_blocks(p), 0);
	pfx_free(&p);
	assert_int_not_equal(pfx_new(0, &p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_table_collisions),
		cmocka_unit_test(test_collision_refused),
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
