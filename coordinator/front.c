/* front — the client front: validation, prompts, the queue's door,
 * replies and cluster status (sched_int.h). */
#include "sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/prompt.h"
#include "qerr.h"
#include "net/spwire.h"
#include "net/wire.h"
#include "sc/answer.h"
#include "sc/params.h"
#include "sc/usc.h"
#include "sc/vote.h"

static uint64_t hash_tokens(const int32_t *t, size_t n)
{
	return fnv1a(FNV_BASIS, t, n * sizeof(*t));
}

void front_reply_retry(sched *s, const unsigned char *cid, size_t cid_len,
		       uint64_t rid, int status, const char *err,
		       uint32_t retry_ms)
{
	Quorum__ClientReply r = QUORUM__CLIENT_REPLY__INIT;

	r.request_id = rid;
	r.status = status;
	r.error = (char *)err;
	r.has_retry_after_ms = retry_ms > 0;
	r.retry_after_ms = retry_ms;
	sched_send_client(s, cid, cid_len, &r);
}

void front_reply_error(sched *s, const unsigned char *cid, size_t cid_len,
			uint64_t rid, int status, const char *err)
{
	front_reply_retry(s, cid, cid_len, rid, status, err, 0);
}

/* ---- clients: identity, share, tokens per minute ---------------------
 *
 * A client is a connection (its routing id), or the user a trusted
 * gateway names in Ask.on_behalf_of: each API key of a gateway is then a
 * client of its own. The identity is untrusted input from the gateway
 * too: 1..WHO_NAME_MAX bytes of [A-Za-z0-9:._-]. */

int front_same_client(const req *a, const req *b)
{
	return a->who_len == b->who_len &&
	       !memcmp(a->who, b->who, a->who_len);
}

