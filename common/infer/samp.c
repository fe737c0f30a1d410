/*
 * samp — the token sampler (see samp.h for the reproducibility contract):
 * the seeded per-sample RNG, and one draw over a vocabulary — greedy, or
 * temperature softmax with top-k and top-p cut in exact integer masses —
 * with the drawn token's log-probability and, when asked, the most likely
 * alternatives.
 * Owns nothing beyond the caller's scratch; callers: sc/ (one draw per
 * sample per round), tests.
 */
#include "infer/samp.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "qerr.h"

/* Weights are floor(p * 2^SAMP_QBITS); n_vocab <= 2^SAMP_VOCAB_BITS keeps
 * every sum below 2^63. */
#define SAMP_QBITS 40
#define SAMP_VOCAB_BITS 23

/* Top-p buckets: y = (l - m) / T in [-inf, 0] goes to bucket
 * floor(-y * SAMP_BUCKET_SCALE), the last bucket taking everything below.
 * y is monotone in the logit, so each bucket is a contiguous run of rank
 * order and "buckets < B" is a rank-order prefix. */
#define SAMP_NBUCKET 256
#define SAMP_BUCKET_SCALE 4.0f

struct cand {
	float l; /* logit */
	int id;  /* token id */
};

/* An alternative being chosen: its integer weight and token id. */
struct topq {
	uint64_t q;
	int id;
};

struct samp {
	int n;          /* vocabulary size */
	struct cand *c; /* (n) candidates: heap / rank-sorted / one bucket */
	float *w;       /* (n) scaled logits, then softmax, by list position */
	uint8_t *bk;    /* (n) top-p bucket of each token id */
	struct topq tq[SAMP_ALT_MAX]; /* the best alternatives so far */
};

/* ---- RNG ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *z)
{
	uint64_t x;

	*z += 0x9e3779b97f4a7c15ull;
	x = *z;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void samp_rng_seed(samp_rng *r, uint64_t seed0, uint64_t index)
{
	uint64_t z = seed0 + 7919ull * index;

	for (int k = 0; k < 4; k++)
		r->s[k] = splitmix64(&z);
}

uint64_t samp_rng_next(samp_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double samp_rng_uniform(samp_rng *r)
{
	return (double)(samp_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- params, object ----------------------------------------------------- */

int samp_params_check(const samp_params *p)
{
	if (!p)
		return qerr_fail(QERR_ARG, "samp: params is NULL");
	if (!isfinite(p->temperature) || p->temperature < 0.0f)
		return qerr_fail(QERR_RANGE,
				 "samp: temperature %g must be finite and >= 0",
				 (double)p->temperature);
	if (p->top_k < 0)
		return qerr_fail(QERR_RANGE,
				 "samp: top_k %d must be >= 0 (0 = off)",
				 p->top_k);
	if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
		return qerr_fail(QERR_RANGE,
				 "samp: top_p %g must be in [0, 1] (1 = off)",
				 (double)p->top_p);
	if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
		return qerr_fail(QERR_RANGE,
				 "samp: min_p %g must be in [0, 1] (0 = off)",
				 (double)p->min_p);
	return QERR_OK;
}

int samp_new(int n_vocab, samp **out)
{
	samp *s;

	if (!out)
		return qerr_fail(QERR_ARG, "samp_new: out is NULL");
	*out = NULL;
	if (n_vocab < 1 || n_vocab > (1 << SAMP_VOCAB_BITS))
		return qerr_fail(QERR_RANGE,
				 "samp_new: vocabulary size %d not in [1, 2^%d]",
				 n_vocab, SAMP_VOCAB_BITS);
	s = calloc(1, sizeof(*s));
	if (!s)
		goto fail;
	s->n = n_vocab;
	s->c = malloc((size_t)n_vocab * sizeof(*s->c));
	s->w = malloc((size_t)n_vocab * sizeof(*s->w));
	s->bk = malloc((size_t)n_vocab);
	if (!s->c || !s->w || !s->bk)
		goto fail;
	*out = s;
	return QERR_OK;
fail:
	samp_free(&s);
	return qerr_fail(QERR_NOMEM, "samp_new: scratch for %d tokens",
			 n_vocab);
}

