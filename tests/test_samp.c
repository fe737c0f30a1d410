/* samp: params, greedy, filters, distribution, reproducibility, goldens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "qerr.h"
#include "infer/samp.h"

#define NINF (-INFINITY)

/* ---- parameter validation ---------------------------------------------- */

struct pcase {
	const char *name;
	samp_params p;
	int rc;
	const char *detail; /* substring of qerr_detail() on failure */
};

static const struct pcase pcases[] = {
	{"default", {1.0f, 0, 1.0f, 0.0f}, QERR_OK, NULL},
	{"greedy", {0.0f, 0, 1.0f, 0.0f}, QERR_OK, NULL},
	{"all_filters", {0.7f, 40, 0.9f, 0.0f}, QERR_OK, NULL},
	{"tiny_top_p", {0.7f, 0, 1e-6f, 0.0f}, QERR_OK, NULL},
	{"huge_top_k", {0.7f, 1 << 30, 1.0f, 0.0f}, QERR_OK, NULL},
	{"neg_temperature", {-0.1f, 0, 1.0f, 0.0f}, QERR_RANGE, "temperature"},
	{"nan_temperature", {NAN, 0, 1.0f, 0.0f}, QERR_RANGE, "temperature"},
	{"inf_temperature", {INFINITY, 0, 1.0f, 0.0f}, QERR_RANGE, "temperature"},
	{"neg_top_k", {1.0f, -1, 1.0f, 0.0f}, QERR_RANGE, "top_k"},
	{"zero_top_p", {1.0f, 0, 0.0f, 0.0f}, QERR_OK, NULL},
	{"neg_top_p", {1.0f, 0, -0.5f, 0.0f}, QERR_RANGE, "top_p"},
	{"big_top_p", {1.0f, 0, 1.0001f, 0.0f}, QERR_RANGE, "top_p"},
	{"nan_top_p", {1.0f, 0, NAN, 0.0f}, QERR_RANGE, "top_p"},
	{"min_p", {0.7f, 40, 0.9f, 0.1f}, QERR_OK, NULL},
	{"min_p_one", {0.7f, 0, 1.0f, 1.0f}, QERR_OK, NULL},
	{"neg_min_p", {1.0f, 0, 1.0f, -0.1f}, QERR_RANGE, "min_p"},
	{"big_min_p", {1.0f, 0, 1.0f, 1.5f}, QERR_RANGE, "min_p"},
	{"nan_min_p", {1.0f, 0, 1.0f, NAN}, QERR_RANGE, "min_p"},
};

static void run_pcase(void **state)
{
	const struct pcase *c = *state;
	float l[4] = {0, 1, 2, 3};
	samp *s;
	samp_rng r;
	int tok = -1;

	qerr_clear();
	assert_int_equal(samp_params_check(&c->p), c->rc);
	if (c->detail && !strstr(qerr_detail(), c->detail))
		fail_msg("%s: detail \"%s\" lacks \"%s\"", c->name,
			 qerr_detail(), c->detail);
	assert_int_equal(samp_new(4, &s), QERR_OK);
	samp_rng_seed(&r, 1, 0);
	assert_int_equal(samp_sample(s, &c->p, l, &r, &tok), c->rc);
	if (c->rc == QERR_OK)
		assert_true(tok >= 0 && tok < 4);
	samp_free(&s);
	assert_null(s);
}

/* ---- greedy and bad logits ---------------------------------------------- */

struct gcase {
	const char *name;
	int n;
	float l[8];
	int expect; /* token, or -QERR_RANGE */
};

static const struct gcase gcases[] = {
	{"single", 1, {5}, 0},
	{"plain", 5, {0.1f, 3, -2, 2.9f, 1}, 1},
	{"tie_lowest_id", 6, {1, 4, 2, 4, 4, 0}, 1},
	{"tie_at_end", 3, {-1, -2, -1}, 0},
	{"neg_inf_masked", 4, {NINF, NINF, -50, NINF}, 2},
	{"signed_zero_tie", 3, {-1, -0.0f, 0.0f}, 1},
	{"all_neg_inf", 3, {NINF, NINF, NINF}, -QERR_RANGE},
	{"nan", 3, {1, NAN, 2}, -QERR_RANGE},
	{"pos_inf", 3, {1, 2, INFINITY}, -QERR_RANGE},
	{"nan_in_tail", 8, {1, 2, 3, 4, 5, 6, 7, NAN}, -QERR_RANGE},
};

static void run_gcase(void **state)
{
	const struct gcase *c = *state;
	samp_params greedy = {0.0f, 0, 1.0f, 0.0f}, t1 = {1.0f, 0, 1.0f, 0.0f};
	samp *s;
	samp_rng r;
	int tok = -1;

	assert_int_equal(samp_new(c->n, &s), QERR_OK);
	samp_rng_seed(&r, 3, 0);
	if (c->expect < 0) {
		assert_int_equal(samp_sample(s, &greedy, c->l, NULL, &tok),
				 -c->expect);
		assert_int_equal(samp_sample(s, &t1, c->l, &r, &tok),
				 -c->expect);
	} else {
		/* greedy needs no rng */
		assert_int_equal(samp_sample(s, &greedy, c->l, NULL, &tok),
				 QERR_OK);
		assert_int_equal(tok, c->expect);
	}
	samp_free(&s);
}

