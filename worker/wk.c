#include "wk.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kv.h"
#include "model.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "sc.h"
#include "tok.h"
#include "wire.h"

#define WK_TEXT_ROUNDS 4    /* streamed jobs: new text every this many rounds */
#define WK_MAX_INDICES 65536
#define WK_PREFILL_CHUNK 64 /* rows per prefill forward between heartbeats */

/* A command read during a decode, handled after it. */
typedef struct wk_pending {
	struct wk_pending *next;
	size_t len;
	uint8_t data[];
} wk_pending;

typedef struct {
	const wk_opts *o;
	const cfg *c;
	model *m;
	tok *t;
	sc_engine *e;
	char pool_name[WIRE_POOL_NAME_MAX];
	void *ctx, *sock;
	int64_t hb_at;      /* next heartbeat to send */
	int64_t expiry;     /* coordinator presumed dead after this */
	int64_t backoff_ms; /* next reconnect delay */
	uint32_t *roots;    /* root ids handed to the coordinator */
	int n_roots, cap_roots;
	wk_pending *head, *tail;
	int rejected;
	uint32_t busy;      /* samples of the running job */
	/* the running decode */
	uint64_t cur_rid;
	uint32_t cur_attempt;
	int cur_stream;     /* DecodeJob.stream: send SampleText */
	uint32_t rounds;
	uint32_t *sent;     /* (busy) bytes of each sample sent so far */
	const int *cur_idx; /* (busy) its sample indices */
	int cancelled;
	uint64_t cancels[32]; /* recent Cancel ids: queued jobs to skip */
	uint32_t cancel_att[32]; /* ... and the attempt (0: every job) */
	unsigned n_cancels;
} wk;

static int send_msg(wk *w, Quorum__WorkerMsg *m)
{
	int rc;

	m->version = WIRE_VERSION;
	m->worker_id = (char *)w->o->id;
	if ((rc = wire_send(w->sock, NULL, 0, &m->base)))
		fprintf(stderr, "worker %s: %s\n", w->o->id, qerr_detail());
	return rc;
}

static void send_heartbeat(wk *w)
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
	send_msg(w, &m);
	w->hb_at = wire_now_ms() + w->c->heartbeat.interval_ms;
}

static void send_error(wk *w, uint64_t rid, uint32_t attempt, int status,
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
	send_msg(w, &m);
}

static int track_root(wk *w, uint32_t id)
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

static int untrack_root(wk *w, uint32_t id)
{
	for (int i = 0; i < w->n_roots; i++)
		if (w->roots[i] == id) {
			w->roots[i] = w->roots[--w->n_roots];
			return 1;
		}
	return 0;
}

static void release_all_roots(wk *w)
{
	for (int i = 0; i < w->n_roots; i++)
		sc_root_release(w->e, w->roots[i]);
	w->n_roots = 0;
}

/* Keeps a root just made (rc: how making it went): tracked, so a
 * reconnect releases it, and described into d. Otherwise sends the error
 * for (rid, attempt) and returns nonzero. */
static int keep_root(wk *w, uint64_t rid, uint32_t attempt, int rc,
		     uint32_t root, sc_root_desc *d)
{
	if (!rc && (rc = track_root(w, root)))
		sc_root_release(w->e, root);
	if (rc || (rc = sc_root_get(w->e, root, d))) {
		send_error(w, rid, attempt, wire_status_of_qerr(rc), qerr_detail());
		return rc;
	}
	return 0;
}

/* Logits of the wire (vocab x f32) into an aligned copy, or NULL. */
static float *logits_copy(wk *w, const ProtobufCBinaryData *b)
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

/* ---- Prefill --------------------------------------------------------- */

static void handle_raw(wk *w, const uint8_t *data, size_t len, int queue);

/* Reads the commands waiting on the socket inside a prefill or a decode
 * (handle_raw with queue set) until none is left, w->rejected is set or,
 * with until_cancel, w->cancelled. */
static void read_queued(wk *w, int until_cancel)
{
	wire_msg in;

	while (!(until_cancel && w->cancelled) && !w->rejected) {
		int rc = wire_recv(w->sock, 0, 1, 0, &in);

		if (rc == QERR_FULL || rc == QERR_IO)
			break;
		if (rc)
			continue;
		handle_raw(w, in.data, in.len, 1);
		wire_msg_close(&in);
	}
}