void samp_free(samp **p)
{
	if (!p || !*p)
		return;
	free((*p)->c);
	free((*p)->w);
	free((*p)->bk);
	free(*p);
	*p = NULL;
}

int samp_vocab(const samp *s)
{
	return s->n;
}

/* ---- helpers ------------------------------------------------------------ */

/* Rank order: logit descending, then id ascending. A total order (ids are
 * unique), so any correct sort gives the same permutation. */
static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;

	if (a->l != b->l)
		return a->l > b->l ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

/* a ranks after b */
static inline int cand_worse(struct cand a, struct cand b)
{
	return a.l < b.l || (a.l == b.l && a.id > b.id);
}

/* Min-heap on rank (root = the worst kept candidate). */
static void heap_down(struct cand *h, int n, int i)
{
	struct cand v = h[i];

	for (;;) {
		int c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && cand_worse(h[c + 1], h[c]))
			c++;
		if (!cand_worse(h[c], v))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = v;
}


static inline uint64_t qweight(float p)
{
	return (uint64_t)(p * (float)(1ull << SAMP_QBITS)); /* exact, floor */
}

static inline int bucket_of(float y)
{
	float ny = -y * SAMP_BUCKET_SCALE; /* >= 0 since y <= 0 */

	return ny < (float)(SAMP_NBUCKET - 1) ? (int)ny : SAMP_NBUCKET - 1;
}

/* ceil(top_p * Z), within [1, Z]. */
static uint64_t top_p_target(float top_p, uint64_t z)
{
	double t = ceil((double)top_p * (double)z);
	uint64_t P = t >= (double)z ? z : (uint64_t)t;

	return P ? P : 1;
}

/* min-p's least kept weight M = ceil(min_p * q_max) (0: min-p off). */
static uint64_t min_p_floor(float min_p, uint64_t qmax)
{
	return min_p > 0.0f ? (uint64_t)ceil((double)min_p * (double)qmax)
			    : 0;
}

static uint64_t draw_r(samp_rng *rng, uint64_t s)
{
	uint64_t r = (uint64_t)(samp_rng_uniform(rng) * (double)s);

	return r < s ? r : s - 1;
}

/* a ranks before-or-at b */
static inline int at_or_before(float l, int id, struct cand b)
{
	return l > b.l || (l == b.l && id <= b.id);
}

/*
 * Weighted selection: the candidate c* of c[0, n) (any order) such that
 * the rank-order prefix ending at c* is the shortest whose weight sum
 * (weights q(w[id])) is >= need. *mass gets that prefix's sum. Requires
 * 0 < need <= total weight. Quickselect with exact integer masses, so the
 * answer is unique and independent of the pivots; a sort of the remaining
 * range bounds the worst case.
 */
static struct cand wselect(struct cand *c, int n, const float *w,
			   uint64_t need, uint64_t *mass)
{
	uint64_t base = 0; /* mass of the members ranked before c[lo] */
	int lo = 0, hi = n;

	for (int iter = 0; hi - lo > 32 && iter < 64; iter++) {
		int mid = lo + (hi - lo) / 2, a = lo, b = mid, e = hi - 1, pv;
		struct cand pivot, t;
		uint64_t ml = 0;

		/* median of three by rank */
		if (cand_worse(c[a], c[b])) { int x = a; a = b; b = x; }
		if (cand_worse(c[b], c[e])) { int x = b; b = e; e = x; }
		if (cand_worse(c[a], c[b])) { int x = a; a = b; b = x; }
		pv = b;
		t = c[pv]; c[pv] = c[hi - 1]; c[hi - 1] = t;
		pivot = c[hi - 1];
		pv = lo;
		for (int j = lo; j < hi - 1; j++) {
			if (cand_worse(pivot, c[j])) {
				t = c[j]; c[j] = c[pv]; c[pv] = t;
				ml += qweight(w[c[pv].id]);
				pv++;
			}
		}
		t = c[pv]; c[pv] = c[hi - 1]; c[hi - 1] = t;
		if (base + ml >= need) {
			hi = pv;
		} else if (base + ml + qweight(w[c[pv].id]) >= need) {
			*mass = base + ml + qweight(w[c[pv].id]);
			return c[pv];
		} else {
			base += ml + qweight(w[c[pv].id]);
			lo = pv + 1;
		}
	}
	qsort(c + lo, (size_t)(hi - lo), sizeof(*c), cand_cmp);
	for (int j = lo; j < hi; j++) {
		base += qweight(w[c[j].id]);
		if (base >= need || j == hi - 1) {
			*mass = base;
			return c[j];
		}
	}
	*mass = base; /* unreachable when 0 < need <= total */
	return c[lo];
}