static void bad_args(void **state)
{
	samp *s = NULL;
	samp_params p = SAMP_PARAMS_DEFAULT;
	float l[2] = {0, 0};
	int tok;

	(void)state;
	assert_int_equal(samp_new(0, &s), QERR_RANGE);
	assert_null(s);
	assert_int_equal(samp_new((1 << 23) + 1, &s), QERR_RANGE);
	assert_int_equal(samp_new(2, NULL), QERR_ARG);
	assert_int_equal(samp_new(2, &s), QERR_OK);
	assert_int_equal(samp_vocab(s), 2);
	assert_int_equal(samp_sample(s, &p, l, NULL, &tok), QERR_ARG);
	assert_int_equal(samp_sample(s, NULL, l, NULL, &tok), QERR_ARG);
	assert_int_equal(samp_sample(s, &p, NULL, NULL, &tok), QERR_ARG);
	samp_free(&s);
	samp_free(&s); /* NULL-safe */
}

/* ---- helpers ------------------------------------------------------------ */

/* Deterministic pseudo-logits (test data, not part of any contract). */
static void fill_logits(float *l, int n, uint64_t seed, float scale)
{
	samp_rng r;

	samp_rng_seed(&r, seed, 12345);
	for (int i = 0; i < n; i++)
		l[i] = (float)((samp_rng_uniform(&r) - 0.5) * scale);
}

static int argmax(const float *l, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (l[i] > l[b])
			b = i;
	return b;
}

/* top_k = 1 is greedy at every temperature and with every top_p; so is
 * top_p = 0 with every top_k (OpenAI's and llama.cpp's 0: the nucleus
 * keeps at least the top token), ties to the lowest id as greedy. */
static void top_k1_is_greedy(void **state)
{
	enum { V = 1000 };
	static float l[V];
	static const float temps[] = {0.05f, 0.7f, 1.0f, 3.0f, 100.0f};
	samp *s;
	samp_rng r;

	(void)state;
	assert_int_equal(samp_new(V, &s), QERR_OK);
	for (int trial = 0; trial < 20; trial++) {
		fill_logits(l, V, (uint64_t)trial, 10.0f);
		if (trial % 2)
			l[trial * 7] = l[argmax(l, V)]; /* a tie */
		for (size_t t = 0; t < sizeof(temps) / sizeof(temps[0]); t++) {
			samp_params p = {temps[t], 1, trial % 3 ? 0.5f : 1.0f, 0.0f};
			int tok;

			samp_rng_seed(&r, (uint64_t)trial, t);
			assert_int_equal(samp_sample(s, &p, l, &r, &tok), 0);
			assert_int_equal(tok, argmax(l, V));
			for (int k = 0; k < 3; k++) {
				samp_params z = {temps[t], k ? 40 * k : 0,
						 0.0f, 0.0f};

				samp_rng_seed(&r, (uint64_t)trial, t);
				assert_int_equal(samp_sample(s, &z, l, &r,
							     &tok), 0);
				assert_int_equal(tok, argmax(l, V));
			}
		}
	}
	samp_free(&s);
}

/* ---- distribution ------------------------------------------------------- */

/*
 * Draw `draws` tokens and compare the counts with expected probabilities
 * (double-precision softmax over the allowed tokens) by chi-square. The
 * seed is fixed, so the statistic is a fixed number: the bound (about the
 * 1e-4 tail for the degrees of freedom used here) only guards against
 * bias, not luck. Tokens with probability 0 must never appear.
 */
static void check_dist(const char *name, const float *l, int n,
		       samp_params p, const double *prob, int draws,
		       double bound)
{
	samp *s;
	samp_rng r;
	int *cnt = calloc((size_t)n, sizeof(int));
	double chi = 0.0;
	int df = -1;

	assert_non_null(cnt);
	assert_int_equal(samp_new(n, &s), QERR_OK);
	samp_rng_seed(&r, 2024, 0);
	for (int i = 0; i < draws; i++) {
		int tok;

		assert_int_equal(samp_sample(s, &p, l, &r, &tok), QERR_OK);
		cnt[tok]++;
	}
	for (int i = 0; i < n; i++) {
		double e = prob[i] * draws;

		if (prob[i] == 0.0) {
			if (cnt[i])
				fail_msg("%s: token %d has p = 0 but was drawn "
					 "%d times", name, i, cnt[i]);
			continue;
		}
		chi += (cnt[i] - e) * (cnt[i] - e) / e;
		df++;
	}
	print_message("%s: chi2 = %.2f, df = %d, bound %.1f\n", name, chi, df,
		      bound);
	if (!(chi < bound))
		fail_msg("%s: chi2 %.2f >= %.1f", name, chi, bound);
	samp_free(&s);
	free(cnt);
}

static void softmax_ref(const float *l, int n, double t, const int *keep,
			double *prob)
{
	double m = -INFINITY, z = 0.0;

	for (int i = 0; i < n; i++)
		if (keep[i] && l[i] > m)
			m = l[i];
	for (int i = 0; i < n; i++) {
		prob[i] = keep[i] ? exp((l[i] - m) / t) : 0.0;
		z += prob[i];
	}
	for (int i = 0; i < n; i++)
		prob[i] /= z;
}