/* Between prefill chunks: heartbeats that fall due, and the socket read
 * (commands queued, as during a decode), so a long prompt never looks
 * like a dead worker. */
static int on_prefill_chunk(void *ctx)
{
	wk *w = ctx;

	if (*w->o->stop)
		return QERR_CANCELLED;
	if (wire_now_ms() >= w->hb_at)
		send_heartbeat(w);
	read_queued(w, 0);
	return w->rejected ? QERR_CANCELLED : 0;
}

static void on_prefill(wk *w, const Quorum__Prefill *p)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__PrefixReady r = QUORUM__PREFIX_READY__INIT;
	int32_t *ids = NULL;
	uint32_t root;
	sc_root_desc d;
	int64_t t0 = wire_now_ms();
	int rc;

	if (p->n_tokens < 1 || p->n_tokens > (size_t)w->m->cfg.ctx_len) {
		send_error(w, p->request_id, p->attempt,
			   QUORUM__STATUS__STATUS_TOO_LONG,
			   "prompt length out of range");
		return;
	}
	if (!(ids = malloc(p->n_tokens * sizeof(*ids)))) {
		send_error(w, p->request_id, p->attempt,
			   QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	for (size_t i = 0; i < p->n_tokens; i++) {
		if (p->tokens[i] >= (uint32_t)w->m->cfg.vocab) {
			send_error(w, p->request_id, p->attempt,
				   QUORUM__STATUS__STATUS_BAD_REQUEST,
				   "token id out of the vocabulary");
			free(ids);
			return;
		}
		ids[i] = (int32_t)p->tokens[i];
	}
	rc = sc_root_prefill_cb(w->e, ids, p->n_tokens, WK_PREFILL_CHUNK,
				on_prefill_chunk, w, &root);
	free(ids);
	if (keep_root(w, p->request_id, p->attempt, rc, root, &d))
		return;
	r.request_id = p->request_id;
	r.attempt = p->attempt;
	r.root_id = root;
	r.n_tokens = d.n_tokens;
	r.n_blocks = d.n_blocks;
	r.blocks = (uint32_t *)d.blocks;
	r.logits.data = (uint8_t *)d.logits;
	r.logits.len = (size_t)w->m->cfg.vocab * sizeof(float);
	r.pool_name = w->pool_name;
	r.has_prefill_ms = 1;
	r.prefill_ms = (double)(wire_now_ms() - t0);
	m.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
	m.prefix_ready = &r;
	send_msg(w, &m);
}

/* ---- DecodeJob ------------------------------------------------------- */

static int on_sample(void *ctx, const sc_sample *s)
{
	wk *w = ctx;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
	Quorum__Sample x = QUORUM__SAMPLE__INIT;

	x.index = (uint32_t)s->index;
	if (s->has_answer) {
		x.has_answer = 1;
		x.answer.data = (uint8_t *)s->answer;
		x.answer.len = strlen(s->answer);
	}
	x.tokens = (uint32_t)s->n_tokens;
	x.has_mean_logprob = x.has_group_confidence = 1;
	x.mean_logprob = s->mean_logprob;
	x.group_confidence = s->group_conf;
	x.finish = (char *)sc_finish_name(s->finish);
	x.text.data = (uint8_t *)s->text;
	x.text.len = s->len;
	x.worker = (char *)w->o->id;
	r.request_id = w->cur_rid;
	r.attempt = w->cur_attempt;
	r.sample = &x;
	for (uint32_t i = 0; w->cur_stream && i < w->busy; i++)
		if (w->cur_idx[i] == s->index)
			w->sent[i] = UINT32_MAX; /* whole: in the SampleResult */
	m.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
	m.sample = &r;
	send_msg(w, &m);
	return 0;
}

/* Streamed jobs: every WK_TEXT_ROUNDS rounds, the new bytes of the
 * unfinished samples in one SampleText. */
static void on_text(void *ctx, const sc_sample *s, int n)
{
	wk *w = ctx;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleText st = QUORUM__SAMPLE_TEXT__INIT;
	Quorum__TextPart *parts, **pp;

	if (!w->cur_stream || ++w->rounds % WK_TEXT_ROUNDS)
		return;
	parts = calloc((size_t)n, sizeof(*parts));
	pp = calloc((size_t)n, sizeof(*pp));
	for (int i = 0; parts && pp && i < n; i++) {
		Quorum__TextPart *x = &parts[st.n_parts];

		if (s[i].len <= w->sent[i] || s[i].len > UINT32_MAX)
			continue;
		quorum__text_part__init(x);
		x->index = (uint32_t)s[i].index;
		x->offset = w->sent[i];
		x->text.data = (uint8_t *)s[i].text + w->sent[i];
		x->text.len = s[i].len - w->sent[i];
		w->sent[i] = (uint32_t)s[i].len;
		pp[st.n_parts++] = x;
	}
	if (st.n_parts) {
		st.request_id = w->cur_rid;
		st.attempt = w->cur_attempt;
		st.parts = pp;
		m.body_case = QUORUM__WORKER_MSG__BODY_TEXT;
		m.text = &st;
		send_msg(w, &m);
	}
	free(parts);
	free(pp);
}

static int on_round(void *ctx)
{
	wk *w = ctx;

	if (*w->o->stop)
		return QERR_CANCELLED;
	if (wire_now_ms() >= w->hb_at)
		send_heartbeat(w);
	/* a coordinator silent past its liveness has forgotten this job:
	 * stop it and reconnect (serve) instead of decoding for nobody */
	if (wire_now_ms() >= w->expiry)
		return QERR_CANCELLED;
	read_queued(w, 1);
	if (w->rejected)
		return QERR_CANCELLED;
	return w->cancelled ? QERR_CANCELLED : 0;
}

/* A root reference is usable when it names our pool or a pool of this
 * cluster (another worker on this host, kv_pool_name_ok); anything else
 * is refused so a coordinator bug cannot make us map arbitrary shm
 * objects. */
static int pool_name_ok(const wk *w, const char *name)
{
	return name && (!strcmp(name, w->pool_name) ||
			kv_pool_name_ok(name, w->c->cluster.name, NULL));
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

static void on_decode(wk *w, const Quorum__DecodeJob *j)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__JobDone done = QUORUM__JOB_DONE__INIT;
	const Quorum__SamplingParams *sp = j->params;
	const Quorum__RootRef *rr = j->root;
	sc_params p = {0};
	sc_root_ref ref = {0};
	sc_decode_stats st = {0};
	float *logits = NULL;
	int *idx = NULL;
	const char *bad = NULL;
	int rc = 0;

	if (!rr || !sp || !sp->has_n || !sp->has_seed ||
	    !sp->has_temperature || !sp->has_top_k || !sp->has_top_p ||
	    !sp->has_max_new_tokens)
		bad = "decode job without a root or full sampling params";
	else if (sp->n < 1 || sp->n > WK_MAX_INDICES || j->n_indices < 1 ||
		 j->n_indices > sp->n)
		bad = "bad sample count";
	else if (was_cancelled(w, j->request_id, j->attempt))
		bad = "cancelled";
	else if (!pool_name_ok(w, rr->pool_name))
		bad = "root pool is not of this cluster";
	else if (rr->n_tokens < 1 ||
		 rr->n_blocks != ((size_t)rr->n_tokens +
				  (size_t)w->c->kv.block_tokens - 1) /
					 (size_t)w->c->kv.block_tokens)
		bad = "root blocks do not match its tokens";
	else if (!(logits = logits_copy(w, &j->logits)))
		bad = "bad logits";
	else if (!(idx = malloc(j->n_indices * sizeof(*idx))))
		bad = "out of memory";
	for (size_t i = 0; !bad && i < j->n_indices; i++) {
		if (j->indices[i] >= sp->n)
			bad = "sample index out of range";
		else
			idx[i] = (int)j->indices[i];
	}
	if (!bad) {
		p.sp.temperature = sp->temperature;
		p.sp.top_k = sp->top_k;
		p.sp.top_p = sp->top_p;
		p.seed = sp->seed;
		p.n = (int)sp->n;
		p.max_new = (int)sp->max_new_tokens;
		p.mode = SC_BATCHED;
		p.ignore_eos = sp->has_ignore_eos && sp->ignore_eos;
		if (p.max_new < 1 || sc_params_check(&p))
			bad = "bad sampling params";
	}
	done.request_id = j->request_id;
	done.attempt = j->attempt;
	if (bad) {
		done.status = strcmp(bad, "cancelled")
				      ? QUORUM__STATUS__STATUS_BAD_REQUEST
				      : QUORUM__STATUS__STATUS_CANCELLED;
		done.error = (char *)bad;
	} else {
		ref.pool_name = rr->pool_name;
		ref.n_tokens = rr->n_tokens;
		ref.n_blocks = (uint32_t)rr->n_blocks;
		ref.blocks = rr->blocks;
		ref.logits = logits;
		w->cur_rid = j->request_id;
		w->cur_attempt = j->attempt;
		w->cancelled = 0;
		w->busy = (uint32_t)j->n_indices;
		w->rounds = 0;
		w->cur_idx = idx;
		w->sent = j->has_stream && j->stream
				  ? calloc(j->n_indices, sizeof(*w->sent)) : NULL;
		w->cur_stream = w->sent != NULL; /* no memory: no parts */
		rc = sc_decode_text(w->e, &ref, idx, (int)j->n_indices, &p,
				    on_sample, on_round,
				    w->cur_stream ? on_text : NULL, w, &st);
		free(w->sent);
		w->sent = NULL;
		w->cur_stream = 0;
		w->cur_idx = NULL;
		w->busy = 0;
		if (rc == QERR_CANCELLED) {
			done.status = QUORUM__STATUS__STATUS_CANCELLED;
			done.error = "cancelled";
		} else if (rc) {
			done.status = wire_status_of_qerr(rc);
			done.error = (char *)qerr_detail();
		}
		done.has_blocks_mapped = done.has_blocks_copied = 1;
		done.has_decode_ms = done.has_generated_tokens = 1;
		done.blocks_mapped = st.blocks_mapped;
		done.blocks_copied = st.blocks_copied;
		done.decode_ms = st.decode_ms;
		done.generated_tokens = st.gen_tokens;
		w->cancelled = 0;
	}
	m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
	m.job_done = &done;
	send_msg(w, &m);
	free(idx);
	free(logits);
}

/* ---- roots across hosts ---------------------------------------------- */

static void on_export(wk *w, const Quorum__ExportRoot *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__RootData d = QUORUM__ROOT_DATA__INIT;
	sc_root_desc desc;
	void *bytes = NULL;
	size_t len = 0;
	int rc;

	if ((rc = sc_root_get(w->e, x->root_id, &desc)) ||
	    (rc = sc_root_export(w->e, x->root_id, &bytes, &len))) {
		send_error(w, x->request_id, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		return;
	}
	if ((int64_t)len + (int64_t)w->m->cfg.vocab * 4 + 4096 >
	    w->c->limits.max_message_bytes) {
		/* the coordinator would drop the connection on such a frame */
		free(bytes);
		send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_NO_CAPACITY,
			   "root too large for one message "
			   "(limits.max_message_bytes)");
		return;
	}
	d.request_id = x->request_id;
	d.attempt = x->attempt;
	d.n_tokens = desc.n_tokens;
	d.kv.data = bytes;
	d.kv.len = len;
	d.logits.data = (uint8_t *)desc.logits;
	d.logits.len = (size_t)w->m->cfg.vocab * sizeof(float);
	m.body_case = QUORUM__WORKER_MSG__BODY_ROOT_DATA;
	m.root_data = &d;
	send_msg(w, &m);
	free(bytes);
}

static void on_import(wk *w, const Quorum__RootData *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__ImportedRoot r = QUORUM__IMPORTED_ROOT__INIT;
	float *logits = logits_copy(w, &x->logits);
	sc_root_desc d;
	uint32_t root;
	int rc;

	if (!logits) {
		send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_BAD_REQUEST, "bad logits");
		return;
	}
	rc = sc_root_import(w->e, x->n_tokens, x->kv.data, x->kv.len, logits,
			    &root);
	free(logits);
	if (keep_root(w, x->request_id, x->attempt, rc, root, &d))
		return;
	r.request_id = x->request_id;
	r.attempt = x->attempt;
	r.root_id = root;
	r.n_tokens = d.n_tokens;
	r.n_blocks = d.n_blocks;
	r.blocks = (uint32_t *)d.blocks;
	r.pool_name = w->pool_name;
	m.body_case = QUORUM__WORKER_MSG__BODY_IMPORTED;
	m.imported = &r;
	send_msg(w, &m);
}

