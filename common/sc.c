#include "sc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fwd.h"
#include "kern.h"
#include "qerr.h"
#include "tpool.h"

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

int sc_params_check(const sc_params *p)
{
	int rc = samp_params_check(&p->sp);

	if (rc)
		return rc;
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

/* A pool large enough for one prefix plus `forks` private tails. */
static int ensure_pool(sc_engine *e, size_t n_prompt, int forks, int max_new)
{
	uint64_t need = blocks_for(e, n_prompt + 1) +
			(uint64_t)forks * (blocks_for(e, (uint64_t)max_new) + 1);
	kv_params kp = {e->m->cfg.n_layers, e->m->cfg.kv_dim,
			e->p.block_tokens, 0, e->p.kv_dtype};

	if (e->fixed_pool)
		return 0; /* a fixed pool reports exhaustion as it happens */
	if (need > KV_BLOCK_MASK)
		return qerr_fail(QERR_FULL, "KV pool of %llu blocks is too large",
				 (unsigned long long)need);
	if (e->pool && kv_pool_params(e->pool)->n_blocks >= need)
		return 0;
	kv_pool_free(&e->pool);
	kp.n_blocks = (uint32_t)need;
	return kv_pool_new(&kp, &e->pool);
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
	w = (uint64_t)(kern_expf((float)g) * 0x1p32f);
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
	if (tok_is_eog(e->t, tokid)) {
		f->out->finish = SC_FINISH_STOP;
		f->done = 1;
		return 0;
	}
	piece = tok_piece(e->t, tokid, 0, &plen);
	if ((rc = append_text(f, piece ? piece : "", plen)))
		return rc;
	f->out->n_tokens++;
	if (f->out->n_tokens >= p->max_new) {
		f->out->finish = SC_FINISH_LENGTH;
		f->done = 1;
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

/*
 * Decodes the samples idx[0..n) from a prefilled root, advancing all of
 * them together; the paged and reset modes call it with one sample at a
 * time. out[i] receives sample idx[i]. root_logits: the root's last-row
 * logits. cb/rcb/tcb: optional per-sample, per-round and text callbacks.
 * Forks start in idx order, at most st->width at a time (st NULL: all at
 * once); a finished fork's blocks are freed at once. With st, out[] is in
 * sample order and each round pushes the finished prefix: when the
 * request is decided the forks in flight are cancelled.
 */
static int decode_group(sc_engine *e, const sc_params *p, const kv_seq *root,
			const float *root_logits, const int *idx, int n,
			sc_sample *out, sc_sample_cb cb, sc_round_cb rcb,
			sc_text_cb tcb, void *ctx, uint64_t *gen_tokens,
			sc_stopper *st, const sc_filter *flt)
{
	const int V = e->m->cfg.vocab, B = e->p.max_batch;
	fork_state *fs = calloc((size_t)n, sizeof(*fs));
	fork_state **act = calloc((size_t)n, sizeof(*act));
	kv_seq **seqs = calloc((size_t)B, sizeof(*seqs));
	int32_t *toks = calloc((size_t)B, sizeof(*toks));
	int *ones = calloc((size_t)B, sizeof(*ones));
	float *lg = malloc((size_t)n * V * sizeof(float));
	int *done = calloc((size_t)n, sizeof(*done));
	int rc = 0, n_act = 0, next = 0, width = st ? st->width : n;

	if (!fs || !act || !seqs || !toks || !ones || !lg || !done) {
		rc = qerr_fail(QERR_NOMEM, "out of memory for %d samples", n);
		goto out;
	}
	for (int i = 0; i < B; i++)
		ones[i] = 1;
	for (int i = 0; i < n; i++) {
		kv_seq_init(&fs[i].seq);
		fs[i].index = idx[i];
		fs[i].out = &out[i];
		fs[i].out->index = idx[i];
		fs[i].logits = root_logits;
		samp_rng_seed(&fs[i].rng, p->seed, (uint64_t)idx[i]);
	}
	if (width < 1)
		width = 1;
	while (!rc) {
		int live = 0;

		/* start forks in index order up to the width */
		while (!rc && n_act < width && next < n &&
		       !(st && st->decided) &&
		       /* past the warm-up only with the threshold known */
		       !(flt && flt->warm && !flt->armed &&
			 idx[next] >= flt->warm)) {
			fs[next].ring = malloc((size_t)conf_window(p) *
					       sizeof(int64_t));
			fs[next].win_min = INT64_MAX;
			rc = fs[next].ring ? kv_seq_fork(e->pool, root,
							 &fs[next].seq)
					   : qerr_fail(QERR_NOMEM, "out of "
						       "memory");
			act[n_act++] = &fs[next++];
			if (st)
				st->started++;
		}
		if (rc || !n_act)
			break;
		/* sample every active fork, in sample order, then compact */
		for (int i = 0; i < n_act && !rc; i++) {
			rc = step_sample(e, p, act[i]);
			(*gen_tokens)++;
			if (!rc)
				filter_check(flt, act[i], conf_window(p));
			if (!rc && act[i]->done) {
				rc = finish(act[i], conf_window(p), cb, ctx);
				/* its blocks go back to the pool now */
				kv_seq_free(e->pool, &act[i]->seq);
				done[act[i] - fs] = 1;
				if (st)
					st->finished++;
			} else if (!rc) {
				act[live++] = act[i];
			}
		}
		n_act = live;
		if (!rc && st && (rc = stop_advance(st, out, n, done)) == 0 &&
		    st->decided) {
			/* cancel the forks in flight: blocks free at once */
			for (int i = 0; i < n_act; i++)
				kv_seq_free(e->pool, &act[i]->seq);
			n_act = 0;
			break;
		}
		/* one forward per chunk of up to max_batch live forks */
		for (int c0 = 0; c0 < n_act && !rc; c0 += B) {
			int m = n_act - c0 < B ? n_act - c0 : B;

			for (int j = 0; j < m; j++) {
				seqs[j] = &act[c0 + j]->seq;
				toks[j] = act[c0 + j]->next;
				act[c0 + j]->logits = lg + (size_t)(c0 + j) * V;
			}
			rc = fwd_batch(e->f, e->pool, seqs, ones, m, toks,
				       lg + (size_t)c0 * V, 0);
			track_peak(e);
		}
		if (!rc && n_act && tcb)
			tcb(ctx, out, n);
		if (!rc && n_act && rcb)
			rc = rcb(ctx);
	}
	for (int i = 0; i < n; i++) {
		kv_seq_free(e->pool, &fs[i].seq);
		free(fs[i].ring);
	}
out:
	free(done);
	free(fs);
	free(act);
	free(seqs);
	free(toks);
	free(ones);
	free(lg);
	return rc;
}

static int prefill(sc_engine *e, const int32_t *prompt, size_t n_prompt,
		   kv_seq *root, float *logits, sc_result *res)
{
	double t0 = now_ms();
	int rc = fwd_prefill(e->f, e->pool, root, prompt, (int)n_prompt, logits);

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
	int rc = decode_group(e, p, root, root_logits, &s, 1, &res->samples[s],
			      NULL, NULL, NULL, NULL, &res->stats.gen_tokens,
			      NULL, &st->flt);

	st->started++;
	if (rc)
		return rc;
	st->finished++;
	if ((rc = push_sample(st, &res->samples[s])))
		return rc;
	return filter_arm(&st->flt, res->samples, st->prefix);
}

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
			rc = prefill(e, prompt, n_prompt, &root, root_logits, res);
			t0 = now_ms();
			if (!rc)
				rc = run_one(e, p, &root, root_logits, s, res,
					     st);
			res->stats.decode_ms += now_ms() - t0;
			kv_seq_free(e->pool, &root);
		}
		return rc;
	}
	rc = prefill(e, prompt, n_prompt, &root, root_logits, res);
	t0 = now_ms();
	if (!rc && p->mode == SC_PAGED) {
		for (int s = 0; s < p->n && !rc && !st->decided; s++)
			rc = run_one(e, p, &root, root_logits, s, res, st);
	} else if (!rc) {
		int *idx = malloc((size_t)p->n * sizeof(int));

		if (!idx)
			rc = qerr_fail(QERR_NOMEM, "out of memory");
		for (int s = 0; idx && s < p->n; s++)
			idx[s] = s;
		if (idx)
			rc = decode_group(e, p, &root, root_logits, idx, p->n,
					  res->samples, NULL, NULL, NULL,
					  NULL, &res->stats.gen_tokens, st,
					  &st->flt);
		free(idx);
	}
	res->stats.decode_ms += now_ms() - t0;
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

int sc_run(sc_engine *e, const int32_t *prompt, size_t n_prompt,
	   const sc_params *p, sc_result *out)
{
	const char **answers = NULL;
	uint64_t *weights = NULL;
	float *root_logits = NULL;
	kv_stats st0, st1;
	sc_stopper stp = {0};
	int rc, k;

	memset(out, 0, sizeof(*out));
	out->vote.winner = VOTE_NONE;
	if ((rc = sc_params_check(p)))
		return rc;
	if (n_prompt < 1)
		return qerr_fail(QERR_ARG, "empty prompt");
	if (n_prompt + (size_t)p->max_new > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens + %d new "
				 "tokens exceeds the context of %d tokens",
				 n_prompt, p->max_new, e->m->cfg.ctx_len);
	stp.width = stop_min_prefix(&p->stop, p->n);
	stp.flt.warm = p->filter_warmup < p->n ? p->filter_warmup : 0;
	stp.flt.pct = p->filter_pct;
	if ((rc = ensure_pool(e, n_prompt, p->mode == SC_BATCHED ? stp.width : 1,
			      p->max_new)))
		return rc;
	if ((rc = p->vote == SC_VOTE_CONFIDENCE
			  ? stop_init_weighted(&stp.ss, &p->stop, p->n)
			  : stop_init(&stp.ss, &p->stop, p->n)))
		return rc;
	out->samples = calloc((size_t)p->n, sizeof(sc_sample));
	root_logits = malloc((size_t)e->m->cfg.vocab * sizeof(float));
	answers = calloc((size_t)p->n, sizeof(*answers));
	weights = calloc((size_t)p->n, sizeof(*weights));
	if (!out->samples || !root_logits || !answers || !weights) {
		rc = qerr_fail(QERR_NOMEM, "out of memory");
		goto out;
	}
	out->n = p->n;
	out->stats.n_prompt = (int)n_prompt;
	e->peak_in_use = 0;
	kv_pool_stats(e->pool, &st0);
	rc = run_samples(e, prompt, n_prompt, p, out, root_logits, &stp);
	kv_pool_stats(e->pool, &st1);
	if (rc)
		goto out;
	/* report exactly the decided prefix; later samples are dropped */
	k = stp.prefix;
	for (int s = k; s < p->n; s++) {
		free(out->samples[s].text);
		memset(&out->samples[s], 0, sizeof(out->samples[s]));
	}
	out->n = k;
	stop_report(p, &stp, out);
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
			(uint64_t)p->n * blocks_for(e, n_prompt + p->max_new) *
			per_block;
	}
	out->stats.cow_blocks = st1.cow - st0.cow;
out:
	stop_fini(&stp.ss);
	free(weights);
	free(answers);
	free(root_logits);
	if (rc)
		sc_result_fini(out);
	return rc;
}

