/* dispatch — requests and their decode jobs: the sample split over free
 * slots, requeue when a root dies, deadlines (sched_int.h). */
#include "sched_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/prompt.h"
#include "text/tok.h"
#include "qerr.h"
#include "net/spwire.h"
#include "sc/params.h"
#include "sc/vote.h"

static void job_free(job *j)
{
	free(j->idx);
	free(j);
}

/* Gives the unfinished indices of j back to the request and frees it. */
void dispatch_job_drop(sched *s, req *r, job *j)
{
	job **pp = &r->jobs;
	worker *w = j->worker >= 0 ? &s->w[j->worker] : NULL;

	while (*pp && *pp != j)
		pp = &(*pp)->next;
	if (*pp)
		*pp = j->next;
	for (int i = 0; i < j->n; i++)
		if (r->st[j->idx[i]] == S_ASSIGNED) {
			r->st[j->idx[i]] = S_PENDING;
			if (w && w->used && w->busy)
				w->busy--;
		}
	if (j->root)
		roots_unref(s, j->root);
	job_free(j);
}

void dispatch_req_free(sched *s, req *r)
{
	req **pp = &s->reqs;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
	s->reqs_tail = NULL;
	for (req *x = s->reqs; x; x = x->next)
		s->reqs_tail = x;
	s->n_reqs--;
	front_charge(s, r);
	if (r->usc_child) {
		/* its pass goes on, orphaned (its result dropped), and ends
		 * at the next deadline sweep */
		r->usc_child->usc_parent = NULL;
		r->usc_child->deadline = sched_now(s);
		r->usc_child = NULL;
	}
	if (r->usc_parent)
		r->usc_parent->usc_child = NULL;
	while (r->jobs) {
		job *j = r->jobs;

		if (j->state == J_SENT && j->n_done < j->n) {
			Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
			Quorum__Cancel c = QUORUM__CANCEL__INIT;

			c.request_id = r->rid;
			m.body_case = QUORUM__COORD_MSG__BODY_CANCEL;
			m.cancel = &c;
			sched_send_worker(s, j->worker, &m);
		}
		dispatch_job_drop(s, r, j);
	}
	if (r->root)
		roots_unref(s, r->root);
	dispatch_req_release(r);
}

void dispatch_req_release(req *r)
{
	for (uint32_t i = 0; r->res && i < req_n(r); i++)
		if (r->res[i])
			quorum__worker_msg__free_unpacked(r->res[i], NULL);
	free(r->res);
	free(r->fwd);
	free(r->fwd_hash);
	free(r->fwd_tok);
	free(r->fwd_tok_hash);
	free(r->st);
	free(r->lost);
	free(r->begun);
	stop_fini(&r->ss);
	free(r->tokens);
	free(r->grammar);
	free(r->question);
	free(r->usc_reply);
	free(r);
}

void dispatch_req_fail(sched *s, req *r, int status, const char *err)
{
	dispatch_req_fail_retry(s, r, status, err, 0);
}

void dispatch_req_fail_retry(sched *s, req *r, int status, const char *err,
			     uint32_t retry_ms)
{
	if (r->usc_child_of) {
		/* a selection pass that failed: its parent replies without
		 * it (at the next pump), saying why */
		req *p = r->usc_parent;

		if (p) {
			char why[256];

			snprintf(why, sizeof(why), "the selection pass failed: "
				 "%s", err ? err : "?");
			p->usc_child = NULL;
			p->usc_done = 1;
			p->usc_chosen = -1;
			free(p->usc_reply);
			p->usc_reply = strdup(why);
			p->state = Q_DECODE;
		}
		dispatch_req_free(s, r);
		return;
	}

	/* a client found gone (front_send_part) gets nothing: its lost
	 * reply is counted there */
	if (!r->gone)
		front_reply_retry(s, r->cid, r->cid_len, r->client_rid, status,
				  err, retry_ms);
	s->failed++;
	dispatch_req_free(s, r);
}

req *dispatch_req_by_rid(const sched *s, uint64_t rid)
{
	for (req *r = s->reqs; r; r = r->next)
		if (r->rid == rid)
			return r;
	return NULL;
}

static void try_send(sched *s, req *r, job *j)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__DecodeJob d = QUORUM__DECODE_JOB__INIT;
	Quorum__RootRef ref = QUORUM__ROOT_REF__INIT;
	Quorum__SamplingParams sp;
	spwire_buf spb;
	worker *w = &s->w[j->worker];
	int src = roots_ref_for(s, r->root, w, &ref);

	if (src < 0) {
		roots_want_replica(s, r, r->root, w->host);
		return;
	}
	spwire_encode(&r->p, SPWIRE_JOB, &sp, &spb);
	d.request_id = r->rid;
	d.attempt = j->attempt;
	d.root = &ref;
	d.logits.data = r->root->logits;
	d.logits.len = r->root->logits_len;
	d.n_indices = (size_t)j->n;
	d.indices = j->idx;
	d.params = &sp;
	d.has_stream = d.stream = r->stream;
	m.body_case = QUORUM__COORD_MSG__BODY_DECODE;
	m.decode = &d;
	j->state = J_SENT;
	j->src = src;
	j->root = r->root;
	r->root->refs++;
	r->messages++;
	sched_send_worker(s, j->worker, &m);
}

