/*
 * sc — self-consistency in one process (see sc.h): prefill once, fork N
 * samples, decode them in batched lockstep, extract answers, vote. Called
 * by the CLI, the worker and the coordinator. The confidence weight
 * exp(g) is mathf_exp (kernels/mathf.h), the same bits on every host.
 */
#include "sc/sc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/fwd.h"
#include "kernels/mathf.h"
#include "sc/pfx.h"
#include "qerr.h"
#include "kernels/tpool.h"

typedef struct {
	uint32_t id;
	kv_seq seq;
	float *logits;       /* (vocab) */
	int32_t *tokens;     /* (seq.n_tokens) its prompt; NULL: imported */
} sc_root;

struct sc_engine {
	const model *m;
	const tok *t;
	sc_engine_params p;
	tpool *tp;
	fwd *f;
	samp *sampler;
	kv_pool *pool;       /* grown on demand */
	float *masked;       /* (vocab) logits with end-of-generation masked */
	int32_t *eog;        /* (n_eog) end-of-generation token ids */
	int n_eog;
	uint32_t peak_in_use;/* blocks, this run */
	int fixed_pool;      /* pool created once (named or sized) */
	sc_root *roots;      /* (n_roots) kept prefills */
	int n_roots, cap_roots;
	uint32_t next_root;
	struct {
		char *name;
		kv_pool *pool;  /* mapped read-only, linked at slot i + 1 */
	} linked[KV_MAX_SLOTS - 1];
	int n_linked;
	/* sc_run's prefix cache (sc_engine_params.prefix_cache > 0): the
	 * roots of recent prompts, kept between runs */
	pfx *cache_ix;
	struct sc_cached {
		kv_seq seq;
		int32_t *tokens;
		size_t n;
		uint64_t used;   /* e->tick when last used */
	} *cached;
	int n_cached;
	uint64_t tick;
};

/* One sample being decoded. */
typedef struct {
	int index;
	kv_seq seq;
	samp_rng rng;
	const float *logits; /* row to sample next */
	int32_t next;        /* token to feed */
	int done;
	sc_sample *out;
	size_t text_cap;
	/* confidence: log-probabilities in units of 2^-32 nats */
	int64_t lp_sum;      /* all drawn tokens */
	int64_t *ring;       /* (conf window) the last ones */
	int64_t win_sum;     /* sum of the ring */
	int64_t win_min;     /* least full-window sum so far */
	int n_drawn;
	struct sc_job *job;  /* the job it belongs to */
	int appended;        /* has been forwarded (holds a private tail) */
} fork_state;

/* The online confidence filter (sc_params.filter_*). */
typedef struct {
	int warm;            /* samples in the warm-up; 0: off */
	double pct;
	int armed;           /* thr is known */
	double thr;
} sc_filter;

/* sc_run's early stopping: the decision over out[0..prefix) in index
 * order, and how many forks may be in flight. */
typedef struct {
	sc_filter flt;
	stop_state ss;
	int width;           /* forks in flight at most */
	int prefix;          /* samples pushed */
	int decided;         /* the request is decided at prefix */
	int started, finished;
} sc_stopper;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

const char *sc_mode_name(int mode)
{
	switch (mode) {
	case SC_RESET: return "reset";
	case SC_PAGED: return "paged";
	case SC_BATCHED: return "batched";
	default: return "unknown";
	}
}

int sc_mode_parse(const char *s)
{
	for (int m = SC_RESET; m <= SC_BATCHED; m++)
		if (!strcmp(s, sc_mode_name(m)))
			return m;
	return -1;
}

const char *sc_finish_name(int finish)
{
	return finish == SC_FINISH_STOP ? "stop"
	       : finish == SC_FINISH_FILTERED ? "filtered" : "length";
}

int sc_engine_new(const model *m, const tok *t, const sc_engine_params *p,
		  sc_engine **out)
{
	sc_engine *e;
	int rc, rows;

	*out = NULL;
	if (p->n_threads < 1 || p->block_tokens < 1 || p->max_batch < 1 ||
	    p->prefill_chunk < 1 || kv_elem_size(p->kv_dtype) == 0)
		return qerr_fail(QERR_RANGE, "engine: bad parameters");
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
		kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, p->block_tokens,
				p->pool_blocks ? p->pool_blocks : 4096,
				p->kv_dtype};

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
	free(e->eog);
	free(e);
	*ep = NULL;
}

int sc_stop_strs_add(sc_stop_strs *q, const char *s, size_t len)
{
	if (q->n < 0 || q->n >= SC_STOP_STR_MAX)
		return qerr_fail(QERR_RANGE, "at most %d stop strings",
				 SC_STOP_STR_MAX);
	if (len < 1 || len > SC_STOP_STR_LEN || memchr(s, 0, len))
		return qerr_fail(QERR_RANGE, "a stop string must be 1..%d "
				 "bytes without NUL", SC_STOP_STR_LEN);
	memcpy(q->s[q->n], s, len);
	q->len[q->n++] = (uint8_t)len;
	return 0;
}

/* The longest stop string, in bytes (0: none). */
static size_t stop_strs_longest(const sc_stop_strs *q)
{
	size_t m = 0;

	for (int i = 0; i < q->n; i++)
		if (q->len[i] > m)
			m = q->len[i];
	return m;
}

int sc_params_check(const sc_params *p)
{
	int rc = samp_params_check(&p->sp);

	if (rc)
		return rc;
	if (p->stop_strs.n < 0 || p->stop_strs.n > SC_STOP_STR_MAX)
		return qerr_fail(QERR_RANGE, "%d stop strings (at most %d)",
				 p->stop_strs.n, SC_STOP_STR_MAX);
	for (int i = 0; i < p->stop_strs.n; i++)
		if (p->stop_strs.len[i] < 1 ||
		    p->stop_strs.len[i] > SC_STOP_STR_LEN ||
		    memchr(p->stop_strs.s[i], 0, p->stop_strs.len[i]))
			return qerr_fail(QERR_RANGE, "stop string %d: 1..%d "
					 "bytes without NUL", i,
					 SC_STOP_STR_LEN);
	if (p->n < 1 || p->n > 65536)
		return qerr_fail(QERR_RANGE, "n = %d must be in 1..65536", p->n);
	if (p->max_new < 1 || p->max_new > 1 << 20)
		return qerr_fail(QERR_RANGE, "max_new_tokens = %d must be in "
				 "1..1048576", p->max_new);
	if (p->mode < SC_RESET || p->mode > SC_BATCHED)
		return qerr_fail(QERR_RANGE, "unknown mode %d", p->mode);
	if (p->vote != SC_VOTE_MAJORITY && p->vote != SC_VOTE_CONFIDENCE)
		return qerr_fail(QERR_RANGE, "unknown vote %d", p->vote);
	if (p->filter_warmup < 0 || p->filter_warmup > 65536 ||
	    !(p->filter_pct >= 0 && p->filter_pct <= 100))
		return qerr_fail(QERR_RANGE, "confidence filter: warm-up %d "
				 "must be in 0..65536, percentile %g in "
				 "0..100", p->filter_warmup, p->filter_pct);
	if (p->conf_window < 0 || p->conf_window > SC_CONF_WINDOW_MAX)
		return qerr_fail(QERR_RANGE, "confidence window %d must be in "
				 "1..%d", p->conf_window, SC_CONF_WINDOW_MAX);
	return stop_rule_check(&p->stop);
}

/* Blocks for n tokens. */
static uint32_t blocks_for(const sc_engine *e, uint64_t n)
{
	return (uint32_t)((n + e->p.block_tokens - 1) / e->p.block_tokens);
}

static void cache_room(sc_engine *e, uint64_t need);

/* A pool of at least need blocks (a fixed pool reports exhaustion as it
 * happens instead). */
static int ensure_pool_blocks(sc_engine *e, uint64_t need)
{
	kv_params kp = {e->m->cfg.n_layers, e->m->cfg.kv_dim,
			e->p.block_tokens, 0, e->p.kv_dtype};

	/* cached prompts give way to this one (all of them when the pool is
	 * made anew) */
	cache_room(e, e->fixed_pool || need <= KV_BLOCK_MASK ? need
							      : UINT64_MAX);
	if (e->fixed_pool)
		return 0;
	if (need > KV_BLOCK_MASK)
		return qerr_fail(QERR_FULL, "KV pool of %llu blocks is too large",
				 (unsigned long long)need);
	if (e->pool && kv_pool_params(e->pool)->n_blocks >= need)
		return 0;
	kv_pool_free(&e->pool);
	/* with a prefix cache, room for cached prompts besides this one */
	if (e->cache_ix && 2 * need <= KV_BLOCK_MASK)
		need *= 2;
	kp.n_blocks = (uint32_t)need;
	return kv_pool_new(&kp, &e->pool);
}

