/*
 * run — self-consistency requests end to end: sc_run (one prompt, in the
 * reset, paged or batched mode) and sc_run_many (many prompts in merged
 * rounds).
 *
 * Owns: a question's setup (checks, its result, its stopper), the reset
 * and paged modes' loops (prefill, then one sample at a time), the
 * batched mode as jobs of one merged loop with results delivered in
 * question order, and a result's end: the reported prefix, the stop
 * report, the vote and the KV figures (sc_result, sc_run_result_fini).
 *
 * Callers: tools/ (quorum run, bench, evalset), tests/. Built on batch.c
 * (the decode loop), fork.c (the stopper) and engine.c (pool, prefix
 * cache) through sc_int.h.
 */
#include "sc/run.h"

#include "sc/sc_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"

/* rc from sizing the pool for `forks` samples in flight of up to max_new
 * new tokens: a pool the machine cannot hold names the request's figures
 * that made it that large (the detail alone says only blocks and bytes). */
static int pool_err(int rc, int forks, uint64_t max_new)
{
	char d[400];

	if (rc != QERR_NOMEM)
		return rc;
	snprintf(d, sizeof(d), "%s", qerr_detail());
	return qerr_fail(rc, "%d sample(s) in flight (n) of up to %llu new "
			 "tokens (max_new_tokens): %s", forks,
			 (unsigned long long)max_new, d);
}

/* A pool large enough for one prefix plus `forks` private tails. */
static int ensure_pool(sc_engine *e, size_t n_prompt, int forks, int max_new)
{
	uint64_t root = sc_engine_blocks_for(e, n_prompt + 1);
	uint32_t tail = sc_engine_blocks_for(e, (uint64_t)max_new) + 1;

	return pool_err(sc_engine_ensure_blocks(e, root + (uint64_t)forks * tail,
						root + (uint64_t)forks *
							sc_engine_win_slots(e, tail)),
			forks, (uint64_t)max_new);
}

/* cached: from the prefix cache when it is on (not in reset mode, the
 * baseline that prefills every sample). */
static int prefill(sc_engine *e, const int32_t *prompt, size_t n_prompt,
		   kv_seq *root, float *logits, sc_result *res, int cached)
{
	double t0 = now_ms();
	int reused = 0;
	int rc = cached && e->cache_ix
			 ? sc_cache_prefill(e, prompt, n_prompt, root, logits,
					     &reused)
			 : fwd_prefill(e->f, e->pool, root, prompt,
				       (int)n_prompt, logits);

	res->stats.n_reused += reused;

	sc_engine_track_peak(e);
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
	rc = sc_batch_solo(e, &ji, &js);
	res->stats.gen_tokens += js.gen_tokens;
	st->started++;
	if (rc)
		return rc;
	st->finished++;
	if ((rc = sc_fork_stopper_push(st, &res->samples[s])))
		return rc;
	return sc_fork_filter_arm(&st->flt, res->samples, st->prefix);
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
		sc_cache_keep(e, prompt, n_prompt, &root);
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
				      (uint64_t)r->samples[i].end_step;
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

void sc_run_result_fini(sc_result *r)
{
	if (!r)
		return;
	for (int i = 0; r->samples && i < r->n; i++)
		sc_fork_sample_fini(&r->samples[i]);
	free(r->samples);
	vote_result_fini(&r->vote);
	memset(r, 0, sizeof(*r));
	r->vote.winner = VOTE_NONE;
}

/* ---- many questions in merged rounds (sc_run_many, sc_run) ------------- */

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
	q->stp.waves = p->stop_waves;
	q->stp.horizon = stop_horizon(&q->stp.ss, p->stop_waves);
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
		sc_fork_sample_fini(&out->samples[s]);
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
		uint64_t per_token = 2ull * kp->n_layers *
				     kv_row_bytes(kp->dtype, kp->kv_dim);
		uint64_t per_block = per_token * kp->block_tokens;

		/* with windows released, blocks differ in size */
		out->stats.kv_peak_bytes = e->peak_bytes;
		out->stats.kv_unshared_bytes =
			(uint64_t)p->n * sc_engine_blocks_for(e, q->n_prompt + p->max_new) *
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
		sc_run_result_fini(&q->res);
	return cb(ctx, i, rc, rc ? q->err : NULL, &q->res);
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
		uint64_t roots = (uint64_t)qin * sc_engine_blocks_for(e, mp + 1);
		uint32_t tail = sc_engine_blocks_for(e, mn) + 1;

		rc = pool_err(sc_engine_ensure_blocks(e, roots +
						      (uint64_t)bp.max_live * tail,
					   roots + (uint64_t)bp.max_live *
							   sc_engine_win_slots(e,
									     tail)),
			      bp.max_live, mn);
	}
	if (!rc)
		rc = sc_batch_create(e, &bp, &b);
	e->peak_in_use = 0;
	e->peak_bytes = 0;
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
			if ((rc = sc_batch_add(b, &ji, &j))) {
				q->rc = rc;
				snprintf(q->err, sizeof(q->err), "%s",
					 qerr_detail());
				next++;
				continue;
			}
			q->res.stats.n_reused = sc_cache_start(e, j);
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
		sc_run_result_fini(&rq[i].res);
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
	e->peak_bytes = 0;
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
		sc_run_result_fini(&q.res);
	else
		*out = q.res;
	return rc;
}
