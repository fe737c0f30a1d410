/* decode — DecodeJob: the job checked, run in the merged decode loop, its samples and streamed text sent, JobDone; cancels (wk_int.h). */
#include "wk_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- DecodeJob ------------------------------------------------------- */

/* The bytes of n alternatives' token ids (an end token's text too),
 * pointing into the tokenizer, into *out (malloc'ed; NULL for n = 0):
 * 0, or -1 out of memory. */
static int alt_pieces(const wk *w, const uint32_t *ids, size_t n,
		      ProtobufCBinaryData **out)
{
	*out = NULL;
	if (n && !(*out = calloc(n, sizeof(**out))))
		return -1;
	for (size_t k = 0; k < n; k++) {
		const char *pc = tok_piece(w->t, (int32_t)ids[k], 1,
					   &(*out)[k].len);

		(*out)[k].data = (uint8_t *)(pc ? pc : "");
	}
	return 0;
}

static int on_sample(void *ctx, const sc_sample *s)
{
	wk_job *j = ctx;
	wk *w = j->w;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
	Quorum__Sample x = QUORUM__SAMPLE__INIT;
	ProtobufCBinaryData *pieces = NULL;

	x.index = (uint32_t)s->index;
	if (s->has_answer) {
		x.has_answer = 1;
		x.answer.data = (uint8_t *)s->answer;
		x.answer.len = strlen(s->answer);
	}
	x.tokens = (uint32_t)s->n_tokens;
	x.has_reasoning_tokens = 1;
	x.reasoning_tokens = (uint32_t)s->reasoning_tokens;
	x.has_steps = 1;
	x.steps = (uint32_t)(s->n_tokens + s->end_step);
	x.has_mean_logprob = x.has_group_confidence = 1;
	x.mean_logprob = s->mean_logprob;
	x.group_confidence = s->group_conf;
	x.finish = (char *)sc_fork_finish_name(s->finish);
	x.text.data = (uint8_t *)s->text;
	x.text.len = s->len;
	x.worker = (char *)w->o->id;
	x.n_token_logprobs = x.n_token_offsets = (size_t)s->n_token_lp;
	x.token_logprobs = s->token_lp;
	x.token_offsets = s->token_off;
	if (s->alt_n) {
		/* the alternatives, each with its bytes */
		if (alt_pieces(w, s->alt_id, s->n_alt, &pieces))
			return qerr_fail(QERR_NOMEM, "out of memory for the "
					 "alternatives");
		x.n_alt_counts = (size_t)s->n_token_lp;
		x.alt_counts = s->alt_n;
		x.n_alt_tokens = x.n_alt_logprobs = x.n_alt_pieces = s->n_alt;
		x.alt_tokens = s->alt_id;
		x.alt_logprobs = s->alt_lp;
		x.alt_pieces = pieces;
	}
	r.request_id = j->rid;
	r.attempt = j->attempt;
	r.sample = &x;
	for (int i = 0; j->sent && i < j->n; i++)
		if (j->idx[i] == s->index)
			j->sent[i] = UINT32_MAX; /* whole: in the SampleResult */
	m.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
	m.sample = &r;
	wk_send_msg(w, &m);
	free(pieces);
	j->left--;
	if (w->busy)
		w->busy--;
	return 0;
}

/* Sample s's tokens not sent yet whose pieces end within its settled
 * bytes (the next token's start is known and settled), as run (its
 * pieces for the alternatives at *pieces, to free): 0 when none. */
static int token_run(wk_job *j, int i, const sc_sample *s,
		     Quorum__TokenRun *run, ProtobufCBinaryData **pieces)
{
	uint32_t t0 = j->sent_tok[i], t = t0;
	size_t na = 0;

	*pieces = NULL;
	if (!s->token_lp)
		return 0;
	while ((int)t + 1 < s->n_token_lp && s->token_off[t + 1] <= s->settled)
		t++;
	if (t == t0)
		return 0;
	quorum__token_run__init(run);
	run->first = t0;
	run->end = s->token_off[t];
	run->n_token_logprobs = run->n_token_offsets = t - t0;
	run->token_logprobs = s->token_lp + t0;
	run->token_offsets = s->token_off + t0;
	if (s->alt_n) {
		size_t a0 = j->sent_alt[i];

		for (uint32_t k = t0; k < t; k++)
			na += s->alt_n[k];
		if (alt_pieces(j->w, s->alt_id + a0, na, pieces))
			return 0; /* out of memory: they come with the sample */
		run->n_alt_counts = t - t0;
		run->alt_counts = s->alt_n + t0;
		run->n_alt_tokens = run->n_alt_logprobs = run->n_alt_pieces = na;
		run->alt_tokens = s->alt_id + a0;
		run->alt_logprobs = s->alt_lp + a0;
		run->alt_pieces = *pieces;
	}
	j->sent_tok[i] = t;
	j->sent_alt[i] += na;
	return 1;
}