/* ---- dispatch -------------------------------------------------------- */

static void pending_push(wk *w, const uint8_t *data, size_t len)
{
	wk_pending *p = malloc(sizeof(*p) + len);

	if (!p) {
		fprintf(stderr, "worker %s: out of memory, command dropped\n",
			w->o->id);
		return;
	}
	p->next = NULL;
	p->len = len;
	memcpy(p->data, data, len);
	if (w->tail)
		w->tail->next = p;
	else
		w->head = p;
	w->tail = p;
}

/* Handles one packed CoordMsg; with queue set (inside a decode) only
 * heartbeats, cancels and rejects are handled, the rest is queued. */
static void handle_raw(wk *w, const uint8_t *data, size_t len, int queue)
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
		if (queue && m->cancel->request_id == w->cur_rid &&
		    (!m->cancel->has_attempt ||
		     m->cancel->attempt == w->cur_attempt))
			w->cancelled = 1;
		w->cancel_att[w->n_cancels % 32] =
			m->cancel->has_attempt ? m->cancel->attempt : 0;
		w->cancels[w->n_cancels++ % 32] = m->cancel->request_id;
		break;
	case QUORUM__COORD_MSG__BODY_REJECT:
		fprintf(stderr, "worker %s: rejected by the coordinator: %s "
			"(%s)\n", w->o->id,
			m->reject->error ? m->reject->error : "no reason given",
			wire_status_name(m->reject->status));
		w->rejected = 1;
		break;
	default:
		if (queue) {
			pending_push(w, data, len);
			break;
		}
		switch (m->body_case) {
		case QUORUM__COORD_MSG__BODY_PREFILL:
			on_prefill(w, m->prefill);
			break;
		case QUORUM__COORD_MSG__BODY_DECODE:
			on_decode(w, m->decode);
			break;
		case QUORUM__COORD_MSG__BODY_RELEASE:
			if (untrack_root(w, m->release->root_id))
				sc_root_release(w->e, m->release->root_id);
			break;
		case QUORUM__COORD_MSG__BODY_EXPORT_ROOT:
			on_export(w, m->export_root);
			break;
		case QUORUM__COORD_MSG__BODY_IMPORT_ROOT:
			on_import(w, m->import_root);
			break;
		case QUORUM__COORD_MSG__BODY_FORGET_POOL:
			/* its owner is gone; never our own pool */
			if (m->forget_pool->pool_name &&
			    strcmp(m->forget_pool->pool_name, w->pool_name) &&
			    !sc_unlink_pool(w->e, m->forget_pool->pool_name))
				fprintf(stderr, "worker %s: dropped the mapping "
					"of pool %s\n", w->o->id,
					m->forget_pool->pool_name);
			qerr_clear();
			break;
		default:
			fprintf(stderr, "worker %s: empty command dropped\n",
				w->o->id);
			break;
		}
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
	r.kv_dtype = w->c->kv.dtype == CFG_DTYPE_F16 ? KV_F16 : KV_F32;
	r.vocab = (uint32_t)w->m->cfg.vocab;
	r.threads = (uint32_t)w->o->threads;
	m.body_case = QUORUM__WORKER_MSG__BODY_REGISTER;
	m.register_ = &r;
	if ((rc = send_msg(w, &m)))
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