/* Logits are scanned in blocks of SCAN_BLK: a test over a whole block is
 * one comparison per element with no branch between them (plain C that
 * the compiler turns into vector compares), and only a block that holds
 * what is sought is walked element by element. */
#define SCAN_BLK 16
#ifndef SAMP_PF_AHEAD
#define SAMP_PF_AHEAD 1024 /* floats: 4 KiB */
#endif

/* Some l[0, SCAN_BLK) equals t. */
static inline int blk_equal(const float *l, float t)
{
	int any = 0;

	for (int j = 0; j < SCAN_BLK; j++)
		any |= l[j] == t;
	return any;
}

/* The first i in [0, n) with l[i] == t (one exists). */
static int first_equal(const float *l, int n, float t)
{
	int i = 0;

	for (; i + SCAN_BLK <= n && !blk_equal(l + i, t); i += SCAN_BLK)
		;
	for (; l[i] != t; i++)
		;
	return i;
}

/* Sets the qerr detail for logits that hold NaN or +inf (the first
 * named) or are all -inf; returns -1. */
static int bad_logits(const float *l, int n)
{
	int i;

	for (i = 0; i < n && l[i] < INFINITY; i++)
		;
	if (i < n)
		qerr_fail(QERR_RANGE, "samp: logit %d is %s", i,
			  isnan(l[i]) ? "NaN" : "+inf");
	else
		qerr_fail(QERR_RANGE, "samp: all %d logits are -inf", n);
	return -1;
}

/* Validates logits; returns the argmax (ties to the lowest id), or -1 with
 * the qerr detail set. The max is exact in any order; the index is then
 * the first logit equal to it (-0 == +0, as in every comparison here). */
static int scan_max(const float *l, int n)
{
	float mx[SCAN_BLK], best = -INFINITY;
	int bad = 0, i = 0;

	for (int j = 0; j < SCAN_BLK; j++)
		mx[j] = -INFINITY;
	for (; i + SCAN_BLK <= n; i += SCAN_BLK) {
		for (int j = 0; j < SCAN_BLK; j++) {
			float v = l[i + j];

			bad |= !(v < INFINITY); /* NaN or +inf */
			mx[j] = v > mx[j] ? v : mx[j];
		}
	}
	for (; i < n; i++) {
		bad |= !(l[i] < INFINITY);
		mx[0] = l[i] > mx[0] ? l[i] : mx[0];
	}
	for (int j = 0; j < SCAN_BLK; j++)
		best = mx[j] > best ? mx[j] : best;
	if (bad || best == -INFINITY)
		return bad_logits(l, n);
	return first_equal(l, n, best);
}

/* ---- pipelines ---------------------------------------------------------- */

/* Some l[0, SCAN_BLK) is > t, NaN or +inf. */
static inline int blk_above_or_bad(const float *l, float t)
{
	int any = 0;

	for (int j = 0; j < SCAN_BLK; j++)
		any |= (l[j] > t) | !(l[j] < INFINITY);
	return any;
}

/* The top k of l[0, n) in rank order into c[0, k) (1 < k < n), the logits
 * validated on the way (scan_max's checks and messages): one pass over
 * the vocabulary, a bounded heap. Returns 0, or -1 with the qerr detail
 * set. */