/* Streamed jobs: every WK_TEXT_ROUNDS rounds, the new bytes of the
 * unfinished samples in one SampleText, with their tokens' run when the
 * job asks for log-probabilities. */
static void on_text(void *ctx, const sc_sample *s, int n)
{
	wk_job *j = ctx;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleText st = QUORUM__SAMPLE_TEXT__INIT;
	Quorum__TextPart *parts, **pp;
	Quorum__TokenRun *runs;
	ProtobufCBinaryData **pieces;

	if (!j->sent || ++j->rounds % WK_TEXT_ROUNDS)
		return;
	parts = calloc((size_t)n, sizeof(*parts));
	pp = calloc((size_t)n, sizeof(*pp));
	runs = calloc((size_t)n, sizeof(*runs));
	pieces = calloc((size_t)n, sizeof(*pieces));
	for (int i = 0; parts && pp && runs && pieces && i < n; i++) {
		Quorum__TextPart *x = &parts[st.n_parts];

		/* the settled bytes: a stop string may still cut the rest */
		if (s[i].settled <= j->sent[i] || s[i].settled > UINT32_MAX)
			continue;
		quorum__text_part__init(x);
		x->index = (uint32_t)s[i].index;
		x->offset = j->sent[i];
		x->text.data = (uint8_t *)s[i].text + j->sent[i];
		x->text.len = s[i].settled - j->sent[i];
		j->sent[i] = (uint32_t)s[i].settled;
		if (j->sent_tok && token_run(j, i, &s[i], &runs[st.n_parts],
					     &pieces[st.n_parts]))
			x->tokens = &runs[st.n_parts];
		pp[st.n_parts++] = x;
	}
	if (st.n_parts) {
		st.request_id = j->rid;
		st.attempt = j->attempt;
		st.parts = pp;
		m.body_case = QUORUM__WORKER_MSG__BODY_TEXT;
		m.text = &st;
		wk_send_msg(j->w, &m);
	}
	for (size_t k = 0; pieces && k < st.n_parts; k++)
		free(pieces[k]);
	free(pieces);
	free(runs);
	free(parts);
	free(pp);
}

static void job_free(wk_job *j)
{
	free(j->idx);
	free(j->sent);
	free(j->sent_tok);
	free(j->sent_alt);
	free(j->pool);
	free(j->grammar);
	free(j->blocks);
	free(j->logits);
	free(j);
}

/* A job's end: status (a wire status; OK with no error) and its stats
 * (NULL: it never ran). */
static void send_job_done(wk *w, uint64_t rid, uint32_t attempt, int status,
			  const char *err, const sc_job_stats *st)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__JobDone done = QUORUM__JOB_DONE__INIT;

	done.request_id = rid;
	done.attempt = attempt;
	done.status = status;
	if (status != QUORUM__STATUS__STATUS_OK)
		done.error = (char *)err;
	if (st) {
		done.has_blocks_mapped = done.has_blocks_copied = 1;
		done.has_decode_ms = done.has_generated_tokens = 1;
		done.blocks_mapped = st->blocks_mapped;
		done.blocks_copied = st->blocks_copied;
		done.decode_ms = st->decode_ms;
		done.generated_tokens = st->gen_tokens;
	}
	m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
	m.job_done = &done;
	wk_send_msg(w, &m);
}

void wk_start_waiting(wk *w);

static int status_of(int rc)
{
	return rc == QERR_CANCELLED ? QUORUM__STATUS__STATUS_CANCELLED
	       : rc ? wire_status_of_qerr(rc) : QUORUM__STATUS__STATUS_OK;
}

/* The job left the merged loop (finished, cancelled or failed): its
 * JobDone, with its own stats. */
