/*
 * samp — the token sampler: greedy, top-k, temperature, top-p; seeded,
 * reproducible draws.
 *
 * implements: samp_params validation, the per-sample RNG (splitmix64 seed
 * expansion + xoshiro256**), and samp_sample() over a vocabulary of logits
 * with caller-owned scratch (no allocation per token).
 *
 * CONTRACT — reproducibility. The token returned by samp_sample() depends
 * only on the bits of the logits, the params and the RNG state; never on
 * the thread count, the host or the ISA. Exponentials go through
 * kern_softmax() (bit-identical on every ISA by kern's contract), masses
 * are exact integer sums, ordering ties are broken by the lower token id,
 * and the remaining float arithmetic is plain IEEE single/double (the
 * project builds with -std=c11: no fp contraction, no fast-math).
 * A sample's token sequence therefore depends only on the logits it sees,
 * the params and (seed0, sample index).
 *
 * RNG DERIVATION (cross-process, cross-host contract; changing any step
 * changes every sampled sequence — tests/test_samp.c pins the output):
 *   z      = seed0 + 7919 * index                  (uint64, wraps mod 2^64)
 *   s[k]   = splitmix64(&z) for k = 0, 1, 2, 3, where splitmix64 is
 *              z += 0x9e3779b97f4a7c15;
 *              x = z;
 *              x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
 *              x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
 *              return x ^ (x >> 31);
 *   (four distinct splitmix64 states give four distinct outputs, so the
 *   xoshiro state is never all-zero)
 *   next   = xoshiro256** (Blackman & Vigna 2018, rotl(s[1] * 5, 7) * 9)
 *   u      = (next >> 11) * 2^-53, a double in [0, 1)
 * samp_sample() consumes exactly one u per call except in greedy mode
 * (temperature == 0), which consumes none.
 *
 * PIPELINE, in this order:
 *   0. temperature == 0: greedy — the token with the largest logit, ties
 *      to the lowest id. top_k/top_p/min_p are ignored. No RNG draw.
 *   1. top-k (top_k > 0 and top_k < vocab): keep the k first tokens in
 *      RANK ORDER = logit descending, then token id ascending.
 *      (top_k == 1 is greedy, but still consumes one draw when T > 0.)
 *   2. temperature softmax over the candidates (the k kept, in rank order,
 *      or the whole vocabulary in id order):
 *        m   = the largest candidate logit
 *        y_i = (l_i - m) / T                       (float)
 *        p   = kern_softmax(y)                     (bit-exact on every ISA)
 *        q_i = floor(p_i * 2^40)                   (uint64 weight)
 *        Z   = sum of q_i                          (exact: order-free)
 *      Integer weights make every mass below exact, hence independent of
 *      summation order. The price: a token with p_i < 2^-40 (~1e-12) has
 *      weight 0 and is never drawn.
 *   3. top-p (top_p < 1): keep the SMALLEST PREFIX of the candidates in
 *      rank order whose weight sum is >= P = ceil(top_p * (double)Z).
 *   3b. min-p (min_p > 0): of those, keep only the tokens whose weight is
 *      >= M = ceil(min_p * (double)q_max), q_max the largest weight of
 *      the candidates: p >= min_p * p_max in the exact integer weights.
 *      (Top-p's P still counts from Z: the two cuts are independent, the
 *      kept set is both's; the argmax token always stays.)
 *   4. draw: S = weight of the kept set, r = floor(u * (double)S) (clamped
 *      to S - 1); walk the kept set in LIST ORDER — rank order when top-k
 *      is active, token id order otherwise — and return the first token
 *      whose running weight sum exceeds r.
 * Top-k is unaffected by T (exp is monotone), so steps 1-3 equal the
 * Hugging Face / vLLM warper order (temperature, top-k, top-p): top-p sees
 * temperature-scaled probabilities, and so does min-p (as in vLLM and
 * Hugging Face's MinPLogitsWarper). NOTE this is NOT llama.cpp's default
 * chain (common_params_sampling::samplers: ... top_k, typical_p, top_p,
 * min_p, xtc, temperature), where temperature comes last and top-p is
 * evaluated on T = 1 probabilities.
 *
 * COST (V = vocab): greedy one pass; top-k O(V log k) with a bounded heap
 * plus k exps; otherwise kern_softmax over V. Top-p without top-k never
 * sorts the vocabulary: a histogram of the scaled logits (exact integer
 * masses) finds the bucket holding the cut, a weighted quickselect finds
 * the cut inside it, and the draw walks the vocabulary in id order testing
 * "ranks at or before the cut". The result never depends on the bucketing.
 * Alternatives (samp_sample_top, k > 0) add one pass over the candidates'
 * weights keeping the best k. Scratch: 13 bytes per token, allocated once
 * by samp_new().
 *
 * Logits must be finite or -INFINITY (masked tokens); NaN or +INFINITY, or
 * all logits -INFINITY, is QERR_RANGE.
 *
 * Ownership/threads: a samp object is scratch for ONE thread at a time;
 * keep one per worker thread. The RNG state belongs to the sample (one
 * samp_rng per sample, advanced by each draw).
 */