/* Blocks a worker on host needs for r's root besides its samples' tails:
 * none where the holder's pool or a copy is (or is being made), else a
 * copy of its own. */
static uint64_t root_extra(const sched *s, const req *r, const char *host)
{
	const entry *e = r->root;

	if (!strcmp(s->w[e->worker].host, host))
		return 0;
	for (int i = 0; i < e->n_reps; i++)
		if (!strcmp(e->reps[i].host, host))
			return 0;
	return sched_blocks_for(s, r->n_tokens);
}

/* Samples of r that may be assigned now: pending ones, at most r->width
 * in flight (early stopping: the lowest pending indices first), in waves
 * (sampling.stop_waves) only those below the rule's horizon, none once
 * the request is decided. *flying: its samples assigned now. */
static uint32_t assignable(const sched *s, const req *r, uint32_t *flying)
{
	uint32_t pending = 0, fl = 0;
	uint32_t h = (uint32_t)stop_horizon(&r->ss, s->c->sampling.p.stop_waves);

	for (uint32_t i = 0; i < req_n(r); i++) {
		pending += r->st[i] == S_PENDING && i < h;
		fl += r->st[i] == S_ASSIGNED;
	}
	*flying = fl;
	if (r->decided)
		return 0;
	if (pending > r->width - (fl < r->width ? fl : r->width))
		pending = r->width - (fl < r->width ? fl : r->width);
	return pending;
}

/* Splits up to cap pending indices of r over the workers' free slots and
 * KV blocks (each sample reserves its worst-case tail; contiguous ranges,
 * as even as slots and blocks allow; unused cached roots are evicted
 * for room) into jobs (send_waiting sends them). */
static void split(sched *s, req *r, uint32_t cap)
{
	int elig[MAX_WORKERS], ne = 0;
	uint64_t room[MAX_WORKERS], extra[MAX_WORKERS], all[MAX_WORKERS];
	uint32_t next = 0, tail = sched_tail_blocks(s, r), flying;
	uint32_t pending = assignable(s, r, &flying);

	if (pending > cap)
		pending = cap;
	if (pending)
		roots_room_all(s, NULL, all);
	for (int i = 0; pending && i < s->n_workers; i++) {
		if (!members_usable(s, i) || s->w[i].busy >= s->w[i].slots ||
		    roots_transfer_failed(r->root, s->w[i].host))
			continue;
		extra[ne] = root_extra(s, r, s->w[i].host);
		room[ne] = all[i];
		if (room[ne] < extra[ne] + tail)
			continue;
		elig[ne++] = i;
	}
	if (ne) {
		uint32_t share = (pending + (uint32_t)ne - 1) / (uint32_t)ne;

		for (int k = 0; k < ne && pending; k++) {
			worker *w = &s->w[elig[k]];
			uint32_t take = share, f = w->slots - w->busy;
			uint64_t fit = (room[k] - extra[k]) / tail;
			job *j;

			if (take > f)
				take = f;
			if (take > pending)
				take = pending;
			if (take > fit)
				take = (uint32_t)fit;
			if (!take || !roots_make_room(s, elig[k],
						      extra[k] +
							      (uint64_t)take *
								      tail))
				continue;
			if (!(j = calloc(1, sizeof(*j))) ||
			    !(j->idx = malloc(take * sizeof(*j->idx)))) {
				free(j);
				break;
			}
			j->attempt = ++r->next_attempt;
			j->worker = elig[k];
			j->src = -1;
			j->state = J_WAIT_ROOT;
			while (j->n < (int)take) {
				while (r->st[next] != S_PENDING)
					next++;
				r->st[next] = S_ASSIGNED;
				r->started += !r->begun[next];
				r->begun[next] = 1;
				j->idx[j->n++] = next;
			}
			w->busy += take;
			pending -= take;
			j->next = r->jobs;
			r->jobs = j;
		}
	}
}

/* Sends r's jobs waiting for their root where it is reachable now (tried
 * again only when the root's copies changed). */
static void send_waiting(sched *s, req *r)
{
	for (job *j = r->jobs; j; j = j->next)
		if (j->state == J_WAIT_ROOT &&
		    (!j->tried || j->tried_gen != r->root->rep_gen)) {
			try_send(s, r, j);
			j->tried = 1;
			j->tried_gen = r->root->rep_gen;
		}
}

/* The root of r is gone (holder lost, prefill failed): prefill again,
 * keeping the samples already in and the jobs already sent. */