static void distribution(void **state)
{
	static const float l[8] = {1.0f, 2.0f, 0.5f, 3.0f,
				   -1.0f, 2.5f, 0.0f, NINF};
	int keep[8], rank[8] = {3, 5, 1, 0, 2, 6, 4, 7}; /* by logit */
	double prob[8];

	(void)state;
	/* T = 1, no filter; the masked token never comes */
	for (int i = 0; i < 8; i++)
		keep[i] = 1;
	softmax_ref(l, 8, 1.0, keep, prob);
	check_dist("T1", l, 8, (samp_params){1.0f, 0, 1.0f, 0.0f}, prob, 200000,
		   35.0);
	/* T = 0.5 */
	softmax_ref(l, 8, 0.5, keep, prob);
	check_dist("T0.5", l, 8, (samp_params){0.5f, 0, 1.0f, 0.0f}, prob, 200000,
		   35.0);
	/* top-k 3 at T = 2: tokens 3, 5, 1 */
	for (int i = 0; i < 8; i++)
		keep[i] = 0;
	for (int j = 0; j < 3; j++)
		keep[rank[j]] = 1;
	softmax_ref(l, 8, 2.0, keep, prob);
	check_dist("topk3_T2", l, 8, (samp_params){2.0f, 3, 1.0f, 0.0f}, prob,
		   100000, 25.0);
}

/* A large vocabulary through the top-p path (buckets + selection): the
 * kept set is checked exactly against a reference nucleus computed from
 * the documented definition, and frequencies by chi-square. */
static int cmp_rank(const void *pa, const void *pb, void *ctx)
{
	const float *l = ctx;
	int a = *(const int *)pa, b = *(const int *)pb;

	if (l[a] != l[b])
		return l[a] > l[b] ? -1 : 1;
	return (a > b) - (a < b);
}

static int nucleus_ref(const float *l, int n, float t, float top_p,
		       double *prob)
{
	int *ord = malloc((size_t)n * sizeof(int));
	float *y = malloc((size_t)n * sizeof(float));
	float m = l[argmax(l, n)];
	uint64_t z = 0, acc = 0, need;
	int cut = 0;

	for (int i = 0; i < n; i++) {
		ord[i] = i;
		y[i] = (l[i] - m) / t;
	}
	kern_softmax(y, n);
	for (int i = 0; i < n; i++)
		z += (uint64_t)(y[i] * 0x1.0p40f);
	need = (uint64_t)ceil((double)top_p * (double)z);
	qsort_r(ord, (size_t)n, sizeof(int), cmp_rank, (void *)l);
	for (cut = 0; cut < n; cut++) {
		acc += (uint64_t)(y[ord[cut]] * 0x1.0p40f);
		if (acc >= need)
			break;
	}
	for (int i = 0; i < n; i++)
		prob[i] = 0.0;
	for (int j = 0; j <= cut; j++)
		prob[ord[j]] = (double)(uint64_t)(y[ord[j]] * 0x1.0p40f) /
			       (double)acc;
	free(ord);
	free(y);
	return cut + 1;
}

static void top_p_large_vocab(void **state)
{
	enum { V = 151936 };
	float *l = malloc(V * sizeof(float));
	double *prob = malloc(V * sizeof(double));
	int kept;

	(void)state;
	/* peaked: 60 high logits over a low flat background */
	fill_logits(l, V, 7, 4.0f);
	for (int j = 0; j < 60; j++)
		l[(j * 2503) % V] = 8.0f + 0.05f * (float)j;
	kept = nucleus_ref(l, V, 0.7f, 0.8f, prob);
	print_message("peaked nucleus: %d tokens\n", kept);
	assert_true(kept > 10 && kept < 60);
	check_dist("topp_peaked", l, V, (samp_params){0.7f, 0, 0.8f, 0.0f}, prob,
		   6000, 60.0);
	/* all equal: the nucleus is the lowest ids, exactly */
	for (int i = 0; i < V; i++)
		l[i] = 1.5f;
	kept = nucleus_ref(l, V, 1.0f, 0.5f, prob);
	assert_int_equal(kept, V / 2);
	{
		samp *s;
		samp_rng r;
		samp_params p = {1.0f, 0, 0.5f, 0.0f};
		int tok, hi = 0;

		assert_int_equal(samp_new(V, &s), QERR_OK);
		samp_rng_seed(&r, 5, 0);
		for (int i = 0; i < 1000; i++) {
			assert_int_equal(samp_sample(s, &p, l, &r, &tok), 0);
			assert_true(tok < V / 2);
			hi += tok >= V / 4;
		}
		assert_true(hi > 420 && hi < 580); /* ~ Binomial(1000, 1/2) */
		samp_free(&s);
	}
	free(l);
	free(prob);
}

/* Top-p keeps exactly the smallest rank-order prefix with mass >= p, on
 * both paths (top-k off, and top-k on with k = V - 1). Probabilities are
 * 1/2, 1/4, 1/8, ... so each p below has a clear prefix. */
struct topp_case {
	const char *name;
	float top_p;
	int prefix; /* tokens 0 .. prefix-1 may appear, all of them do */
};

static const struct topp_case topp_cases[] = {
	{"p0.3", 0.3f, 1}, {"p0.5", 0.49f, 1}, {"p0.51", 0.51f, 2},
	{"p0.7", 0.7f, 2}, {"p0.76", 0.76f, 3}, {"p0.9", 0.9f, 4},
	{"p0.99", 0.99f, 7},
};

