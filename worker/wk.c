/*
 * wk — the worker's serving loop (see wk.h for the commands it answers):
 * one engine and one merged decode batch, the coordinator's messages
 * dispatched in one zmq_poll loop between decode rounds, heartbeats and
 * reconnects, its pool named and stale pools of its host swept. Called by
 * worker/main.c.
 */
#include "wk_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "infer/kv.h"
#include "infer/model.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "sc/batch.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/fork.h"
#include "text/tok.h"
#include "net/wire.h"
#include "net/poolname.h"
#include "net/spwire.h"

/* the config's KV dtype is the pool's and the wire's value */
_Static_assert((int)CFG_DTYPE_F32 == (int)KV_F32 &&
		       (int)CFG_DTYPE_F16 == (int)KV_F16 &&
		       (int)CFG_DTYPE_Q8_0 == (int)KV_Q8_0,
	       "cfg_dtype = kv_dtype");

int wk_send_msg(wk *w, Quorum__WorkerMsg *m)
{
	int rc;

	m->version = WIRE_VERSION;
	m->worker_id = (char *)w->o->id;
	if ((rc = wire_send(w->sock, NULL, 0, &m->base)))
		fprintf(stderr, "worker %s: %s\n", w->o->id, qerr_detail());
	return rc;
}

void wk_send_heartbeat(wk *w)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;

	hb.has_blocks_used = hb.has_blocks_free = hb.has_busy = 1;
	hb.has_roots = 1;
	hb.blocks_used = sc_engine_kv_in_use(w->e);
	hb.blocks_free = sc_engine_kv_free(w->e);
	hb.busy = w->busy;
	hb.roots = (uint32_t)sc_root_count(w->e);
	m.body_case = QUORUM__WORKER_MSG__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	wk_send_msg(w, &m);
	w->hb_at = wire_now_ms() + w->c->heartbeat.interval_ms;
}

void wk_send_error(wk *w, uint64_t rid, uint32_t attempt, int status,
		       const char *err)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__WorkerError e = QUORUM__WORKER_ERROR__INIT;

	e.has_request_id = e.has_attempt = 1;
	e.request_id = rid;
	e.attempt = attempt;
	e.status = status;
	e.error = (char *)err;
	m.body_case = QUORUM__WORKER_MSG__BODY_ERROR;
	m.error = &e;
	wk_send_msg(w, &m);
}

int wk_track_root(wk *w, uint32_t id)
{
	if (w->n_roots == w->cap_roots) {
		int nc = w->cap_roots ? 2 * w->cap_roots : 16;
		uint32_t *nr = realloc(w->roots, (size_t)nc * sizeof(*nr));

		if (!nr)
			return QERR_NOMEM;
		w->roots = nr;
		w->cap_roots = nc;
	}
	w->roots[w->n_roots++] = id;
	return 0;
}

int wk_tracked_root(const wk *w, uint32_t id)
{
	for (int i = 0; i < w->n_roots; i++)
		if (w->roots[i] == id)
			return 1;
	return 0;
}

int wk_untrack_root(wk *w, uint32_t id)
{
	for (int i = 0; i < w->n_roots; i++)
		if (w->roots[i] == id) {
			w->roots[i] = w->roots[--w->n_roots];
			return 1;
		}
	return 0;
}

void wk_release_all_roots(wk *w)
{
	for (int i = 0; i < w->n_roots; i++)
		sc_root_release(w->e, w->roots[i]);
	w->n_roots = 0;
}

/* Keeps a root just made (rc: how making it went): tracked, so a
 * reconnect releases it, and described into d. Otherwise sends the error
 * for (rid, attempt) and returns nonzero. */
int wk_keep_root(wk *w, uint64_t rid, uint32_t attempt, int rc,
		     uint32_t root, sc_root_desc *d)
{
	if (!rc && (rc = wk_track_root(w, root)))
		sc_root_release(w->e, root);
	if (rc || (rc = sc_root_get(w->e, root, d))) {
		wk_send_error(w, rid, attempt, wire_status_of_qerr(rc), qerr_detail());
		return rc;
	}
	return 0;
}

/* Logits of the wire (vocab x f32) into an aligned copy, or NULL. */
float *wk_logits_copy(wk *w, const ProtobufCBinaryData *b)
{
	size_t want = (size_t)w->m->cfg.vocab * sizeof(float);
	float *l;

	if (b->len != want || !(l = malloc(want)))
		return NULL;
	memcpy(l, b->data, want);
	for (int i = 0; i < w->m->cfg.vocab; i++)
		if (isnan(l[i]) || l[i] == INFINITY) {
			free(l);
			return NULL;
		}
	return l;
}