/* A pool large enough for one prefix plus `forks` private tails. */
static int ensure_pool(sc_engine *e, size_t n_prompt, int forks, int max_new)
{
	return ensure_pool_blocks(e, blocks_for(e, n_prompt + 1) +
					     (uint64_t)forks *
						     (blocks_for(e, (uint64_t)max_new) + 1));
}

static void track_peak(sc_engine *e)
{
	kv_stats st;

	kv_pool_stats(e->pool, &st);
	if (st.in_use > e->peak_in_use)
		e->peak_in_use = st.in_use;
}

static int append_text(fork_state *f, const char *piece, size_t n)
{
	sc_sample *s = f->out;

	if (s->len + n + 1 > f->text_cap) {
		size_t nc = (s->len + n + 1) * 2;
		char *nt = realloc(s->text, nc);

		if (!nt)
			return qerr_fail(QERR_NOMEM, "out of memory for text");
		s->text = nt;
		f->text_cap = nc;
	}
	memcpy(s->text + s->len, piece, n);
	s->len += n;
	s->text[s->len] = '\0';
	return 0;
}

/* Records a drawn token's log-probability (rounded as conf_add sums it)
 * and where its piece will start in the text. */
static int token_lp_add(sc_sample *s, double lp)
{
	int n = s->n_token_lp;

	if (!(n & (n - 1))) { /* 0, 1, 2, 4, ...: grow to the next power */
		size_t cap = n ? 2 * (size_t)n : 1;
		double *a = realloc(s->token_lp, cap * sizeof(*a));
		uint32_t *b;

		if (!a)
			return qerr_fail(QERR_NOMEM, "out of memory for "
					 "log-probabilities");
		s->token_lp = a;
		if (!(b = realloc(s->token_off, cap * sizeof(*b))))
			return qerr_fail(QERR_NOMEM, "out of memory for "
					 "log-probabilities");
		s->token_off = b;
	}
	s->token_lp[n] = (double)(int64_t)(lp * 0x1p32) / 0x1p32;
	s->token_off[n] = s->len > UINT32_MAX ? UINT32_MAX : (uint32_t)s->len;
	s->n_token_lp = n + 1;
	return 0;
}

/* After s's text grew by its last added bytes: cuts it before the first
 * stop string that now occurs (none did before, so a new one ends in the
 * added bytes); 1 when it did. */
static int stop_strs_cut(const sc_stop_strs *q, sc_sample *s, size_t added)
{
	size_t longest = stop_strs_longest(q), from, cut = SIZE_MAX;

	from = s->len - added;
	from = from > longest - 1 ? from - (longest - 1) : 0;
	for (int i = 0; i < q->n; i++) {
		const char *hit = memmem(s->text + from, s->len - from,
					 q->s[i], q->len[i]);

		if (hit && (size_t)(hit - s->text) < cut)
			cut = (size_t)(hit - s->text);
	}
	if (cut == SIZE_MAX)
		return 0;
	s->len = cut;
	s->text[cut] = '\0';
	for (int i = 0; i < s->n_token_lp; i++)
		if (s->token_off[i] > cut)
			s->token_off[i] = (uint32_t)cut;
	return 1;
}

/* Draws the next token of f and records it; marks f done on a stop. */
static int conf_window(const sc_params *p)
{
	return p->conf_window > 0 ? p->conf_window : SC_CONF_WINDOW_DEFAULT;
}

/* Records one drawn token's log-probability (ring allocated at start). */
static void conf_add(fork_state *f, int w, double lp)
{
	int64_t x = (int64_t)(lp * 0x1p32); /* toward 0: exact scaling */
	int slot = f->n_drawn % w;

	f->lp_sum += x;
	f->win_sum += x - (f->n_drawn >= w ? f->ring[slot] : 0);
	f->ring[slot] = x;
	f->n_drawn++;
	if (f->n_drawn >= w && f->win_sum < f->win_min)
		f->win_min = f->win_sum;
}

/* The sample's confidence fields from its fork's sums. */
static void conf_finish(const fork_state *f, int w, sc_sample *s)
{
	int n = f->n_drawn;
	double g;

	s->mean_logprob = n ? (double)f->lp_sum / 0x1p32 / n : 0.0;
	g = n >= w ? (double)f->win_min / 0x1p32 / w : s->mean_logprob;
	s->group_conf = g;
	s->weight = sc_conf_weight(g);
}

uint64_t sc_conf_weight(double g)
{
	uint64_t w;

	if (!(g <= 0)) /* NaN or positive: log-probabilities never are */
		g = 0;
	w = (uint64_t)(mathf_exp((float)g) * 0x1p32f);
	return w > STOP_WEIGHT_ONE ? STOP_WEIGHT_ONE : w;
}

int sc_vote_parse(const char *s)
{
	if (!strcmp(s, "majority"))
		return SC_VOTE_MAJORITY;
	if (!strcmp(s, "confidence"))
		return SC_VOTE_CONFIDENCE;
	return -1;
}

const char *sc_vote_name(int vote)
{
	return vote == SC_VOTE_CONFIDENCE ? "confidence" : "majority";
}

static int step_sample(sc_engine *e, const sc_params *p, fork_state *f)
{
	const float *lg = f->logits;
	const char *piece;
	size_t plen;
	int tokid, rc;
	double lp;

	if (p->ignore_eos) {
		memcpy(e->masked, lg, (size_t)e->m->cfg.vocab * sizeof(float));
		for (int i = 0; i < e->n_eog; i++)
			e->masked[e->eog[i]] = -INFINITY;
		lg = e->masked;
	}
	if ((rc = samp_sample_lp(e->sampler, &p->sp, lg, &f->rng, &tokid,
				 &lp)))
		return rc;
	conf_add(f, conf_window(p), lp);
	if (p->logprobs && (rc = token_lp_add(f->out, lp)))
		return rc;
	if (tok_is_eog(e->t, tokid)) {
		f->out->finish = SC_FINISH_STOP;
		f->done = 1;
		return 0;
	}
	piece = tok_piece(e->t, tokid, 0, &plen);
	if ((rc = append_text(f, piece ? piece : "", plen)))
		return rc;
	f->out->n_tokens++;
	if (p->stop_strs.n && stop_strs_cut(&p->stop_strs, f->out, plen)) {
		f->out->finish = SC_FINISH_STOP;
		f->done = 1;
	} else if (f->out->n_tokens >= p->max_new) {
		f->out->finish = SC_FINISH_LENGTH;
		f->done = 1;
	}
	/* what a stop string could still cut: its length less one */
	if (f->done)
		f->out->settled = f->out->len;
	else {
		size_t hold = p->stop_strs.n
				      ? stop_strs_longest(&p->stop_strs) - 1
				      : 0;

		f->out->settled = f->out->len > hold ? f->out->len - hold : 0;
	}
	f->next = tokid;
	return 0;
}

/* Marks a finished sample: extracts its answer and reports it. A sample
 * the filter cut has none. */
static int finish(fork_state *f, int w, sc_sample_cb cb, void *ctx)
{
	sc_sample *s = f->out;

	conf_finish(f, w, s);
	if (!s->text && !(s->text = calloc(1, 1)))
		return qerr_fail(QERR_NOMEM, "out of memory for text");
	s->settled = s->len;
	s->has_answer = s->finish != SC_FINISH_FILTERED &&
			vote_extract(s->text, s->len, s->answer,
				     sizeof(s->answer));
	return cb ? cb(ctx, s) : 0;
}

/* The filter's verdict on f after a drawn token: cut it (finish
 * "filtered") when past the warm-up its full-window mean fell below the
 * threshold, or, shorter than a window, it ended with its mean below. */