static int who_ok(const char *w)
{
	size_t n = strlen(w);

	if (n < 1 || n > WHO_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = w[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == ':' || c == '.' ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* A peer address (ZeroMQ's Peer-Address) on this machine: IPv4 loopback,
 * ::1, an IPv4-mapped loopback, inproc ("") or ipc://, whose peer libzmq
 * names by its credentials after an optional name without a colon
 * (":uid:gid:pid", "localhost:uid:gid:pid"; no IP address has that
 * shape: an IPv6 one with three colons has an empty group). */
static int peer_local(const char *p)
{
	unsigned a, b, c;
	const char *colon;
	char tail;

	if (!p[0] || !strcmp(p, "::1") || !strncmp(p, "127.", 4) ||
	    !strncmp(p, "::ffff:127.", 11))
		return 1;
	if (!(colon = strchr(p, ':')))
		return 0;
	for (const char *q = colon + 1; *q; q++)
		if (!(*q >= '0' && *q <= '9') && *q != ':')
			return 0;
	return sscanf(colon, ":%u:%u:%u%c", &a, &b, &c, &tail) == 3;
}

/* The connection m came on may speak for its users (module comment of
 * scheduler.h: the trust model). */
static int trusted_gateway(const sched *s, const wire_msg *m)
{
	if (s->zap) {
		for (size_t i = 0; i < s->o.n_gateway_keys; i++)
			if (m->user[0] && !strcmp(m->user, s->o.gateway_keys[i]))
				return 1;
		return 0;
	}
	return s->c->security.loopback_gateway && peer_local(m->peer);
}

/* r's client: the gateway's user when the connection may name one, else
 * the connection. Returns NULL or the refusal. */
static const char *set_who(const sched *s, const wire_msg *m,
			   const Quorum__Ask *a, req *r)
{
	if (a->on_behalf_of) {
		if (!trusted_gateway(s, m))
			return "on_behalf_of is taken only from a gateway "
			       "(security.gateway_keys, "
			       "security.loopback_gateway)";
		if (!who_ok(a->on_behalf_of))
			return "on_behalf_of: 1..64 characters of "
			       "[A-Za-z0-9:._-] expected";
		r->who[0] = 'g';
		r->who_len = 1 + strlen(a->on_behalf_of);
		memcpy(r->who + 1, a->on_behalf_of, r->who_len - 1);
		return NULL;
	}
	r->who[0] = 'c';
	memcpy(r->who + 1, m->id, m->id_len);
	r->who_len = 1 + m->id_len;
	return NULL;
}

/* The bucket of who, refilled to now; NULL when it has none (full). */
static bucket *bucket_of(sched *s, const unsigned char *who, size_t len)
{
	double cap = (double)s->c->limits.tokens_per_minute;
	int64_t now = sched_now(s);

	for (bucket **pp = &s->buckets; *pp;) {
		bucket *b = *pp;

		b->level += (double)(now - b->at) * cap / 60000.0;
		b->at = now;
		if (b->level >= cap) {
			/* paid off: forgotten */
			*pp = b->next;
			free(b);
			s->n_buckets--;
			continue;
		}
		if (b->who_len == len && !memcmp(b->who, who, len))
			return b;
		pp = &b->next;
	}
	return NULL;
}

void front_charge(sched *s, const req *r)
{
	bucket *b;

	if (s->c->limits.tokens_per_minute <= 0 || !r->gen_tokens)
		return;
	if (!(b = bucket_of(s, r->who, r->who_len))) {
		if (s->n_buckets >= BUCKETS_MAX || !(b = calloc(1, sizeof(*b))))
			return; /* not tracked: the limit errs on the open side */
		memcpy(b->who, r->who, r->who_len);
		b->who_len = r->who_len;
		b->level = (double)s->c->limits.tokens_per_minute;
		b->at = sched_now(s);
		b->next = s->buckets;
		s->buckets = b;
		s->n_buckets++;
	}
	b->level -= (double)r->gen_tokens;
}

void front_buckets_free(sched *s)
{
	while (s->buckets) {
		bucket *b = s->buckets;

		s->buckets = b->next;
		free(b);
	}
	s->n_buckets = 0;
}

static int tokenize(sched *s, const Quorum__Ask *a, req *r,
		    const char **err);

/* answer select: the selection pass of r as an internal child request
 * (greedy, one sample, the prompt of usc.h over r's responses), queued
 * like any request; r waits in Q_SELECT. 0, or nonzero (r replies
 * without a pass). */
static int usc_start(sched *s, req *r, uint32_t k)
{
	const char **texts = calloc(k + 1, sizeof(*texts));
	size_t *lens = calloc(k + 1, sizeof(*lens));
	char *q = NULL;
	req *c = NULL;
	const char *err = NULL;
	Quorum__Ask a = QUORUM__ASK__INIT;
	int rc = -1;

	if (!texts || !lens || !r->question)
		goto out;
	for (uint32_t i = 0; i < k; i++) {
		const Quorum__Sample *x = r->res[i]->sample->sample;

		texts[i] = (const char *)x->text.data;
		lens[i] = x->text.len;
	}
	if (!(q = usc_prompt(r->question, r->qlen, texts, lens, (int)k)) ||
	    !(c = calloc(1, sizeof(*c))))
		goto out;
	c->p = SC_PARAMS_DEFAULTS;
	c->p.n = 1;
	c->p.sp.temperature = 0.0f;
	c->p.max_new = USC_MAX_NEW;
	c->p.stop = (stop_rule){STOP_NONE, STOP_BETA_DEFAULT,
				STOP_WINDOW_DEFAULT};
	c->p.answer.kind = ANSWER_TEXT;
	memcpy(c->who, r->who, r->who_len);
	c->who_len = r->who_len;
	memcpy(c->key, r->key, sizeof(c->key));
	a.question.data = (uint8_t *)q;
	a.question.len = strlen(q);
	a.has_system = 1;           /* no system prompt */
	a.system.data = (uint8_t *)"";
	a.system.len = 0;
	if (tokenize(s, &a, c, &err) != QUORUM__STATUS__STATUS_OK ||
	    (uint64_t)c->n_tokens + USC_MAX_NEW > (uint64_t)s->o.ctx_len ||
	    !(c->st = calloc(1, 1)) || !(c->lost = calloc(1, 1)) ||
	    !(c->begun = calloc(1, 1)) || !(c->res = calloc(1, sizeof(*c->res))) ||
	    stop_init(&c->ss, &c->p.stop, 1))
		goto out;
	c->rid = ++s->next_id;
	c->width = 1;
	c->t_accept = sched_now(s);
	c->deadline = r->deadline;
	c->usc_child_of = 1;
	c->usc_parent = r;
	r->usc_child = c;
	r->state = Q_SELECT;
	/* its samples are in: its root is no longer needed */
	if (r->root) {
		roots_unref(s, r->root);
		r->root = NULL;
	}
	if (s->reqs_tail)
		s->reqs_tail->next = c;
	else
		s->reqs = c;
	s->reqs_tail = c;
	s->n_reqs++;
	c = NULL;
	rc = 0;
out:
	if (c)
		dispatch_req_release(c);
	free(q);
	free(texts);
	free(lens);
	return rc;
}

/* A selection pass is over: its parent takes the outcome and is finished
 * at the next pump (an orphan's is dropped). */
static void usc_child_done(sched *s, req *c)
{
	req *p = c->usc_parent;

	if (p && c->res[0]) {
		const Quorum__Sample *x = c->res[0]->sample->sample;

		p->usc_done = 1;
		p->usc_chosen = usc_pick((const char *)x->text.data,
					 x->text.len, (int)(p->decided
							    ? p->prefix
							    : req_n(p)));
		p->usc_tokens = x->tokens;
		free(p->usc_reply);
		p->usc_reply = strndup((const char *)x->text.data,
				       x->text.len);
		p->usc_child = NULL;
		p->state = Q_DECODE;
	}
	dispatch_req_free(s, c);
}

static void finish_reply(sched *s, req *r)
{
	Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
	Quorum__Answer a = QUORUM__ANSWER__INIT;
	Quorum__Timings tm = QUORUM__TIMINGS__INIT;
	Quorum__PrefixStats px = QUORUM__PREFIX_STATS__INIT;
	Quorum__StopReport sr = QUORUM__STOP_REPORT__INIT;
	/* samples 0..k-1: all n, or the prefix the stop rule decided at */
	uint32_t k = r->decided ? r->prefix : req_n(r), finished = 0;
	Quorum__SelectReport usr = QUORUM__SELECT_REPORT__INIT;
	Quorum__SamplingParams sp;
	char shown[VOTE_ANSWER_MAX];
	/* the settings it ran with, echoed (a client that left them to the
	 * cluster learns them); the grammar's text stays home */
	spwire_buf *pb = malloc(sizeof(*pb));
	Quorum__Sample **smp = calloc(req_n(r), sizeof(*smp));
	uint64_t *wts = calloc(req_n(r), sizeof(*wts));
	const char **ans = calloc(req_n(r), sizeof(*ans));
	char **abuf = calloc(req_n(r), sizeof(*abuf));
	Quorum__Vote *votes = NULL, **vp = NULL;
	vote_result v = {0};
	char rule[STOP_NAME_MAX];
	uint64_t est;
	int64_t now = sched_now(s);

	if (!smp || !ans || !abuf || !wts)
		goto nomem;
	for (uint32_t i = 0; i < k; i++) {
		Quorum__Sample *x = r->res[i]->sample->sample;

		smp[i] = x;
		wts[i] = vote_conf_weight(x->has_group_confidence
						? x->group_confidence : 0.0);
		sr.tokens_reported += x->has_steps
			? x->steps : x->tokens + !strcmp(x->finish, "stop");
		if (x->has_answer && x->answer.len) {
			if (!(abuf[i] = malloc(x->answer.len + 1)))
				goto nomem;
			memcpy(abuf[i], x->answer.data, x->answer.len);
			abuf[i][x->answer.len] = '\0';
			ans[i] = abuf[i];
		}
	}
	if (vote_tally_weighted(ans, r->p.vote == SC_VOTE_CONFIDENCE ? wts : NULL,
				k, &v))
		goto nomem;
	if (r->usc_done) {
		/* answer select: the chosen response's answer first */
		usr.has_chosen = usr.has_tokens = 1;
		usr.chosen = r->usc_chosen;
		usr.tokens = r->usc_tokens;
		if (r->usc_reply) {
			usr.has_reply = 1;
			usr.reply.data = (uint8_t *)r->usc_reply;
			usr.reply.len = strlen(r->usc_reply);
		}
		for (size_t e = 0; r->usc_chosen >= 0 &&
				   (uint32_t)r->usc_chosen < k &&
				   ans[r->usc_chosen] && e < v.n_entries; e++)
			if (!strcmp(v.entries[e].answer, ans[r->usc_chosen])) {
				vote_entry x = v.entries[e];

				memmove(&v.entries[1], &v.entries[0],
					e * sizeof(x));
				v.entries[0] = x;
				v.winner = 0;
				break;
			}
		a.select = &usr;
	}
	votes = calloc(v.n_entries ? v.n_entries : 1, sizeof(*votes));
	vp = calloc(v.n_entries ? v.n_entries : 1, sizeof(*vp));
	if (!votes || !vp)
		goto nomem;
	for (size_t i = 0; i < v.n_entries; i++) {
		quorum__vote__init(&votes[i]);
		votes[i].answer.data = (uint8_t *)v.entries[i].answer;
		votes[i].answer.len = strlen(v.entries[i].answer);
		votes[i].count = (uint32_t)v.entries[i].count;
		votes[i].first_index = (uint32_t)v.entries[i].first_index;
		if (r->p.vote == SC_VOTE_CONFIDENCE) {
			votes[i].has_weight = 1;
			votes[i].weight = (double)v.entries[i].weight / 0x1p32;
		}
		vp[i] = &votes[i];
	}
	if (v.winner != VOTE_NONE) {
		const Quorum__Sample *fv = NULL;

		a.has_answer = 1;
		a.answer = votes[0].answer;
		/* as its first voter wrote it */
		for (uint32_t i = 0; i < k; i++)
			if (smp[i]->index == votes[0].first_index)
				fv = smp[i];
		answer_shown(v.entries[0].answer,
			     fv ? (const char *)fv->text.data : NULL,
			     fv ? fv->text.len : 0, shown, sizeof(shown));
		a.has_answer_text = 1;
		a.answer_text.data = (uint8_t *)shown;
		a.answer_text.len = strlen(shown);
	}
	a.n_votes = v.n_entries;
	a.votes = vp;
	a.n_samples = k;
	a.samples = smp;
	a.n = req_n(r);
	tm.has_queue_ms = tm.has_prefill_ms = tm.has_decode_ms = 1;
	tm.has_total_ms = tm.has_generated_tokens = tm.has_messages = 1;
	tm.queue_ms = (double)(r->t_start - r->t_accept);
	tm.prefill_ms = r->prefill_ms;
	tm.decode_ms = r->decode_ms;
	tm.total_ms = (double)(now - r->t_accept);
	tm.generated_tokens = r->gen_tokens;
	tm.messages = r->messages;
	if (r->t_first) {
		tm.has_first_sample_ms = 1;
		tm.first_sample_ms = (double)(r->t_first - r->t_accept);
	}
	a.timings = &tm;
	px.prefill_worker = r->prefill_worker;
	px.has_cache_hit = px.has_prompt_tokens = px.has_prefix_blocks = 1;
	px.has_blocks_mapped = px.has_blocks_copied = 1;
	px.has_blocks_transferred = px.has_bytes_transferred = 1;
	px.has_prefills = 1;
	px.cache_hit = r->cache_hit;
	px.prompt_tokens = (uint32_t)r->n_tokens;
	px.prefix_blocks = sched_blocks_for(s, r->n_tokens);
	px.blocks_mapped = r->blocks_mapped;
	px.blocks_copied = r->blocks_copied;
	px.blocks_transferred = r->blocks_transferred;
	px.bytes_transferred = r->bytes_transferred;
	px.prefills = (uint32_t)r->prefills;
	px.has_prompt_tokens_reused = px.has_prompt_tokens_prefilled = 1;
	px.prompt_tokens_reused = r->reused;
	px.prompt_tokens_prefilled = (uint32_t)r->prefilled;
	s->tokens_reused += r->reused;
	s->tokens_prefilled += r->prefilled;
	a.prefix = &px;
	for (uint32_t i = 0; i < req_n(r); i++)
		finished += r->st[i] == S_DONE;
	sr.rule = (char *)stop_name(&r->p.stop, rule, sizeof(rule));
	sr.has_stopped_early = sr.has_budget = sr.has_reported = 1;
	sr.has_started = sr.has_finished = sr.has_cancelled = 1;
	sr.has_tokens_generated = sr.has_tokens_reported = 1;
	sr.has_tokens_saved_est = sr.has_leader_count = 1;
	sr.has_second_count = 1;
	sr.stopped_early = r->ss.fired;
	sr.budget = req_n(r);
	sr.reported = k;
	sr.started = r->started;
	sr.finished = finished;
	sr.cancelled = r->started - finished;
	sr.tokens_generated = r->gen_tokens;
	est = k ? sr.tokens_reported * req_n(r) / k : 0;
	sr.tokens_saved_est = est > r->gen_tokens ? est - r->gen_tokens : 0;
	sr.leader_count = stop_leader_count(&r->ss);
	sr.second_count = stop_second_count(&r->ss);
	if (r->p.stop.kind == STOP_BETA) {
		sr.has_posterior = 1;
		sr.posterior = r->ss.posterior;
	}
	if (r->p.stop.kind == STOP_WINDOW) {
		sr.has_agreeing_run = 1;
		sr.agreeing_run = (uint32_t)r->ss.run;
	}
	a.stop = &sr;
	rep.request_id = r->client_rid;
	if (!pb)
		goto nomem;
	if (spwire_encode(&r->p, spwire_fields() & ~SC_BIT(SC_S_GRAMMAR), &sp,
			  pb))
		a.params = &sp;
	rep.status = QUORUM__STATUS__STATUS_OK;
	rep.body_case = QUORUM__CLIENT_REPLY__BODY_ANSWER;
	rep.answer = &a;
	sched_send_client(s, r->cid, r->cid_len, &rep);
	s->served++;
	s->gen_tokens += r->gen_tokens;
	s->tokens_saved += sr.tokens_saved_est;
	s->decode_s += r->decode_ms / 1e3;
	goto out;
nomem:
	front_reply_error(s, r->cid, r->cid_len, r->client_rid,
		    QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
	s->failed++;
out:
	free(pb);
	vote_result_fini(&v);
	for (uint32_t i = 0; abuf && i < req_n(r); i++)
		free(abuf[i]);
	free(abuf);
	free(wts);
	free(ans);
	free(smp);
	free(votes);
	free(vp);
	dispatch_req_free(s, r);
}

void front_finish(sched *s, req *r)
{
	uint32_t k = r->decided ? r->prefix : req_n(r);

	if (r->usc_child_of) {
		usc_child_done(s, r);
		return;
	}
	if (r->p.answer.kind == ANSWER_SELECT && !r->usc_done &&
	    !r->usc_child) {
		if (!usc_start(s, r, k))
			return;
		r->usc_done = 1;
		r->usc_chosen = -1;
		r->usc_reply = strdup("the selection pass could not start");
	}
	finish_reply(s, r);
}

static void reply_status(sched *s, const wire_msg *m, uint64_t rid)
{
	Quorum__ClientReply r = QUORUM__CLIENT_REPLY__INIT;
	Quorum__ClusterStatus cs = QUORUM__CLUSTER_STATUS__INIT;
	Quorum__WorkerStatus *ws = calloc((size_t)s->n_workers + 1, sizeof(*ws));
	Quorum__WorkerStatus **wp = calloc((size_t)s->n_workers + 1, sizeof(*wp));
	int64_t now = sched_now(s);
	uint32_t queued = 0, inflight = 0;

	if (!ws || !wp) {
		front_reply_error(s, m->id, m->id_len, rid,
			    QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < s->n_workers; i++) {
		const worker *w = &s->w[i];
		Quorum__WorkerStatus *x = &ws[cs.n_workers];

		if (!w->used || w->dead)
			continue;
		quorum__worker_status__init(x);
		x->id = (char *)w->id;
		x->host = (char *)w->host;
		x->has_pid = x->has_slots = x->has_busy = 1;
		x->has_blocks_used = x->has_blocks_free = 1;
		x->has_heartbeat_age_ms = x->has_roots = 1;
		x->pid = w->pid;
		x->slots = w->slots;
		x->busy = w->busy;
		x->blocks_used = w->blocks_used;
		x->blocks_free = w->blocks_free;
		x->heartbeat_age_ms = (uint32_t)(now - w->last_seen);
		x->roots = w->roots;
		wp[cs.n_workers++] = x;
	}
	for (req *q = s->reqs; q; q = q->next) {
		queued += q->state == Q_QUEUED;
		inflight += q->state != Q_QUEUED;
	}
	cs.workers = wp;
	cs.has_queue_depth = cs.has_in_flight = cs.has_requests_served = 1;
	cs.has_requests_failed = cs.has_tokens_per_s = 1;
	cs.has_prefix_hits = cs.has_prefix_misses = 1;
	cs.queue_depth = queued;
	cs.in_flight = inflight;
	cs.requests_served = s->served;
	cs.requests_failed = s->failed;
	cs.tokens_per_s = s->decode_s > 0 ? (double)s->gen_tokens / s->decode_s
					  : 0.0;
	cs.prefix_hits = s->hits;
	cs.prefix_misses = s->misses;
	cs.cluster = (char *)s->c->cluster.name;
	cs.has_replies_unroutable = 1;
	cs.replies_unroutable = s->unroutable;
	cs.model = strrchr(s->c->model.path, '/')
			   ? strrchr(s->c->model.path, '/') + 1
			   : s->c->model.path;
	cs.has_model_fingerprint = s->have_fingerprint;
	cs.model_fingerprint = s->fingerprint;
	cs.has_tokens_saved = 1;
	cs.tokens_saved = s->tokens_saved;
	cs.has_prompt_tokens_reused = cs.has_prompt_tokens_prefilled = 1;
	cs.has_prefix_partial_hits = 1;
	cs.prompt_tokens_reused = s->tokens_reused;
	cs.prompt_tokens_prefilled = s->tokens_prefilled;
	cs.prefix_partial_hits = s->partial_hits;
	r.request_id = rid;
	r.status = QUORUM__STATUS__STATUS_OK;
	r.body_case = QUORUM__CLIENT_REPLY__BODY_CLUSTER;
	r.cluster = &cs;
	sched_send_client(s, m->id, m->id_len, &r);
out:
	free(ws);
	free(wp);
}

/* The few-shot examples: each part non-empty, no NUL, 1 MiB in all. */
static int shots_ok(const Quorum__Ask *a)
{
	size_t total = 0;

	for (size_t i = 0; i < a->n_shots; i++) {
		const Quorum__Shot *x = a->shots[i];

		if (!x->question.len || !x->answer.len ||
		    memchr(x->question.data, 0, x->question.len) ||
		    memchr(x->answer.data, 0, x->answer.len))
			return 0;
		total += x->question.len + x->answer.len;
	}
	return total <= WIRE_QUESTION_MAX;
}

/* The message of the setting check that failed (sc/params' qerr detail),
 * kept until the refusal is sent. */
static char field_err[256];

static int bad_field(const char **err)
{
	snprintf(field_err, sizeof(field_err), "%s", qerr_detail());
	*err = field_err;
	return QUORUM__STATUS__STATUS_BAD_REQUEST;
}

/* The cheap checks of an Ask (no tokenizing): every field within its
 * cap; fills r's params. The sampling settings are checked by sc/params,
 * with the messages of every entry point; then this cluster's policy
 * (limits.max_n, the model's context). Returns a Status and sets *err. */
static int check_fields(sched *s, const Quorum__Ask *a, req *r,
			const char **err)
{
	/* the cluster's defaults, then what the Ask gives (each checked by
	 * sc/params, in the words of every entry point) */
	r->p = s->c->sampling.p;
	*err = NULL;
	if (spwire_decode(a->params, &r->p, NULL))
		return bad_field(err);
	if (r->p.answer.kind == ANSWER_SELECT &&
	    !(r->question = strndup((const char *)a->question.data,
				    a->question.len))) {
		*err = "out of memory";
		return QUORUM__STATUS__STATUS_INTERNAL;
	}
	r->qlen = a->question.len;
	if (r->p.grammar) {
		/* the Ask goes; the grammar stays with the request */
		if (!(r->grammar = strndup(r->p.grammar, r->p.grammar_len))) {
			*err = "out of memory";
			return QUORUM__STATUS__STATUS_INTERNAL;
		}
		r->p.grammar = r->grammar;
	}
	/* choice: the options the question lists travel with the format */
	answer_choice_options(&r->p.answer, (const char *)a->question.data,
			      a->question.len);
	if (wire_question_blank((const char *)a->question.data, a->question.len))
		*err = "the question is empty (or only whitespace)";
	else if (a->question.len > WIRE_QUESTION_MAX)
		*err = "the question is over 1 MiB";
	else if (a->has_system && a->system.len > WIRE_SYSTEM_MAX)
		*err = "the system prompt is over 64 KiB";
	else if (memchr(a->question.data, 0, a->question.len) ||
		 (a->has_system && memchr(a->system.data, 0, a->system.len)))
		*err = "the question or system prompt holds a NUL byte";
	else if (a->n_shots > WIRE_SHOTS_MAX)
		*err = "more than 64 few-shot examples";
	else if (!shots_ok(a))
		*err = "a few-shot example is empty, over 1 MiB in all, or "
		       "holds a NUL byte";
	if (!*err && a->reasoning_effort &&
	    prompt_effort_from_name(a->reasoning_effort) < 0)
		*err = "reasoning_effort must be one of " PROMPT_EFFORT_LIST;
	/* one setting reaches the template: the effort would win and
	 * think be dropped unsaid (the CLI and config refuse it too) */
	if (!*err && a->reasoning_effort && a->has_think)
		*err = "reasoning_effort: not together with think ("
		       PROMPT_THINK_EFFORT_CLASH ")";
	if (*err)
		return QUORUM__STATUS__STATUS_BAD_REQUEST;
	if (sc_params_n_limit(r->p.n, s->c->limits.max_n) ||
	    sc_params_max_new_limit(r->p.max_new, s->o.ctx_len) ||
	    sc_params_vocab_limit(&r->p, (int)s->vocab))
		return bad_field(err);
	if (r->p.logprobs && r->p.top_logprobs) {
		/* a sample's alternatives travel in its one SampleResult:
		 * at worst each token brings its bytes, value and offset and
		 * K alternatives of the longest token's bytes each; refused
		 * here, in words, when that could pass
		 * limits.max_message_bytes, rather than cut a worker's link
		 * later */
		uint64_t worst = (uint64_t)(r->p.max_new + 1) *
				 (s->piece_max + WIRE_ALT_BYTES +
				  (uint64_t)r->p.top_logprobs *
					  (WIRE_ALT_BYTES + s->piece_max)) +
				 1024;

		if (worst > (uint64_t)s->c->limits.max_message_bytes) {
			qerr_fail(QERR_RANGE, "top_logprobs = %d with "
				  "max_new_tokens = %d: a sample's result "
				  "could take %llu bytes, over "
				  "limits.max_message_bytes (%lld)",
				  r->p.top_logprobs, r->p.max_new,
				  (unsigned long long)worst,
				  (long long)s->c->limits.max_message_bytes);
			return bad_field(err);
		}
	}
	return QUORUM__STATUS__STATUS_OK;
}

/* The prompt's tokens into r, and the length checks. */
static int tokenize(sched *s, const Quorum__Ask *a, req *r, const char **err)
{
	char *q = NULL, *sys = NULL;
	prompt_shot *shots = NULL;
	int rc, oom = 0;

	if (!(q = strndup((const char *)a->question.data, a->question.len)) ||
	    (a->has_system &&
	     !(sys = strndup((const char *)a->system.data, a->system.len)))) {
		free(q);
		*err = "out of memory";
		return QUORUM__STATUS__STATUS_INTERNAL;
	}
	if (a->n_shots && !(shots = calloc(a->n_shots, sizeof(*shots)))) {
		free(q);
		free(sys);
		*err = "out of memory";
		return QUORUM__STATUS__STATUS_INTERNAL;
	}
	for (size_t i = 0; i < a->n_shots; i++)
		if (!(shots[i].question = strndup(
			      (const char *)a->shots[i]->question.data,
			      a->shots[i]->question.len)) ||
		    !(shots[i].answer = strndup(
			      (const char *)a->shots[i]->answer.data,
			      a->shots[i]->answer.len)))
			oom = 1;
	rc = oom ? QERR_NOMEM
		 : prompt_build_shots(s->o.t, s->o.prompt_family,
				      a->reasoning_effort
				      ? prompt_effort_from_name(
					      a->reasoning_effort)
				      : a->has_think
					      ? (a->think ? PROMPT_THINK_ON
							  : PROMPT_THINK_OFF)
					      : s->c->prompt.think,
				      a->has_system ? sys : s->c->prompt.system,
				      shots, a->n_shots, q, &r->tokens,
				      &r->n_tokens);
	for (size_t i = 0; shots && i < a->n_shots; i++) {
		free((char *)shots[i].question);
		free((char *)shots[i].answer);
	}
	free(shots);
	free(q);
	free(sys);
	if (rc) {
		*err = "the prompt cannot be tokenized";
		return QUORUM__STATUS__STATUS_BAD_REQUEST;
	}
	if (r->n_tokens > (size_t)s->c->limits.max_prompt_tokens) {
		*err = "prompt over limits.max_prompt_tokens";
		return QUORUM__STATUS__STATUS_TOO_LONG;
	}
	if ((uint64_t)r->n_tokens + r->p.max_new > (uint64_t)s->o.ctx_len) {
		/* led by the setting, as sc/params words it: the gateway
		 * says it with the request's own field (max_tokens) */
		snprintf(field_err, sizeof(field_err), "max_new_tokens = %d: "
			 "with the prompt's %zu tokens, over the model's "
			 "context (%d tokens)", r->p.max_new, r->n_tokens,
			 s->o.ctx_len);
		*err = field_err;
		return QUORUM__STATUS__STATUS_TOO_LONG;
	}
	r->hash = hash_tokens(r->tokens, r->n_tokens);
	return QUORUM__STATUS__STATUS_OK;
}

/* The queue's door for a request of r's client. The queue is work
 * conserving: one client may fill it while nobody else waits. When it is
 * full, a client holding less than its fair share — limits.queue_depth /
 * (clients with requests, itself included) — displaces the newest request
 * still queued (not started) of the client holding the most, if that one
 * holds more than its share (*victim: it gets BUSY with a retry hint);
 * else BUSY. Then the per-client caps: limits.per_client_in_flight and
 * limits.tokens_per_minute. Returns the refusal (NULL: admitted) and sets
 * *retry_ms. */
static const char *admit(sched *s, const req *r, req **victim,
			 uint32_t *retry_ms)
{
	int mine = 0, clients = 1, most = 0;
	const req *top = NULL; /* a request of the client holding the most */

	*victim = NULL;
	*retry_ms = RETRY_MS;
	for (const req *x = s->reqs; x; x = x->next) {
		int first = 1, held = 0;

		if (front_same_client(x, r)) {
			mine++;
			continue;
		}
		for (const req *y = s->reqs; y != x; y = y->next)
			if (front_same_client(x, y)) {
				first = 0;
				break;
			}
		if (!first)
			continue;
		clients++;
		for (const req *y = x; y; y = y->next)
			held += front_same_client(x, y);
		if (held > most) {
			most = held;
			top = x;
		}
	}
	if (s->c->limits.per_client_in_flight > 0 &&
	    mine >= s->c->limits.per_client_in_flight)
		return "over limits.per_client_in_flight for this client";
	if (s->c->limits.tokens_per_minute > 0) {
		bucket *b = bucket_of(s, r->who, r->who_len);

		if (b && b->level <= 0) {
			double rate = (double)s->c->limits.tokens_per_minute /
				      60000.0;
			double ms = (1.0 - b->level) / rate + 1.0;

			*retry_ms = ms > 3600000.0 ? 3600000u : (uint32_t)ms;
			return "over limits.tokens_per_minute for this client";
		}
	}
	if (s->n_reqs < s->c->limits.queue_depth)
		return NULL;
	{
		int share = s->c->limits.queue_depth / clients;

		if (share < 1)
			share = 1;
		if (top && mine < share && most > share) {
			req *last = NULL;

			for (req *y = s->reqs; y; y = y->next)
				if (y->state == Q_QUEUED &&
				    front_same_client(y, top))
					last = y;
			if (last) {
				*victim = last;
				return NULL;
			}
		}
	}
	return "queue full";
}

/* FNV-1a over what protobuf-c packs, as a ProtobufCBuffer. */
typedef struct {
	ProtobufCBuffer base;
	uint64_t h;
} hash_sink;

static void hash_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	hash_sink *k = (hash_sink *)b;

	k->h = fnv1a(k->h, data, len);
}

/* The hash of a request as protobuf-c writes it again (fields in number
 * order, varints shortest): a resend whose encoder ordered or wrote them
 * otherwise is the same request. */
static uint64_t ask_hash(const Quorum__ClientRequest *cr)
{
	hash_sink k = {{hash_append}, FNV_BASIS};

	protobuf_c_message_pack_to_buffer(&cr->base, &k.base);
	return k.h;
}

static void on_ask(sched *s, const wire_msg *m, const Quorum__ClientRequest *cr)
{
	req *r, *victim = NULL;
	const char *err;
	int st;
	int64_t dl;
	uint32_t largest, retry_ms = 0;
	uint64_t h = ask_hash(cr);

	for (req *x = s->reqs; x; x = x->next) {
		if (x->client_rid != cr->request_id || x->cid_len != m->id_len ||
		    memcmp(x->cid, m->id, m->id_len))
			continue;
		/* a client's resend of a request in flight (the same
		 * request: quorum ask and the gateway resend what they
		 * packed, another client's encoder may write its fields in
		 * another order) is the same request, answered once; another
		 * Ask under its id is refused, never taken for it */
		if (x->ask_hash != h) {
			char e[96];

			snprintf(e, sizeof(e), "request id %llu reused for "
				 "another question",
				 (unsigned long long)cr->request_id);
			front_reply_error(s, m->id, m->id_len, cr->request_id,
					  QUORUM__STATUS__STATUS_BAD_REQUEST,
					  e);
		}
		return;
	}
	if (s->draining) {
		front_reply_retry(s, m->id, m->id_len, cr->request_id,
				  QUORUM__STATUS__STATUS_CANCELLED,
				  "coordinator shutting down; retry",
				  DRAIN_RETRY_MS);
		return;
	}
	if (!(r = calloc(1, sizeof(*r)))) {
		front_reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	if ((err = set_who(s, m, cr->ask, r))) {
		st = QUORUM__STATUS__STATUS_BAD_REQUEST;
		goto refuse;
	}
	/* cheap checks first: nothing is tokenized for a request that
	 * cannot be queued */
	if ((st = check_fields(s, cr->ask, r, &err)) !=
	    QUORUM__STATUS__STATUS_OK)
		goto refuse;
	if (!members_alive(s) && members_none_expected(s)) {
		st = QUORUM__STATUS__STATUS_NO_CAPACITY;
		err = "no worker is registered";
		goto refuse;
	}
	if ((err = admit(s, r, &victim, &retry_ms))) {
		st = QUORUM__STATUS__STATUS_BUSY;
		goto refuse;
	}
	if ((st = tokenize(s, cr->ask, r, &err)) != QUORUM__STATUS__STATUS_OK)
		goto refuse;
	/* never fits: the root plus one sample's tail over every pool */
	largest = roots_largest_pool(s);
	if (largest && (uint64_t)sched_blocks_for(s, r->n_tokens) +
				       sched_tail_blocks(s, r) > largest) {
		st = QUORUM__STATUS__STATUS_NO_CAPACITY;
		err = "the prompt and one sample need more KV blocks than the "
		      "largest worker pool has";
		goto refuse;
	}
	if (!(r->st = calloc(req_n(r), 1)) || !(r->lost = calloc(req_n(r), 1)) ||
	    !(r->begun = calloc(req_n(r), 1)) ||
	    (r->p.vote == SC_VOTE_CONFIDENCE
		     ? stop_init_weighted(&r->ss, &r->p.stop, (int)req_n(r))
		     : stop_init(&r->ss, &r->p.stop, (int)req_n(r))) ||
	    !(r->res = calloc(req_n(r), sizeof(*r->res))) ||
	    (cr->ask->has_stream && cr->ask->stream &&
	     (!(r->fwd = calloc(req_n(r), sizeof(*r->fwd))) ||
	      !(r->fwd_hash = calloc(req_n(r), sizeof(*r->fwd_hash))) ||
	      (r->p.logprobs &&
	       (!(r->fwd_tok = calloc(req_n(r), sizeof(*r->fwd_tok))) ||
		!(r->fwd_tok_hash = calloc(req_n(r),
					   sizeof(*r->fwd_tok_hash)))))))) {
		st = QUORUM__STATUS__STATUS_INTERNAL;
		err = "out of memory";
		goto refuse;
	}
	if (victim) {
		/* its place goes to r (admit) */
		s->displaced++;
		dispatch_req_fail_retry(s, victim, QUORUM__STATUS__STATUS_BUSY,
					"displaced from the full queue by "
					"another client's request",
					RETRY_MS);
	}
	r->rid = ++s->next_id;
	r->width = (uint32_t)stop_min_prefix(&r->p.stop, (int)req_n(r));
	r->stream = cr->ask->has_stream && cr->ask->stream;
	r->announce = cr->ask->has_announce && cr->ask->announce;
	r->no_cache = cr->ask->has_prefix_cache && !cr->ask->prefix_cache;
	snprintf(r->key, sizeof(r->key), "%s", m->user);
	r->client_rid = cr->request_id;
	r->ask_hash = h;
	memcpy(r->cid, m->id, m->id_len);
	r->cid_len = m->id_len;
	r->t_accept = sched_now(s);
	/* a client's deadline never exceeds limits.request_timeout_ms */
	dl = (int64_t)s->c->limits.request_timeout_ms;
	if (cr->ask->has_deadline_ms && cr->ask->deadline_ms &&
	    (int64_t)cr->ask->deadline_ms < dl)
		dl = (int64_t)cr->ask->deadline_ms;
	r->deadline = r->t_accept + dl;
	if (s->reqs_tail)
		s->reqs_tail->next = r;
	else
		s->reqs = r;
	s->reqs_tail = r;
	s->n_reqs++;
	if (r->stream || r->announce) {
		Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
		Quorum__StreamStart ss = QUORUM__STREAM_START__INIT;

		ss.has_prompt_tokens = 1;
		ss.prompt_tokens = (uint32_t)r->n_tokens;
		rep.request_id = r->client_rid;
		rep.status = QUORUM__STATUS__STATUS_OK;
		rep.body_case = QUORUM__CLIENT_REPLY__BODY_STARTED;
		rep.started = &ss;
		if (front_send_part(s, r, &rep))
			return; /* its client is gone: r was cancelled */
	}
	dispatch_pump(s);
	return;
refuse:
	front_reply_retry(s, m->id, m->id_len, cr->request_id, st, err,
			  st == QUORUM__STATUS__STATUS_BUSY ? retry_ms : 0);
	dispatch_req_release(r);
}

void front_cancel(sched *s, req *r, const char *why)
{
	dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_CANCELLED, why);
}

int front_send_part(sched *s, req *r, Quorum__ClientReply *rep)
{
	if (!sched_try_client(s, r->cid, r->cid_len, rep))
		return 0;
	/* the client is gone (or so far behind that its queue is full: its
	 * stream would miss bytes either way). Nobody reads the rest: the
	 * request is cancelled now, as its CancelAsk would, rather than
	 * decoded to its end with every part failing (one line and one
	 * lost reply per request, never per part) */
	fprintf(stderr, "coordinator: request %llu (client's %llu): its "
		"client is unreachable (%s): cancelled\n",
		(unsigned long long)r->rid, (unsigned long long)r->client_rid,
		qerr_detail());
	s->unroutable++;
	r->gone = 1;
	front_cancel(s, r, "its client is unreachable");
	return -1;
}

/* The client no longer wants its request: its jobs are cancelled (a
 * request that is not (or no longer) here is ignored). */
static void on_cancel(sched *s, const wire_msg *m, uint64_t client_rid)
{
	for (req *r = s->reqs; r; r = r->next)
		if (r->client_rid == client_rid && r->cid_len == m->id_len &&
		    !memcmp(r->cid, m->id, m->id_len)) {
			front_cancel(s, r, "cancelled by the client");
			return;
		}
}

/* The request_id of a ClientRequest from its first bytes (protobuf-c
 * packs fields in number order: version = 1, request_id = 2, then the
 * body): 0 when they do not hold it. Untrusted bytes: every read is
 * bounded by len. */
static uint64_t peek_request_id(const uint8_t *b, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint64_t tag = 0, v = 0;
		int sh = 0;

		do {
			if (i >= len || sh > 63)
				return 0;
			tag |= (uint64_t)(b[i] & 0x7f) << sh;
			sh += 7;
		} while (b[i++] & 0x80);
		if ((tag & 7) != 0)
			return 0; /* not a varint: past the header */
		sh = 0;
		do {
			if (i >= len || sh > 63)
				return 0;
			v |= (uint64_t)(b[i] & 0x7f) << sh;
			sh += 7;
		} while (b[i++] & 0x80);
		if (tag >> 3 == 2)
			return v;
	}
	return 0;
}

void sched_on_client(sched *s, int rc, const wire_msg *m)
{
	Quorum__ClientRequest *cr;

	if (!m->id_len)
		return;
	if (rc && m->too_big) {
		char e[128];

		snprintf(e, sizeof(e), "a message of %zu bytes is over "
			 "limits.max_message_bytes (%lld)", m->too_big,
			 (long long)s->c->limits.max_message_bytes);
		front_reply_error(s, m->id, m->id_len,
				  peek_request_id(m->head, m->head_len),
				  QUORUM__STATUS__STATUS_TOO_LONG, e);
		return;
	}
	if (rc) {
		front_reply_error(s, m->id, m->id_len, 0,
			    QUORUM__STATUS__STATUS_BAD_REQUEST,
			    "one protobuf frame per message expected");
		return;
	}
	if (!(cr = quorum__client_request__unpack(NULL, m->len, m->data))) {
		front_reply_error(s, m->id, m->id_len, 0,
			    QUORUM__STATUS__STATUS_BAD_REQUEST,
			    "undecodable ClientRequest");
		return;
	}
	if (cr->version != WIRE_VERSION)
		front_reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_VERSION_MISMATCH,
			    "protocol version 1 expected");
	else if (cr->body_case == QUORUM__CLIENT_REQUEST__BODY_STATUS)
		reply_status(s, m, cr->request_id);
	else if (cr->body_case == QUORUM__CLIENT_REQUEST__BODY_ASK)
		on_ask(s, m, cr);
	else if (cr->body_case == QUORUM__CLIENT_REQUEST__BODY_CANCEL)
		on_cancel(s, m, cr->request_id);
	else
		front_reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_BAD_REQUEST,
			    "request without ask or status");
	quorum__client_request__free_unpacked(cr, NULL);
}