static int top_k_scan(struct cand *c, const float *l, int n, int k)
{
	int bad = 0;

	for (int i = 0; i < k; i++) {
		c[i] = (struct cand){l[i], i};
		bad |= !(l[i] < INFINITY);
	}
	for (int i = k / 2 - 1; i >= 0; i--)
		heap_down(c, k, i);
	/* Ids grow along the scan, so a later equal logit ranks after the
	 * root: only a strictly larger logit enters. Once the heap holds
	 * good candidates few logits beat its root, so a block with none
	 * (and nothing invalid) is passed over by one test. */
	for (int i = k; i < n; i++) {
		/* the logits come from memory (the head wrote all rows'
		 * before any is sampled): lines requested 4 KiB ahead
		 * (the 0.5b's N = 32 sampling 155-168 -> 82-84 ms of a
		 * 4.2 s decode, an Intel Xeon; a hint, no result moves) */
		if (i + SAMP_PF_AHEAD < n)
			__builtin_prefetch(l + i + SAMP_PF_AHEAD);
		if (i + SCAN_BLK <= n && !blk_above_or_bad(l + i, c[0].l)) {
			i += SCAN_BLK - 1;
			continue;
		}
		bad |= !(l[i] < INFINITY);
		if (l[i] > c[0].l) {
			c[0] = (struct cand){l[i], i};
			heap_down(c, k, 0);
		}
	}
	qsort(c, (size_t)k, sizeof(*c), cand_cmp);
	/* c[0] is now the argmax: -inf only if every logit is */
	return bad || c[0].l == -INFINITY ? bad_logits(l, n) : 0;
}

/* top-k, then temperature, then top-p over the k candidates (rank order),
 * c[0, k) from top_k_scan. */
static int sample_top_k(samp *s, const samp_params *p, samp_rng *rng,
			uint64_t *wq, uint64_t *wz)
{
	struct cand *c = s->c;
	float *w = s->w;
	int k = p->top_k;
	uint64_t z = 0, r, acc, qmax = 0, M;

	for (int j = 0; j < k; j++)
		w[j] = (c[j].l - c[0].l) / p->temperature;
	kern_softmax(w, k);
	for (int j = 0; j < k; j++) {
		uint64_t q = qweight(w[j]);

		z += q;
		qmax = q > qmax ? q : qmax;
	}
	*wz = z;
	if (p->top_p < 1.0f) {
		uint64_t P = top_p_target(p->top_p, z);

		acc = 0;
		for (int j = 0; j < k; j++) {
			acc += qweight(w[j]);
			if (acc >= P) {
				k = j + 1;
				break;
			}
		}
		z = acc;
	}
	if ((M = min_p_floor(p->min_p, qmax))) {
		z = 0;
		for (int j = 0; j < k; j++)
			if (qweight(w[j]) >= M)
				z += qweight(w[j]);
	}
	r = draw_r(rng, z);
	acc = 0;
	for (int j = 0; j < k; j++) {
		if (qweight(w[j]) < M)
			continue;
		acc += qweight(w[j]);
		if (r < acc) {
			*wq = qweight(w[j]);
			return c[j].id;
		}
	}
	*wq = qweight(w[k - 1]);
	return c[k - 1].id; /* unreachable: r < z */
}

/* w[i] = (l[i] - m) / t, and (bk) each one's top-p bucket, in blocks of
 * SCAN_BLK that the compiler turns into vector operations (IEEE
 * division and conversion: the same bits as one by one). */
static void scale_logits(float *restrict w, uint8_t *restrict bk,
			 const float *restrict l, int n, float m, float t)
{
	int i = 0;

	for (; i + SCAN_BLK <= n; i += SCAN_BLK)
		for (int j = 0; j < SCAN_BLK; j++)
			w[i + j] = (l[i + j] - m) / t;
	for (; i < n; i++)
		w[i] = (l[i] - m) / t;
	if (!bk)
		return;
	for (i = 0; i + SCAN_BLK <= n; i += SCAN_BLK)
		for (int j = 0; j < SCAN_BLK; j++)
			bk[i + j] = (uint8_t)bucket_of(w[i + j]);
	for (; i < n; i++)
		bk[i] = (uint8_t)bucket_of(w[i]);
}

