/*
 * wk — the worker's serving loop (see wk.h for the commands it answers):
 * one engine and one merged decode batch, the coordinator's messages
 * dispatched in one zmq_poll loop between decode rounds, heartbeats and
 * reconnects, its pool named and stale pools of its host swept. Called by
 * worker/main.c.
 */
#include "wk.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine/kv.h"
#include "engine/model.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "sc/batch.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/sample.h"
#include "text/tok.h"
#include "net/wire.h"
#include "net/poolname.h"
#include "net/spwire.h"

/* the config's KV dtype is the pool's and the wire's value */
_Static_assert((int)CFG_DTYPE_F32 == (int)KV_F32 &&
		       (int)CFG_DTYPE_F16 == (int)KV_F16 &&
		       (int)CFG_DTYPE_Q8_0 == (int)KV_Q8_0,
	       "cfg_dtype = kv_dtype");

#define WK_TEXT_ROUNDS 4    /* streamed jobs: new text every this many rounds */
#define WK_MAX_INDICES 65536

struct wk;

/* A DecodeJob in the merged decode loop (or waiting for it when merging
 * is off). */
typedef struct wk_job {
	struct wk_job *next;
	struct wk *w;
	uint32_t id;         /* in the batch; 0: not added yet */
	uint64_t rid;
	uint32_t attempt;
	int n;               /* its samples */
	int left;            /* ... not finished yet */
	int *idx;            /* (n) */
	int stream;          /* DecodeJob.stream: send SampleText */
	uint32_t rounds;
	uint32_t *sent;      /* (n) bytes of each sample sent so far */
	char *pool;          /* the pool its root is in */
	/* merging off: what to add once the batch is free */
	sc_params p;
	sc_root_ref ref;
	uint32_t *blocks;
	float *logits;
} wk_job;

/* A Prefill in the merged loop. */
typedef struct {
	struct wk *w;
	uint64_t rid;
	uint32_t attempt;
	int64_t t0;
	uint32_t reused;    /* tokens forked from the base root (0: none) */
} wk_prefill;

