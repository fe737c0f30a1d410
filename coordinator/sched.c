/* sched — lifecycle, timers, the worker-message switch and the I/O
 * hooks; the parts are listed in sched_int.h. */
#include "sched_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc/pfx.h"
#include "qerr.h"

/* ---- I/O ------------------------------------------------------------- */

int64_t sched_now(const sched *s)
{
	return s->o.io.now_ms ? s->o.io.now_ms(s->o.io.arg) : wire_now_ms();
}

int sched_send_raw(sched *s, int to_worker, const unsigned char *id,
		   size_t id_len, const ProtobufCMessage *m)
{
	if (s->o.io.send)
		return s->o.io.send(s->o.io.arg, to_worker, id, id_len, m);
	return wire_send(to_worker ? s->o.workers : s->o.clients, id, id_len,
			 m);
}

uint32_t sched_blocks_for(const sched *s, uint64_t n_tokens)
{
	uint64_t b = (uint64_t)s->c->kv.block_tokens;

	return (uint32_t)((n_tokens + b - 1) / b);
}

uint32_t sched_tail_blocks(const sched *s, const req *r)
{
	uint64_t b = (uint64_t)s->c->kv.block_tokens;

	return (uint32_t)(((uint64_t)r->n_tokens % b + r->p.max_new + b - 1) /
			  b);
}

int sched_try_client(sched *s, const unsigned char *cid, size_t cid_len,
		     Quorum__ClientReply *r)
{
	r->version = WIRE_VERSION;
	return sched_send_raw(s, 0, cid, cid_len, &r->base) ? -1 : 0;
}

void sched_send_client(sched *s, const unsigned char *cid, size_t cid_len,
		       Quorum__ClientReply *r)
{
	if (sched_try_client(s, cid, cid_len, r)) {
		/* ZMQ_ROUTER_MANDATORY: the client is gone; counted in status
		 * (a final reply: one per request) */
		s->unroutable++;
		fprintf(stderr, "coordinator: reply to a client's request %llu "
			"dropped: %s\n", (unsigned long long)r->request_id,
			qerr_detail());
	}
}

int sched_send_worker(sched *s, int wi, Quorum__CoordMsg *m)
{
	worker *w = &s->w[wi];

	if (!w->used || w->dead)
		return -1;
	m->version = WIRE_VERSION;
	if (sched_send_raw(s, 1, w->ident, w->ident_len, &m->base)) {
		fprintf(stderr, "coordinator: worker %s unreachable: %s\n",
			w->id, qerr_detail());
		w->dead = 1;
		return -1;
	}
	return 0;
}

void sched_send_release(sched *s, int wi, uint32_t root_id)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__Release r = QUORUM__RELEASE__INIT;

	if (wi < 0)
		return;
	r.root_id = root_id;
	m.body_case = QUORUM__COORD_MSG__BODY_RELEASE;
	m.release = &r;
	sched_send_worker(s, wi, &m);
}

int sched_n_workers(const sched *s)
{
	return members_alive(s);
}

const char *sched_worker_pool(const sched *s, const char *id)
{
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && !strcmp(s->w[i].id, id))
			return s->w[i].pool[0] ? s->w[i].pool : NULL;
	return NULL;
}

/* ---- worker messages ------------------------------------------------- */