/* temperature, then (optionally) top-p over the whole vocabulary; list
 * order is token id order and w is indexed by token id. */
static int sample_full(samp *s, const samp_params *p, const float *l,
		       float m, samp_rng *rng, uint64_t *wq, uint64_t *wz)
{
	float *w = s->w, t = p->temperature;
	uint8_t *bk = s->bk;
	int n = s->n, use_p = p->top_p < 1.0f;
	uint64_t z = 0, r, acc = 0, qmax = 0, M;

	scale_logits(w, use_p ? bk : NULL, l, n, m, t);
	kern_softmax(w, n);

	if (!use_p) {
		for (int i = 0; i < n; i++) {
			uint64_t q = qweight(w[i]);

			z += q;
			qmax = q > qmax ? q : qmax;
		}
		*wz = z;
		if ((M = min_p_floor(p->min_p, qmax))) {
			z = 0;
			for (int i = 0; i < n; i++)
				if (qweight(w[i]) >= M)
					z += qweight(w[i]);
		}
		r = draw_r(rng, z);
		for (int i = 0; i < n; i++) {
			if (qweight(w[i]) < M)
				continue;
			acc += qweight(w[i]);
			if (r < acc) {
				*wq = qweight(w[i]);
				return i;
			}
		}
		*wq = qweight(w[n - 1]);
		return n - 1; /* unreachable: r < z */
	}

	uint64_t bmass[SAMP_NBUCKET] = {0}, below = 0, need, kept;
	int b, k = 0;
	struct cand cut;

	for (int i = 0; i < n; i++) {
		uint64_t q = qweight(w[i]);

		z += q;
		qmax = q > qmax ? q : qmax;
		bmass[bk[i]] += q;
	}
	*wz = z;
	need = top_p_target(p->top_p, z);
	for (b = 0; b < SAMP_NBUCKET - 1; b++) {
		if (below + bmass[b] >= need)
			break;
		below += bmass[b];
	}
	for (int i = 0; i < n; i++)
		if (bk[i] == b)
			s->c[k++] = (struct cand){l[i], i};
	cut = wselect(s->c, k, w, need - below, &kept);
	kept += below;
	if ((M = min_p_floor(p->min_p, qmax))) {
		kept = 0;
		for (int i = 0; i < n; i++)
			if (at_or_before(l[i], i, cut) && qweight(w[i]) >= M)
				kept += qweight(w[i]);
	}
	r = draw_r(rng, kept);
	for (int i = 0; i < n; i++) {
		if (at_or_before(l[i], i, cut) && qweight(w[i]) >= M) {
			acc += qweight(w[i]);
			if (r < acc) {
				*wq = qweight(w[i]);
				return i;
			}
		}
	}
	*wq = qweight(w[cut.id]);
	return cut.id; /* unreachable: r < kept */
}

/* ln(x) for x >= 1: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
 * ln m = 2 atanh(u), u = (m - 1) / (m + 1), |u| < 0.172, by its odd series
 * to u^25 (error < 1e-19 relative to the result's magnitude). IEEE double
 * + - * / only, in a fixed order: the same bits on every host. */
static double ln_u64(uint64_t x)
{
	static const double ln2 = 0x1.62e42fefa39efp-1;
	double m, u, u2, t;
	int e = 63 - __builtin_clzll(x);

	m = (double)x / (double)(1ull << e); /* in [1, 2); exact scaling */
	if (m > 0x1.6a09e667f3bcdp+0) {       /* sqrt(2) */
		m /= 2;
		e++;
	}
	u = (m - 1) / (m + 1);
	u2 = u * u;
	t = 1.0 / 25;
	for (int k = 23; k >= 1; k -= 2)
		t = 1.0 / k + u2 * t;
	return (double)e * ln2 + 2 * u * t;
}

double samp_logprob_of(uint64_t q, uint64_t z)
{
	return q && z ? ln_u64(q) - ln_u64(z) : 0.0;
}

/* ---- alternatives ------------------------------------------------------- */