static void requeue(sched *s, req *r)
{
	int no_room = r->root->no_room;

	for (job *j = r->jobs, *nx; j; j = nx) {
		nx = j->next;
		if (j->state == J_WAIT_ROOT)
			dispatch_job_drop(s, r, j);
	}
	roots_unref(s, r->root);
	r->root = NULL;
	r->state = Q_QUEUED;
	/* a capacity shortage is never charged to the retry budget */
	if (no_room) {
		if (++r->capacity_waits > MAX_CAPACITY_WAITS)
			dispatch_req_fail(s, r,
					  QUORUM__STATUS__STATUS_NO_CAPACITY,
					  "the workers' KV pools stayed full");
	} else if (++r->failures > MAX_FAILURES) {
		dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_WORKER_LOST,
				  "root lost too often: retry budget exhausted");
	}
}

/* The free decode slots go to the requests decoding by max-min fairness:
 * each free slot to the request with the fewest samples in flight
 * (counting what this pass gives), so a request of N=64 that came first
 * cannot starve one of N=4 behind it — the workers then interleave their
 * forks in one merged round. Each request's share is split in one go
 * (one job per worker); what placement could not use (blocks, hosts)
 * goes to the others in a second pass, fewest in flight first. */
static void share_slots(sched *s)
{
	enum { MAXR = 4096 };
	req *rs[MAXR];
	uint32_t fly[MAXR], want[MAXR], give[MAXR];
	uint64_t free_slots = 0;
	int nr = 0;

	for (int i = 0; i < s->n_workers; i++)
		if (members_usable(s, i) && s->w[i].busy < s->w[i].slots)
			free_slots += s->w[i].slots - s->w[i].busy;
	for (req *r = s->reqs; r && nr < MAXR; r = r->next) {
		if (r->state != Q_DECODE || r->n_done == req_n(r) || r->decided)
			continue;
		want[nr] = assignable(s, r, &fly[nr]);
		if (!want[nr])
			continue;
		give[nr] = 0;
		rs[nr++] = r;
	}
	{
		uint64_t total = 0;

		for (int k = 0; k < nr; k++)
			total += want[k];
		if (total < free_slots)
			free_slots = total; /* never more than is wanted */
	}
	for (uint64_t left = free_slots; left > 0; left--) {
		int best = -1;

		for (int k = 0; k < nr; k++)
			if (give[k] < want[k] &&
			    (best < 0 || fly[k] + give[k] <
						 fly[best] + give[best]))
				best = k;
		if (best < 0)
			break;
		give[best]++;
	}
	for (int pass = 0; pass < 2 && free_slots; pass++) {
		int ord[MAXR];

		/* fewest in flight first (arrival order among equals) */
		for (int k = 0; k < nr; k++) {
			int at = k;

			while (at > 0 && fly[ord[at - 1]] > fly[k]) {
				ord[at] = ord[at - 1];
				at--;
			}
			ord[at] = k;
		}
		for (int i = 0; i < nr; i++) {
			int k = ord[i];

			if (pass == 0 && give[k])
				split(s, rs[k], give[k]);
			else if (pass == 1)
				split(s, rs[k], UINT32_MAX);
		}
		for (int k = 0; k < nr; k++)
			assignable(s, rs[k], &fly[k]); /* split never frees r */
		free_slots = 0;
		for (int i = 0; i < s->n_workers; i++)
			if (members_usable(s, i) &&
			    s->w[i].busy < s->w[i].slots)
				free_slots += s->w[i].slots - s->w[i].busy;
	}
}

void dispatch_pump(sched *s)
{
	int active = 0, limit = 2 * members_alive(s);
	int64_t unclaimed = 0;

	if (limit < 2)
		limit = 2;
	for (req *r = s->reqs, *nx; r; r = nx) {
		nx = r->next;
		if (r->root && r->root->state == E_DEAD)
			requeue(s, r);
	}
	for (req *r = s->reqs; r; r = r->next)
		active += r->state != Q_QUEUED;
	/* the workers decode the forks of every request they hold in merged
	 * rounds: beyond 2 per worker, requests start while the free decode
	 * slots are not all claimed by those under way */
	for (int i = 0; i < s->n_workers; i++)
		if (members_usable(s, i) && s->w[i].busy < s->w[i].slots)
			unclaimed += s->w[i].slots - s->w[i].busy;
	for (req *r = s->reqs; r; r = r->next) {
		uint32_t fl;

		if (r->state != Q_QUEUED)
			unclaimed -= assignable(s, r, &fl);
	}
	/* queued requests start fairly: the next is one of the client with
	 * the fewest requests under way (first come first among equals) */
	s->pump_gen++;
	while ((active < limit || unclaimed > 0) && members_alive(s)) {
		req *pick = NULL;
		int pick_on = 0;
		uint64_t rid;

		for (req *r = s->reqs; r; r = r->next) {
			int on = 0;

			if (r->state != Q_QUEUED || r->tried == s->pump_gen)
				continue;
			for (req *x = s->reqs; x; x = x->next)
				on += x->state != Q_QUEUED &&
				      front_same_client(x, r);
			if (!pick || on < pick_on) {
				pick = r;
				pick_on = on;
			}
		}
		if (!pick)
			break;
		pick->tried = s->pump_gen;
		rid = pick->rid;
		roots_start(s, pick);
		if ((pick = dispatch_req_by_rid(s, rid)) &&
		    pick->state != Q_QUEUED) {
			uint32_t fl;

			active++;
			unclaimed -= assignable(s, pick, &fl);
		}
	}
	/* finished once every job reported its stats (a decided request's
	 * cancelled jobs too); after each, from the start again: a
	 * selection pass's end readies its parent (answer select), which
	 * may stand earlier in the list */
	for (req *r = s->reqs; r;) {
		if (r->state == Q_DECODE && (r->n_done == req_n(r) ||
					     r->decided) && !r->jobs) {
			front_finish(s, r);
			r = s->reqs;
			continue;
		}
		r = r->next;
	}
	share_slots(s);
	for (req *r = s->reqs; r; r = r->next)
		if (r->state == Q_DECODE && r->n_done < req_n(r) && !r->decided)
			send_waiting(s, r);
}