/* ---- dispatch -------------------------------------------------------- */

/* Handles one packed CoordMsg (between rounds of the merged loop: new
 * jobs join it, cancels take theirs out of it). */
static void handle_raw(wk *w, const uint8_t *data, size_t len)
{
	Quorum__CoordMsg *m = quorum__coord_msg__unpack(NULL, len, data);

	if (!m) {
		fprintf(stderr, "worker %s: undecodable command dropped\n",
			w->o->id);
		return;
	}
	if (m->version != WIRE_VERSION &&
	    m->body_case != QUORUM__COORD_MSG__BODY_REJECT) {
		fprintf(stderr, "worker %s: command of protocol version %u "
			"dropped\n", w->o->id, m->version);
		quorum__coord_msg__free_unpacked(m, NULL);
		return;
	}
	/* any message from the coordinator proves it alive */
	w->expiry = wire_now_ms() +
		    (int64_t)w->c->heartbeat.interval_ms *
			    w->c->heartbeat.liveness;
	switch (m->body_case) {
	case QUORUM__COORD_MSG__BODY_HEARTBEAT:
		break;
	case QUORUM__COORD_MSG__BODY_CANCEL:
		w->cancel_att[w->n_cancels % 32] =
			m->cancel->has_attempt ? m->cancel->attempt : 0;
		w->cancels[w->n_cancels++ % 32] = m->cancel->request_id;
		wk_cancel_jobs(w, 0, m->cancel->request_id,
			    m->cancel->has_attempt ? m->cancel->attempt : 0,
			    NULL);
		break;
	case QUORUM__COORD_MSG__BODY_REJECT:
		fprintf(stderr, "worker %s: rejected by the coordinator: %s "
			"(%s)\n", w->o->id,
			m->reject->error ? m->reject->error : "no reason given",
			wire_status_name(m->reject->status));
		w->rejected = 1;
		break;
	case QUORUM__COORD_MSG__BODY_PREFILL:
		wk_on_prefill(w, m->prefill);
		break;
	case QUORUM__COORD_MSG__BODY_DECODE:
		wk_on_decode(w, m->decode);
		break;
	case QUORUM__COORD_MSG__BODY_RELEASE:
		if (wk_untrack_root(w, m->release->root_id))
			sc_root_release(w->e, m->release->root_id);
		break;
	case QUORUM__COORD_MSG__BODY_EXPORT_ROOT:
		wk_on_export(w, m->export_root);
		break;
	case QUORUM__COORD_MSG__BODY_IMPORT_ROOT:
		wk_on_import(w, m->import_root);
		break;
	case QUORUM__COORD_MSG__BODY_FORGET_POOL:
		/* its owner is gone; never our own pool. Jobs still reading
		 * it leave the loop first (the coordinator has given their
		 * samples to others) */
		if (m->forget_pool->pool_name &&
		    strcmp(m->forget_pool->pool_name, w->pool_name)) {
			wk_cancel_jobs(w, 0, 0, 0, m->forget_pool->pool_name);
			if (!sc_root_unlink_pool(w->e, m->forget_pool->pool_name))
				fprintf(stderr, "worker %s: dropped the mapping "
					"of pool %s\n", w->o->id,
					m->forget_pool->pool_name);
		}
		qerr_clear();
		break;
	default:
		fprintf(stderr, "worker %s: empty command dropped\n",
			w->o->id);
		break;
	}
	quorum__coord_msg__free_unpacked(m, NULL);
}

/* ---- connection ------------------------------------------------------ */

static int connect_and_register(wk *w)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__Register r = QUORUM__REGISTER__INIT;
	int sndto = w->c->heartbeat.interval_ms, rc;

	wire_close(&w->sock);
	if ((rc = wire_connect_curve(w->ctx, ZMQ_DEALER, w->o->endpoint,
				     w->c->limits.max_message_bytes,
				     w->o->curve, &w->sock)))
		return rc;
	/* a silent coordinator must not block us in a send: the liveness
	 * check reconnects instead */
	zmq_setsockopt(w->sock, ZMQ_SNDTIMEO, &sndto, sizeof(sndto));
	r.host = (char *)w->o->host;
	r.pid = (uint32_t)getpid();
	r.slots = (uint32_t)w->c->workers.slots;
	r.pool_name = w->pool_name;
	r.model_fingerprint = w->m->fingerprint;
	r.has_pool_blocks = r.has_block_tokens = r.has_kv_dtype = 1;
	r.has_vocab = r.has_threads = 1;
	r.pool_blocks = (uint32_t)w->c->kv.blocks;
	r.block_tokens = (uint32_t)w->c->kv.block_tokens;
	r.kv_dtype = (uint32_t)w->c->kv.dtype; /* = enum kv_dtype */
	r.vocab = (uint32_t)w->m->cfg.vocab;
	r.threads = (uint32_t)w->o->threads;
	r.has_heartbeat_interval_ms = r.has_heartbeat_liveness = 1;
	r.heartbeat_interval_ms = (uint32_t)w->c->heartbeat.interval_ms;
	r.heartbeat_liveness = (uint32_t)w->c->heartbeat.liveness;
	m.body_case = QUORUM__WORKER_MSG__BODY_REGISTER;
	m.register_ = &r;
	if ((rc = wk_send_msg(w, &m)))
		return rc;
	w->hb_at = wire_now_ms() + w->c->heartbeat.interval_ms;
	w->expiry = wire_now_ms() + (int64_t)w->c->heartbeat.interval_ms *
					    w->c->heartbeat.liveness;
	return 0;
}