void sc_result_fini(sc_result *r)
{
	if (!r)
		return;
	for (int i = 0; r->samples && i < r->n; i++)
		free(r->samples[i].text);
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
	const sc_root *r = find_root(e, root_id);
	size_t rb, n;
	char *b;

	if (!r)
		return qerr_fail(QERR_MISSING, "no root %u", root_id);
	rb = row_bytes(e);
	n = (size_t)r->seq.n_tokens * e->m->cfg.n_layers * 2 * rb;
	if (!(b = malloc(n ? n : 1)))
		return qerr_fail(QERR_NOMEM, "out of memory exporting a root");
	*bytes = b;
	*len = n;
	for (uint32_t t = 0; t < r->seq.n_tokens; t++)
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
	const char *b = bytes;
	sc_root *r;
	size_t rb;
	int rc;

	if ((rc = need_fixed(e)))
		return rc;
	rb = row_bytes(e);
	if (n_tokens < 1 || n_tokens > (uint32_t)e->m->cfg.ctx_len ||
	    len != (size_t)n_tokens * e->m->cfg.n_layers * 2 * rb)
		return qerr_fail(QERR_FORMAT, "root import: %zu bytes for %u "
				 "tokens", len, n_tokens);
	if ((rc = new_root(e, &r)))
		return rc;
	rc = kv_seq_reserve(e->pool, &r->seq, n_tokens);
	if (!rc) {
		for (uint32_t t = 0; t < n_tokens; t++)
			for (int l = 0; l < e->m->cfg.n_layers; l++) {
				memcpy(kv_seq_k_row(e->pool, &r->seq, l, t), b,
				       rb);
				memcpy(kv_seq_v_row(e->pool, &r->seq, l, t),
				       b + rb, rb);
				b += 2 * rb;
			}
		kv_seq_commit(&r->seq, n_tokens);
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
	const char *own = kv_pool_name(e->pool);
	sc_sample *out = NULL;
	kv_stats st0, st1;
	kv_seq view;
	int rc, slot = 0;
	double t0 = now_ms();

	memset(st, 0, sizeof(*st));
	kv_seq_init(&view);
	if ((rc = need_fixed(e)) || (rc = sc_params_check(p)))
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
	if (root->pool_name && (!own || strcmp(root->pool_name, own)) &&
	    (rc = linked_slot(e, root->pool_name, &slot)))
		return rc;
	if ((rc = kv_seq_view(&view, slot, root->blocks, root->n_blocks,
			      root->n_tokens, (uint32_t)e->p.block_tokens)))
		return rc;
	if (slot) {
		/* the view's blocks must exist in the linked pool */
		const kv_pool *lp = e->linked[slot - 1].pool;

		for (uint32_t i = 0; i < root->n_blocks; i++)
			if (root->blocks[i] >= kv_pool_params(lp)->n_blocks) {
				kv_seq_free(NULL, &view);
				return qerr_fail(QERR_RANGE, "root block %u is "
						 "outside pool %s",
						 root->blocks[i],
						 root->pool_name);
			}
	} else {
		for (uint32_t i = 0; i < root->n_blocks; i++)
			if (root->blocks[i] >= kv_pool_params(e->pool)->n_blocks ||
			    kv_block_refcount(e->pool, root->blocks[i]) == 0) {
				kv_seq_free(NULL, &view);
				return qerr_fail(QERR_RANGE, "root block %u is "
						 "not held", root->blocks[i]);
			}
	}
	if (!(out = calloc((size_t)n, sizeof(*out)))) {
		kv_seq_free(NULL, &view);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	kv_pool_stats(e->pool, &st0);
	rc = decode_group(e, p, &view, root->logits, idx, n, out, on_sample,
			  on_round, on_text, ctx, &st->gen_tokens, NULL, NULL);
	kv_pool_stats(e->pool, &st1);
	st->blocks_copied = (uint32_t)(st1.cow - st0.cow);
	/* every fork reads the root's full blocks in place */
	st->blocks_mapped = (uint32_t)n *
			    (root->n_tokens / (uint32_t)e->p.block_tokens);
	st->decode_ms = now_ms() - t0;
	for (int i = 0; i < n; i++)
		free(out[i].text);
	free(out);
	/* a view of our own pool took no references: only the table goes */
	kv_seq_free(NULL, &view);
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
	if (n < 1 || n > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens (context "
				 "%d)", n, e->m->cfg.ctx_len);
	if (!(base = find_root(e, base_id)))
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