#ifndef QUORUM_SAMP_H
#define QUORUM_SAMP_H

#include <stdint.h>

typedef struct samp_params {
	float temperature; /* >= 0, finite; 0 = greedy */
	int top_k;         /* >= 0; 0 (or >= vocab) = off */
	float top_p;       /* in [0, 1]; 1 = off; 0 (as any p below the
			    * top token's share) keeps that token only */
	float min_p;       /* in [0, 1]; 0 = off */
} samp_params;

/* temperature 1, no filters. */
#define SAMP_PARAMS_DEFAULT ((samp_params){1.0f, 0, 1.0f, 0.0f})

typedef struct samp_rng {
	uint64_t s[4]; /* xoshiro256** state */
} samp_rng;

/* Seeds the RNG of sample `index` of a run with seed `seed0` (see above). */
void samp_rng_seed(samp_rng *r, uint64_t seed0, uint64_t index);
/* Next raw 64-bit output. */
uint64_t samp_rng_next(samp_rng *r);
/* Next double in [0, 1) from the top 53 bits of samp_rng_next(). */
double samp_rng_uniform(samp_rng *r);

/* QERR_OK or QERR_RANGE (with a qerr detail naming the parameter). */
int samp_params_check(const samp_params *p);

typedef struct samp samp;

/* Scratch for vocabularies of n_vocab tokens, 1 <= n_vocab <= 2^23 (so
 * that 2^40-scaled weights sum below 2^63): QERR_RANGE / QERR_ARG /
 * QERR_NOMEM. */
int samp_new(int n_vocab, samp **out);
void samp_free(samp **p);
int samp_vocab(const samp *s);

/*
 * Samples one token from logits[0 .. n_vocab) (borrowed, not modified) and
 * writes it to *token. rng may be NULL only when p->temperature == 0.
 * Returns QERR_OK, QERR_RANGE (bad params or logits; detail says which),
 * QERR_ARG (NULL argument).
 */
int samp_sample(samp *s, const samp_params *p, const float *logits,
		samp_rng *rng, int *token);

/*
 * LOG-PROBABILITY. samp_sample_lp also gives the natural log of the drawn
 * token's probability under the distribution of step 2 (temperature
 * softmax over the candidates, before top-p): ln(q_token / Z) from the
 * integer weights, so it is exact up to the weights' 2^-40 grain and the
 * same bits on every ISA (our own ln: IEEE double + - * / in a fixed
 * order, no libm). Greedy and top-k 1 give 0 (a point mass). logprob may
 * be NULL.
 */
int samp_sample_lp(samp *s, const samp_params *p, const float *logits,
		   samp_rng *rng, int *token, double *logprob);

/*
 * ALTERNATIVES (OpenAI's top_logprobs). samp_sample_top draws exactly as
 * samp_sample_lp (the same token, log-probability and RNG use) and also
 * gives the k most likely tokens of the distribution that log-probability
 * is taken from — step 2's candidates (the top-k kept, else the whole
 * vocabulary), before top-p and min-p cut them — with their
 * log-probabilities, computed as the drawn token's (samp_logprob_of of
 * the integer weights), so the drawn token, when among them, carries the
 * very bits of *logprob. Only tokens of non-zero weight are listed;
 * ORDER: weight descending, ties to the lower token id (a total order on
 * exact integers: the same list on every ISA and thread). Greedy and
 * top-k 1 give the drawn token alone with 0 (a point mass). alt holds k
 * entries, 0 <= k <= SAMP_ALT_MAX; *n_alt gets how many were written
 * (fewer than k when fewer tokens have weight). k = 0 costs nothing.
 */
#define SAMP_ALT_MAX 64

typedef struct samp_alt {
	int32_t id;
	double logprob;
} samp_alt;

int samp_sample_top(samp *s, const samp_params *p, const float *logits,
		    samp_rng *rng, int *token, double *logprob,
		    samp_alt *alt, int k, int *n_alt);
/* ln(q / z) as above for integer weights 0 < q <= z (0 if either is 0). */
double samp_logprob_of(uint64_t q, uint64_t z);

#endif