/* (qa, ida) comes before (qb, idb): weight descending, then id ascending */
static inline int topq_before(uint64_t qa, int ida, struct topq b)
{
	return qa > b.q || (qa == b.q && ida < b.id);
}

/* Offers token id of weight q to the best k kept in t[0, *n) (sorted). */
static inline void topq_offer(struct topq *t, int *n, int k, uint64_t q,
			      int id)
{
	int i;

	if (!q || (*n == k && !topq_before(q, id, t[k - 1])))
		return;
	i = *n < k ? (*n)++ : k - 1;
	while (i > 0 && topq_before(q, id, t[i - 1])) {
		t[i] = t[i - 1];
		i--;
	}
	t[i] = (struct topq){q, id};
}

/* The k best candidates of the draw just made (path: the top-k list
 * c[0, kk) with weights w by position, or the whole vocabulary with w by
 * id) into alt, each ln(q / z). */
static int alternatives(samp *s, int top_k_path, int kk, uint64_t z,
			samp_alt *alt, int k)
{
	struct topq *t = s->tq;
	int n = 0;

	if (top_k_path) {
		for (int j = 0; j < kk; j++)
			topq_offer(t, &n, k, qweight(s->w[j]), s->c[j].id);
	} else {
		for (int i = 0; i < s->n; i++) {
			uint64_t q = qweight(s->w[i]);

			/* ids grow: an equal weight ranks after the last */
			if (n < k || q > t[k - 1].q)
				topq_offer(t, &n, k, q, i);
		}
	}
	for (int i = 0; i < n; i++)
		alt[i] = (samp_alt){t[i].id, samp_logprob_of(t[i].q, z)};
	return n;
}

int samp_sample_top(samp *s, const samp_params *p, const float *logits,
		    samp_rng *rng, int *token, double *logprob,
		    samp_alt *alt, int k, int *n_alt)
{
	uint64_t wq = 1, wz = 1;
	int rc, am, path = 0; /* 0 a point mass, 1 top-k, 2 full */

	if (!s || !p || !logits || !token || (k && (!alt || !n_alt)))
		return qerr_fail(QERR_ARG, "samp_sample: NULL argument");
	if (k < 0 || k > SAMP_ALT_MAX)
		return qerr_fail(QERR_RANGE, "samp: %d alternatives asked "
				 "(0..%d)", k, SAMP_ALT_MAX);
	rc = samp_params_check(p);
	if (rc)
		return rc;
	if (p->temperature > 0.0f && !rng)
		return qerr_fail(QERR_ARG, "samp_sample: rng is NULL");
	if (p->temperature > 0.0f && p->top_k > 1 && p->top_k < s->n) {
		/* the scan validates the logits and finds the argmax too */
		if (top_k_scan(s->c, logits, s->n, p->top_k))
			return QERR_RANGE;
		*token = sample_top_k(s, p, rng, &wq, &wz);
		path = 1;
	} else if ((am = scan_max(logits, s->n)) < 0) {
		return QERR_RANGE;
	} else if (p->temperature == 0.0f) {
		*token = am;
	} else if (p->top_k == 1) {
		(void)samp_rng_next(rng); /* one draw per call when T > 0 */
		*token = am;
	} else {
		*token = sample_full(s, p, logits, logits[am], rng, &wq, &wz);
		path = 2;
	}
	if (logprob)
		*logprob = samp_logprob_of(wq, wz);
	if (!k)
		return QERR_OK;
	if (!path) {
		alt[0] = (samp_alt){am, 0.0};
		*n_alt = 1;
	} else {
		*n_alt = alternatives(s, path == 1, p->top_k, wz, alt, k);
	}
	return QERR_OK;
}

int samp_sample_lp(samp *s, const samp_params *p, const float *logits,
		   samp_rng *rng, int *token, double *logprob)
{
	return samp_sample_top(s, p, logits, rng, token, logprob, NULL, 0,
			       NULL);
}

int samp_sample(samp *s, const samp_params *p, const float *logits,
		samp_rng *rng, int *token)
{
	return samp_sample_lp(s, p, logits, rng, token, NULL);
}