static void run_topp(void **state)
{
	const struct topp_case *c = *state;
	enum { V = 10 };
	float l[V];
	samp *s;

	for (int i = 0; i < V; i++)
		l[i] = -(float)i * 0.69314718f; /* p_i ~ 2^-(i+1) */
	assert_int_equal(samp_new(V, &s), QERR_OK);
	for (int path = 0; path < 2; path++) {
		samp_params p = {1.0f, path ? V - 1 : 0, c->top_p, 0.0f};
		int seen[V] = {0};
		samp_rng r;

		samp_rng_seed(&r, 77, (uint64_t)path);
		for (int i = 0; i < 4000; i++) {
			int tok;

			assert_int_equal(samp_sample(s, &p, l, &r, &tok), 0);
			seen[tok]++;
		}
		for (int i = 0; i < V; i++) {
			if ((i < c->prefix) != (seen[i] > 0))
				fail_msg("%s path %d: token %d seen %d times, "
					 "prefix %d", c->name, path, i,
					 seen[i], c->prefix);
		}
	}
	samp_free(&s);
}

/* min-p, exactly: every draw equals a reference written from samp.h's
 * pipeline (top-k, softmax, integer weights, top-p's prefix from Z,
 * min-p's floor ceil(min_p * q_max), the draw over the kept set in list
 * order) on the same RNG, on each path: the whole vocabulary with and
 * without top-p, and top-k. */
static int min_p_ref(const float *l, int n, const samp_params *p,
		     samp_rng *rng)
{
	int *ord = malloc((size_t)n * sizeof(int));
	float *y = malloc((size_t)n * sizeof(float));
	int k = p->top_k > 0 && p->top_k < n ? p->top_k : n, topk = k < n;
	int *list = malloc((size_t)n * sizeof(int)), *keep;
	uint64_t z = 0, qmax = 0, M, S = 0, r, acc = 0, need = 0;
	int tok = -1;

	keep = calloc((size_t)n, sizeof(int));
	for (int i = 0; i < n; i++)
		ord[i] = i;
	qsort_r(ord, (size_t)n, sizeof(int), cmp_rank, (void *)l);
	/* list order: rank for top-k, ids otherwise */
	for (int j = 0; j < k; j++)
		list[j] = topk ? ord[j] : j;
	for (int j = 0; j < k; j++)
		y[j] = (l[list[j]] - l[ord[0]]) / p->temperature;
	kern_softmax(y, k);
	for (int j = 0; j < k; j++) {
		uint64_t q = (uint64_t)(y[j] * 0x1.0p40f);

		z += q;
		qmax = q > qmax ? q : qmax;
	}
	M = (uint64_t)ceil((double)p->min_p * (double)qmax);
	if (p->top_p < 1.0f)
		need = (uint64_t)ceil((double)p->top_p * (double)z);
	/* the top-p prefix in rank order (positions of list) */
	for (int j = 0; j < k; j++) {
		int id = ord[j], pos = topk ? j : id;
		uint64_t q = (uint64_t)(y[pos] * 0x1.0p40f);

		keep[pos] = q >= M;
		acc += q;
		if (p->top_p < 1.0f && acc >= need) {
			for (int i = j + 1; i < k; i++)
				keep[topk ? i : ord[i]] = 0;
			break;
		}
	}
	for (int j = 0; j < k; j++)
		if (keep[j])
			S += (uint64_t)(y[j] * 0x1.0p40f);
	r = (uint64_t)(samp_rng_uniform(rng) * (double)S);
	r = r < S ? r : S - 1;
	acc = 0;
	for (int j = 0; j < k && tok < 0; j++) {
		if (!keep[j])
			continue;
		acc += (uint64_t)(y[j] * 0x1.0p40f);
		if (r < acc)
			tok = list[j];
	}
	free(ord);
	free(y);
	free(list);
	free(keep);
	return tok;
}

static void min_p_exact(void **state)
{
	enum { V = 3000 };
	static const samp_params ps[] = {
		{0.8f, 0, 1.0f, 0.05f}, {0.8f, 0, 1.0f, 0.3f},
		{1.3f, 0, 0.9f, 0.02f}, {1.3f, 0, 0.5f, 0.2f},
		{0.8f, 50, 1.0f, 0.1f}, {1.1f, 200, 0.8f, 0.01f},
		{0.8f, 0, 1.0f, 1.0f},
	};
	float *l = malloc(V * sizeof(float));
	samp *s;

	(void)state;
	assert_int_equal(samp_new(V, &s), QERR_OK);
	fill_logits(l, V, 11, 3.0f);
	for (size_t c = 0; c < sizeof(ps) / sizeof(ps[0]); c++) {
		samp_rng r, rr;
		int distinct = 0, last = -1;

		samp_rng_seed(&r, 99, c);
		for (int i = 0; i < 200; i++) {
			int tok, want;

			rr = r;
			want = min_p_ref(l, V, &ps[c], &rr);
			assert_int_equal(samp_sample(s, &ps[c], l, &r, &tok), 0);
			if (tok != want)
				fail_msg("case %zu draw %d: %d, reference %d",
					 c, i, tok, want);
			distinct += tok != last;
			last = tok;
		}
		/* min_p 1: the top token alone; otherwise a real draw */
		if (ps[c].min_p == 1.0f)
			assert_int_equal(distinct, 1);
		else
			assert_true(distinct > 1);
	}
	samp_free(&s);
	free(l);
}