static job *job_of(req *r, uint32_t attempt, int wi)
{
	for (job *j = r ? r->jobs : NULL; j; j = j->next)
		if (j->attempt == attempt && j->worker == wi &&
		    j->state == J_SENT)
			return j;
	return NULL;
}

/* Early stopping: pushes the samples that extend the finished prefix (in
 * index order, whatever order they came in); when the rule decides, the
 * jobs still running are cancelled (each by its attempt) and nothing more
 * is assigned. Their JobDone (CANCELLED, with the tokens they spent) ends
 * them; pump() then replies with samples 0..prefix-1. */
static void advance(sched *s, req *r)
{
	while (!r->decided && r->prefix < req_n(r) && r->st[r->prefix] == S_DONE) {
		const Quorum__Sample *x = r->res[r->prefix]->sample->sample;
		char a[VOTE_ANSWER_MAX];
		int d;

		a[0] = '\0';
		if (x->has_answer && x->answer.len < sizeof(a)) {
			memcpy(a, x->answer.data, x->answer.len);
			a[x->answer.len] = '\0';
		}
		d = stop_push_w(&r->ss, a, r->p.vote != SC_VOTE_CONFIDENCE ? 1
					   : vote_conf_weight(x->has_group_confidence
							    ? x->group_confidence
							    : 0.0));
		if (d < 0)
			return; /* out of memory: decide at n as without a rule */
		r->prefix++;
		r->decided = d && r->ss.fired;
	}
	if (!r->decided)
		return;
	for (job *j = r->jobs, *nx; j; j = nx) {
		nx = j->next;
		if (j->state != J_SENT) {
			dispatch_job_drop(s, r, j);
		} else if (j->n_done < j->n) {
			Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
			Quorum__Cancel c = QUORUM__CANCEL__INIT;

			c.request_id = r->rid;
			c.has_attempt = 1;
			c.attempt = j->attempt;
			m.body_case = QUORUM__COORD_MSG__BODY_CANCEL;
			m.cancel = &c;
			r->messages++;
			sched_send_worker(s, j->worker, &m);
		}
	}
}

/* A run of tokens with their log-probabilities, as a Sample carries
 * them all and a TokenRun some (the same fields). */
typedef struct {
	size_t n_lp, n_off;
	const double *lp;
	const uint32_t *off;
	size_t n_counts, n_ids, n_alp, n_pieces;
	const uint32_t *counts, *ids;
	const double *alp;
	const ProtobufCBinaryData *pieces;
} tok_view;

#define TOK_VIEW(x)                                                         \
	((tok_view){(x)->n_token_logprobs, (x)->n_token_offsets,            \
		    (x)->token_logprobs, (x)->token_offsets,                \
		    (x)->n_alt_counts, (x)->n_alt_tokens, (x)->n_alt_logprobs, \
		    (x)->n_alt_pieces, (x)->alt_counts, (x)->alt_tokens,    \
		    (x)->alt_logprobs, (x)->alt_pieces})

/* Per-token log-probabilities: only when asked, one offset per value, at
 * most one per token asked for plus the end token (first of them before
 * these), offsets rising up to bound, values finite and <= 0. */
static int token_lps_ok(const req *r, const tok_view *x, uint64_t first,
			uint64_t bound)
{
	if (!r->p.logprobs)
		return !x->n_lp && !x->n_off;
	if (x->n_lp != x->n_off ||
	    first + x->n_lp > (uint64_t)r->p.max_new + 1)
		return 0;
	for (size_t i = 0; i < x->n_lp; i++)
		if (!(isfinite(x->lp[i]) && x->lp[i] <= 0) ||
		    x->off[i] > bound || (i && x->off[i] < x->off[i - 1]))
			return 0;
	return 1;
}

