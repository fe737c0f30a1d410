/*
 * batch — the merged decode loop: continuous batching of the live forks
 * of any number of jobs in lockstep rounds (admission under max_live and
 * the KV blocks, sampling, one forward for all, prefill chunks).
 *
 * Owns: struct sc_batch, the jobs' life (sc_batch_decode/_prefill/
 * _prefill_from, cancel, the end of a job), and its single-job uses: a
 * job alone in a batch of its own (sc_batch_solo: sc_run's paged and
 * reset modes) and sc_batch_decode_job/sc_batch_decode_job_text.
 *
 * Callers: worker/wk.c (sc_batch_* in the cluster, sc_batch_decode_job), tools and
 * tests, and run.c (sc_run_many's questions as jobs; sc_batch_solo)
 * through sc_int.h. It draws samples with fork.c and takes roots, views
 * and pool state from engine.c.
 */
#include "sc/batch.h"

#include "sc/sc_int.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/prof.h"
#include "infer/fwd.h"
#include "qerr.h"

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

int sc_batch_create(sc_engine *e, const sc_batch_params *p,
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
	if ((rc = sc_engine_need_fixed(e)))
		return rc;
	return sc_batch_create(e, p, out);
}

int sc_batch_add(sc_batch *b, const job_init *ji, sc_job **out)
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
	if (j->n && j->p.grammar) {
		/* the grammar, compiled once for the job's forks */
		if ((!e->gv && (rc = sc_grammar_vocab(e))) ||
		    (rc = gbnf_parse(j->p.grammar, j->p.grammar_len,
				     &j->gg)) ||
		    (rc = gbnf_matcher_new(j->gg, e->gv, &j->gm)))
			goto fail;
		j->g0 = gbnf_start(j->gm);
		if ((rc = sc_grammar_waits(e, j)))
			goto fail;
	}
	if (j->n && (rc = sc_params_vocab_limit(&j->p, V)))
		goto fail;
	j->p.grammar = NULL; /* borrowed: not kept past this call */
	j->p.grammar_len = 0;
	j->w = sc_fork_conf_window(&j->p);
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
		j->need_root = sc_engine_blocks_for(e, ji->n_prompt);
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

		j->need = sc_engine_blocks_for(e, rt % (uint64_t)e->p.block_tokens +
					    (uint64_t)j->p.max_new);
		j->need_win = sc_engine_win_slots(e, j->need);
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
		free(j->fs[i].seen);
		free(j->fs[i].alt);
		free(j->fs[i].starts);
	}
	if (j->own_out)
		for (int i = 0; i < j->n; i++)
			sc_fork_sample_fini(&j->out[i]);
	if (j->own_out)
		free(j->out);
	kv_seq_free(b->e->pool, &j->own);
	kv_seq_free(NULL, &j->view); /* a view holds no references */
	free(j->fs);
	free(j->done);
	free(j->prompt);
	free(j->logits_buf);
	gbnf_matcher_free(&j->gm);
	gbnf_free(&j->gg);
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
		sc_cache_keep(b->e, j->prompt, j->n_prompt, &j->own);
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

/* The same for window slots (a pool split by windows): a fork's private
 * blocks it still sees the window part of are held, need_win owed at
 * most; UINT64_MAX for a pool without window slots. */
static uint64_t batch_avail_win(const sc_batch *b)
{
	const kv_pool *p = b->e->pool;
	uint64_t owed = 0, fr = kv_pool_free_win_slots(p);

	if (!kv_pool_win_slots(p))
		return UINT64_MAX;
	for (int i = 0; i < b->n_act; i++) {
		const fork_state *f = b->act[i];
		uint32_t full = f->job->root->n_tokens /
				(uint32_t)b->e->p.block_tokens;
		uint32_t lo = f->seq.w_lo > full ? f->seq.w_lo : full;
		uint32_t held = f->appended && f->seq.n_blocks > lo
					? f->seq.n_blocks - lo : 0;

		owed += held < f->job->need_win ? f->job->need_win - held : 0;
	}
	return fr > owed ? fr - owed : 0;
}

/* j may start another fork now (blocks aside). */
static int job_wants(const sc_job *j)
{
	return !j->rc && !j->prefilling && j->n_started < j->n &&
	       j->n_act < j->width && !(j->st && j->st->decided) &&
	       /* in waves: only samples the rule may still need */
	       !(j->st && j->fs[j->n_started].index >= j->st->horizon) &&
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
	if (j->p.logprobs && j->p.top_logprobs > 0 &&
	    !(f->alt = malloc((size_t)j->p.top_logprobs * sizeof(*f->alt))))
		return qerr_fail(QERR_NOMEM, "out of memory");
	f->win_min = INT64_MAX;
	f->job = j;
	f->gstate = j->g0;
	sc_fork_grammar_init(f);
	f->logits = j->root_logits;
	f->lg_own = NULL;
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
	uint64_t avail = batch_avail(b), wavail = batch_avail_win(b);
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
				if (avail < j->need || wavail < j->need_win) {
					j->starved = 1;
					continue;
				}
				if ((rc = start_fork(b, j))) {
					j->rc = rc;
					continue;
				}
				avail -= j->need;
				if (wavail != UINT64_MAX)
					wavail -= j->need_win;
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
		/* a root keeps every window part: a slot per block */
		if (avail < j->need_root || wavail < j->need_root) {
			j->starved = 1;
			continue;
		}
		if ((j->rc = kv_seq_reserve(b->e->pool, &j->own,
					    (uint32_t)(j->n_prompt -
						       j->filled))))
			continue;
		j->pf_started = 1;
		avail -= j->need_root;
		if (wavail != UINT64_MAX)
			wavail -= j->need_root;
	}
}