/* ---- reproducibility ---------------------------------------------------- */

/* A toy "model": the logits of step t depend on the previous token. */
static void gen(samp *s, const samp_params *p, uint64_t seed, uint64_t idx,
		int *seq, int len)
{
	int n = samp_vocab(s), prev = 0;
	float *l = malloc((size_t)n * sizeof(float));
	samp_rng r;

	samp_rng_seed(&r, seed, idx);
	for (int t = 0; t < len; t++) {
		fill_logits(l, n, (uint64_t)prev * 31 + (uint64_t)t, 12.0f);
		assert_int_equal(samp_sample(s, p, l, &r, &seq[t]), QERR_OK);
		prev = seq[t];
	}
	free(l);
}

static void same_seed_same_sequence(void **state)
{
	enum { V = 5000, L = 64 };
	static const samp_params ps[] = {
		{1.0f, 0, 1.0f, 0.0f}, {0.7f, 40, 1.0f, 0.0f}, {0.7f, 0, 0.9f, 0.0f},
		{0.8f, 100, 0.95f, 0.0f},
	};
	int a[L], b[L], c[L];
	samp *s1, *s2;

	(void)state;
	assert_int_equal(samp_new(V, &s1), QERR_OK);
	assert_int_equal(samp_new(V, &s2), QERR_OK);
	for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		gen(s1, &ps[k], 42, 3, a, L);
		gen(s2, &ps[k], 42, 3, b, L); /* fresh scratch, same result */
		assert_memory_equal(a, b, sizeof(a));
		gen(s1, &ps[k], 42, 4, c, L);
		assert_memory_not_equal(a, c, sizeof(a));
		gen(s1, &ps[k], 43, 3, c, L);
		assert_memory_not_equal(a, c, sizeof(a));
	}
	samp_free(&s1);
	samp_free(&s2);
}

/* Same sequences on every ISA this CPU has (kern_softmax's contract). */
static void isa_invariance(void **state)
{
	enum { V = 20000, L = 48 };
	static const samp_params ps[] = {
		{1.0f, 0, 1.0f, 0.0f}, {0.7f, 40, 1.0f, 0.0f}, {0.7f, 0, 0.9f, 0.0f},
	};
	int ref[L], got[L];
	int saved = kern_isa();
	samp *s;

	(void)state;
	assert_int_equal(samp_new(V, &s), QERR_OK);
	for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
		assert_int_equal(kern_set_isa(KERN_ISA_SCALAR), QERR_OK);
		gen(s, &ps[k], 9, 1, ref, L);
		for (int isa = KERN_ISA_AVX2; isa <= KERN_ISA_LAST; isa++) {
			if (kern_set_isa(isa) != QERR_OK)
				continue;
			gen(s, &ps[k], 9, 1, got, L);
			assert_memory_equal(ref, got, sizeof(ref));
		}
	}
	kern_set_isa(saved);
	samp_free(&s);
}

/*
 * GOLDEN — the cross-host reproducibility contract. A run's samples must
 * reproduce on any host and in any later build; these values pin the RNG
 * derivation (samp.h) and the sampling pipeline. If this test fails, a
 * change broke reproducibility of every seeded run: do not "update the
 * numbers" unless that break is intended and announced.
 */