/* One token's alternatives (top_logprobs), x's a[0, n): distinct ids of
 * the vocabulary, values finite, <= 0 and never rising, each piece the
 * bytes the coordinator's tokenizer gives its id (an end token's text
 * too), so a client is shown only real tokens. */
static int alts_one_ok(const sched *s, const tok_view *x, size_t a,
		       uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		uint32_t id = x->ids[a + k];
		double v = x->alp[a + k];
		const char *pc;
		size_t len;

		if (!(isfinite(v) && v <= 0) || id >= s->vocab ||
		    (k && v > x->alp[a + k - 1]))
			return 0;
		for (uint32_t q = 0; q < k; q++)
			if (x->ids[a + q] == id)
				return 0;
		pc = tok_piece(s->o.t, (int32_t)id, 1, &len);
		if (!pc || len != x->pieces[a + k].len ||
		    (len && memcmp(pc, x->pieces[a + k].data, len)))
			return 0;
	}
	return 1;
}

/* The alternatives: only when asked, one count per token value, each at
 * most top_logprobs, as many tokens, values and pieces as the counts add
 * up to, and each token's list as alts_one_ok says. */
static int alts_ok(const sched *s, const req *r, const tok_view *x)
{
	size_t at = 0;

	if (!r->p.logprobs || !r->p.top_logprobs)
		return !x->n_counts && !x->n_ids && !x->n_alp && !x->n_pieces;
	if (x->n_counts != x->n_lp || x->n_alp != x->n_ids ||
	    x->n_pieces != x->n_ids)
		return 0;
	for (size_t i = 0; i < x->n_counts; i++) {
		uint32_t c = x->counts[i];

		if (c > (uint32_t)r->p.top_logprobs ||
		    c > x->n_ids - at || !alts_one_ok(s, x, at, c))
			return 0;
		at += c;
	}
	return at == x->n_ids;
}

/* h after x's tokens [t0, t1) (their alternatives from at): their
 * values' bits, offsets and alternatives, what a client was shown. */
static uint64_t token_hash(uint64_t h, const tok_view *x, size_t t0,
			   size_t t1, size_t at)
{
	for (size_t t = t0; t < t1; t++) {
		uint32_t c = x->counts ? x->counts[t] : 0;

		h = fnv1a(h, &x->lp[t], sizeof(x->lp[t]));
		h = fnv1a(h, &x->off[t], sizeof(x->off[t]));
		h = fnv1a(h, &c, sizeof(c));
		for (uint32_t k = 0; k < c; k++, at++) {
			h = fnv1a(h, &x->ids[at], sizeof(x->ids[at]));
			h = fnv1a(h, &x->alp[at], sizeof(x->alp[at]));
		}
	}
	return h;
}

/* A sample's tokens (token_lps_ok and alts_ok over them all). */
static int sample_tokens_ok(const sched *s, const req *r,
			    const Quorum__Sample *x)
{
	tok_view v = TOK_VIEW(x);

	return token_lps_ok(r, &v, 0, x->text.len) && alts_ok(s, r, &v);
}

/* A streamed sample's text begins with the bytes already forwarded to
 * its client: the parts and the rest concatenate to the text (the
 * proto's promise), compared by their hash (fwd_hash). */
static int extends_stream(const req *r, uint32_t i, const Quorum__Sample *x)
{
	tok_view v = TOK_VIEW(x);

	if (!r->stream || !r->fwd[i])
		return 1;
	/* and its tokens with those forwarded (validated: counts match) */
	if (r->fwd_tok && r->fwd_tok[i] &&
	    (r->fwd_tok[i] > v.n_lp ||
	     token_hash(FNV_BASIS, &v, 0, r->fwd_tok[i], 0) !=
		     r->fwd_tok_hash[i]))
		return 0;
	return r->fwd[i] <= x->text.len &&
	       fnv1a(FNV_BASIS, x->text.data, r->fwd[i]) ==
		       r->fwd_hash[i];
}