/* Sleeps ms unless a signal arrives or a message is waiting on sock
 * (returns 1 then). */
static int nap(void *sock, int64_t ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};

	if (sock)
		return zmq_poll(&it, 1, (long)ms) > 0 &&
		       (it.revents & ZMQ_POLLIN);
	nanosleep(&ts, NULL);
	return 0;
}

/* Between the forwards of a round (a merged round of many forks and a
 * prefill chunk can be long): the heartbeats that fall due go out, so a
 * busy worker never looks dead. Only sends. */
static void on_forward(void *ctx)
{
	wk *w = ctx;

	if (wire_now_ms() >= w->hb_at)
		wk_send_heartbeat(w);
}

static int new_batch(wk *w)
{
	sc_batch_params bp = {w->c->workers.slots,
			      w->c->workers.prefill_tokens, on_forward, w};

	if (w->b)
		return 0;
	return sc_batch_new(w->e, &bp, &w->b);
}

/* The loop: while jobs are in the merged decode loop, one round, then
 * the commands waiting (without blocking) and heartbeats due; idle, a
 * poll until the next heartbeat. */
static int serve(wk *w)
{
	while (!*w->o->stop && !w->rejected) {
		zmq_pollitem_t it = {w->sock, 0, ZMQ_POLLIN, 0};
		int64_t now = wire_now_ms(), timeout;
		wire_msg in;

		if (!w->b && new_batch(w)) {
			/* the detail copied out: qerr_fail writes the buffer
			 * qerr_detail reads */
			char why[256];

			snprintf(why, sizeof(why), "%s", qerr_detail());
			return qerr_fail(QERR_NOMEM, "worker: %s", why);
		}
		wk_start_waiting(w);
		if (sc_batch_jobs(w->b)) {
			sc_batch_round(w->b);
			timeout = 0;
		} else {
			timeout = w->hb_at - now;
			if (timeout < 0)
				timeout = 0;
		}
		if (zmq_poll(&it, 1, (long)timeout) < 0 && zmq_errno() != EINTR)
			return qerr_fail(QERR_IO, "zmq_poll: %s",
					 zmq_strerror(zmq_errno()));
		if (it.revents & ZMQ_POLLIN) {
			/* bounded so heartbeats go out on a busy socket */
			for (int k = 0; k < 64 && !w->rejected; k++) {
				int rc = wire_recv(w->sock, 0, 1, 0, &in);

				if (rc == QERR_FULL || rc == QERR_IO)
					break;
				if (rc) {
					fprintf(stderr, "worker %s: a malformed "
						"command (%s) dropped\n",
						w->o->id, qerr_detail());
					continue;
				}
				handle_raw(w, in.data, in.len);
				wire_msg_close(&in);
			}
		}
		now = wire_now_ms();
		if (now >= w->hb_at)
			wk_send_heartbeat(w);
		if (now >= w->expiry && !*w->o->stop) {
			fprintf(stderr, "worker %s: coordinator silent, "
				"reconnecting in %lld ms\n", w->o->id,
				(long long)w->backoff_ms);
			/* a coordinator silent past its liveness has forgotten
			 * our jobs: stop them instead of decoding for nobody */
			wk_cancel_jobs(w, 1, 0, 0, NULL);
			/* the coordinator only speaks to a connection it has
			 * registered: an answer during the backoff (the link
			 * came back, our last Register went through late)
			 * keeps this one instead of registering twice */
			if (nap(w->sock, w->backoff_ms))
				continue;
			if (w->backoff_ms < w->c->heartbeat.reconnect_max_ms)
				w->backoff_ms *= 2;
			if (w->backoff_ms > w->c->heartbeat.reconnect_max_ms)
				w->backoff_ms = w->c->heartbeat.reconnect_max_ms;
			/* the coordinator forgot us: our roots are orphans,
			 * and so are prefills under way */
			sc_batch_free(&w->b);
			wk_release_all_roots(w);
			if (connect_and_register(w))
				fprintf(stderr, "worker %s: %s\n", w->o->id,
					qerr_detail());
		} else if (now < w->expiry &&
			   w->backoff_ms != w->c->heartbeat.reconnect_min_ms &&
			   it.revents) {
			w->backoff_ms = w->c->heartbeat.reconnect_min_ms;
		}
	}
	return w->rejected ? QERR_REJECTED : QERR_OK;
}