static void golden(void **state)
{
	static const uint64_t raw[4] = {0xef33f17055244b74ull, 0xe1f591112fb5051bull,
					    0xd8ab05640214863aull, 0xf985e1f2fb897b03ull};
	static const struct {
		samp_params p;
		int tok[10];
	} g[] = {
		{{1.0f, 0, 1.0f, 0.0f}, {18, 19, 11, 6, 5, 12, 18, 6, 6, 4}},
		{{0.7f, 5, 1.0f, 0.0f}, {6, 25, 6, 19, 19, 6, 6, 19, 19, 19}},
		{{0.8f, 0, 0.9f, 0.0f}, {19, 19, 12, 6, 5, 12, 18, 6, 6, 5}},
		{{1.3f, 8, 0.8f, 0.0f}, {25, 12, 6, 19, 19, 6, 25, 19, 19, 19}},
	};
	float l[32];
	samp *s;
	samp_rng r;

	(void)state;
	samp_rng_seed(&r, 0x5eed, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(samp_rng_next(&r), raw[i]);
	for (int i = 0; i < 32; i++)
		l[i] = (float)((i * 37) % 32) / 8.0f - 2.0f; /* exact values */
	assert_int_equal(samp_new(32, &s), QERR_OK);
	for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		samp_rng_seed(&r, 0x5eed, 7);
		for (int i = 0; i < 10; i++) {
			int tok;

			assert_int_equal(samp_sample(s, &g[k].p, l, &r, &tok),
					 0);
			if (tok != g[k].tok[i])
				fail_msg("golden %zu draw %d: %d != %d", k, i,
					 tok, g[k].tok[i]);
		}
	}
	samp_free(&s);
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
/*
 * LOG-PROBABILITY: our ln agrees with libm's log to ~1 ulp over the whole
 * weight range; samp_sample_lp draws exactly samp_sample's tokens, gives
 * ln(p) of the drawn token under the temperature/top-k distribution
 * (checked against a softmax in double), the same bits on every ISA, and
 * 0 for greedy.
 */
static void logprob(void **state)
{
	enum { V = 3000, L = 40 };
	static const samp_params ps[] = {
		{1.0f, 0, 1.0f, 0.0f}, {0.7f, 40, 1.0f, 0.0f}, {0.7f, 0, 0.9f, 0.0f},
		{0.8f, 100, 0.95f, 0.0f},
	};
	static const uint64_t z = 1ull << 40;
	float *l = malloc(V * sizeof(float));
	int saved = kern_isa();
	samp *s;

	(void)state;
	{
		double worst = 0;

		for (uint64_t q = 1; q <= z; q = q * 3 + 1) {
			double d = fabs(samp_logprob_of(q, z) -
					(log((double)q) - log((double)z)));

			worst = d > worst ? d : worst;
		}
		for (uint64_t q = 1; q < 1ull << 62; q = q * 5 + 3) {
			double d = fabs(samp_logprob_of(q, 1) - log((double)q));

			worst = d > worst ? d : worst;
		}
		printf("  ln: largest difference to libm %.3g\n", worst);
		assert_true(worst < 1e-13);
	}
	assert_true(samp_logprob_of(z, z) == 0.0);
	assert_true(samp_logprob_of(0, z) == 0.0);
	assert_int_equal(samp_new(V, &s), QERR_OK);
	for (size_t k = 0; k < N_OF(ps); k++) {
		samp_rng r1, r2;
		double ref[L];
		int prev = 0;

		samp_rng_seed(&r1, 4, 2);
		samp_rng_seed(&r2, 4, 2);
		for (int t = 0; t < L; t++) {
			int a, b;
			double lp, m = -INFINITY, zz = 0;

			fill_logits(l, V, (uint64_t)prev * 31 + (uint64_t)t,
				    12.0f);
			assert_int_equal(samp_sample(s, &ps[k], l, &r1, &a), 0);
			assert_int_equal(samp_sample_lp(s, &ps[k], l, &r2, &b,
							&lp), 0);
			assert_int_equal(a, b);
			assert_true(lp <= 0.0);
			if (ps[k].top_k == 0) { /* softmax over all, in double */
				for (int i = 0; i < V; i++)
					m = l[i] > m ? l[i] : m;
				for (int i = 0; i < V; i++)
					zz += exp((l[i] - m) / ps[k].temperature);
				if (fabs(lp - ((l[b] - m) / ps[k].temperature -
					       log(zz))) > 1e-4)
					fail_msg("params %zu token %d: ln p %g vs "
						 "%g", k, t, lp,
						 (l[b] - m) / ps[k].temperature -
							 log(zz));
			}
			ref[t] = lp;
			prev = b;
		}
		/* the same bits on every ISA */
		for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_LAST; isa++) {
			if (kern_set_isa(isa) != QERR_OK)
				continue;
			samp_rng_seed(&r2, 4, 2);
			prev = 0;
			for (int t = 0; t < L; t++) {
				int b;
				double lp;

				fill_logits(l, V, (uint64_t)prev * 31 +
						      (uint64_t)t, 12.0f);
				assert_int_equal(samp_sample_lp(s, &ps[k], l,
								&r2, &b, &lp),
						 0);
				assert_memory_equal(&lp, &ref[t], sizeof(lp));
				prev = b;
			}
		}
		kern_set_isa(saved);
	}
	{
		samp_params g = {0.0f, 0, 1.0f, 0.0f};
		int b;
		double lp = 1;

		assert_int_equal(samp_sample_lp(s, &g, l, NULL, &b, &lp), 0);
		assert_true(lp == 0.0);
	}
	samp_free(&s);
	free(l);
}

/* The alternatives samp.h promises, from its words: the candidates of
 * step 2 (the top_k first in rank order, else every token), their
 * integer weights after the temperature softmax, those of non-zero
 * weight by weight descending then id ascending, the first k, each
 * ln(q / Z). */
static int alt_ref(const float *l, int n, const samp_params *p, int k,
		   samp_alt *out)
{
	int *ord = malloc((size_t)n * sizeof(int));
	float *y = malloc((size_t)n * sizeof(float));
	uint64_t (*qi)[2] = malloc((size_t)n * sizeof(*qi)), z = 0;
	int kk = p->top_k > 0 && p->top_k < n ? p->top_k : n, m = 0;

	for (int i = 0; i < n; i++)
		ord[i] = i;
	qsort_r(ord, (size_t)n, sizeof(int), cmp_rank, (void *)l);
	for (int j = 0; j < kk; j++) /* list order: rank, or ids */
		y[j] = (l[kk < n ? ord[j] : j] - l[ord[0]]) / p->temperature;
	kern_softmax(y, kk);
	for (int j = 0; j < kk; j++) {
		uint64_t q = (uint64_t)(y[j] * 0x1.0p40f);

		z += q;
		if (q) {
			qi[m][0] = q;
			qi[m++][1] = (uint64_t)(kk < n ? ord[j] : j);
		}
	}
	/* weight descending, id ascending: a bubble pass is enough here */
	for (int a = 0; a < m; a++)
		for (int b = m - 1; b > a; b--)
			if (qi[b][0] > qi[b - 1][0] ||
			    (qi[b][0] == qi[b - 1][0] && qi[b][1] < qi[b - 1][1])) {
				uint64_t t0 = qi[b][0], t1 = qi[b][1];

				qi[b][0] = qi[b - 1][0];
				qi[b][1] = qi[b - 1][1];
				qi[b - 1][0] = t0;
				qi[b - 1][1] = t1;
			}
	m = m < k ? m : k;
	for (int j = 0; j < m; j++)
		out[j] = (samp_alt){(int32_t)qi[j][1],
				    samp_logprob_of(qi[j][0], z)};
	free(ord);
	free(y);
	free(qi);
	return m;
}