/* Returns 1 when it kept wm. */
int dispatch_on_sample(sched *s, int wi, Quorum__WorkerMsg *wm)
{
	const Quorum__SampleResult *x = wm->sample;
	req *r = dispatch_req_by_rid(s, x->request_id);
	job *j = job_of(r, x->attempt, wi);
	uint32_t i;
	int mine = 0;

	if (!j || !x->sample) {
		sched_stray(s, wi, "SampleResult", x->request_id, x->attempt,
			    r ? r->next_attempt : UINT32_MAX);
		return 0;
	}
	i = x->sample->index;
	for (int k = 0; k < j->n; k++)
		mine |= j->idx[k] == i;
	/* everything a worker says is checked: its own job's index, a
	 * finish reason, no more tokens than asked (its steps one more at
	 * most, its reasoning tokens no more), bounded text and answer */
	if (!mine || r->st[i] != S_ASSIGNED || !x->sample->finish ||
	    (strcmp(x->sample->finish, "stop") &&
	     strcmp(x->sample->finish, "length") &&
	     strcmp(x->sample->finish, "grammar")) ||
	    x->sample->tokens > (uint32_t)r->p.max_new ||
	    (x->sample->has_steps && x->sample->steps != x->sample->tokens &&
	     x->sample->steps - 1 != x->sample->tokens) ||
	    (x->sample->has_reasoning_tokens &&
	     x->sample->reasoning_tokens > x->sample->tokens) ||
	    x->sample->text.len > WIRE_SAMPLE_TEXT_MAX(r->p.max_new) ||
	    (x->sample->has_answer && x->sample->answer.len >= VOTE_ANSWER_MAX) ||
	    (x->sample->worker && strlen(x->sample->worker) >= ID_MAX) ||
	    !sample_tokens_ok(s, r, x->sample)) {
		sched_log_drop(s, "coordinator: worker %s: bad SampleResult "
			"for request %llu dropped\n", s->w[wi].id,
			(unsigned long long)r->rid);
		return 0;
	}
	if (!extends_stream(r, i, x->sample)) {
		/* the client holds bytes (or tokens) the sample does not: a
		 * bad result, decoded again (the same bytes, by the seed) */
		sched_log_drop(s, "coordinator: worker %s: bad SampleResult "
			"for request %llu dropped: sample %u does not begin "
			"with the %u bytes and %u tokens streamed\n",
			s->w[wi].id, (unsigned long long)r->rid, i, r->fwd[i],
			r->fwd_tok ? r->fwd_tok[i] : 0);
		return 0;
	}
	r->st[i] = S_DONE;
	r->res[i] = wm;
	r->n_done++;
	if (!r->t_first)
		r->t_first = sched_now(s);
	/* the books first: a stream whose client is gone ends r below */
	r->messages++;
	j->n_done++;
	if (s->w[wi].busy)
		s->w[wi].busy--;
	if (r->stream) {
		/* the rest of the sample's text, and the sample */
		Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
		Quorum__SamplePart p = QUORUM__SAMPLE_PART__INIT;
		size_t off = r->fwd[i]; /* <= the text's length: checked */

		p.index = i;
		p.text.data = x->sample->text.data + off;
		p.text.len = x->sample->text.len - off;
		p.done = x->sample;
		rep.request_id = r->client_rid;
		rep.status = QUORUM__STATUS__STATUS_OK;
		rep.body_case = QUORUM__CLIENT_REPLY__BODY_PARTIAL;
		rep.partial = &p;
		if (front_send_part(s, r, &rep))
			return 1; /* r was cancelled, wm freed with it */
	}
	advance(s, r);
	return 1; /* pump() finishes r when all is in */
}

/* The tokens of part x of sample i (its text ending at byte end) past
 * those forwarded, into fr (pointing into x's arrays): 1 when there are
 * some. A run that does not check out (as a sample's tokens, its pieces
 * within the part) is dropped with a line; one that starts past the
 * tokens forwarded (a gap) forwards none: the client gets them all with
 * the sample, whose first tokens must be those forwarded (extends_stream,
 * by their hash). */
static int forward_run(sched *s, int wi, req *r, uint32_t i,
		       const Quorum__TokenRun *x, uint64_t end,
		       Quorum__TokenRun *fr)
{
	tok_view v = TOK_VIEW(x);
	size_t k0, at = 0;

	if (!r->fwd_tok || !v.n_lp || !token_lps_ok(r, &v, x->first, x->end) ||
	    !alts_ok(s, r, &v) || x->end > end ||
	    x->end < v.off[v.n_lp - 1]) {
		sched_log_drop(s, "coordinator: worker %s: bad token run of "
			"request %llu sample %u dropped (its text goes on)\n",
			s->w[wi].id, (unsigned long long)r->rid, i);
		return 0;
	}
	if (x->first > r->fwd_tok[i] || x->first + v.n_lp <= r->fwd_tok[i])
		return 0;
	k0 = r->fwd_tok[i] - x->first;
	for (size_t t = 0; v.counts && t < k0; t++)
		at += v.counts[t];
	quorum__token_run__init(fr);
	fr->first = r->fwd_tok[i];
	fr->end = x->end;
	fr->n_token_logprobs = fr->n_token_offsets = v.n_lp - k0;
	fr->token_logprobs = x->token_logprobs + k0;
	fr->token_offsets = x->token_offsets + k0;
	if (v.counts) {
		fr->n_alt_counts = v.n_lp - k0;
		fr->alt_counts = x->alt_counts + k0;
		fr->n_alt_tokens = fr->n_alt_logprobs = fr->n_alt_pieces =
			v.n_ids - at;
		fr->alt_tokens = x->alt_tokens + at;
		fr->alt_logprobs = x->alt_logprobs + at;
		fr->alt_pieces = x->alt_pieces + at;
	}
	r->fwd_tok_hash[i] = token_hash(r->fwd_tok[i] ? r->fwd_tok_hash[i]
						      : FNV_BASIS,
					&v, k0, v.n_lp, at);
	r->fwd_tok[i] = x->first + (uint32_t)v.n_lp;
	return 1;
}