/* shm_sweep_stale's judge: exactly a pool name of this worker
 * (poolname_ok: so worker "w1" never touches worker "w1-x"'s pools,
 * nor cluster "a" those of cluster "a-b"), a KV region of this version,
 * its creator dead. */
static int stale_pool(const char *name, const void *head, size_t len,
		      void *arg)
{
	const wk_opts *o = arg;

	if (!poolname_ok(name, o->c->cluster.name, o->id))
		return 0;
	return kv_region_stale(name, head, len, NULL);
}

/* Removes the pools a previous run of this worker (same cluster, same id)
 * left behind when it was killed; never a live process's. */
static void sweep_stale(const wk_opts *o)
{
	char prefix[160];
	int n = 0;

	if (poolname_prefix(prefix, sizeof(prefix), o->c->cluster.name,
				o->id))
		return;
	if (shm_sweep_stale(prefix, KV_MAGIC, sizeof(kv_shm_header),
			    stale_pool, (void *)o, &n))
		fprintf(stderr, "worker %s: stale pool sweep: %s\n", o->id,
			qerr_detail());
	else if (n)
		fprintf(stderr, "worker %s: removed %d stale pool(s) of a "
			"previous run\n", o->id, n);
}

int wk_run(const wk_opts *o)
{
	wk w = {0};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	unsigned char rnd[POOLNAME_RND_BYTES];
	int rc;

	w.o = o;
	w.c = o->c;
	w.backoff_ms = o->c->heartbeat.reconnect_min_ms;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return qerr_fail(QERR_IO, "getrandom: %s", strerror(errno));
	if ((rc = poolname_make(w.pool_name, sizeof(w.pool_name),
				    o->c->cluster.name, o->id, rnd)))
		return rc;
	ep.pool_name = w.pool_name;
	ep.pool_blocks = (uint32_t)o->c->kv.blocks;
	ep.n_threads = o->threads;
	ep.block_tokens = o->c->kv.block_tokens;
	ep.kv_dtype = (int)o->c->kv.dtype;
	ep.free_windows = o->c->kv.free_windows;
	/* a merged round's prefill chunk is one forward of that many rows */
	if (ep.prefill_chunk < o->c->workers.prefill_tokens)
		ep.prefill_chunk = o->c->workers.prefill_tokens;
	sweep_stale(o);
	if ((rc = model_load(o->c->model.path, &w.m)) ||
	    (rc = tok_load(w.m->gguf, &w.t))) {
		/* the file's own fault, not the machine's (memory, I/O) */
		if (o->model_bad && rc != QERR_NOMEM && rc != QERR_IO)
			*o->model_bad = 1;
		goto out;
	}
	if ((rc = sc_engine_new(w.m, w.t, &ep, &w.e))) {
		char d[400];

		/* a pool the machine cannot hold: the setting that sized it */
		snprintf(d, sizeof(d), "%s", qerr_detail());
		if (rc == QERR_NOMEM)
			rc = qerr_fail(rc, "kv.blocks %d: %s", o->c->kv.blocks,
				       d);
		goto out;
	}
	if (!(w.ctx = zmq_ctx_new())) {
		rc = qerr_fail(QERR_IO, "zmq_ctx_new failed");
		goto out;
	}
	if ((rc = new_batch(&w)) || (rc = connect_and_register(&w)))
		goto out;
	fprintf(stderr, "worker %s: host %s, pool %s (%d blocks), "
		"coordinator %s\n", o->id, o->host, w.pool_name,
		o->c->kv.blocks, o->endpoint);
	rc = serve(&w);
out:
	if (w.b)
		wk_cancel_jobs(&w, 1, 0, 0, NULL);
	sc_batch_free(&w.b);
	if (w.e)
		wk_release_all_roots(&w);
	free(w.roots);
	wire_close(&w.sock);
	if (w.ctx)
		zmq_ctx_term(w.ctx);
	sc_engine_free(&w.e); /* unlinks the pool's shm name */
	tok_free(&w.t);
	model_free(&w.m);
	return rc;
}