void sched_log_drop(sched *s, const char *fmt, ...)
{
	int64_t now = sched_now(s);
	va_list ap;

	if (now - s->drop_log_at >= 1000) {
		s->drop_log_at = now;
		s->drop_logs = 0;
	}
	if (s->drop_logs >= SCHED_DROP_LOGS) {
		s->drop_quiet++;
		return;
	}
	s->drop_logs++;
	if (s->drop_quiet) {
		fprintf(stderr, "coordinator: (%llu more such lines held "
			"back)\n", (unsigned long long)s->drop_quiet);
		s->drop_quiet = 0;
	}
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void sched_stray(sched *s, int wi, const char *what, uint64_t id,
		 uint64_t attempt, uint64_t max_attempt)
{
	if (id && id <= s->next_id && attempt && attempt <= max_attempt)
		return;
	sched_log_drop(s, "coordinator: worker %s: %s for a job never sent "
		       "(request %llu, attempt %llu) dropped\n", s->w[wi].id,
		       what, (unsigned long long)id,
		       (unsigned long long)attempt);
}

void sched_on_worker(sched *s, int rc, const wire_msg *m)
{
	Quorum__WorkerMsg *wm;
	int wi, keep = 0;

	if (!m->id_len)
		return;
	if (rc) {
		wi = members_find(s, m);
		sched_log_drop(s, "coordinator: %s%s: a malformed message (%s) "
			       "dropped\n", wi >= 0 ? "worker " : "",
			       wi >= 0 ? s->w[wi].id : "an unregistered peer",
			       m->too_big ? "over limits.max_message_bytes"
					  : "not one frame");
		return;
	}
	if (!(wm = quorum__worker_msg__unpack(NULL, m->len, m->data))) {
		/* rate-limited as the malformed ones above: a peer must
		 * not flood the log */
		wi = members_find(s, m);
		sched_log_drop(s, "coordinator: %s%s: an undecodable message "
			       "dropped\n", wi >= 0 ? "worker " : "",
			       wi >= 0 ? s->w[wi].id : "an unregistered peer");
		return;
	}
	if (wm->version != WIRE_VERSION) {
		members_reject(s, m, QUORUM__STATUS__STATUS_VERSION_MISMATCH,
			       "protocol version 1 expected");
		goto out;
	}
	if (wm->body_case == QUORUM__WORKER_MSG__BODY_REGISTER) {
		members_on_register(s, m, wm);
		goto out;
	}
	if ((wi = members_find(s, m)) < 0 || s->w[wi].dead) {
		/* unknown: it re-registers when we stay silent */
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field(
				&quorum__worker_msg__descriptor,
				(unsigned)wm->body_case);

		sched_log_drop(s, "coordinator: a %s from %s dropped: not "
			       "registered\n", f ? f->name : "message",
			       wire_name_ok(wm->worker_id, ID_MAX)
				       ? wm->worker_id : "a peer");
		goto out;
	}
	s->w[wi].last_seen = sched_now(s);
	switch (wm->body_case) {
	case QUORUM__WORKER_MSG__BODY_HEARTBEAT:
		s->w[wi].blocks_used = wm->heartbeat->blocks_used;
		s->w[wi].blocks_free = wm->heartbeat->blocks_free;
		s->w[wi].roots = wm->heartbeat->roots;
		break;
	case QUORUM__WORKER_MSG__BODY_PREFIX_READY:
		roots_on_prefix_ready(s, wi, wm->prefix_ready);
		break;
	case QUORUM__WORKER_MSG__BODY_SAMPLE:
		keep = dispatch_on_sample(s, wi, wm);
		break;
	case QUORUM__WORKER_MSG__BODY_JOB_DONE:
		dispatch_on_job_done(s, wi, wm->job_done);
		break;
	case QUORUM__WORKER_MSG__BODY_TEXT:
		dispatch_on_text(s, wi, wm->text);
		break;
	case QUORUM__WORKER_MSG__BODY_ROOT_DATA:
		roots_on_root_data(s, wi, wm->root_data);
		break;
	case QUORUM__WORKER_MSG__BODY_IMPORTED:
		roots_on_imported(s, wi, wm->imported);
		break;
	case QUORUM__WORKER_MSG__BODY_ERROR:
		roots_on_error(s, wi, wm->error);
		break;
	default:
		break;
	}
	dispatch_pump(s);
out:
	if (!keep)
		quorum__worker_msg__free_unpacked(wm, NULL);
}

/* ---- timers ---------------------------------------------------------- */

void sched_tick(sched *s)
{
	int64_t now = sched_now(s);

	members_tick(s);
	dispatch_deadlines(s);
	roots_tick(s);
	if (members_alive(s))
		s->no_worker_since = 0;
	else if (!s->no_worker_since)
		s->no_worker_since = now;
	while (s->reqs && !members_alive(s) && members_none_expected(s))
		dispatch_req_fail(s, s->reqs,
				  QUORUM__STATUS__STATUS_NO_CAPACITY,
				  "no worker left to serve it");
	dispatch_pump(s);
}

long sched_timeout_ms(const sched *s)
{
	int64_t t = s->hb_at - sched_now(s);

	if (t < 0)
		t = 0;
	if (t > 100)
		t = 100;
	return (long)t;
}

void sched_shutdown(sched *s)
{
	s->draining = 1;
	while (s->reqs)
		dispatch_req_fail_retry(s, s->reqs,
					QUORUM__STATUS__STATUS_CANCELLED,
					"coordinator shutting down; retry",
					DRAIN_RETRY_MS);
}

int sched_new(const sched_opts *o, sched **out)
{
	sched *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->w = calloc(MAX_WORKERS, sizeof(*s->w))) ||
	    pfx_new((uint32_t)o->c->kv.block_tokens, &s->index)) {
		if (s)
			free(s->w);
		free(s);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	s->o = *o;
	s->c = o->c;
	s->vocab = tok_vocab_size(o->t);
	for (uint32_t id = 0; id < s->vocab; id++) {
		size_t len;

		if (tok_piece(o->t, (int32_t)id, 1, &len) && len > s->piece_max)
			s->piece_max = (uint32_t)len;
	}
	s->fingerprint = o->fingerprint;
	s->have_fingerprint = o->has_fingerprint;
	s->zap = o->zap;
	s->hb_at = sched_now(s) + o->c->heartbeat.interval_ms;
	s->t_started = sched_now(s);
	*out = s;
	return QERR_OK;
}

void sched_free(sched **sp)
{
	sched *s = sp ? *sp : NULL;

	if (!s)
		return;
	sched_shutdown(s);
	/* the workers' roots go with them (local ones are stopped by now,
	 * remote ones release everything when they re-register) */
	roots_free_all(s);
	front_buckets_free(s);
	pfx_free(&s->index);
	while (s->zombies) {
		zombie *z = s->zombies;

		s->zombies = z->next;
		free(z);
	}
	while (s->bindings) {
		binding *b = s->bindings;

		s->bindings = b->next;
		free(b);
	}
	free(s->w);
	free(s);
	*sp = NULL;
}