/*
 * TOP-K SCAN: the k kept are exactly the first k in rank order, whatever
 * the vocabulary's length (blocks and a tail), ties (many equal logits
 * across the cut) and masked runs; found through the alternatives, which
 * at a huge temperature (every kept weight nonzero) list all k. And the
 * top-k path validates the logits as greedy does: the first NaN or +inf
 * named, wherever it is (among the first k, in a block, in the tail),
 * all -inf refused.
 */
static void top_k_scan_exact(void **state)
{
	enum { V = 3001 };
	static float l[V];
	static const int ks[] = {2, 5, 16, 17, 40, 64};
	samp *s;
	samp_rng r;
	int *ord = malloc(V * sizeof(int));

	(void)state;
	assert_non_null(ord);
	assert_int_equal(samp_new(V, &s), QERR_OK);
	for (int trial = 0; trial < 12; trial++) {
		samp_rng_seed(&r, 77, (uint64_t)trial);
		/* 8 logit values: ties everywhere, the cut among them */
		for (int i = 0; i < V; i++)
			l[i] = (float)(samp_rng_next(&r) % 8) - 4.0f;
		for (int i = 100 * trial; i < 100 * trial + 300 && i < V; i++)
			l[i] = -INFINITY; /* a masked run */
		if (trial % 3 == 1) /* the best late: the heap moves in the tail */
			for (int i = V - 40; i < V; i += 3)
				l[i] = 9.0f + (float)(i % 5);
		if (trial % 3 == 2) /* few finite logits: fewer than some k */
			for (int i = 0; i < V; i++)
				if (i % 97)
					l[i] = -INFINITY;
		for (int i = 0; i < V; i++)
			ord[i] = i;
		qsort_r(ord, V, sizeof(int), cmp_rank, l);
		for (size_t t = 0; t < N_OF(ks); t++) {
			samp_params p = {1e30f, ks[t], 1.0f, 0.0f};
			samp_alt alt[SAMP_ALT_MAX];
			int tok, n_alt, want = 0;
			char got[V] = {0};

			assert_int_equal(samp_sample_top(s, &p, l, &r, &tok, NULL,
							 alt, ks[t], &n_alt), 0);
			for (int j = 0; j < ks[t]; j++)
				want += l[ord[j]] > -INFINITY;
			/* the masked among the k have weight 0: not listed */
			assert_int_equal(n_alt, want);
			for (int j = 0; j < n_alt; j++)
				got[alt[j].id] = 1;
			for (int j = 0; j < want; j++)
				if (!got[ord[j]])
					fail_msg("trial %d, k %d: rank %d (token %d) "
						 "not kept", trial, ks[t], j, ord[j]);
		}
	}
	/* validation on the top-k path */
	static const struct {
		int at;
		float v;
		const char *msg;
	} bad[] = {
		{3, NAN, "logit 3 is NaN"}, {1000, NAN, "logit 1000 is NaN"},
		{1000, INFINITY, "logit 1000 is +inf"},
		{V - 1, NAN, "logit 3000 is NaN"},
	};
	samp_params p = {0.7f, 40, 0.95f, 0.0f};
	int tok;

	for (size_t b = 0; b < N_OF(bad); b++) {
		fill_logits(l, V, b, 10.0f);
		l[bad[b].at] = bad[b].v;
		if (b == 2)
			l[2500] = NAN; /* a later one: the first is named */
		assert_int_equal(samp_sample(s, &p, l, &r, &tok), QERR_RANGE);
		assert_non_null(strstr(qerr_detail(), bad[b].msg));
	}
	for (int i = 0; i < V; i++)
		l[i] = -INFINITY;
	assert_int_equal(samp_sample(s, &p, l, &r, &tok), QERR_RANGE);
	assert_non_null(strstr(qerr_detail(), "all 3001 logits are -inf"));
	samp_free(&s);
	free(ord);
}