static void job_done(void *ctx, uint32_t id, int rc, const sc_job_stats *st)
{
	wk_job *j = ctx, **pp;
	wk *w = j->w;

	(void)id;
	send_job_done(w, j->rid, j->attempt, status_of(rc),
		      rc == QERR_CANCELLED ? "cancelled" : qerr_detail(), st);
	w->busy -= (uint32_t)j->left < w->busy ? (uint32_t)j->left : w->busy;
	for (pp = &w->jobs; *pp && *pp != j; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = j->next;
	job_free(j);
}

/* Adds j to the merged loop; on failure its JobDone goes out at once. */
static void job_start(wk *w, wk_job *j)
{
	sc_job_cbs cb = {on_sample, j->sent ? on_text : NULL, NULL, job_done,
			 j};
	int rc;

	j->ref.blocks = j->blocks;
	j->ref.logits = j->logits;
	j->ref.pool_name = j->pool;
	rc = sc_batch_decode(w->b, &j->ref, j->idx, j->n, &j->p, &cb, &j->id);
	free(j->logits); /* copied by the batch */
	j->logits = NULL;
	if (rc) {
		send_job_done(w, j->rid, j->attempt, status_of(rc),
			      qerr_detail(), NULL);
		job_free(j);
		return;
	}
	j->next = w->jobs;
	w->jobs = j;
	w->busy += (uint32_t)j->n;
}

/* Merging off: the next waiting job starts once no other decodes. */
void wk_start_waiting(wk *w)
{
	while (w->waiting && !w->jobs) {
		wk_job *j = w->waiting;

		if (!(w->waiting = j->next))
			w->waiting_tail = NULL;
		job_start(w, j);
	}
}

/* Ends the jobs matching (rid, attempt; 0: any attempt) — or, rid 0, all
 * of them — with QERR_CANCELLED: their forks leave the loop between
 * rounds and their blocks are free at once; everyone else's samples go on
 * untouched. */
void wk_cancel_jobs(wk *w, int all, uint64_t rid, uint32_t attempt,
			const char *pool)
{
	for (wk_job **pp = &w->waiting; *pp;) {
		wk_job *j = *pp;

		if (all || (pool ? !strcmp(j->pool, pool)
				 : j->rid == rid &&
					   (!attempt || j->attempt == attempt))) {
			*pp = j->next;
			send_job_done(w, j->rid, j->attempt,
				      QUORUM__STATUS__STATUS_CANCELLED,
				      "cancelled", NULL);
			job_free(j);
		} else {
			pp = &j->next;
		}
	}
	w->waiting_tail = NULL;
	for (wk_job *j = w->waiting; j; j = j->next)
		w->waiting_tail = j;
	for (wk_job *j = w->jobs, *nx; j; j = nx) {
		nx = j->next;
		if (all || (pool ? !strcmp(j->pool, pool)
				 : j->rid == rid &&
					   (!attempt || j->attempt == attempt)))
			sc_batch_cancel(w->b, j->id, QERR_CANCELLED);
	}
}

/* A root reference is usable when it names our pool or a pool of this
 * cluster (another worker on this host, poolname_ok); anything else
 * is refused so a coordinator bug cannot make us map arbitrary shm
 * objects. */
int wk_pool_name_ok(const wk *w, const char *name)
{
	return name && (!strcmp(name, w->pool_name) ||
			poolname_ok(name, w->c->cluster.name, NULL));
}

/* A job is cancelled by a Cancel of its request naming no attempt or its
 * own: a job sent again after a per-job cancel (a new attempt) runs. */
static int was_cancelled(const wk *w, uint64_t rid, uint32_t attempt)
{
	unsigned n = w->n_cancels < 32 ? w->n_cancels : 32;

	for (unsigned i = 0; i < n; i++)
		if (w->cancels[i] == rid &&
		    (!w->cancel_att[i] || w->cancel_att[i] == attempt))
			return 1;
	return 0;
}

void wk_on_decode(wk *w, const Quorum__DecodeJob *j)
{
	const Quorum__SamplingParams *sp = j->params;
	const Quorum__RootRef *rr = j->root;
	/* what a job must name (the rest have their zero meaning: no stop
	 * strings, no log-probabilities, stop at an end token) */
	const unsigned need = SC_BIT(SC_S_N) | SC_BIT(SC_S_SEED) |
			      SC_BIT(SC_S_TEMPERATURE) | SC_BIT(SC_S_TOP_K) |
			      SC_BIT(SC_S_TOP_P) |
			      SC_BIT(SC_S_MAX_NEW_TOKENS);
	sc_params p = {0};
	unsigned given = 0;
	wk_job *x = NULL;
	const char *bad = NULL;
	uint8_t *seen = NULL;   /* (p.n) indices met */
	char why[300];

	p.mode = SC_BATCHED;
	if (!rr || !sp)
		bad = "decode job without a root or sampling params";
	else if (spwire_decode(sp, &p, &given)) {
		/* the limits and message of every entry point (sc/params) */
		snprintf(why, sizeof(why), "bad sampling params: %s",
			 qerr_detail());
		bad = why;
	} else if ((given & need) != need)
		bad = "decode job without full sampling params";
	else if (p.n > WK_MAX_INDICES || j->n_indices < 1 ||
		 j->n_indices > (size_t)p.n)
		bad = "bad sample count";
	else if (was_cancelled(w, j->request_id, j->attempt))
		bad = "cancelled";
	else if (!wk_pool_name_ok(w, rr->pool_name))
		bad = "root pool is not of this cluster";
	else if (rr->n_tokens < 1 ||
		 rr->n_blocks != ((size_t)rr->n_tokens +
				  (size_t)w->c->kv.block_tokens - 1) /
					 (size_t)w->c->kv.block_tokens)
		bad = "root blocks do not match its tokens";
	else if (!(x = calloc(1, sizeof(*x))) ||
		 !(x->idx = malloc(j->n_indices * sizeof(*x->idx))) ||
		 !(x->pool = strdup(rr->pool_name)) ||
		 !(x->blocks = malloc((rr->n_blocks ? rr->n_blocks : 1) *
				      sizeof(*x->blocks))))
		bad = "out of memory";
	else if (!(x->logits = wk_logits_copy(w, &j->logits)))
		bad = "bad logits";
	/* each index once: a duplicate would decode the same sample (the
	 * same bytes, by the seed) again for nothing */
	if (!bad && !(seen = calloc((size_t)p.n, 1)))
		bad = "out of memory";
	for (size_t i = 0; !bad && i < j->n_indices; i++) {
		if (j->indices[i] >= (uint32_t)p.n)
			bad = "sample index out of range";
		else if (seen[j->indices[i]]++)
			bad = "duplicate sample index";
		else
			x->idx[i] = (int)j->indices[i];
	}
	free(seen);
	if (!bad && p.grammar &&
	    !(x->grammar = strndup(p.grammar, p.grammar_len)))
		bad = "out of memory";
	if (!bad && p.grammar)
		p.grammar = x->grammar; /* the message goes, the job stays */
	if (!bad && sc_params_check(&p)) {
		snprintf(why, sizeof(why), "bad sampling params: %s",
			 qerr_detail());
		bad = why;
	}
	if (bad) {
		send_job_done(w, j->request_id, j->attempt,
			      strcmp(bad, "cancelled")
				      ? QUORUM__STATUS__STATUS_BAD_REQUEST
				      : QUORUM__STATUS__STATUS_CANCELLED,
			      bad, NULL);
		if (x)
			job_free(x);
		return;
	}
	x->w = w;
	x->rid = j->request_id;
	x->attempt = j->attempt;
	x->n = x->left = (int)j->n_indices;
	x->p = p;
	memcpy(x->blocks, rr->blocks, rr->n_blocks * sizeof(*x->blocks));
	x->ref.n_tokens = rr->n_tokens;
	x->ref.n_blocks = (uint32_t)rr->n_blocks;
	/* no memory for the offsets: no parts, the samples still go out */
	if (j->has_stream && j->stream &&
	    (x->sent = calloc(j->n_indices, sizeof(*x->sent))) &&
	    p.logprobs &&
	    (!(x->sent_tok = calloc(j->n_indices, sizeof(*x->sent_tok))) ||
	     !(x->sent_alt = calloc(j->n_indices, sizeof(*x->sent_alt))))) {
		free(x->sent);
		x->sent = NULL;
	}
	if (w->c->workers.merge || !w->jobs) {
		job_start(w, x);
		return;
	}
	/* merging off: one job at a time, the others wait their turn */
	if (w->waiting_tail)
		w->waiting_tail->next = x;
	else
		w->waiting = x;
	w->waiting_tail = x;
}