typedef struct wk {
	const wk_opts *o;
	const cfg *c;
	model *m;
	tok *t;
	sc_engine *e;
	sc_batch *b;        /* the merged decode loop */
	char pool_name[WIRE_POOL_NAME_MAX];
	void *ctx, *sock;
	int64_t hb_at;      /* next heartbeat to send */
	int64_t expiry;     /* coordinator presumed dead after this */
	int64_t backoff_ms; /* next reconnect delay */
	uint32_t *roots;    /* root ids handed to the coordinator */
	int n_roots, cap_roots;
	int rejected;
	uint32_t busy;      /* samples of the jobs in the batch, unfinished */
	wk_job *jobs;       /* in the batch */
	wk_job *waiting, *waiting_tail; /* merging off: jobs not started */
	uint64_t cancels[32]; /* recent Cancel ids: jobs to refuse */
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

static int tracked_root(const wk *w, uint32_t id)
{
	for (int i = 0; i < w->n_roots; i++)
		if (w->roots[i] == id)
			return 1;
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

/* The merged loop finished a prompt: the root is kept and described to
 * the coordinator. */
static int prefill_ready(void *ctx, uint32_t job, uint32_t root)
{
	wk_prefill *x = ctx;
	wk *w = x->w;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__PrefixReady r = QUORUM__PREFIX_READY__INIT;
	sc_root_desc d;
	int rc;

	(void)job;
	if ((rc = track_root(w, root)))
		return qerr_fail(rc, "out of memory tracking a root");
	if ((rc = sc_root_get(w->e, root, &d))) {
		untrack_root(w, root);
		return rc;
	}
	r.request_id = x->rid;
	r.attempt = x->attempt;
	r.root_id = root;
	r.n_tokens = d.n_tokens;
	r.n_blocks = d.n_blocks;
	r.blocks = (uint32_t *)d.blocks;
	r.logits.data = (uint8_t *)d.logits;
	r.logits.len = (size_t)w->m->cfg.vocab * sizeof(float);
	r.pool_name = w->pool_name;
	r.has_prefill_ms = 1;
	r.prefill_ms = (double)(wire_now_ms() - x->t0);
	r.has_reused_tokens = x->reused > 0;
	r.reused_tokens = x->reused;
	m.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
	m.prefix_ready = &r;
	send_msg(w, &m);
	return 0;
}

static void prefill_done(void *ctx, uint32_t job, int rc,
			 const sc_job_stats *st)
{
	wk_prefill *x = ctx;

	(void)job;
	(void)st;
	if (rc)
		send_error(x->w, x->rid, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
	free(x);
}

/* The prompt joins the merged loop: prefilled workers.prefill_tokens per
 * round between decode rounds, so the samples running here keep their
 * pace and heartbeats and commands are served meanwhile. */
static void on_prefill(wk *w, const Quorum__Prefill *p)
{
	sc_job_cbs cb = {NULL, NULL, prefill_ready, prefill_done, NULL};
	wk_prefill *x;
	int32_t *ids = NULL;
	int rc;

	if (p->n_tokens < 1 || p->n_tokens > (size_t)w->m->cfg.ctx_len) {
		send_error(w, p->request_id, p->attempt,
			   QUORUM__STATUS__STATUS_TOO_LONG,
			   "prompt length out of range");
		return;
	}
	if (!(ids = malloc(p->n_tokens * sizeof(*ids))) ||
	    !(x = calloc(1, sizeof(*x)))) {
		free(ids);
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
			free(x);
			return;
		}
		ids[i] = (int32_t)p->tokens[i];
	}
	x->w = w;
	x->rid = p->request_id;
	x->attempt = p->attempt;
	x->t0 = wire_now_ms();
	cb.ctx = x;
	if (p->has_base_root_id) {
		/* a root of ours sharing the prompt's first base_tokens: the
		 * engine checks the tokens and the range */
		if (!p->has_base_tokens || !tracked_root(w, p->base_root_id))
			rc = qerr_fail(QERR_ARG, "prefill base root %u is not "
				       "held", p->base_root_id);
		else
			rc = sc_batch_prefill_from(w->b, p->base_root_id,
						   p->base_tokens, ids,
						   p->n_tokens, &cb, NULL);
		x->reused = p->base_tokens;
		if (rc == QERR_ARG || rc == QERR_RANGE || rc == QERR_MISSING) {
			/* the coordinator's view of our roots is wrong, not
			 * the request: it retries without this base */
			send_error(w, p->request_id, p->attempt,
				   QUORUM__STATUS__STATUS_INTERNAL,
				   qerr_detail());
			free(ids);
			free(x);
			return;
		}
	} else {
		rc = sc_batch_prefill(w->b, ids, p->n_tokens, &cb, NULL);
	}
	free(ids);
	if (rc) {
		send_error(w, p->request_id, p->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		free(x);
	}
}

/* ---- DecodeJob ------------------------------------------------------- */

static int on_sample(void *ctx, const sc_sample *s)
{
	wk_job *j = ctx;
	wk *w = j->w;
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
	x.n_token_logprobs = x.n_token_offsets = (size_t)s->n_token_lp;
	x.token_logprobs = s->token_lp;
	x.token_offsets = s->token_off;
	r.request_id = j->rid;
	r.attempt = j->attempt;
	r.sample = &x;
	for (int i = 0; j->sent && i < j->n; i++)
		if (j->idx[i] == s->index)
			j->sent[i] = UINT32_MAX; /* whole: in the SampleResult */
	m.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
	m.sample = &r;
	send_msg(w, &m);
	j->left--;
	if (w->busy)
		w->busy--;
	return 0;
}

/* Streamed jobs: every WK_TEXT_ROUNDS rounds, the new bytes of the
 * unfinished samples in one SampleText. */
static void on_text(void *ctx, const sc_sample *s, int n)
{
	wk_job *j = ctx;
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleText st = QUORUM__SAMPLE_TEXT__INIT;
	Quorum__TextPart *parts, **pp;

	if (!j->sent || ++j->rounds % WK_TEXT_ROUNDS)
		return;
	parts = calloc((size_t)n, sizeof(*parts));
	pp = calloc((size_t)n, sizeof(*pp));
	for (int i = 0; parts && pp && i < n; i++) {
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
		pp[st.n_parts++] = x;
	}
	if (st.n_parts) {
		st.request_id = j->rid;
		st.attempt = j->attempt;
		st.parts = pp;
		m.body_case = QUORUM__WORKER_MSG__BODY_TEXT;
		m.text = &st;
		send_msg(j->w, &m);
	}
	free(parts);
	free(pp);
}

static void job_free(wk_job *j)
{
	free(j->idx);
	free(j->sent);
	free(j->pool);
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
	send_msg(w, &m);
}

static void start_waiting(wk *w);

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
static void start_waiting(wk *w)
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
static void cancel_jobs(wk *w, int all, uint64_t rid, uint32_t attempt,
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
static int pool_name_ok(const wk *w, const char *name)
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

static void on_decode(wk *w, const Quorum__DecodeJob *j)
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
	else if (!pool_name_ok(w, rr->pool_name))
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
	else if (!(x->logits = logits_copy(w, &j->logits)))
		bad = "bad logits";
	for (size_t i = 0; !bad && i < j->n_indices; i++) {
		if (j->indices[i] >= (uint32_t)p.n)
			bad = "sample index out of range";
		else
			x->idx[i] = (int)j->indices[i];
	}
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
	if (j->has_stream && j->stream)
		x->sent = calloc(j->n_indices, sizeof(*x->sent));
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

/* ---- roots across hosts ---------------------------------------------- */

/* The rows of root x->root_id from x->from_tokens to send in one
 * RootData: all the rest when it fits one message, else — the
 * coordinator asked for chunks (chunk_bytes) — as many whole blocks as
 * fit (quorum.proto ExportRoot). 0 with *to set, or an error sent. */
static int export_range(wk *w, const Quorum__ExportRoot *x,
			const sc_root_desc *d, uint32_t *to)
{
	uint64_t from = x->has_from_tokens ? x->from_tokens : 0;
	uint64_t tb = sc_token_kv_bytes(w->e);
	uint64_t bt = (uint64_t)w->c->kv.block_tokens, n;
	/* our own frame limit (wire.h); the coordinator's chunk_bytes
	 * (wire_root_chunk_bytes) is within its own */
	int64_t fit = w->c->limits.max_message_bytes -
		      (int64_t)w->m->cfg.vocab * 4 - WIRE_ROOT_HEADROOM;
	char why[160];

	if (from >= d->n_tokens) {
		snprintf(why, sizeof(why), "export of root %u from token %llu: "
			 "it has %u", x->root_id, (unsigned long long)from,
			 d->n_tokens);
		send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_BAD_REQUEST, why);
		return -1;
	}
	if (x->has_chunk_bytes && x->chunk_bytes < (uint64_t)INT64_MAX &&
	    (int64_t)x->chunk_bytes < fit)
		fit = (int64_t)x->chunk_bytes;
	if (fit < 0)
		fit = 0;
	if ((d->n_tokens - from) * tb <= (uint64_t)fit) {
		*to = d->n_tokens;
		return 0;
	}
	/* whole blocks, ending on a block boundary */
	n = (from + (uint64_t)fit / tb) / bt * bt;
	if (!x->has_chunk_bytes || n <= from) {
		/* the coordinator would drop the connection on such a frame */
		snprintf(why, sizeof(why), "root too large for one message "
			 "(limits.max_message_bytes): %s of %llu bytes",
			 x->has_chunk_bytes ? "a KV block" : "its K/V rows",
			 (unsigned long long)(x->has_chunk_bytes
					      ? bt * tb
					      : (d->n_tokens - from) * tb));
		send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_NO_CAPACITY, why);
		return -1;
	}
	*to = (uint32_t)n;
	return 0;
}

static void on_export(wk *w, const Quorum__ExportRoot *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__RootData d = QUORUM__ROOT_DATA__INIT;
	uint32_t from = x->has_from_tokens ? x->from_tokens : 0, to;
	sc_root_desc desc;
	void *bytes = NULL;
	size_t len = 0;
	int rc;

	if ((rc = sc_root_get(w->e, x->root_id, &desc))) {
		send_error(w, x->request_id, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		return;
	}
	if (export_range(w, x, &desc, &to))
		return;
	if ((rc = sc_root_export_rows(w->e, x->root_id, from, to, &bytes,
				      &len))) {
		send_error(w, x->request_id, x->attempt, wire_status_of_qerr(rc),
			   qerr_detail());
		return;
	}
	d.request_id = x->request_id;
	d.attempt = x->attempt;
	d.n_tokens = to;
	d.kv.data = bytes;
	d.kv.len = len;
	d.has_from_tokens = x->has_from_tokens;
	d.from_tokens = x->from_tokens;
	if (to < desc.n_tokens) {
		d.has_partial = d.partial = 1; /* no logits yet */
	} else {
		d.logits.data = (uint8_t *)desc.logits;
		d.logits.len = (size_t)w->m->cfg.vocab * sizeof(float);
	}
	m.body_case = QUORUM__WORKER_MSG__BODY_ROOT_DATA;
	m.root_data = &d;
	send_msg(w, &m);
	free(bytes);
}

/* A root (or, partial, a chunk of one: the base of the next chunk, with
 * no logits of its own — zeros) from another host's rows. */
static void on_import(wk *w, const Quorum__RootData *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__ImportedRoot r = QUORUM__IMPORTED_ROOT__INIT;
	int partial = x->has_partial && x->partial;
	float *logits = NULL;
	sc_root_desc d;
	uint32_t root = 0; /* set by the import when rc is 0 */
	int rc;

	if (partial ? x->logits.len != 0 ||
			      !(logits = calloc((size_t)w->m->cfg.vocab,
						sizeof(float)))
		    : !(logits = logits_copy(w, &x->logits))) {
		send_error(w, x->request_id, x->attempt,
			   QUORUM__STATUS__STATUS_BAD_REQUEST,
			   partial ? "bad partial root chunk (logits)"
				   : "bad logits");
		return;
	}
	if (x->has_from_tokens && x->from_tokens &&
	    (!x->has_base_root_id || !tracked_root(w, x->base_root_id)))
		rc = qerr_fail(QERR_MISSING, "import base root %u is not held",
			       x->base_root_id);
	else
		rc = sc_root_import_from(w->e, x->base_root_id,
					 x->has_from_tokens ? x->from_tokens
							    : 0,
					 x->n_tokens, x->kv.data, x->kv.len,
					 logits, &root);
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
		cancel_jobs(w, 0, m->cancel->request_id,
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
		/* its owner is gone; never our own pool. Jobs still reading
		 * it leave the loop first (the coordinator has given their
		 * samples to others) */
		if (m->forget_pool->pool_name &&
		    strcmp(m->forget_pool->pool_name, w->pool_name)) {
			cancel_jobs(w, 0, 0, 0, m->forget_pool->pool_name);
			if (!sc_unlink_pool(w->e, m->forget_pool->pool_name))
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

/* Between the forwards of a round (a merged round of many forks and a
 * prefill chunk can be long): the heartbeats that fall due go out, so a
 * busy worker never looks dead. Only sends. */
static void on_forward(void *ctx)
{
	wk *w = ctx;

	if (wire_now_ms() >= w->hb_at)
		send_heartbeat(w);
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

		if (!w->b && new_batch(w))
			return qerr_fail(QERR_NOMEM, "worker: %s", qerr_detail());
		start_waiting(w);
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
				if (rc)
					continue;
				handle_raw(w, in.data, in.len);
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
			/* a coordinator silent past its liveness has forgotten
			 * our jobs: stop them instead of decoding for nobody */
			cancel_jobs(w, 1, 0, 0, NULL);
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
	    (rc = tok_load(w.m->gguf, &w.t)) ||
	    (rc = sc_engine_new(w.m, w.t, &ep, &w.e)))
		goto out;
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
		cancel_jobs(&w, 1, 0, 0, NULL);
	sc_batch_free(&w.b);
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