/* Partial texts of a streamed job: the bytes past what was forwarded
 * go to the client. A sample decoded again elsewhere (its worker was
 * lost) sends the same bytes from offset 0: they are skipped. A part
 * past the bytes a sample's text may have (WIRE_SAMPLE_TEXT_MAX, as the
 * SampleResult) is dropped; what it held comes with the result. */
void dispatch_on_text(sched *s, int wi, const Quorum__SampleText *x)
{
	req *r = dispatch_req_by_rid(s, x->request_id);
	job *j = job_of(r, x->attempt, wi);

	if (!j) {
		sched_stray(s, wi, "SampleText", x->request_id, x->attempt,
			    r ? r->next_attempt : UINT32_MAX);
		return;
	}
	if (!r->stream) {
		sched_log_drop(s, "coordinator: worker %s: SampleText for "
			       "request %llu, not streamed, dropped\n",
			       s->w[wi].id, (unsigned long long)r->rid);
		return;
	}
	for (size_t k = 0; k < x->n_parts; k++) {
		const Quorum__TextPart *p = x->parts[k];
		Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
		Quorum__SamplePart sp = QUORUM__SAMPLE_PART__INIT;
		Quorum__TokenRun fr;
		uint32_t i = p->index;
		uint64_t end = (uint64_t)p->offset + p->text.len;
		int mine = 0;

		for (int q = 0; q < j->n; q++)
			mine |= j->idx[q] == i;
		if (!mine || r->st[i] != S_ASSIGNED || p->offset > r->fwd[i] ||
		    end <= r->fwd[i])
			continue;
		if (end > WIRE_SAMPLE_TEXT_MAX(r->p.max_new) ||
		    end > UINT32_MAX) {
			sched_log_drop(s, "coordinator: worker %s: streamed text "
				"of request %llu sample %u dropped: it ends at "
				"byte %llu, past %zu\n", s->w[wi].id,
				(unsigned long long)r->rid, i,
				(unsigned long long)end,
				WIRE_SAMPLE_TEXT_MAX(r->p.max_new));
			continue;
		}
		sp.index = i;
		sp.text.data = p->text.data + (r->fwd[i] - p->offset);
		sp.text.len = (size_t)(end - r->fwd[i]);
		r->fwd_hash[i] = fnv1a(r->fwd[i] ? r->fwd_hash[i]
					   : FNV_BASIS, sp.text.data,
					   sp.text.len);
		r->fwd[i] = (uint32_t)end;
		if (p->tokens && forward_run(s, wi, r, i, p->tokens, end, &fr))
			sp.tokens = &fr;
		rep.request_id = r->client_rid;
		rep.status = QUORUM__STATUS__STATUS_OK;
		rep.body_case = QUORUM__CLIENT_REPLY__BODY_PARTIAL;
		rep.partial = &sp;
		if (front_send_part(s, r, &rep))
			return; /* its client is gone: r was cancelled */
	}
}

/* The stats a JobDone claims, held to what its job could have done (a
 * worker's word is checked like its samples: a count it made up would
 * show in the reply and in its client's tokens_per_minute debt): per
 * sample at most max_new + 1 tokens (a final end token too), the root's
 * blocks mapped and one tail block copied; a decode time >= 0 within
 * the request's life. A claim past them is held to them, with a line. */
static void job_stats(sched *s, int wi, req *r, const job *j,
		      const Quorum__JobDone *x)
{
	uint64_t n = (uint64_t)j->n;
	uint64_t max_tok = n * ((uint64_t)r->p.max_new + 1);
	uint64_t max_map = n * sched_blocks_for(s, r->n_tokens);
	uint64_t tok = x->generated_tokens, map = x->blocks_mapped;
	uint64_t cp = x->blocks_copied;
	double ms = x->decode_ms;
	double life = (double)(sched_now(s) - r->t_accept) + 1.0;

	if (tok > max_tok || map > max_map || cp > n || !(ms >= 0) ||
	    ms > life) {
		sched_log_drop(s, "coordinator: worker %s: JobDone of request "
			"%llu claims more than its %llu samples could do "
			"(generated_tokens %llu, blocks_mapped %llu, "
			"blocks_copied %llu, decode_ms %g): held to at most "
			"%llu, %llu, %llu, %.0f\n", s->w[wi].id,
			(unsigned long long)r->rid, (unsigned long long)n,
			(unsigned long long)tok, (unsigned long long)map,
			(unsigned long long)cp, ms,
			(unsigned long long)max_tok,
			(unsigned long long)max_map, (unsigned long long)n,
			life);
		tok = tok > max_tok ? max_tok : tok;
		map = map > max_map ? max_map : map;
		cp = cp > n ? n : cp;
		ms = !(ms >= 0) ? 0 : ms > life ? life : ms;
	}
	r->blocks_mapped += (uint32_t)map;
	r->blocks_copied += (uint32_t)cp;
	r->gen_tokens += tok;
	if (ms > r->decode_ms)
		r->decode_ms = ms;
}