static void alternatives(void **state)
{
	enum { V = 600 };
	static const samp_params ps[] = {
		{1.0f, 0, 1.0f, 0.0f}, {0.7f, 40, 1.0f, 0.0f},
		{0.7f, 0, 0.9f, 0.0f}, {0.8f, 100, 0.95f, 0.05f},
		{1.3f, 5, 1.0f, 0.0f}, {0.9f, 0, 1.0f, 0.3f},
	};
	static const int ks[] = {1, 5, 20};
	float *l = malloc(V * sizeof(float));
	int saved = kern_isa();
	samp *s;

	(void)state;
	assert_int_equal(samp_new(V, &s), QERR_OK);
	for (int data = 0; data < 3; data++) {
		if (data == 0)
			fill_logits(l, V, 21, 12.0f);
		for (int i = 0; data == 1 && i < V; i++)
			l[i] = (float)(i % 7) / 2.0f; /* many equal weights */
		for (int i = 0; data == 2 && i < V; i++)
			l[i] = i == 17 || i == 400 ? 0.0f : -80.0f; /* two */
		for (size_t c = 0; c < N_OF(ps); c++) {
			for (size_t kx = 0; kx < N_OF(ks); kx++) {
				samp_alt want[20], got[20];
				samp_rng r1, r2;
				int n_want, n_got, a, b, k = ks[kx];
				double lp1, lp2;

				n_want = alt_ref(l, V, &ps[c], k, want);
				samp_rng_seed(&r1, 6, (uint64_t)c);
				samp_rng_seed(&r2, 6, (uint64_t)c);
				assert_int_equal(samp_sample_lp(s, &ps[c], l, &r1,
								&a, &lp1), 0);
				assert_int_equal(samp_sample_top(s, &ps[c], l,
								 &r2, &b, &lp2,
								 got, k, &n_got),
						 0);
				/* the same draw, the same RNG after it */
				assert_int_equal(a, b);
				assert_memory_equal(&lp1, &lp2, sizeof(lp1));
				assert_memory_equal(&r1, &r2, sizeof(r1));
				if (n_got != n_want)
					fail_msg("data %d params %zu k %d: %d "
						 "alternatives, reference %d",
						 data, c, k, n_got, n_want);
				for (int j = 0; j < n_got; j++) {
					assert_int_equal(got[j].id, want[j].id);
					assert_memory_equal(&got[j].logprob,
							    &want[j].logprob,
							    sizeof(double));
					if (got[j].id == b)
						assert_memory_equal(
							&got[j].logprob, &lp2,
							sizeof(double));
				}
				if (data == 2)
					assert_int_equal(n_got, k < 2 ? 1 : 2);
				/* the same list on every ISA */
				for (int isa = KERN_ISA_SCALAR;
				     isa <= KERN_ISA_LAST; isa++) {
					samp_alt again[20];
					int n_again;

					if (kern_set_isa(isa) != QERR_OK)
						continue;
					samp_rng_seed(&r2, 6, (uint64_t)c);
					assert_int_equal(samp_sample_top(
						s, &ps[c], l, &r2, &b, &lp2,
						again, k, &n_again), 0);
					assert_int_equal(n_again, n_got);
					for (int j = 0; j < n_got; j++) {
						assert_int_equal(again[j].id,
								 got[j].id);
						assert_memory_equal(
							&again[j].logprob,
							&got[j].logprob,
							sizeof(double));
					}
				}
				kern_set_isa(saved);
			}
		}
	}
	{
		/* greedy and top-k 1: the drawn token alone, 0 */
		samp_params g[] = {{0.0f, 0, 1.0f, 0.0f},
				   {0.7f, 1, 1.0f, 0.0f}};
		samp_alt got[3];
		samp_rng r;
		int b, n_got;
		double lp;

		fill_logits(l, V, 5, 4.0f);
		for (int i = 0; i < 2; i++) {
			samp_rng_seed(&r, 1, 0);
			assert_int_equal(samp_sample_top(s, &g[i], l, &r, &b,
							 &lp, got, 3, &n_got),
					 0);
			assert_int_equal(n_got, 1);
			assert_int_equal(got[0].id, b);
			assert_true(got[0].logprob == 0.0 && lp == 0.0);
		}
		/* k out of range; alt missing */
		assert_int_equal(samp_sample_top(s, &ps[0], l, &r, &b, &lp,
						 got, SAMP_ALT_MAX + 1, &n_got),
				 QERR_RANGE);
		assert_int_equal(samp_sample_top(s, &ps[0], l, &r, &b, &lp,
						 NULL, 3, &n_got), QERR_ARG);
	}
	samp_free(&s);
	free(l);
}

int main(void)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(bad_args),
		cmocka_unit_test(top_k1_is_greedy),
		cmocka_unit_test(distribution),
		cmocka_unit_test(top_p_large_vocab),
		cmocka_unit_test(same_seed_same_sequence),
		cmocka_unit_test(isa_invariance),
		cmocka_unit_test(golden),
		cmocka_unit_test(logprob),
		cmocka_unit_test(min_p_exact),
		cmocka_unit_test(alternatives),
		cmocka_unit_test(top_k_scan_exact),
	};
	struct CMUnitTest t[N_OF(pcases) + N_OF(gcases) + N_OF(topp_cases) +
			   N_OF(fixed)];
	size_t n = 0;

	for (size_t i = 0; i < N_OF(pcases); i++)
		t[n++] = (struct CMUnitTest){.name = pcases[i].name,
					     .test_func = run_pcase,
					     .initial_state = (void *)&pcases[i]};
	for (size_t i = 0; i < N_OF(gcases); i++)
		t[n++] = (struct CMUnitTest){.name = gcases[i].name,
					     .test_func = run_gcase,
					     .initial_state = (void *)&gcases[i]};
	for (size_t i = 0; i < N_OF(topp_cases); i++)
		t[n++] = (struct CMUnitTest){
			.name = topp_cases[i].name,
			.test_func = run_topp,
			.initial_state = (void *)&topp_cases[i]};
	for (size_t i = 0; i < N_OF(fixed); i++)
		t[n++] = fixed[i];
	return _cmocka_run_group_tests("samp", t, n, NULL, NULL);
}