/* Every live fork draws a token; finished ones report and free their
 * blocks; the stoppers advance; forks of ended or decided jobs leave. */
static void batch_sample(sc_batch *b)
{
	sc_engine *e = b->e;
	int live = 0;
	int64_t t0 = prof_active ? prof_now() : 0;

	sc_fork_draw(e, b->act, b->n_act);
	for (int i = 0; i < b->n_act; i++) {
		fork_state *f = b->act[i];
		sc_job *j = f->job;
		int rc;

		if (j->rc)
			continue;
		j->active = 1;
		rc = sc_fork_step(e, &j->p, f);
		j->stats.gen_tokens++;
		if (!rc)
			sc_fork_filter_check(j->flt, f, j->w);
		if (!rc && f->done) {
			rc = sc_fork_finish(f, j->w, j->cb.on_sample, j->cb.ctx);
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
			j->rc = sc_fork_stopper_advance(j->st, j->out, j->n, j->done);
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
	if (t0)
		prof_add(PROF_SAMPLING, prof_now() - t0);
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
			f->logits = f->lg_own = b->lg + (size_t)(c0 + k) * V;
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
		sc_engine_track_peak(e);
		for (int k = 0; !rc && k < m; k++)
			sc_engine_drop_windows(e, b->seqs[k]);
		if (b->on_forward)
			b->on_forward(b->fctx);
	}
}

/* Keeps a prefilled root as an sc_root (the job's blocks move to it). */
static int publish_root(sc_engine *e, sc_job *j, uint32_t *id)
{
	sc_root *r;
	int rc;

	if ((rc = sc_root_new(e, &r)))
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
	sc_root_end(e, r, 1);
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
		sc_engine_track_peak(e);
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
	/* a decode round (what bench --roofline times) */
	prof_decode(1);
	batch_sample(b);
	batch_forward(b);
	prof_decode(0);
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
	if ((rc = sc_root_view(e, root, &view)))
		return rc;
	ji.p = p;
	ji.view = &view;
	ji.copy_logits = root->logits;
	ji.idx = idx;
	ji.n = n;
	if (cb)
		ji.cb = *cb;
	if ((rc = sc_batch_add(b, &ji, &j))) {
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
	if ((rc = sc_batch_add(b, &ji, &j)))
		return rc;
	if (job)
		*job = j->id;
	return 0;
}

int sc_batch_prefill_from(sc_batch *b, uint32_t base_id, uint32_t n_base,
			  const int32_t *prompt, size_t n,
			  const sc_job_cbs *cb, uint32_t *job)
{
	sc_engine *e = b->e;
	const sc_root *base = sc_root_find(e, base_id);
	uint32_t full;
	sc_job *j;
	int rc;

	if ((rc = sc_root_base_check(e, base, base_id, n_base, prompt, n)))
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
	j->need_root = sc_engine_blocks_for(e, n) - full;
	return 0;
}

/* ---- single-job uses: sc_batch_decode_job, sc_run's paged and reset modes -------- */

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

/* One job alone in a batch of its own (sc_batch_decode_job, sc_run's paged and
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

int sc_batch_solo(sc_engine *e, job_init *ji, sc_job_stats *st)
{
	sc_batch_params bp = {ji->width > 0 ? ji->width : ji->n, 0, NULL,
			      NULL};
	solo o = {0};
	sc_batch *b;
	sc_job *j;
	int rc;

	solo_wrap(&o, &ji->cb);
	if ((rc = sc_batch_create(e, &bp, &b)))
		return rc;
	if ((rc = sc_batch_add(b, ji, &j))) {
		sc_batch_free(&b);
		return rc;
	}
	rc = solo_loop(b, j->id, &o, NULL, NULL);
	sc_batch_free(&b);
	*st = o.end.st;
	return rc;
}

int sc_batch_decode_job(sc_engine *e, const sc_root_ref *root, const int *idx, int n,
	      const sc_params *p, sc_sample_cb on_sample, sc_round_cb on_round,
	      void *ctx, sc_decode_stats *st)
{
	return sc_batch_decode_job_text(e, root, idx, n, p, on_sample, on_round, NULL,
			      ctx, st);
}

int sc_batch_decode_job_text(sc_engine *e, const sc_root_ref *root, const int *idx,
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
	if ((rc = sc_engine_need_fixed(e)) || (rc = sc_batch_create(e, &bp, &b)))
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