void dispatch_on_job_done(sched *s, int wi, const Quorum__JobDone *x)
{
	req *r = dispatch_req_by_rid(s, x->request_id);
	job *j = job_of(r, x->attempt, wi);

	if (!j) {
		if (!members_zombie_done(s, wi, x->request_id, x->attempt))
			sched_stray(s, wi, "JobDone", x->request_id,
				    x->attempt, r ? r->next_attempt
						  : UINT32_MAX);
		return;
	}
	r->messages++;
	job_stats(s, wi, r, j, x);
	if (x->status != QUORUM__STATUS__STATUS_OK &&
	    !(r->decided && x->status == QUORUM__STATUS__STATUS_CANCELLED)) {
		/* (a decided request's cancels are ours: nothing to say) */
		fprintf(stderr, "coordinator: worker %s: job of request %llu "
			"failed: %s: %s\n", s->w[wi].id,
			(unsigned long long)r->rid, wire_status_name(x->status),
			x->error ? x->error : "");
		/* a full pool is a capacity shortage, not the request's
		 * fault (never charged, never WORKER_LOST): room is made
		 * there for the next try */
		if (x->status == QUORUM__STATUS__STATUS_NO_CAPACITY) {
			r->capacity_waits++;
			roots_make_room(s, wi, s->w[wi].pool_blocks);
		} else if (x->status != QUORUM__STATUS__STATUS_CANCELLED) {
			/* (a cancel is ours, or the worker lost us: the
			 * sample losses count those) */
			r->failures++;
		}
	}
	dispatch_job_drop(s, r, j);
	if (r->failures > MAX_FAILURES)
		dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_WORKER_LOST,
				  "decode failed on the workers");
	else if (r->capacity_waits > MAX_CAPACITY_WAITS)
		dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_NO_CAPACITY,
				  "the workers' KV pools stayed full");
}

/* Worker wi is gone: its jobs' unfinished indices go back to pending;
 * jobs of other workers reading its pool are cancelled and their
 * indices dispatched again (not charged: the request did nothing wrong)
 * — wi's blocks may be handed out again once it re-registers, and a
 * reader must never see them. Until the readers confirm, wi's pool
 * owner is fenced (members_usable). */
void dispatch_forget_worker(sched *s, int wi)
{
	for (req *r = s->reqs, *rn; r; r = rn) {
		int spent = 0;

		rn = r->next;
		for (job *j = r->jobs, *nx; j; j = nx) {
			nx = j->next;
			if (j->worker != wi && j->state == J_SENT &&
			    j->src == wi && j->n_done < j->n) {
				Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
				Quorum__Cancel c = QUORUM__CANCEL__INIT;
				zombie *z = calloc(1, sizeof(*z));

				c.request_id = r->rid;
				/* only this job: its indices are dispatched
				 * again, maybe to the same worker */
				c.has_attempt = 1;
				c.attempt = j->attempt;
				m.body_case = QUORUM__COORD_MSG__BODY_CANCEL;
				m.cancel = &c;
				if (z && !sched_send_worker(s, j->worker, &m)) {
					z->worker = j->worker;
					z->rid = r->rid;
					z->attempt = j->attempt;
					snprintf(z->pool, sizeof(z->pool), "%s",
						 s->w[wi].pool);
					z->next = s->zombies;
					s->zombies = z;
				} else {
					free(z);
				}
				dispatch_job_drop(s, r, j);
				continue;
			}
			if (j->worker != wi)
				continue;
			/* the retry budget is per sample: one that was being
			 * decoded by MAX_SAMPLE_LOSSES lost workers may be
			 * what kills them */
			for (int k = 0; j->state == J_SENT && k < j->n; k++)
				if (r->st[j->idx[k]] == S_ASSIGNED &&
				    ++r->lost[j->idx[k]] >= MAX_SAMPLE_LOSSES)
					spent = 1;
			dispatch_job_drop(s, r, j);
		}
		if (spent)
			dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_WORKER_LOST,
				 "a sample's workers were lost "
				 "(retry budget exhausted)");
	}
}

/* Requests past their deadline get TIMEOUT (their jobs are cancelled). */
void dispatch_deadlines(sched *s)
{
	int64_t now = sched_now(s);

	for (req *r = s->reqs, *nx; r; r = nx) {
		nx = r->next;
		/* a parent's failure only detaches its pass (the pass is
		 * failed on its own, here or later), so nx stays valid */
		if (now >= r->deadline)
			dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_TIMEOUT,
					  "deadline passed");
	}
}