static int serve(wk *w)
{
	while (!*w->o->stop && !w->rejected) {
		zmq_pollitem_t it = {w->sock, 0, ZMQ_POLLIN, 0};
		int64_t now = wire_now_ms(), timeout;
		wire_msg in;

		if (w->head) {
			wk_pending *p = w->head;

			if (!(w->head = p->next))
				w->tail = NULL;
			handle_raw(w, p->data, p->len, 0);
			free(p);
			continue;
		}
		timeout = w->hb_at - now;
		if (timeout < 0)
			timeout = 0;
		if (zmq_poll(&it, 1, (long)timeout) < 0 && zmq_errno() != EINTR)
			return qerr_fail(QERR_IO, "zmq_poll: %s",
					 zmq_strerror(zmq_errno()));
		if (it.revents & ZMQ_POLLIN) {
			/* bounded so heartbeats go out on a busy socket */
			for (int k = 0; k < 64 && !w->rejected; k++) {
				int rc = wire_recv(w->sock, 0, 1, 0, &in);

				if (rc == QERR_FULL || rc == QERR_IO)
					break;
				if (rc)
					continue;
				handle_raw(w, in.data, in.len, 0);
				wire_msg_close(&in);
			}
		}
		now = wire_now_ms();
		if (now >= w->hb_at)
			send_heartbeat(w);
		if (now >= w->expiry && !*w->o->stop) {
			fprintf(stderr, "worker %s: coordinator silent, "
				"reconnecting in %lld ms\n", w->o->id,
				(long long)w->backoff_ms);
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
			/* the coordinator forgot us: our roots are orphans */
			release_all_roots(w);
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
 * (kv_pool_name_ok: so worker "w1" never touches worker "w1-x"'s pools,
 * nor cluster "a" those of cluster "a-b"), a KV region of this version,
 * its creator dead. */
static int stale_pool(const char *name, const void *head, size_t len,
		      void *arg)
{
	const wk_opts *o = arg;

	if (!kv_pool_name_ok(name, o->c->cluster.name, o->id))
		return 0;
	return kv_region_stale(name, head, len, NULL);
}

/* Removes the pools a previous run of this worker (same cluster, same id)
 * left behind when it was killed; never a live process's. */
static void sweep_stale(const wk_opts *o)
{
	char prefix[160];
	int n = 0;

	if (kv_pool_name_prefix(prefix, sizeof(prefix), o->c->cluster.name,
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
	unsigned char rnd[KV_POOL_RND_BYTES];
	int rc;

	w.o = o;
	w.c = o->c;
	w.backoff_ms = o->c->heartbeat.reconnect_min_ms;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return qerr_fail(QERR_IO, "getrandom: %s", strerror(errno));
	if ((rc = kv_pool_name_make(w.pool_name, sizeof(w.pool_name),
				    o->c->cluster.name, o->id, rnd)))
		return rc;
	ep.pool_name = w.pool_name;
	ep.pool_blocks = (uint32_t)o->c->kv.blocks;
	ep.n_threads = o->threads;
	ep.block_tokens = o->c->kv.block_tokens;
	ep.kv_dtype = o->c->kv.dtype == CFG_DTYPE_F16 ? KV_F16 : KV_F32;
	sweep_stale(o);
	if ((rc = model_load(o->c->model.path, &w.m)) ||
	    (rc = tok_load(w.m->gguf, &w.t)) ||
	    (rc = sc_engine_new(w.m, w.t, &ep, &w.e)))
		goto out;
	if (!(w.ctx = zmq_ctx_new())) {
		rc = qerr_fail(QERR_IO, "zmq_ctx_new failed");
		goto out;
	}
	if ((rc = connect_and_register(&w)))
		goto out;
	fprintf(stderr, "worker %s: host %s, pool %s (%d blocks), "
		"coordinator %s\n", o->id, o->host, w.pool_name,
		o->c->kv.blocks, o->endpoint);
	rc = serve(&w);
out:
	while (w.head) {
		wk_pending *p = w.head;

		w.head = p->next;
		free(p);
	}
	if (w.e)
		release_all_roots(&w);
	free(w.roots);
	wire_close(&w.sock);
	if (w.ctx)
		zmq_ctx_term(w.ctx);
	sc_engine_free(&w.e); /* unlinks the pool's shm name */
	tok_free(&w.t);
	model_free(&w.m);
	return rc;
}