static void filter_check(const sc_filter *flt, fork_state *f, int w)
{
	double g;

	if (!flt || !flt->armed || f->index < flt->warm)
		return;
	if (f->n_drawn >= w)
		g = (double)f->win_min / 0x1p32 / w;
	else if (f->done)
		g = (double)f->lp_sum / 0x1p32 / f->n_drawn;
	else
		return;
	if (g < flt->thr) {
		f->out->finish = SC_FINISH_FILTERED;
		f->done = 1;
	}
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Arms the filter once samples 0..warm-1 (out, in sample order) are in:
 * the pct-th percentile of their group confidences, nearest rank below. */
static int filter_arm(sc_filter *flt, const sc_sample *out, int prefix)
{
	double *v;
	int k;

	if (!flt->warm || flt->armed || prefix < flt->warm)
		return 0;
	if (!(v = malloc((size_t)flt->warm * sizeof(*v))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	for (int i = 0; i < flt->warm; i++)
		v[i] = out[i].group_conf;
	qsort(v, (size_t)flt->warm, sizeof(*v), dbl_cmp);
	k = (int)(flt->pct / 100.0 * (double)(flt->warm - 1));
	flt->thr = v[k < 0 ? 0 : k >= flt->warm ? flt->warm - 1 : k];
	flt->armed = 1;
	free(v);
	return 0;
}

/* Pushes one finished sample to the decision (its weight when the vote
 * is weighted); 0 or an error. */
static int push_sample(sc_stopper *st, const sc_sample *x)
{
	int d = stop_push_w(&st->ss, x->has_answer ? x->answer : NULL,
			    st->ss.unit == 1 ? 1 : x->weight);

	if (d < 0)
		return -d;
	st->prefix++;
	st->decided = d;
	return 0;
}

/* Pushes the finished samples that extend the prefix; 0 or an error. */
static int stop_advance(sc_stopper *st, const sc_sample *out, int n,
			const int *done)
{
	int rc = 0;

	while (!rc && !st->decided && st->prefix < n && done[st->prefix])
		rc = push_sample(st, &out[st->prefix]);
	return rc ? rc : filter_arm(&st->flt, out, st->prefix);
}

typedef struct sc_job sc_job;

/* What a job of the merged decode loop does (the internal form of
 * sc_batch_decode/_prefill; sc_run's jobs). Defined with the loop below. */
typedef struct {
	const sc_params *p;       /* NULL: a prefill job */
	const kv_seq *root;       /* decode from (borrowed), or NULL */
	kv_seq *view;             /* ... or this view, moved into the job */
	const float *root_logits; /* borrowed; NULL: copy_logits or prompt */
	const float *copy_logits; /* copied into the job */
	const int32_t *prompt;    /* prefill this first (copied) */
	size_t n_prompt;
	int publish;              /* keep the prefilled root (sc_root) */
	const int *idx;           /* NULL: 0..n-1 */
	int n;
	sc_sample *out;           /* (n) the caller's; NULL: the job's own */
	sc_stopper *st;           /* sc_run's early stopping, or NULL */
	sc_filter *flt;
	int width;                /* forks in flight at most (0: n) */
	sc_job_cbs cb;
} job_init;
static int run_solo(sc_engine *e, job_init *ji, sc_job_stats *st);

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
static void cache_room(sc_engine *e, uint64_t need)
{
	if (!e->n_cached)
		return;
	if (!e->pool || kv_pool_params(e->pool)->n_blocks < need) {
		sc_engine_cache_clear(e);
		return;
	}
	while (e->n_cached && kv_pool_free_blocks(e->pool) < need)
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
static int prefill_cached(sc_engine *e, const int32_t *prompt, size_t n,
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
static void cache_keep(sc_engine *e, const int32_t *prompt, size_t n,
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

/* cached: from the prefix cache when it is on (not in reset mode, the
 * baseline that prefills every sample). */
static int prefill(sc_engine *e, const int32_t *prompt, size_t n_prompt,
		   kv_seq *root, float *logits, sc_result *res, int cached)
{
	double t0 = now_ms();
	int reused = 0;
	int rc = cached && e->cache_ix
			 ? prefill_cached(e, prompt, n_prompt, root, logits,
					  &reused)
			 : fwd_prefill(e->f, e->pool, root, prompt,
				       (int)n_prompt, logits);

	res->stats.n_reused += reused;

	track_peak(e);
	res->stats.prefill_ms += now_ms() - t0;
	res->stats.n_prefills++;
	return rc;
}

/* One sample at a time (reset and paged modes): out[s] for s in order
 * until the stopper decides. */
static int run_one(sc_engine *e, const sc_params *p, const kv_seq *root,
		   const float *root_logits, int s, sc_result *res,
		   sc_stopper *st)
{
	job_init ji = {0};
	sc_job_stats js = {0};
	int rc;

	ji.p = p;
	ji.root = root;
	ji.root_logits = root_logits;
	ji.idx = &s;
	ji.n = 1;
	ji.out = &res->samples[s];
	ji.flt = &st->flt;
	rc = run_solo(e, &ji, &js);
	res->stats.gen_tokens += js.gen_tokens;
	st->started++;
	if (rc)
		return rc;
	st->finished++;
	if ((rc = push_sample(st, &res->samples[s])))
		return rc;
	return filter_arm(&st->flt, res->samples, st->prefix);
}

/* The reset and paged modes (the batched one runs in merged rounds). */
static int run_samples(sc_engine *e, const int32_t *prompt, size_t n_prompt,
		       const sc_params *p, sc_result *res, float *root_logits,
		       sc_stopper *st)
{
	kv_seq root;
	int rc = 0;
	double t0;

	kv_seq_init(&root);
	if (p->mode == SC_RESET) {
		for (int s = 0; s < p->n && !rc && !st->decided; s++) {
			rc = prefill(e, prompt, n_prompt, &root, root_logits, res,
				     0);
			t0 = now_ms();
			if (!rc)
				rc = run_one(e, p, &root, root_logits, s, res,
					     st);
			res->stats.decode_ms += now_ms() - t0;
			kv_seq_free(e->pool, &root);
		}
		return rc;
	}
	rc = prefill(e, prompt, n_prompt, &root, root_logits, res, 1);
	t0 = now_ms();
	for (int s = 0; s < p->n && !rc && !st->decided; s++)
		rc = run_one(e, p, &root, root_logits, s, res, st);
	res->stats.decode_ms += now_ms() - t0;
	if (!rc && e->cache_ix)
		cache_keep(e, prompt, n_prompt, &root);
	kv_seq_free(e->pool, &root);
	return rc;
}

/* The stop report of a run decided at st->prefix. */
static void stop_report(const sc_params *p, const sc_stopper *st,
			sc_result *r)
{
	sc_stop_stats *o = &r->stop;
	uint64_t est;

	o->rule = p->stop;
	o->fired = st->ss.fired;
	o->budget = p->n;
	o->reported = st->prefix;
	o->started = st->started;
	o->finished = st->finished;
	o->cancelled = st->started - st->finished;
	o->tokens_reported = 0;
	for (int i = 0; i < st->prefix; i++)
		o->tokens_reported += (uint64_t)r->samples[i].n_tokens +
				      (r->samples[i].finish == SC_FINISH_STOP);
	est = st->prefix ? o->tokens_reported * (uint64_t)p->n /
				   (uint64_t)st->prefix : 0;
	o->tokens_saved = est > r->stats.gen_tokens ? est - r->stats.gen_tokens
						    : 0;
	o->posterior = st->ss.posterior;
	o->filtered = 0;
	for (int i = 0; i < st->prefix; i++)
		o->filtered += r->samples[i].finish == SC_FINISH_FILTERED;
	o->filter_threshold = st->flt.armed ? st->flt.thr : 0.0;
	o->leader = stop_leader_count(&st->ss);
	o->second = stop_second_count(&st->ss);
	o->run = st->ss.run;
}

void sc_sample_fini(sc_sample *s)
{
	free(s->text);
	free(s->token_lp);
	free(s->token_off);
	s->text = NULL;
	s->token_lp = NULL;
	s->token_off = NULL;
	s->n_token_lp = 0;
}

void sc_result_fini(sc_result *r)
{
	if (!r)
		return;
	for (int i = 0; r->samples && i < r->n; i++)
		sc_sample_fini(&r->samples[i]);
	free(r->samples);
	vote_result_fini(&r->vote);
	memset(r, 0, sizeof(*r));
	r->vote.winner = VOTE_NONE;
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

/* ---- cluster building blocks ----------------------------------------- */

static int need_fixed(const sc_engine *e)
{
	if (!e->fixed_pool)
		return qerr_fail(QERR_ARG, "engine has no fixed KV pool (set "
				 "pool_name or pool_blocks)");
	return 0;
}

static sc_root *find_root(const sc_engine *e, uint32_t id)
{
	for (int i = 0; i < e->n_roots; i++)
		if (e->roots[i].id == id)
			return &e->roots[i];
	return NULL;
}

/* A new root slot with its logits buffer; the sequence is empty. */
static int new_root(sc_engine *e, sc_root **out)
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

/* Commits (keep) or drops the root new_root() handed out. */
static void end_root(sc_engine *e, sc_root *r, int keep)
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

	if ((rc = need_fixed(e)))
		return rc;
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if ((rc = new_root(e, &r)))
		return rc;
	if (!(rc = root_tokens(r, prompt, n)))
		rc = fwd_prefill(e->f, e->pool, &r->seq, prompt, (int)n,
				 r->logits);
	end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

int sc_root_get(const sc_engine *e, uint32_t root_id, sc_root_desc *out)
{
	const sc_root *r = find_root(e, root_id);

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
	sc_root *r = find_root(e, root_id);

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

	return (size_t)kp->kv_dim * kv_elem_size(kp->dtype);
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
	const sc_root *r = find_root(e, root_id);

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	return sc_root_export_rows(e, root_id, from, r->seq.n_tokens, bytes,
				   len);
}

int sc_root_export_rows(const sc_engine *e, uint32_t root_id, uint32_t from,
			uint32_t to, void **bytes, size_t *len)
{
	const sc_root *r = find_root(e, root_id);
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

	if ((rc = need_fixed(e)))
		return rc;
	rb = row_bytes(e);
	if (n_tokens < 1 || n_tokens > (uint32_t)e->m->cfg.ctx_len ||
	    n_base >= n_tokens ||
	    len != (size_t)(n_tokens - n_base) * e->m->cfg.n_layers * 2 * rb)
		return qerr_fail(QERR_FORMAT, "root import: %zu bytes for "
				 "tokens %u..%u", len, n_base, n_tokens);
	if (n_base && (!(base = find_root(e, base_id)) ||
		       base->seq.n_tokens < n_base))
		return qerr_fail(QERR_MISSING, "root import: no root %u with "
				 "%u tokens to start from", base_id, n_base);
	if ((rc = new_root(e, &r)))
		return rc;
	if (n_base) {
		base = find_root(e, base_id); /* new_root may move the roots */
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
	end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

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

/* ---- the merged decode loop (sc_batch) ------------------------------- */

struct sc_job {
	sc_job *next;
	uint32_t id;
	sc_params p;
	int w;                  /* confidence window */
	const kv_seq *root;     /* forks fork from it: &own, &view, borrowed */
	kv_seq own, view;
	const float *root_logits;
	float *logits_buf;      /* (vocab) owned */
	int32_t *prompt;        /* prefill: prompt[filled..n_prompt) to go */
	size_t n_prompt, filled;
	int prefilling;         /* the root is not complete */
	int pf_started;         /* its blocks are reserved */
	int publish;
	uint32_t need_root;     /* blocks the prompt takes */
	int n;                  /* samples (0: a prefill job) */
	fork_state *fs;         /* (n) */
	sc_sample *out;         /* (n) */
	int own_out;
	int *done;              /* (n) */
	int n_started, n_act, width;
	uint32_t need;          /* worst-case private blocks of one fork */
	sc_stopper *st;
	sc_filter *flt;
	sc_job_cbs cb;
	sc_job_stats stats;
	double t0;
	int rc;
	int starved;            /* could not start for lack of blocks */
	int active;             /* took part in this round */
};

struct sc_batch {
	sc_engine *e;
	int max_live, prefill_tokens;
	void (*on_forward)(void *ctx); /* after every forward */
	void *fctx;
	sc_job *jobs;           /* in arrival (id) order */
	int n_jobs;
	uint32_t next_id;
	uint32_t rr;            /* admission starts after this job id */
	fork_state **act;       /* (cap_act) live forks of all jobs */
	int n_act, cap_act;
	float *lg;              /* (cap_lg rows, vocab) last forward's logits */
	int cap_lg;
	kv_seq **seqs;          /* (max_batch) */
	int32_t *toks;
	int *ones;
	uint64_t rounds;
};

static void batch_job_free(sc_batch *b, sc_job *j);

static int batch_create(sc_engine *e, const sc_batch_params *p,
			sc_batch **out)
{
	sc_batch *b;
	int B = e->p.max_batch, rows = fwd_max_rows(e->f);

	*out = NULL;
	if (p->max_live < 1)
		return qerr_fail(QERR_RANGE, "batch: max_live %d < 1",
				 p->max_live);
	if (p->prefill_tokens > rows)
		return qerr_fail(QERR_RANGE, "batch: prefill_tokens %d is more "
				 "than the engine's forward rows (%d: its "
				 "prefill_chunk)", p->prefill_tokens, rows);
	if (!(b = calloc(1, sizeof(*b))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	b->e = e;
	b->max_live = p->max_live;
	b->on_forward = p->on_forward;
	b->fctx = p->ctx;
	b->prefill_tokens = p->prefill_tokens < 1 ? e->p.prefill_chunk
						  : p->prefill_tokens;
	b->next_id = 1;
	b->seqs = calloc((size_t)B, sizeof(*b->seqs));
	b->toks = calloc((size_t)B, sizeof(*b->toks));
	b->ones = calloc((size_t)B, sizeof(*b->ones));
	if (!b->seqs || !b->toks || !b->ones) {
		sc_batch_free(&b);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < B; i++)
		b->ones[i] = 1;
	*out = b;
	return 0;
}

int sc_batch_new(sc_engine *e, const sc_batch_params *p, sc_batch **out)
{
	int rc;

	*out = NULL;
	if ((rc = need_fixed(e)))
		return rc;
	return batch_create(e, p, out);
}

static int batch_add(sc_batch *b, const job_init *ji, sc_job **out)
{
	sc_engine *e = b->e;
	const int V = e->m->cfg.vocab;
	sc_job *j = calloc(1, sizeof(*j));
	int rc = 0;

	if (!j)
		return qerr_fail(QERR_NOMEM, "out of memory");
	kv_seq_init(&j->own);
	kv_seq_init(&j->view);
	j->cb = ji->cb;
	j->n = ji->p ? ji->n : 0;
	if (ji->p)
		j->p = *ji->p;
	j->w = conf_window(&j->p);
	j->st = ji->st;
	j->flt = ji->flt;
	j->publish = ji->publish;
	j->width = ji->width > 0 ? ji->width : j->n;
	if (ji->copy_logits || ji->prompt)
		j->logits_buf = malloc((size_t)V * sizeof(float));
	if (j->n) {
		j->fs = calloc((size_t)j->n, sizeof(*j->fs));
		j->done = calloc((size_t)j->n, sizeof(*j->done));
		j->own_out = !ji->out;
		j->out = ji->out ? ji->out
				 : calloc((size_t)j->n, sizeof(*j->out));
	}
	if (ji->prompt)
		j->prompt = malloc(ji->n_prompt * sizeof(*j->prompt));
	if ((j->n && (!j->fs || !j->done || !j->out)) ||
	    ((ji->copy_logits || ji->prompt) && !j->logits_buf) ||
	    (ji->prompt && !j->prompt)) {
		rc = qerr_fail(QERR_NOMEM, "out of memory for a job of %d "
			       "samples", j->n);
		goto fail;
	}
	if (ji->prompt) {
		memcpy(j->prompt, ji->prompt, ji->n_prompt * sizeof(*j->prompt));
		j->n_prompt = ji->n_prompt;
		j->prefilling = 1;
		j->need_root = blocks_for(e, ji->n_prompt);
		j->root = &j->own;
		j->root_logits = j->logits_buf;
	} else if (ji->view) {
		j->view = *ji->view;
		kv_seq_init(ji->view);
		j->root = &j->view;
	} else {
		j->root = ji->root;
	}
	if (ji->copy_logits) {
		memcpy(j->logits_buf, ji->copy_logits, (size_t)V * sizeof(float));
		j->root_logits = j->logits_buf;
	} else if (ji->root_logits) {
		j->root_logits = ji->root_logits;
	}
	if (j->n) {
		uint64_t rt = ji->prompt ? ji->n_prompt : j->root->n_tokens;

		j->need = blocks_for(e, rt % (uint64_t)e->p.block_tokens +
					 (uint64_t)j->p.max_new);
		j->stats.blocks_mapped =
			(uint32_t)j->n * (uint32_t)(rt / e->p.block_tokens);
	}
	for (int i = 0; i < j->n; i++) {
		int s = ji->idx ? ji->idx[i] : i;

		kv_seq_init(&j->fs[i].seq);
		j->fs[i].index = s;
		j->fs[i].out = &j->out[i];
		j->out[i].index = s;
		samp_rng_seed(&j->fs[i].rng, j->p.seed, (uint64_t)s);
	}
	j->id = b->next_id++;
	if (!b->next_id)
		b->next_id = 1;
	j->t0 = now_ms();
	/* append: the list stays in arrival order */
	{
		sc_job **pp = &b->jobs;

		while (*pp)
			pp = &(*pp)->next;
		*pp = j;
	}
	b->n_jobs++;
	if (out)
		*out = j;
	return 0;
fail:
	if (ji->view) {
		/* the caller's view stays the caller's */
		kv_seq_init(&j->view);
	}
	batch_job_free(b, j);
	return rc;
}

/* Frees a job's memory (its forks are off the live list already). */
static void batch_job_free(sc_batch *b, sc_job *j)
{
	for (int i = 0; j->fs && i < j->n; i++) {
		kv_seq_free(b->e->pool, &j->fs[i].seq);
		free(j->fs[i].ring);
	}
	if (j->own_out)
		for (int i = 0; i < j->n; i++)
			sc_sample_fini(&j->out[i]);
	if (j->own_out)
		free(j->out);
	kv_seq_free(b->e->pool, &j->own);
	kv_seq_free(NULL, &j->view); /* a view holds no references */
	free(j->fs);
	free(j->done);
	free(j->prompt);
	free(j->logits_buf);
	free(j);
}

/* Takes j off the batch: its live forks' blocks go back at once; then
 * on_done. */
static void batch_end(sc_batch *b, sc_job *j)
{
	sc_job **pp = &b->jobs;
	int live = 0;

	for (int i = 0; i < b->n_act; i++) {
		if (b->act[i]->job != j)
			b->act[live++] = b->act[i];
		else
			kv_seq_free(b->e->pool, &b->act[i]->seq);
	}
	b->n_act = live;
	while (*pp && *pp != j)
		pp = &(*pp)->next;
	if (*pp)
		*pp = j->next;
	b->n_jobs--;
	/* sc_run's prefix cache keeps a question's root once it is the
	 * batch's last job (never holding blocks another job may need) */
	if (b->e->cache_ix && !b->n_jobs && j->n && j->prompt && !j->rc &&
	    !j->prefilling && j->own.n_tokens == j->n_prompt)
		cache_keep(b->e, j->prompt, j->n_prompt, &j->own);
	j->stats.decode_ms = now_ms() - j->t0 - j->stats.prefill_ms;
	if (j->cb.on_done)
		j->cb.on_done(j->cb.ctx, j->id, j->rc, &j->stats);
	batch_job_free(b, j);
}

void sc_batch_free(sc_batch **bp)
{
	sc_batch *b = bp ? *bp : NULL;

	if (!b)
		return;
	while (b->jobs) {
		if (!b->jobs->rc)
			b->jobs->rc = QERR_CANCELLED;
		batch_end(b, b->jobs);
	}
	free(b->act);
	free(b->lg);
	free(b->seqs);
	free(b->toks);
	free(b->ones);
	free(b);
	*bp = NULL;
}

int sc_batch_cancel(sc_batch *b, uint32_t id, int rc)
{
	for (sc_job *j = b->jobs; j; j = j->next)
		if (j->id == id) {
			j->rc = rc ? rc : QERR_CANCELLED;
			batch_end(b, j);
			return 0;
		}
	return qerr_fail(QERR_MISSING, "no job %u in the batch", id);
}

int sc_batch_jobs(const sc_batch *b)
{
	return b->n_jobs;
}

int sc_batch_live(const sc_batch *b)
{
	return b->n_act;
}

uint64_t sc_batch_rounds(const sc_batch *b)
{
	return b->rounds;
}

/* Blocks a live fork may still take: its worst case less what it holds
 * (nothing private before its first append). */
static uint32_t fork_owed(const sc_engine *e, const fork_state *f)
{
	const sc_job *j = f->job;
	uint32_t full = j->root->n_tokens / (uint32_t)e->p.block_tokens;
	uint32_t held = f->appended ? f->seq.n_blocks - full : 0;

	return held < j->need ? j->need - held : 0;
}

/* Free blocks less every live fork's worst case still owed. */
static uint64_t batch_avail(const sc_batch *b)
{
	uint64_t owed = 0, fr = kv_pool_free_blocks(b->e->pool);

	for (int i = 0; i < b->n_act; i++)
		owed += fork_owed(b->e, b->act[i]);
	return fr > owed ? fr - owed : 0;
}

/* j may start another fork now (blocks aside). */
static int job_wants(const sc_job *j)
{
	return !j->rc && !j->prefilling && j->n_started < j->n &&
	       j->n_act < j->width && !(j->st && j->st->decided) &&
	       /* past the warm-up only with the threshold known */
	       !(j->flt && j->flt->warm && !j->flt->armed &&
		 j->fs[j->n_started].index >= j->flt->warm);
}

static int start_fork(sc_batch *b, sc_job *j)
{
	fork_state *f = &j->fs[j->n_started];
	int rc;

	if (b->n_act == b->cap_act) {
		int nc = b->cap_act ? 2 * b->cap_act : 16;
		fork_state **na = realloc(b->act, (size_t)nc * sizeof(*na));

		if (!na)
			return qerr_fail(QERR_NOMEM, "out of memory");
		b->act = na;
		b->cap_act = nc;
	}
	if (!(f->ring = malloc((size_t)j->w * sizeof(int64_t))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	f->win_min = INT64_MAX;
	f->job = j;
	f->logits = j->root_logits;
	j->n_started++;
	if (j->st)
		j->st->started++;
	if ((rc = kv_seq_fork(b->e->pool, j->root, &f->seq)))
		return rc;
	b->act[b->n_act++] = f;
	j->n_act++;
	return 0;
}

/* Admission: forks round-robin across jobs (one per job per pass,
 * starting after the job that led the last round) under max_live and the
 * blocks; then prefills, in arrival order, as their blocks fit. */
static void batch_admit(sc_batch *b)
{
	uint64_t avail = batch_avail(b);
	uint32_t lead = 0;
	int any;

	for (sc_job *j = b->jobs; j; j = j->next)
		j->starved = 0;
	do {
		any = 0;
		for (int pass = 0; pass < 2; pass++)
			for (sc_job *j = b->jobs; j; j = j->next) {
				int rc;

				if ((pass == 0) != (j->id > b->rr) ||
				    b->n_act >= b->max_live || !job_wants(j))
					continue;
				if (avail < j->need) {
					j->starved = 1;
					continue;
				}
				if ((rc = start_fork(b, j))) {
					j->rc = rc;
					continue;
				}
				avail -= j->need;
				any = 1;
				if (!lead)
					lead = j->id;
			}
	} while (any && b->n_act < b->max_live);
	if (lead)
		b->rr = lead;
	for (sc_job *j = b->jobs; j; j = j->next) {
		if (!j->prefilling || j->pf_started || j->rc)
			continue;
		if (avail < j->need_root) {
			j->starved = 1;
			continue;
		}
		if ((j->rc = kv_seq_reserve(b->e->pool, &j->own,
					    (uint32_t)(j->n_prompt -
						       j->filled))))
			continue;
		j->pf_started = 1;
		avail -= j->need_root;
	}
}

/* Every live fork draws a token; finished ones report and free their
 * blocks; the stoppers advance; forks of ended or decided jobs leave. */
static void batch_sample(sc_batch *b)
{
	sc_engine *e = b->e;
	int live = 0;

	for (int i = 0; i < b->n_act; i++) {
		fork_state *f = b->act[i];
		sc_job *j = f->job;
		int rc;

		if (j->rc)
			continue;
		j->active = 1;
		rc = step_sample(e, &j->p, f);
		j->stats.gen_tokens++;
		if (!rc)
			filter_check(j->flt, f, j->w);
		if (!rc && f->done) {
			rc = finish(f, j->w, j->cb.on_sample, j->cb.ctx);
			kv_seq_free(e->pool, &f->seq);
			j->done[f - j->fs] = 1;
			j->n_act--;
			if (j->st)
				j->st->finished++;
		}
		if (rc)
			j->rc = rc;
	}
	for (sc_job *j = b->jobs; j; j = j->next)
		if (j->st && !j->rc && j->active)
			j->rc = stop_advance(j->st, j->out, j->n, j->done);
	for (int i = 0; i < b->n_act; i++) {
		fork_state *f = b->act[i];
		sc_job *j = f->job;

		if (f->done)
			continue;
		if (j->rc || (j->st && j->st->decided)) {
			/* cancelled in flight: its blocks free at once */
			kv_seq_free(e->pool, &f->seq);
			j->n_act--;
			continue;
		}
		b->act[live++] = f;
	}
	b->n_act = live;
}

/* One forward (max_batch rows per call) for all live forks. */
static void batch_forward(sc_batch *b)
{
	sc_engine *e = b->e;
	const int V = e->m->cfg.vocab, B = e->p.max_batch;

	if (b->n_act > b->cap_lg) {
		float *nl = realloc(b->lg, (size_t)b->n_act * V * sizeof(float));

		if (!nl) {
			int rc = qerr_fail(QERR_NOMEM, "out of memory for "
					   "logits");

			for (int i = 0; i < b->n_act; i++)
				b->act[i]->job->rc = rc;
			return;
		}
		b->lg = nl;
		b->cap_lg = b->n_act;
	}
	for (int c0 = 0; c0 < b->n_act; c0 += B) {
		int m = b->n_act - c0 < B ? b->n_act - c0 : B, rc;

		for (int k = 0; k < m; k++) {
			fork_state *f = b->act[c0 + k];

			b->seqs[k] = &f->seq;
			b->toks[k] = f->next;
			f->logits = b->lg + (size_t)(c0 + k) * V;
		}
		rc = fwd_batch(e->f, e->pool, b->seqs, b->ones, m, b->toks,
			       b->lg + (size_t)c0 * V, 0);
		for (int k = 0; k < m; k++) {
			fork_state *f = b->act[c0 + k];

			if (rc) {
				f->job->rc = rc;
			} else if (!f->appended) {
				f->appended = 1;
				f->job->stats.blocks_copied +=
					f->job->root->n_tokens %
						(uint32_t)e->p.block_tokens != 0;
			}
		}
		track_peak(e);
		if (b->on_forward)
			b->on_forward(b->fctx);
	}
}

/* Keeps a prefilled root as an sc_root (the job's blocks move to it). */
static int publish_root(sc_engine *e, sc_job *j, uint32_t *id)
{
	sc_root *r;
	int rc;

	if ((rc = new_root(e, &r)))
		return rc;
	free(r->logits);
	r->seq = j->own;
	r->logits = j->logits_buf;
	r->tokens = j->prompt; /* a later prompt may share its prefix */
	kv_seq_init(&j->own);
	j->logits_buf = NULL;
	j->prompt = NULL;
	j->root = NULL;
	j->root_logits = NULL;
	end_root(e, r, 1);
	*id = r->id;
	return 0;
}

/* Up to prefill_tokens prompt rows of the started prefills, in arrival
 * order. */
static void batch_prefill(sc_batch *b)
{
	sc_engine *e = b->e;
	int budget = b->prefill_tokens;

	for (sc_job *j = b->jobs; j && budget > 0; j = j->next) {
		double t0;
		int c, rc;

		if (!j->prefilling || !j->pf_started || j->rc)
			continue;
		c = j->n_prompt - j->filled < (size_t)budget
			    ? (int)(j->n_prompt - j->filled) : budget;
		t0 = now_ms();
		{
			kv_seq *s = &j->own;

			rc = fwd_batch(e->f, e->pool, &s, &c, 1,
				       j->prompt + j->filled,
				       j->filled + (size_t)c == j->n_prompt
					       ? j->logits_buf : NULL, 0);
		}
		track_peak(e);
		if (b->on_forward)
			b->on_forward(b->fctx);
		j->stats.prefill_ms += now_ms() - t0;
		j->stats.prefill_chunks++;
		j->active = 1;
		budget -= c;
		if (rc) {
			j->rc = rc;
			continue;
		}
		j->filled += (size_t)c;
		if (j->filled < j->n_prompt)
			continue;
		j->prefilling = 0;
		if (j->publish) {
			uint32_t id;

			if ((rc = publish_root(e, j, &id)))
				j->rc = rc;
			else if (j->cb.on_ready &&
				 (rc = j->cb.on_ready(j->cb.ctx, j->id, id))) {
				sc_root_release(e, id);
				j->rc = rc;
			}
		}
	}
}

/* Nothing else runs and j cannot start for lack of blocks: nothing will
 * free them. */
static int batch_stalled(const sc_batch *b)
{
	if (b->n_act)
		return 0;
	for (const sc_job *j = b->jobs; j; j = j->next)
		if (j->pf_started && j->prefilling && !j->rc)
			return 0;
	return 1;
}

int sc_batch_round(sc_batch *b)
{
	sc_job *j, *nx;

	for (j = b->jobs; j; j = j->next)
		j->active = 0;
	batch_admit(b);
	if (batch_stalled(b))
		for (j = b->jobs; j; j = j->next)
			if (j->starved && !j->rc)
				j->rc = qerr_fail(QERR_FULL, "KV pool exhausted:"
						  " %u blocks free, a job needs"
						  " %u", sc_engine_kv_free(b->e),
						  j->prefilling ? j->need_root
								: j->need);
	batch_sample(b);
	batch_forward(b);
	batch_prefill(b);
	for (j = b->jobs; j; j = nx) {
		nx = j->next;
		j->stats.rounds += j->active;
		if (!j->rc && j->n_act && j->cb.on_text)
			j->cb.on_text(j->cb.ctx, j->out, j->n);
		if (j->rc || (!j->prefilling && !j->n_act &&
			      (j->n_started == j->n ||
			       (j->st && j->st->decided))))
			batch_end(b, j);
	}
	b->rounds++;
	return 0;
}

/* Checks a root reference and builds the view forks fork from. */
static int root_view(sc_engine *e, const sc_root_ref *root, kv_seq *view)
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

int sc_batch_decode(sc_batch *b, const sc_root_ref *root, const int *idx,
		    int n, const sc_params *p, const sc_job_cbs *cb,
		    uint32_t *job)
{
	sc_engine *e = b->e;
	job_init ji = {0};
	kv_seq view;
	sc_job *j;
	int rc;

	if ((rc = sc_params_check(p)))
		return rc;
	if (n < 1)
		return qerr_fail(QERR_ARG, "no samples to decode");
	for (int i = 0; i < n; i++)
		if (idx[i] < 0)
			return qerr_fail(QERR_RANGE, "sample index %d", idx[i]);
	if ((uint64_t)root->n_tokens + (uint64_t)p->max_new >
	    (uint64_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "root of %u tokens + %d new "
				 "exceed the context of %d", root->n_tokens,
				 p->max_new, e->m->cfg.ctx_len);
	if (!root->logits)
		return qerr_fail(QERR_ARG, "root without logits");
	if ((rc = root_view(e, root, &view)))
		return rc;
	ji.p = p;
	ji.view = &view;
	ji.copy_logits = root->logits;
	ji.idx = idx;
	ji.n = n;
	if (cb)
		ji.cb = *cb;
	if ((rc = batch_add(b, &ji, &j))) {
		kv_seq_free(NULL, &view);
		return rc;
	}
	if (job)
		*job = j->id;
	return 0;
}

int sc_batch_prefill(sc_batch *b, const int32_t *prompt, size_t n,
		     const sc_job_cbs *cb, uint32_t *job)
{
	job_init ji = {0};
	sc_job *j;
	int rc;

	if (n < 1 || n > (size_t)b->e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, b->e->m->cfg.ctx_len);
	ji.prompt = prompt;
	ji.n_prompt = n;
	ji.publish = 1;
	if (cb)
		ji.cb = *cb;
	if ((rc = batch_add(b, &ji, &j)))
		return rc;
	if (job)
		*job = j->id;
	return 0;
}

/* A prefill of prompt (n tokens) from the first n_base tokens of root
 * base (base_id; NULL: none): QERR_OK, or the error naming what does not
 * fit — the prompt's length, a missing or imported root (its tokens
 * unknown), a prefix out of range or not the prompt's. */
static int base_check(const sc_engine *e, const sc_root *base,
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

int sc_batch_prefill_from(sc_batch *b, uint32_t base_id, uint32_t n_base,
			  const int32_t *prompt, size_t n,
			  const sc_job_cbs *cb, uint32_t *job)
{
	sc_engine *e = b->e;
	const sc_root *base = find_root(e, base_id);
	uint32_t full;
	sc_job *j;
	int rc;

	if ((rc = base_check(e, base, base_id, n_base, prompt, n)))
		return rc;
	if ((rc = sc_batch_prefill(b, prompt, n, cb, job)))
		return rc;
	/* the new job is the last: it holds the base's first n_base tokens
	 * from now on (the base may be released before it starts) */
	for (j = b->jobs; j->next; j = j->next)
		;
	if ((rc = kv_seq_fork_prefix(e->pool, &base->seq, n_base, &j->own))) {
		j->cb.on_done = NULL;
		batch_end(b, j);
		return rc;
	}
	j->filled = n_base;
	full = n_base / (uint32_t)e->p.block_tokens;
	j->need_root = blocks_for(e, n) - full;
	return 0;
}

/* How a single-job loop ended. */
typedef struct {
	int ended, rc;
	sc_job_stats st;
} job_end_rec;

static void rec_done(void *ctx, uint32_t job, int rc, const sc_job_stats *st)
{
	job_end_rec *r = ctx;

	(void)job;
	r->ended = 1;
	r->rc = rc;
	r->st = *st;
}

/* One job alone in a batch of its own (sc_decode, sc_run's paged and
 * reset modes): the caller's callbacks, and how it ended. */
typedef struct {
	job_end_rec end;
	sc_sample_cb cb;
	sc_text_cb tcb;
	void *ctx;
} solo;

static int solo_sample(void *c, const sc_sample *s)
{
	solo *o = c;

	return o->cb ? o->cb(o->ctx, s) : 0;
}

static void solo_text(void *c, const sc_sample *s, int n)
{
	solo *o = c;

	o->tcb(o->ctx, s, n);
}

static void solo_done(void *c, uint32_t job, int rc, const sc_job_stats *st)
{
	rec_done(&((solo *)c)->end, job, rc, st);
}

static void solo_wrap(solo *o, sc_job_cbs *cb)
{
	o->cb = cb->on_sample;
	o->tcb = cb->on_text;
	o->ctx = cb->ctx;
	cb->on_sample = solo_sample;
	cb->on_text = o->tcb ? solo_text : NULL;
	cb->on_done = solo_done;
	cb->ctx = o;
}

/* Rounds until job id ends; rcb (if any) after every round it is still
 * running, a non-zero return ending it with that code. */
static int solo_loop(sc_batch *b, uint32_t id, solo *o, sc_round_cb rcb,
		     void *ctx)
{
	int rc;

	while (!o->end.ended) {
		sc_batch_round(b);
		if (!o->end.ended && rcb && (rc = rcb(ctx)))
			sc_batch_cancel(b, id, rc);
	}
	return o->end.rc;
}

static int run_solo(sc_engine *e, job_init *ji, sc_job_stats *st)
{
	sc_batch_params bp = {ji->width > 0 ? ji->width : ji->n, 0, NULL,
			      NULL};
	solo o = {0};
	sc_batch *b;
	sc_job *j;
	int rc;

	solo_wrap(&o, &ji->cb);
	if ((rc = batch_create(e, &bp, &b)))
		return rc;
	if ((rc = batch_add(b, ji, &j))) {
		sc_batch_free(&b);
		return rc;
	}
	rc = solo_loop(b, j->id, &o, NULL, NULL);
	sc_batch_free(&b);
	*st = o.end.st;
	return rc;
}

int sc_decode(sc_engine *e, const sc_root_ref *root, const int *idx, int n,
	      const sc_params *p, sc_sample_cb on_sample, sc_round_cb on_round,
	      void *ctx, sc_decode_stats *st)
{
	return sc_decode_text(e, root, idx, n, p, on_sample, on_round, NULL,
			      ctx, st);
}

int sc_decode_text(sc_engine *e, const sc_root_ref *root, const int *idx,
		   int n, const sc_params *p, sc_sample_cb on_sample,
		   sc_round_cb on_round, sc_text_cb on_text, void *ctx,
		   sc_decode_stats *st)
{
	sc_batch_params bp = {n > 0 ? n : 1, 0, NULL, NULL};
	sc_job_cbs cb = {on_sample, on_text, NULL, NULL, ctx};
	solo o = {0};
	sc_batch *b;
	uint32_t id;
	int rc;

	memset(st, 0, sizeof(*st));
	solo_wrap(&o, &cb);
	if ((rc = need_fixed(e)) || (rc = batch_create(e, &bp, &b)))
		return rc;
	if ((rc = sc_batch_decode(b, root, idx, n, p, &cb, &id))) {
		sc_batch_free(&b);
		return rc;
	}
	rc = solo_loop(b, id, &o, on_round, ctx);
	sc_batch_free(&b);
	st->blocks_mapped = o.end.st.blocks_mapped;
	st->blocks_copied = o.end.st.blocks_copied;
	st->gen_tokens = o.end.st.gen_tokens;
	st->decode_ms = o.end.st.decode_ms;
	return rc;
}

/* ---- many questions in merged rounds (sc_run_many, sc_run) ----------- */

typedef struct {
	sc_result res;
	sc_stopper stp;
	const sc_params *p;
	size_t n_prompt;
	int running, ended, rc;
	char err[256];          /* the error's text, kept for delivery */
	sc_job_stats st;
} run_q;

static void q_done(void *ctx, uint32_t job, int rc, const sc_job_stats *st)
{
	run_q *q = ctx;

	(void)job;
	q->ended = 1;
	q->rc = rc;
	q->st = *st;
	if (rc)
		snprintf(q->err, sizeof(q->err), "%s", qerr_detail());
}

/* Checks a question and sets up its result and stopper. */
static int run_begin(sc_engine *e, const sc_question *qs, run_q *q)
{
	const sc_params *p = qs->p;
	int rc;

	memset(&q->res, 0, sizeof(q->res));
	q->res.vote.winner = VOTE_NONE;
	q->p = p;
	q->n_prompt = qs->n_prompt;
	if ((rc = sc_params_check(p)))
		return rc;
	if (qs->n_prompt < 1)
		return qerr_fail(QERR_ARG, "empty prompt");
	if (qs->n_prompt + (size_t)p->max_new > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens + %d new "
				 "tokens exceeds the context of %d tokens",
				 qs->n_prompt, p->max_new, e->m->cfg.ctx_len);
	q->stp.width = stop_min_prefix(&p->stop, p->n);
	q->stp.flt.warm = p->filter_warmup < p->n ? p->filter_warmup : 0;
	q->stp.flt.pct = p->filter_pct;
	if ((rc = p->vote == SC_VOTE_CONFIDENCE
			  ? stop_init_weighted(&q->stp.ss, &p->stop, p->n)
			  : stop_init(&q->stp.ss, &p->stop, p->n)))
		return rc;
	if (!(q->res.samples = calloc((size_t)p->n, sizeof(sc_sample))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	q->res.n = p->n;
	q->res.stats.n_prompt = (int)qs->n_prompt;
	return 0;
}

/* The result of a question decided at stp.prefix: the reported prefix,
 * the stop report, the vote and the KV figures. */
static int run_end(sc_engine *e, run_q *q)
{
	const sc_params *p = q->p;
	sc_result *out = &q->res;
	const char **answers = calloc((size_t)p->n, sizeof(*answers));
	uint64_t *weights = calloc((size_t)p->n, sizeof(*weights));
	int k = q->stp.prefix, rc;

	if (!answers || !weights) {
		rc = qerr_fail(QERR_NOMEM, "out of memory");
		goto out;
	}
	/* report exactly the decided prefix; later samples are dropped */
	for (int s = k; s < p->n; s++) {
		sc_sample_fini(&out->samples[s]);
		memset(&out->samples[s], 0, sizeof(out->samples[s]));
	}
	out->n = k;
	stop_report(p, &q->stp, out);
	for (int s = 0; s < k; s++) {
		answers[s] = out->samples[s].has_answer ? out->samples[s].answer
							: NULL;
		weights[s] = out->samples[s].weight;
	}
	if ((rc = vote_tally_weighted(answers, p->vote == SC_VOTE_CONFIDENCE
						       ? weights : NULL,
				      (size_t)k, &out->vote)))
		goto out;
	{
		const kv_params *kp = kv_pool_params(e->pool);
		uint64_t per_token = 2ull * kp->n_layers * kp->kv_dim *
				     kv_elem_size(kp->dtype);
		uint64_t per_block = per_token * kp->block_tokens;

		out->stats.kv_peak_bytes = (uint64_t)e->peak_in_use * per_block;
		out->stats.kv_unshared_bytes =
			(uint64_t)p->n * blocks_for(e, q->n_prompt + p->max_new) *
			per_block;
	}
out:
	free(answers);
	free(weights);
	return rc;
}

/* Hands question i's result to the caller (q's result belongs to it
 * then). */
static int run_deliver(sc_engine *e, run_q *q, int i, sc_result_cb cb,
		       void *ctx)
{
	int rc = q->rc;

	if (!rc) {
		q->res.stats.n_prefills = 1;
		q->res.stats.prefill_ms = q->st.prefill_ms;
		q->res.stats.decode_ms = q->st.decode_ms;
		q->res.stats.gen_tokens = q->st.gen_tokens;
		q->res.stats.cow_blocks = q->st.blocks_copied;
		if ((rc = run_end(e, q)))
			snprintf(q->err, sizeof(q->err), "%s", qerr_detail());
	}
	stop_fini(&q->stp.ss);
	if (rc)
		sc_result_fini(&q->res);
	return cb(ctx, i, rc, rc ? q->err : NULL, &q->res);
}

/* A batched question job j starts from the cached prompt sharing its
 * longest block-aligned prefix (at most n - 1 tokens), as
 * sc_batch_prefill_from starts from a root: the blocks forked into its
 * root, only the rest prefilled. Returns the tokens forked (0: none). */
static int cache_start(sc_engine *e, sc_job *j)
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
	j->need_root = blocks_for(e, j->n_prompt) - (uint32_t)(k / B);
	return (int)k;
}

int sc_run_many(sc_engine *e, const sc_question *qs, int n, int max_live,
		int prefill_tokens, sc_result_cb on_result, void *ctx)
{
	sc_batch_params bp = {max_live < 1 ? 64 : max_live, prefill_tokens,
			      NULL, NULL};
	run_q *rq = NULL;
	sc_batch *b = NULL;
	int rc = 0, next = 0, first = 0, flying = 0, width = 0;

	if (n < 1)
		return 0;
	if (!(rq = calloc((size_t)n, sizeof(*rq))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	if (!e->fixed_pool) {
		/* a pool for the worst case in flight: a root per question
		 * and every live fork's tail */
		uint64_t mp = 0, mn = 0;
		int qin = n < bp.max_live ? n : bp.max_live;

		for (int i = 0; i < n; i++) {
			if (qs[i].n_prompt > mp)
				mp = qs[i].n_prompt;
			if (qs[i].p->max_new > 0 && (uint64_t)qs[i].p->max_new > mn)
				mn = (uint64_t)qs[i].p->max_new;
		}
		rc = ensure_pool_blocks(e, (uint64_t)qin * blocks_for(e, mp + 1) +
					    (uint64_t)bp.max_live *
						    (blocks_for(e, mn) + 1));
	}
	if (!rc)
		rc = batch_create(e, &bp, &b);
	e->peak_in_use = 0;
	while (!rc && first < n) {
		/* questions start in order while their widths fit */
		while (next < n) {
			const sc_params *p = qs[next].p;
			int wq = p->n > 0 && p->n <= 65536
					 ? stop_min_prefix(&p->stop, p->n) : 1;
			job_init ji = {0};
			run_q *q = &rq[next];
			sc_job *j;

			if (flying && width + wq > bp.max_live)
				break;
			if ((rc = run_begin(e, &qs[next], q))) {
				q->rc = rc; /* delivered in order below */
				snprintf(q->err, sizeof(q->err), "%s",
					 qerr_detail());
				next++;
				continue;
			}
			ji.p = p;
			ji.prompt = qs[next].prompt;
			ji.n_prompt = qs[next].n_prompt;
			ji.n = p->n;
			ji.out = q->res.samples;
			ji.st = &q->stp;
			ji.flt = &q->stp.flt;
			ji.width = q->stp.width;
			ji.cb.on_done = q_done;
			ji.cb.ctx = q;
			if ((rc = batch_add(b, &ji, &j))) {
				q->rc = rc;
				snprintf(q->err, sizeof(q->err), "%s",
					 qerr_detail());
				next++;
				continue;
			}
			q->res.stats.n_reused = cache_start(e, j);
			q->rc = 0;
			q->running = 1;
			flying++;
			width += q->stp.width;
			next++;
		}
		rc = 0;
		if (flying)
			sc_batch_round(b);
		/* results go out in question order as they end */
		while (!rc && first < next &&
		       (!rq[first].running || rq[first].ended)) {
			run_q *q = &rq[first];
			if (q->running) {
				flying--;
				width -= q->stp.width;
			}
			rc = run_deliver(e, q, first, on_result, ctx);
			first++;
		}
	}
	sc_batch_free(&b);
	for (int i = first; i < n; i++) {
		/* stopped early: what never reached the caller */
		stop_fini(&rq[i].stp.ss);
		sc_result_fini(&rq[i].res);
	}
	free(rq);
	return rc;
}

/* sc_run's batched result: the one question's. */
typedef struct {
	sc_result *out;
	int rc;
	char err[256];
} run_one_rec;

static int take_one(void *ctx, int q, int rc, const char *err, sc_result *r)
{
	run_one_rec *o = ctx;

	(void)q;
	o->rc = rc;
	if (rc)
		snprintf(o->err, sizeof(o->err), "%s", err ? err : "");
	*o->out = *r;
	memset(r, 0, sizeof(*r));
	return 0;
}

int sc_run(sc_engine *e, const int32_t *prompt, size_t n_prompt,
	   const sc_params *p, sc_result *out)
{
	sc_question qs = {prompt, n_prompt, p};
	float *root_logits = NULL;
	kv_stats st0, st1;
	run_q q = {0};
	int rc;

	memset(out, 0, sizeof(*out));
	out->vote.winner = VOTE_NONE;
	if ((rc = sc_params_check(p)))
		return rc;
	if (p->mode == SC_BATCHED) {
		run_one_rec o = {out, 0, ""};

		if ((rc = sc_run_many(e, &qs, 1, stop_min_prefix(&p->stop,
								 p->n),
				      0, take_one, &o)))
			return rc;
		return o.rc ? qerr_fail(o.rc, "%s", o.err) : 0;
	}
	/* reset and paged: one sample at a time */
	if ((rc = run_begin(e, &qs, &q)) ||
	    (rc = ensure_pool(e, n_prompt, 1, p->max_new)))
		goto out;
	if (!(root_logits = malloc((size_t)e->m->cfg.vocab * sizeof(float)))) {
		rc = qerr_fail(QERR_NOMEM, "out of memory");
		goto out;
	}
	e->peak_in_use = 0;
	kv_pool_stats(e->pool, &st0);
	rc = run_samples(e, prompt, n_prompt, p, &q.res, root_logits, &q.stp);
	kv_pool_stats(e->pool, &st1);
	if (!rc)
		rc = run_end(e, &q);
	q.res.stats.cow_blocks = st1.cow - st0.cow;
out:
	stop_fini(&q.stp.ss);
	free(root_logits);
	if (rc)
		sc_result_fini(&q.res);
	else
		*out = q.res;
	return rc;
}

/* ---- prefill with a progress callback; dropping a linked pool -------- */

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
	if ((rc = need_fixed(e)))
		return rc;
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if (chunk < 1)
		chunk = 64;
	if ((rc = new_root(e, &r)))
		return rc;
	if (!(rc = root_tokens(r, prompt, n)))
		rc = prefill_rest(e, r, prompt, n, chunk, on_chunk, ctx);
	end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
}

int sc_root_prefill_from(sc_engine *e, uint32_t base_id, uint32_t n_base,
			 const int32_t *prompt, size_t n, int chunk,
			 sc_chunk_cb on_chunk, void *ctx, uint32_t *root_id)
{
	const sc_root *base;
	sc_root *r;
	int rc;

	if ((rc = need_fixed(e)))
		return rc;
	base = find_root(e, base_id);
	if ((rc = base_check(e, base, base_id, n_base, prompt, n)))
		return rc;
	if (chunk < 1)
		chunk = 64;
	if ((rc = new_root(e, &r)))
		return rc;
	base = find_root(e, base_id); /* new_root may move the roots */
	if (!(rc = root_tokens(r, prompt, n)) &&
	    !(rc = kv_seq_fork_prefix(e->pool, &base->seq, n_base, &r->seq)))
		rc = prefill_rest(e, r, prompt, n, chunk, on_chunk, ctx);
	end_root(e, r, rc == 0);
	if (!rc)
		*root_id = r->id;
	return rc;
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
