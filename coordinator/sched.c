#include "sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"
#include "proto/quorum.pb-c.h"
#include "qerr.h"
#include "vote.h"

#define MAX_WORKERS 1024
#define ID_MAX 64
#define HOST_MAX 128
#define POOL_MAX 256
#define MAX_FAILURES 4    /* failed jobs/prefills before a request gives up */
#define MAX_SAMPLE_LOSSES 3 /* workers lost while decoding one sample */
#define QUESTION_MAX (1u << 20)

enum { J_WAIT_ROOT = 0, J_SENT };
enum { E_PREFILL = 0, E_READY, E_DEAD };
enum { R_EXPORT = 0, R_IMPORT, R_READY, R_FAILED };
enum { Q_QUEUED = 0, Q_ROOT, Q_DECODE };
enum { S_PENDING = 0, S_ASSIGNED, S_DONE };

typedef struct {
	int used, dead;
	unsigned char ident[WIRE_ID_MAX];
	size_t ident_len;
	char id[ID_MAX], host[HOST_MAX], pool[POOL_MAX];
	uint32_t pid, slots, threads;
	uint32_t busy;          /* samples assigned, unfinished */
	uint32_t ops;           /* prefill/export/import outstanding */
	uint32_t blocks_used, blocks_free, roots;
	int64_t last_seen;
} worker;

/* A copy of a root on another host label. */
typedef struct {
	char host[HOST_MAX];
	int state;              /* R_* */
	int worker;             /* importer (R_IMPORT, R_READY), else -1 */
	uint32_t op;
	uint64_t for_rid;       /* request whose stats get the transfer */
	uint32_t root_id, n_blocks;
	uint32_t *blocks;
} replica;

typedef struct entry {
	struct entry *next;
	uint64_t id;
	uint64_t hash;
	int32_t *tokens;
	size_t n_tokens;
	int state;              /* E_* */
	int worker;             /* holder */
	uint32_t op;
	uint32_t root_id, n_blocks;
	uint32_t *blocks;
	uint8_t *logits;        /* (vocab) f32 as received */
	size_t logits_len;
	replica *reps;
	int n_reps;
	int refs;               /* requests using it */
	int64_t last_used;
	double prefill_ms;
} entry;

typedef struct job {
	struct job *next;
	uint32_t attempt;
	int worker;
	int state;              /* J_* */
	uint32_t *idx;
	int n, n_done;
	/* J_SENT: the entry decoded from, held (a ref) until the job ends,
	 * so a requeue never releases blocks a worker still reads */
	struct entry *root;
} job;

typedef struct req {
	struct req *next;
	uint64_t rid;           /* ours: names jobs on the wire */
	uint64_t client_rid;
	unsigned char cid[WIRE_ID_MAX];
	size_t cid_len;
	int state;              /* Q_* */
	int32_t *tokens;
	size_t n_tokens;
	uint64_t hash;
	uint32_t n;
	uint64_t seed;
	float temperature, top_p;
	int32_t top_k;
	uint32_t max_new;
	int ignore_eos;
	int stream;             /* Ask.stream: forward samples as they come */
	uint32_t *fwd;          /* (n) streamed: text bytes forwarded */
	entry *root;
	uint8_t *st;            /* (n) S_* */
	uint8_t *lost;          /* (n) workers lost while decoding index i */
	Quorum__WorkerMsg **res;/* (n) the SampleResult of each index */
	uint32_t n_done;
	job *jobs;
	uint32_t next_attempt;
	int failures;
	int64_t t_accept, t_start, deadline;
	/* reply stats */
	double prefill_ms, decode_ms;
	uint64_t gen_tokens;
	uint32_t messages, blocks_mapped, blocks_copied, blocks_transferred;
	uint64_t bytes_transferred;
	int cache_hit, prefills;
	char prefill_worker[ID_MAX];
} req;

struct sched {
	sched_opts o;
	const cfg *c;
	uint32_t vocab;
	worker *w;              /* (MAX_WORKERS) */
	int n_workers;
	uint64_t fingerprint;
	int have_fingerprint;
	req *reqs, *reqs_tail;
	int n_reqs;
	entry *entries;
	uint64_t next_id;
	int64_t hb_at;
	/* status counters */
	uint64_t served, failed, hits, misses, gen_tokens;
	uint64_t unroutable;    /* client replies that found no client */
	double decode_s;
	int64_t t_started;      /* sched_new */
	int64_t no_worker_since;/* 0: some worker is alive */
};

static void pump(sched *s);

/* ---- helpers --------------------------------------------------------- */

static uint64_t hash_tokens(const int32_t *t, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const unsigned char *b = (const unsigned char *)t;

	for (size_t i = 0; i < n * sizeof(*t); i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint32_t blocks_for(const sched *s, uint64_t n_tokens)
{
	uint64_t b = (uint64_t)s->c->kv.block_tokens;

	return (uint32_t)((n_tokens + b - 1) / b);
}

static void send_client(sched *s, const unsigned char *cid, size_t cid_len,
			Quorum__ClientReply *r)
{
	r->version = WIRE_VERSION;
	if (wire_send(s->o.clients, cid, cid_len, &r->base)) {
		/* ZMQ_ROUTER_MANDATORY: the client is gone; counted in status */
		s->unroutable++;
		fprintf(stderr, "coordinator: reply to a client dropped: %s\n",
			qerr_detail());
	}
}

static void reply_error(sched *s, const unsigned char *cid, size_t cid_len,
			uint64_t rid, int status, const char *err)
{
	Quorum__ClientReply r = QUORUM__CLIENT_REPLY__INIT;

	r.request_id = rid;
	r.status = status;
	r.error = (char *)err;
	send_client(s, cid, cid_len, &r);
}

static int send_worker(sched *s, int wi, Quorum__CoordMsg *m)
{
	worker *w = &s->w[wi];

	if (!w->used || w->dead)
		return -1;
	m->version = WIRE_VERSION;
	if (wire_send(s->o.workers, w->ident, w->ident_len, &m->base)) {
		fprintf(stderr, "coordinator: worker %s unreachable: %s\n",
			w->id, qerr_detail());
		w->dead = 1;
		return -1;
	}
	return 0;
}

static void send_release(sched *s, int wi, uint32_t root_id)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__Release r = QUORUM__RELEASE__INIT;

	if (wi < 0)
		return;
	r.root_id = root_id;
	m.body_case = QUORUM__COORD_MSG__BODY_RELEASE;
	m.release = &r;
	send_worker(s, wi, &m);
}

static int find_worker(const sched *s, const wire_msg *m)
{
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && s->w[i].ident_len == m->id_len &&
		    !memcmp(s->w[i].ident, m->id, m->id_len))
			return i;
	return -1;
}

static int n_alive(const sched *s)
{
	int n = 0;

	for (int i = 0; i < s->n_workers; i++)
		n += s->w[i].used && !s->w[i].dead;
	return n;
}

int sched_n_workers(const sched *s)
{
	return n_alive(s);
}

/* ---- prefix entries -------------------------------------------------- */

static void entry_free(entry *e)
{
	for (int i = 0; i < e->n_reps; i++)
		free(e->reps[i].blocks);
	free(e->reps);
	free(e->tokens);
	free(e->blocks);
	free(e->logits);
	free(e);
}

/* Unlinks e, releasing its roots on the workers that still hold them. */
static void entry_drop(sched *s, entry *e)
{
	entry **pp = &s->entries;

	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp)
		*pp = e->next;
	if (e->state == E_READY)
		send_release(s, e->worker, e->root_id);
	for (int i = 0; i < e->n_reps; i++)
		if (e->reps[i].state == R_READY)
			send_release(s, e->reps[i].worker, e->reps[i].root_id);
	entry_free(e);
}

static void evict(sched *s)
{
	int cap = s->c->prefix_cache.entries;

	for (;;) {
		entry *old = NULL;
		int n = 0;

		for (entry *e = s->entries; e; e = e->next) {
			if (e->state != E_READY)
				continue;
			n++;
			if (!e->refs && (!old || e->last_used < old->last_used))
				old = e;
		}
		if (n <= cap || !old)
			return;
		entry_drop(s, old);
	}
}

static void entry_unref(sched *s, entry *e)
{
	if (--e->refs > 0)
		return;
	e->last_used = wire_now_ms();
	/* a prefill still running is dropped: its PrefixReady will find no
	 * entry and be Released */
	if (e->state != E_READY || s->c->prefix_cache.entries == 0)
		entry_drop(s, e);
	else
		evict(s);
}

static entry *entry_by_id(const sched *s, uint64_t id)
{
	for (entry *e = s->entries; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

/* ---- requests -------------------------------------------------------- */

static void job_free(job *j)
{
	free(j->idx);
	free(j);
}

/* Gives the unfinished indices of j back to the request and frees it. */
static void job_drop(sched *s, req *r, job *j)
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
		entry_unref(s, j->root);
	job_free(j);
}

static void req_free(sched *s, req *r)
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
	while (r->jobs) {
		job *j = r->jobs;

		if (j->state == J_SENT && j->n_done < j->n) {
			Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
			Quorum__Cancel c = QUORUM__CANCEL__INIT;

			c.request_id = r->rid;
			m.body_case = QUORUM__COORD_MSG__BODY_CANCEL;
			m.cancel = &c;
			send_worker(s, j->worker, &m);
		}
		job_drop(s, r, j);
	}
	if (r->root)
		entry_unref(s, r->root);
	for (uint32_t i = 0; r->res && i < r->n; i++)
		if (r->res[i])
			quorum__worker_msg__free_unpacked(r->res[i], NULL);
	free(r->res);
	free(r->fwd);
	free(r->st);
	free(r->lost);
	free(r->tokens);
	free(r);
}

static void req_fail(sched *s, req *r, int status, const char *err)
{
	reply_error(s, r->cid, r->cid_len, r->client_rid, status, err);
	s->failed++;
	req_free(s, r);
}

static req *req_by_rid(const sched *s, uint64_t rid)
{
	for (req *r = s->reqs; r; r = r->next)
		if (r->rid == rid)
			return r;
	return NULL;
}

static void finish(sched *s, req *r)
{
	Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
	Quorum__Answer a = QUORUM__ANSWER__INIT;
	Quorum__Timings tm = QUORUM__TIMINGS__INIT;
	Quorum__PrefixStats px = QUORUM__PREFIX_STATS__INIT;
	Quorum__Sample **smp = calloc(r->n, sizeof(*smp));
	const char **ans = calloc(r->n, sizeof(*ans));
	char **abuf = calloc(r->n, sizeof(*abuf));
	Quorum__Vote *votes = NULL, **vp = NULL;
	vote_result v = {0};
	int64_t now = wire_now_ms();

	if (!smp || !ans || !abuf)
		goto nomem;
	for (uint32_t i = 0; i < r->n; i++) {
		Quorum__Sample *x = r->res[i]->sample->sample;

		smp[i] = x;
		if (x->has_answer && x->answer.len) {
			if (!(abuf[i] = malloc(x->answer.len + 1)))
				goto nomem;
			memcpy(abuf[i], x->answer.data, x->answer.len);
			abuf[i][x->answer.len] = '\0';
			ans[i] = abuf[i];
		}
	}
	if (vote_tally(ans, r->n, &v))
		goto nomem;
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
		vp[i] = &votes[i];
	}
	if (v.winner != VOTE_NONE) {
		a.has_answer = 1;
		a.answer = votes[0].answer;
	}
	a.n_votes = v.n_entries;
	a.votes = vp;
	a.n_samples = r->n;
	a.samples = smp;
	a.n = r->n;
	tm.has_queue_ms = tm.has_prefill_ms = tm.has_decode_ms = 1;
	tm.has_total_ms = tm.has_generated_tokens = tm.has_messages = 1;
	tm.queue_ms = (double)(r->t_start - r->t_accept);
	tm.prefill_ms = r->prefill_ms;
	tm.decode_ms = r->decode_ms;
	tm.total_ms = (double)(now - r->t_accept);
	tm.generated_tokens = r->gen_tokens;
	tm.messages = r->messages;
	a.timings = &tm;
	px.prefill_worker = r->prefill_worker;
	px.has_cache_hit = px.has_prompt_tokens = px.has_prefix_blocks = 1;
	px.has_blocks_mapped = px.has_blocks_copied = 1;
	px.has_blocks_transferred = px.has_bytes_transferred = 1;
	px.has_prefills = 1;
	px.cache_hit = r->cache_hit;
	px.prompt_tokens = (uint32_t)r->n_tokens;
	px.prefix_blocks = blocks_for(s, r->n_tokens);
	px.blocks_mapped = r->blocks_mapped;
	px.blocks_copied = r->blocks_copied;
	px.blocks_transferred = r->blocks_transferred;
	px.bytes_transferred = r->bytes_transferred;
	px.prefills = (uint32_t)r->prefills;
	a.prefix = &px;
	rep.request_id = r->client_rid;
	rep.status = QUORUM__STATUS__STATUS_OK;
	rep.body_case = QUORUM__CLIENT_REPLY__BODY_ANSWER;
	rep.answer = &a;
	send_client(s, r->cid, r->cid_len, &rep);
	s->served++;
	s->gen_tokens += r->gen_tokens;
	s->decode_s += r->decode_ms / 1e3;
	goto out;
nomem:
	reply_error(s, r->cid, r->cid_len, r->client_rid,
		    QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
	s->failed++;
out:
	vote_result_fini(&v);
	for (uint32_t i = 0; abuf && i < r->n; i++)
		free(abuf[i]);
	free(abuf);
	free(ans);
	free(smp);
	free(votes);
	free(vp);
	req_free(s, r);
}

/* ---- placement ------------------------------------------------------- */

static int least_loaded(const sched *s)
{
	int best = -1;
	uint64_t bl = 0;

	for (int i = 0; i < s->n_workers; i++) {
		const worker *w = &s->w[i];
		uint64_t load;

		if (!w->used || w->dead)
			continue;
		load = (uint64_t)w->busy + 8ull * w->ops;
		if (best < 0 || load < bl) {
			best = i;
			bl = load;
		}
	}
	return best;
}

static void send_prefill(sched *s, entry *e)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__Prefill p = QUORUM__PREFILL__INIT;

	p.request_id = e->id;
	p.attempt = e->op;
	p.n_tokens = e->n_tokens;
	p.tokens = (uint32_t *)e->tokens;
	m.body_case = QUORUM__COORD_MSG__BODY_PREFILL;
	m.prefill = &p;
	s->w[e->worker].ops++;
	send_worker(s, e->worker, &m);
}

/* Finds or starts the root of r; r moves to Q_ROOT or Q_DECODE. */
static void start(sched *s, req *r)
{
	entry *e = NULL;
	int wi;

	if (r->t_start == 0)
		r->t_start = wire_now_ms();
	if (s->c->prefix_cache.entries > 0)
		for (e = s->entries; e; e = e->next)
			if (e->state != E_DEAD && e->hash == r->hash &&
			    e->n_tokens == r->n_tokens &&
			    !memcmp(e->tokens, r->tokens,
				    r->n_tokens * sizeof(*r->tokens)))
				break;
	if (e) {
		s->hits++;
		r->cache_hit = 1;
		e->refs++;
		r->root = e;
		r->state = e->state == E_READY ? Q_DECODE : Q_ROOT;
		if (e->state == E_READY)
			snprintf(r->prefill_worker, sizeof(r->prefill_worker),
				 "%s", s->w[e->worker].id);
		return;
	}
	if ((wi = least_loaded(s)) < 0)
		return; /* stays queued until a worker registers */
	if (!(e = calloc(1, sizeof(*e))) ||
	    !(e->tokens = malloc(r->n_tokens * sizeof(*e->tokens)))) {
		free(e);
		req_fail(s, r, QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	s->misses++;
	memcpy(e->tokens, r->tokens, r->n_tokens * sizeof(*e->tokens));
	e->n_tokens = r->n_tokens;
	e->hash = r->hash;
	e->id = ++s->next_id;
	e->op = (uint32_t)++s->next_id;
	e->state = E_PREFILL;
	e->worker = wi;
	e->refs = 1;
	e->next = s->entries;
	s->entries = e;
	r->root = e;
	r->state = Q_ROOT;
	r->prefills++;
	r->messages++;
	send_prefill(s, e);
}

/* The root a worker on host decodes from: the holder's (same host label)
 * or a ready replica; NULL when a transfer is needed or under way. */
static int root_for(const sched *s, const entry *e, const worker *w,
		    Quorum__RootRef *ref)
{
	const worker *h = &s->w[e->worker];

	if (!strcmp(h->host, w->host)) {
		ref->worker_id = (char *)h->id;
		ref->host = (char *)h->host;
		ref->pool_name = (char *)h->pool;
		ref->root_id = e->root_id;
		ref->n_tokens = (uint32_t)e->n_tokens;
		ref->n_blocks = e->n_blocks;
		ref->blocks = e->blocks;
		return 1;
	}
	for (int i = 0; i < e->n_reps; i++) {
		const replica *rp = &e->reps[i];

		if (strcmp(rp->host, w->host) || rp->state != R_READY)
			continue;
		ref->worker_id = (char *)s->w[rp->worker].id;
		ref->host = (char *)rp->host;
		ref->pool_name = (char *)s->w[rp->worker].pool;
		ref->root_id = rp->root_id;
		ref->n_tokens = (uint32_t)e->n_tokens;
		ref->n_blocks = rp->n_blocks;
		ref->blocks = rp->blocks;
		return 1;
	}
	return 0;
}

/* Starts a transfer of e to host unless one is under way. */
static void want_replica(sched *s, req *r, entry *e, const char *host)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__ExportRoot x = QUORUM__EXPORT_ROOT__INIT;
	replica *nr, *rp;

	for (int i = 0; i < e->n_reps; i++)
		if (!strcmp(e->reps[i].host, host))
			return;
	if (!(nr = realloc(e->reps, (size_t)(e->n_reps + 1) * sizeof(*nr))))
		return;
	e->reps = nr;
	rp = &e->reps[e->n_reps++];
	memset(rp, 0, sizeof(*rp));
	snprintf(rp->host, sizeof(rp->host), "%s", host);
	rp->state = R_EXPORT;
	rp->worker = -1;
	rp->op = (uint32_t)++s->next_id;
	rp->for_rid = r->rid;
	x.request_id = e->id;
	x.attempt = rp->op;
	x.root_id = e->root_id;
	m.body_case = QUORUM__COORD_MSG__BODY_EXPORT_ROOT;
	m.export_root = &x;
	s->w[e->worker].ops++;
	r->messages++;
	send_worker(s, e->worker, &m);
}

static void try_send(sched *s, req *r, job *j)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__DecodeJob d = QUORUM__DECODE_JOB__INIT;
	Quorum__RootRef ref = QUORUM__ROOT_REF__INIT;
	Quorum__SamplingParams sp = QUORUM__SAMPLING_PARAMS__INIT;
	worker *w = &s->w[j->worker];

	if (!root_for(s, r->root, w, &ref)) {
		want_replica(s, r, r->root, w->host);
		return;
	}
	sp.has_n = sp.has_seed = sp.has_temperature = sp.has_top_k = 1;
	sp.has_top_p = sp.has_max_new_tokens = sp.has_ignore_eos = 1;
	sp.n = r->n;
	sp.seed = r->seed;
	sp.temperature = r->temperature;
	sp.top_k = r->top_k;
	sp.top_p = r->top_p;
	sp.max_new_tokens = r->max_new;
	sp.ignore_eos = r->ignore_eos;
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
	j->root = r->root;
	r->root->refs++;
	r->messages++;
	send_worker(s, j->worker, &m);
}

/* A copy of e cannot reach host (too large, import failed): that host's
 * workers do not decode from e. */
static int transfer_failed(const entry *e, const char *host)
{
	for (int i = 0; i < e->n_reps; i++)
		if (e->reps[i].state == R_FAILED && !strcmp(e->reps[i].host, host))
			return 1;
	return 0;
}

/* Splits the pending indices of r over the workers' free slots
 * (contiguous ranges, as even as the slots allow) and sends the jobs
 * whose root is reachable. */
static void dispatch(sched *s, req *r)
{
	int elig[MAX_WORKERS], ne = 0;
	uint32_t pending = 0, next = 0;

	for (uint32_t i = 0; i < r->n; i++)
		pending += r->st[i] == S_PENDING;
	for (int i = 0; pending && i < s->n_workers; i++)
		if (s->w[i].used && !s->w[i].dead &&
		    s->w[i].busy < s->w[i].slots &&
		    !transfer_failed(r->root, s->w[i].host))
			elig[ne++] = i;
	if (ne) {
		uint32_t share = (pending + (uint32_t)ne - 1) / (uint32_t)ne;

		for (int k = 0; k < ne && pending; k++) {
			worker *w = &s->w[elig[k]];
			uint32_t take = share, f = w->slots - w->busy;
			job *j;

			if (take > f)
				take = f;
			if (take > pending)
				take = pending;
			if (!(j = calloc(1, sizeof(*j))) ||
			    !(j->idx = malloc(take * sizeof(*j->idx)))) {
				free(j);
				break;
			}
			j->attempt = ++r->next_attempt;
			j->worker = elig[k];
			j->state = J_WAIT_ROOT;
			while (j->n < (int)take) {
				while (r->st[next] != S_PENDING)
					next++;
				r->st[next] = S_ASSIGNED;
				j->idx[j->n++] = next;
			}
			w->busy += take;
			pending -= take;
			j->next = r->jobs;
			r->jobs = j;
		}
	}
	for (job *j = r->jobs; j; j = j->next)
		if (j->state == J_WAIT_ROOT)
			try_send(s, r, j);
}

/* The root of r is gone (holder lost, prefill failed): prefill again,
 * keeping the samples already in and the jobs already sent. */
static void requeue(sched *s, req *r)
{
	for (job *j = r->jobs, *nx; j; j = nx) {
		nx = j->next;
		if (j->state == J_WAIT_ROOT)
			job_drop(s, r, j);
	}
	entry_unref(s, r->root);
	r->root = NULL;
	r->state = Q_QUEUED;
	if (++r->failures > MAX_FAILURES)
		req_fail(s, r, QUORUM__STATUS__STATUS_WORKER_LOST,
			 "root lost too often: retry budget exhausted");
}

static void pump(sched *s)
{
	int active = 0, limit = 2 * n_alive(s);

	if (limit < 2)
		limit = 2;
	for (req *r = s->reqs, *nx; r; r = nx) {
		nx = r->next;
		if (r->root && r->root->state == E_DEAD)
			requeue(s, r);
	}
	for (req *r = s->reqs; r; r = r->next)
		active += r->state != Q_QUEUED;
	for (req *r = s->reqs, *nx; r; r = nx) {
		nx = r->next;
		if (r->state == Q_QUEUED && active < limit && n_alive(s)) {
			uint64_t rid = r->rid;

			start(s, r);
			if ((r = req_by_rid(s, rid)) && r->state != Q_QUEUED)
				active++;
		}
	}
	for (req *r = s->reqs, *nx; r; r = nx) {
		nx = r->next;
		if (r->state != Q_DECODE)
			continue;
		if (r->n_done == r->n) {
			/* finished once every job reported its stats */
			if (!r->jobs)
				finish(s, r);
			continue;
		}
		dispatch(s, r);
	}
}

/* ---- clients --------------------------------------------------------- */

static void reply_status(sched *s, const wire_msg *m, uint64_t rid)
{
	Quorum__ClientReply r = QUORUM__CLIENT_REPLY__INIT;
	Quorum__ClusterStatus cs = QUORUM__CLUSTER_STATUS__INIT;
	Quorum__WorkerStatus *ws = calloc((size_t)s->n_workers + 1, sizeof(*ws));
	Quorum__WorkerStatus **wp = calloc((size_t)s->n_workers + 1, sizeof(*wp));
	int64_t now = wire_now_ms();
	uint32_t queued = 0, inflight = 0;

	if (!ws || !wp) {
		reply_error(s, m->id, m->id_len, rid,
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
	r.request_id = rid;
	r.status = QUORUM__STATUS__STATUS_OK;
	r.body_case = QUORUM__CLIENT_REPLY__BODY_CLUSTER;
	r.cluster = &cs;
	send_client(s, m->id, m->id_len, &r);
out:
	free(ws);
	free(wp);
}

/* No worker alive, and none can be expected soon: the grace (one
 * heartbeat expiry plus the first reconnect backoff, the time a worker
 * needs to re-register after a coordinator restart) has passed since
 * the start or since the last worker went. */
static int no_capacity(const sched *s)
{
	int64_t grace = (int64_t)s->c->heartbeat.interval_ms *
				s->c->heartbeat.liveness +
			s->c->heartbeat.reconnect_min_ms;
	int64_t since = s->no_worker_since > s->t_started ? s->no_worker_since
							  : s->t_started;

	return wire_now_ms() - since > grace;
}

/* Checks an Ask; on success fills r's params and tokens. Returns a
 * Status and sets *err. */
static int validate(sched *s, const Quorum__Ask *a, req *r, const char **err)
{
	const cfg_sampling *d = &s->c->sampling;
	const Quorum__SamplingParams *p = a->params;
	char *q = NULL, *sys = NULL;
	int rc;

	r->n = p && p->has_n ? p->n : (uint32_t)d->n;
	r->seed = p && p->has_seed ? p->seed : d->seed;
	r->temperature = p && p->has_temperature ? p->temperature
						 : d->temperature;
	r->top_k = p && p->has_top_k ? p->top_k : d->top_k;
	r->top_p = p && p->has_top_p ? p->top_p : d->top_p;
	r->max_new = p && p->has_max_new_tokens ? p->max_new_tokens
						: (uint32_t)d->max_new_tokens;
	r->ignore_eos = p && p->has_ignore_eos && p->ignore_eos;
	*err = NULL;
	if (!a->question.len)
		*err = "the question is empty";
	else if (a->question.len > QUESTION_MAX)
		*err = "the question is too long";
	else if (memchr(a->question.data, 0, a->question.len) ||
		 (a->has_system && memchr(a->system.data, 0, a->system.len)))
		*err = "the question or system prompt holds a NUL byte";
	else if (r->n < 1 || r->n > (uint32_t)s->c->limits.max_n)
		*err = "n out of range (1 .. limits.max_n)";
	else if (!isfinite(r->temperature) || r->temperature < 0)
		*err = "temperature must be finite and >= 0";
	else if (!(r->top_p > 0 && r->top_p <= 1))
		*err = "top_p must be in (0, 1]";
	else if (r->top_k < 0)
		*err = "top_k must be >= 0";
	else if (r->max_new < 1 || r->max_new > (uint32_t)s->o.ctx_len)
		*err = "max_new_tokens out of range";
	if (*err)
		return QUORUM__STATUS__STATUS_BAD_REQUEST;
	if (!(q = strndup((const char *)a->question.data, a->question.len)) ||
	    (a->has_system &&
	     !(sys = strndup((const char *)a->system.data, a->system.len)))) {
		free(q);
		*err = "out of memory";
		return QUORUM__STATUS__STATUS_INTERNAL;
	}
	rc = prompt_build_style(s->o.t, s->o.prompt_family,
				a->has_think ? (a->think ? PROMPT_THINK_ON
							 : PROMPT_THINK_OFF)
					     : s->c->prompt.think,
				a->has_system ? sys : s->c->prompt.system, q,
				&r->tokens, &r->n_tokens);
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
	if ((uint64_t)r->n_tokens + r->max_new > (uint64_t)s->o.ctx_len) {
		*err = "prompt + max_new_tokens exceed the model's context";
		return QUORUM__STATUS__STATUS_TOO_LONG;
	}
	r->hash = hash_tokens(r->tokens, r->n_tokens);
	return QUORUM__STATUS__STATUS_OK;
}

static void on_ask(sched *s, const wire_msg *m, const Quorum__ClientRequest *cr)
{
	req *r = calloc(1, sizeof(*r));
	const char *err;
	int st;
	int64_t dl;

	if (!r) {
		reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	for (req *x = s->reqs; x; x = x->next)
		if (x->client_rid == cr->request_id && x->cid_len == m->id_len &&
		    !memcmp(x->cid, m->id, m->id_len)) {
			/* a client's resend of a request in flight: the same
			 * request, answered once */
			free(r);
			return;
		}
	if ((st = validate(s, cr->ask, r, &err)) != QUORUM__STATUS__STATUS_OK) {
		reply_error(s, m->id, m->id_len, cr->request_id, st, err);
		free(r->tokens);
		free(r);
		return;
	}
	if (!n_alive(s) && no_capacity(s)) {
		reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_NO_CAPACITY,
			    "no worker is registered");
		free(r->tokens);
		free(r);
		return;
	}
	if (s->n_reqs >= s->c->limits.queue_depth) {
		reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_BUSY, "queue full");
		free(r->tokens);
		free(r);
		return;
	}
	if (!(r->st = calloc(r->n, 1)) || !(r->lost = calloc(r->n, 1)) ||
	    !(r->res = calloc(r->n, sizeof(*r->res))) ||
	    (cr->ask->has_stream && cr->ask->stream &&
	     !(r->fwd = calloc(r->n, sizeof(*r->fwd))))) {
		reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		free(r->st);
		free(r->lost);
		free(r->res);
		free(r->fwd);
		free(r->tokens);
		free(r);
		return;
	}
	r->rid = ++s->next_id;
	r->stream = cr->ask->has_stream && cr->ask->stream;
	r->client_rid = cr->request_id;
	memcpy(r->cid, m->id, m->id_len);
	r->cid_len = m->id_len;
	r->t_accept = wire_now_ms();
	dl = cr->ask->has_deadline_ms && cr->ask->deadline_ms
		     ? (int64_t)cr->ask->deadline_ms
		     : (int64_t)s->c->limits.request_timeout_ms;
	r->deadline = r->t_accept + dl;
	if (s->reqs_tail)
		s->reqs_tail->next = r;
	else
		s->reqs = r;
	s->reqs_tail = r;
	s->n_reqs++;
	if (r->stream) {
		Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
		Quorum__StreamStart ss = QUORUM__STREAM_START__INIT;

		ss.has_prompt_tokens = 1;
		ss.prompt_tokens = (uint32_t)r->n_tokens;
		rep.request_id = r->client_rid;
		rep.status = QUORUM__STATUS__STATUS_OK;
		rep.body_case = QUORUM__CLIENT_REPLY__BODY_STARTED;
		rep.started = &ss;
		send_client(s, r->cid, r->cid_len, &rep);
	}
	pump(s);
}

/* The client no longer wants its request: its jobs are cancelled (a
 * request that is not (or no longer) here is ignored). */
static void on_cancel(sched *s, const wire_msg *m, uint64_t client_rid)
{
	for (req *r = s->reqs; r; r = r->next)
		if (r->client_rid == client_rid && r->cid_len == m->id_len &&
		    !memcmp(r->cid, m->id, m->id_len)) {
			req_fail(s, r, QUORUM__STATUS__STATUS_CANCELLED,
				 "cancelled by the client");
			return;
		}
}

void sched_on_client(sched *s, int rc, const wire_msg *m)
{
	Quorum__ClientRequest *cr;

	if (!m->id_len)
		return;
	if (rc) {
		reply_error(s, m->id, m->id_len, 0,
			    QUORUM__STATUS__STATUS_BAD_REQUEST,
			    "one protobuf frame per message expected");
		return;
	}
	if (!(cr = quorum__client_request__unpack(NULL, m->len, m->data))) {
		reply_error(s, m->id, m->id_len, 0,
			    QUORUM__STATUS__STATUS_BAD_REQUEST,
			    "undecodable ClientRequest");
		return;
	}
	if (cr->version != WIRE_VERSION)
		reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_VERSION_MISMATCH,
			    "protocol version 1 expected");
	else if (cr->body_case == QUORUM__CLIENT_REQUEST__BODY_STATUS)
		reply_status(s, m, cr->request_id);
	else if (cr->body_case == QUORUM__CLIENT_REQUEST__BODY_ASK)
		on_ask(s, m, cr);
	else if (cr->body_case == QUORUM__CLIENT_REQUEST__BODY_CANCEL)
		on_cancel(s, m, cr->request_id);
	else
		reply_error(s, m->id, m->id_len, cr->request_id,
			    QUORUM__STATUS__STATUS_BAD_REQUEST,
			    "request without ask or status");
	quorum__client_request__free_unpacked(cr, NULL);
}

/* ---- workers --------------------------------------------------------- */

static void reject(sched *s, const wire_msg *m, int status, const char *why)
{
	Quorum__CoordMsg c = QUORUM__COORD_MSG__INIT;
	Quorum__WorkerError e = QUORUM__WORKER_ERROR__INIT;

	e.status = status;
	e.error = (char *)why;
	c.version = WIRE_VERSION;
	c.body_case = QUORUM__COORD_MSG__BODY_REJECT;
	c.reject = &e;
	wire_send(s->o.workers, m->id, m->id_len, &c.base);
}

/* Forgets worker wi: its jobs' indices go back to pending, its roots and
 * replicas are gone. */
static void worker_remove(sched *s, int wi, const char *why)
{
	worker *w = &s->w[wi];

	fprintf(stderr, "coordinator: worker %s (host %s) removed: %s\n",
		w->id, w->host, why);
	for (req *r = s->reqs, *rn; r; r = rn) {
		int spent = 0;

		rn = r->next;
		for (job *j = r->jobs, *nx; j; j = nx) {
			nx = j->next;
			if (j->worker != wi)
				continue;
			/* the retry budget is per sample: one that was being
			 * decoded by MAX_SAMPLE_LOSSES lost workers may be
			 * what kills them */
			for (int k = 0; j->state == J_SENT && k < j->n; k++)
				if (r->st[j->idx[k]] == S_ASSIGNED &&
				    ++r->lost[j->idx[k]] >= MAX_SAMPLE_LOSSES)
					spent = 1;
			job_drop(s, r, j);
		}
		if (spent)
			req_fail(s, r, QUORUM__STATUS__STATUS_WORKER_LOST,
				 "a sample's workers were lost "
				 "(retry budget exhausted)");
	}
	/* same-host peers may map its pool: they drop the mapping */
	for (int i = 0; w->pool[0] && i < s->n_workers; i++)
		if (i != wi && s->w[i].used && !s->w[i].dead &&
		    !strcmp(s->w[i].host, w->host)) {
			Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
			Quorum__ForgetPool f = QUORUM__FORGET_POOL__INIT;

			f.pool_name = w->pool;
			m.body_case = QUORUM__COORD_MSG__BODY_FORGET_POOL;
			m.forget_pool = &f;
			send_worker(s, i, &m);
		}
	for (entry *e = s->entries, *nx; e; e = nx) {
		nx = e->next;
		for (int i = 0; i < e->n_reps; i++) {
			replica *rp = &e->reps[i];

			if (rp->worker != wi &&
			    !(rp->state == R_EXPORT && e->worker == wi))
				continue;
			free(rp->blocks);
			e->reps[i--] = e->reps[--e->n_reps];
		}
		if (e->worker == wi) {
			e->state = E_DEAD;
			e->worker = -1;
			if (!e->refs)
				entry_drop(s, e);
		}
	}
	memset(w, 0, sizeof(*w));
	while (s->n_workers && !s->w[s->n_workers - 1].used)
		s->n_workers--;
	/* requests whose root died are queued again by pump() */
}

static void on_register(sched *s, const wire_msg *m, const Quorum__WorkerMsg *wm)
{
	const Quorum__Register *g = wm->register_;
	char prefix[64];
	int wi, prev;
	worker *w;

	snprintf(prefix, sizeof(prefix), "/quorum-%s-", s->c->cluster.name);
	if (!wire_name_ok(wm->worker_id, ID_MAX) || !g->host || !*g->host ||
	    strlen(g->host) >= HOST_MAX || strchr(g->host, '\n')) {
		reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "bad worker id or host label");
		return;
	}
	if (!g->pool_name || strlen(g->pool_name) >= POOL_MAX ||
	    strncmp(g->pool_name, prefix, strlen(prefix)) ||
	    strchr(g->pool_name + 1, '/')) {
		reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "pool name is not of this cluster");
		return;
	}
	if (s->have_fingerprint && g->model_fingerprint != s->fingerprint) {
		reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "model fingerprint differs from the cluster's model");
		return;
	}
	if (!g->has_vocab || g->vocab != s->vocab) {
		reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "vocabulary differs from the coordinator's tokenizer");
		return;
	}
	if (!g->has_block_tokens ||
	    g->block_tokens != (uint32_t)s->c->kv.block_tokens ||
	    !g->has_kv_dtype ||
	    g->kv_dtype != (s->c->kv.dtype == CFG_DTYPE_F16 ? 1u : 0u)) {
		reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "KV block size or dtype differs from the config");
		return;
	}
	if (g->slots < 1 || g->slots > 65536) {
		reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "slots out of range");
		return;
	}
	/* a re-registration (same connection or same id) replaces the old */
	if ((prev = find_worker(s, m)) >= 0)
		worker_remove(s, prev, "registered again");
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && !strcmp(s->w[i].id, wm->worker_id)) {
			worker_remove(s, i, "replaced by a new registration");
			break;
		}
	for (wi = 0; wi < MAX_WORKERS && s->w[wi].used; wi++)
		;
	if (wi == MAX_WORKERS) {
		reject(s, m, QUORUM__STATUS__STATUS_NO_CAPACITY,
		       "too many workers");
		return;
	}
	if (!s->have_fingerprint) {
		s->fingerprint = g->model_fingerprint;
		s->have_fingerprint = 1;
	}
	w = &s->w[wi];
	memset(w, 0, sizeof(*w));
	w->used = 1;
	memcpy(w->ident, m->id, m->id_len);
	w->ident_len = m->id_len;
	snprintf(w->id, sizeof(w->id), "%s", wm->worker_id);
	snprintf(w->host, sizeof(w->host), "%s", g->host);
	snprintf(w->pool, sizeof(w->pool), "%s", g->pool_name);
	w->pid = g->pid;
	w->slots = g->slots;
	w->threads = g->has_threads ? g->threads : 0;
	w->blocks_free = g->has_pool_blocks ? g->pool_blocks : 0;
	w->last_seen = wire_now_ms();
	if (wi >= s->n_workers)
		s->n_workers = wi + 1;
	fprintf(stderr, "coordinator: worker %s registered (host %s, pid %u, "
		"%u slots, pool %s)\n", w->id, w->host, w->pid, w->slots,
		w->pool);
	{
		/* greet at once so the worker's liveness starts now */
		Quorum__CoordMsg c = QUORUM__COORD_MSG__INIT;
		Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;

		c.body_case = QUORUM__COORD_MSG__BODY_HEARTBEAT;
		c.heartbeat = &hb;
		send_worker(s, wi, &c);
	}
	pump(s);
}

static void on_prefix_ready(sched *s, int wi, const Quorum__PrefixReady *p)
{
	entry *e = entry_by_id(s, p->request_id);
	worker *w = &s->w[wi];

	if (w->ops)
		w->ops--;
	if (!e || e->state != E_PREFILL || e->op != p->attempt ||
	    e->worker != wi) {
		send_release(s, wi, p->root_id); /* nobody wants it now */
		return;
	}
	if (p->n_tokens != e->n_tokens ||
	    p->n_blocks != blocks_for(s, e->n_tokens) ||
	    p->logits.len != (size_t)s->vocab * sizeof(float) ||
	    !p->pool_name || strcmp(p->pool_name, w->pool) ||
	    !(e->blocks = malloc(p->n_blocks * sizeof(*e->blocks) + 1)) ||
	    !(e->logits = malloc(p->logits.len))) {
		fprintf(stderr, "coordinator: worker %s: bad PrefixReady\n",
			w->id);
		send_release(s, wi, p->root_id);
		e->state = E_DEAD;
		return;
	}
	memcpy(e->blocks, p->blocks, p->n_blocks * sizeof(*e->blocks));
	memcpy(e->logits, p->logits.data, p->logits.len);
	e->logits_len = p->logits.len;
	e->n_blocks = (uint32_t)p->n_blocks;
	e->root_id = p->root_id;
	e->prefill_ms = p->has_prefill_ms ? p->prefill_ms : 0;
	e->state = E_READY;
	for (req *r = s->reqs; r; r = r->next)
		if (r->root == e) {
			r->messages++;
			if (r->state == Q_ROOT) {
				r->state = Q_DECODE;
				if (!r->cache_hit)
					r->prefill_ms = e->prefill_ms;
				snprintf(r->prefill_worker,
					 sizeof(r->prefill_worker), "%s", w->id);
			}
		}
}

static replica *replica_by_op(entry *e, uint32_t op)
{
	for (int i = 0; e && i < e->n_reps; i++)
		if (e->reps[i].op == op)
			return &e->reps[i];
	return NULL;
}

static void on_root_data(sched *s, int wi, Quorum__RootData *d)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	entry *e = entry_by_id(s, d->request_id);
	replica *rp = replica_by_op(e, d->attempt);
	req *r;
	int imp = -1;

	if (s->w[wi].ops)
		s->w[wi].ops--;
	if (!rp || rp->state != R_EXPORT || e->worker != wi ||
	    d->n_tokens != e->n_tokens)
		return;
	/* the importer: a worker on that host with a job waiting, else any */
	for (req *q = s->reqs; q && imp < 0; q = q->next)
		for (job *j = q->jobs; q->root == e && j; j = j->next)
			if (j->state == J_WAIT_ROOT &&
			    !strcmp(s->w[j->worker].host, rp->host)) {
				imp = j->worker;
				break;
			}
	for (int i = 0; imp < 0 && i < s->n_workers; i++)
		if (s->w[i].used && !s->w[i].dead &&
		    !strcmp(s->w[i].host, rp->host))
			imp = i;
	if (imp < 0) {
		free(rp->blocks);
		*rp = e->reps[--e->n_reps];
		return;
	}
	rp->worker = imp;
	rp->state = R_IMPORT;
	if ((r = req_by_rid(s, rp->for_rid))) {
		r->blocks_transferred += e->n_blocks;
		r->bytes_transferred += d->kv.len;
		r->messages += 2;
	}
	m.body_case = QUORUM__COORD_MSG__BODY_IMPORT_ROOT;
	m.import_root = d;
	s->w[imp].ops++;
	send_worker(s, imp, &m);
}

static void on_imported(sched *s, int wi, const Quorum__ImportedRoot *x)
{
	entry *e = entry_by_id(s, x->request_id);
	replica *rp = replica_by_op(e, x->attempt);
	req *r;

	if (s->w[wi].ops)
		s->w[wi].ops--;
	if (!rp || rp->state != R_IMPORT || rp->worker != wi) {
		send_release(s, wi, x->root_id);
		return;
	}
	if (x->n_tokens != e->n_tokens ||
	    x->n_blocks != blocks_for(s, e->n_tokens) || !x->pool_name ||
	    strcmp(x->pool_name, s->w[wi].pool) ||
	    !(rp->blocks = malloc(x->n_blocks * sizeof(*rp->blocks) + 1))) {
		send_release(s, wi, x->root_id);
		*rp = e->reps[--e->n_reps];
		return;
	}
	memcpy(rp->blocks, x->blocks, x->n_blocks * sizeof(*rp->blocks));
	rp->n_blocks = (uint32_t)x->n_blocks;
	rp->root_id = x->root_id;
	rp->state = R_READY;
	if ((r = req_by_rid(s, rp->for_rid)))
		r->messages++;
}

static void on_worker_error(sched *s, int wi, const Quorum__WorkerError *x)
{
	entry *e = x->has_request_id ? entry_by_id(s, x->request_id) : NULL;
	replica *rp;

	fprintf(stderr, "coordinator: worker %s: %s: %s\n", s->w[wi].id,
		wire_status_name(x->status), x->error ? x->error : "");
	if (!e || !x->has_attempt)
		return;
	if (s->w[wi].ops)
		s->w[wi].ops--;
	if (e->state == E_PREFILL && e->op == x->attempt && e->worker == wi) {
		int fatal = x->status == QUORUM__STATUS__STATUS_TOO_LONG ||
			    x->status == QUORUM__STATUS__STATUS_BAD_REQUEST;

		e->state = E_DEAD; /* pump() queues its requests again */
		for (req *r = s->reqs, *nx; fatal && r; r = nx) {
			nx = r->next;
			if (r->root == e)
				req_fail(s, r, x->status, x->error ? x->error
							: "prefill failed");
		}
		return;
	}
	if ((rp = replica_by_op(e, x->attempt))) {
		/* kept as R_FAILED: that host's jobs go elsewhere */
		rp->state = R_FAILED;
		rp->worker = -1;
		for (req *r = s->reqs; r; r = r->next) {
			if (r->root != e)
				continue;
			for (job *j = r->jobs, *nx; j; j = nx) {
				nx = j->next;
				if (j->state == J_WAIT_ROOT &&
				    !strcmp(s->w[j->worker].host, rp->host))
					job_drop(s, r, j);
			}
		}
	}
}

static job *job_of(req *r, uint32_t attempt, int wi)
{
	for (job *j = r ? r->jobs : NULL; j; j = j->next)
		if (j->attempt == attempt && j->worker == wi &&
		    j->state == J_SENT)
			return j;
	return NULL;
}

/* Returns 1 when it kept wm. */
static int on_sample(sched *s, int wi, Quorum__WorkerMsg *wm)
{
	const Quorum__SampleResult *x = wm->sample;
	req *r = req_by_rid(s, x->request_id);
	job *j = job_of(r, x->attempt, wi);
	uint32_t i;
	int mine = 0;

	if (!j || !x->sample)
		return 0;
	i = x->sample->index;
	for (int k = 0; k < j->n; k++)
		mine |= j->idx[k] == i;
	if (!mine || r->st[i] != S_ASSIGNED || !x->sample->finish ||
	    (x->sample->has_answer && x->sample->answer.len >= VOTE_ANSWER_MAX))
		return 0;
	r->st[i] = S_DONE;
	r->res[i] = wm;
	r->n_done++;
	if (r->stream) {
		/* the rest of the sample's text, and the sample */
		Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
		Quorum__SamplePart p = QUORUM__SAMPLE_PART__INIT;
		size_t off = r->fwd[i] < x->sample->text.len ? r->fwd[i]
			     : x->sample->text.len;

		p.index = i;
		p.text.data = x->sample->text.data + off;
		p.text.len = x->sample->text.len - off;
		p.done = x->sample;
		rep.request_id = r->client_rid;
		rep.status = QUORUM__STATUS__STATUS_OK;
		rep.body_case = QUORUM__CLIENT_REPLY__BODY_PARTIAL;
		rep.partial = &p;
		send_client(s, r->cid, r->cid_len, &rep);
	}
	r->messages++;
	j->n_done++;
	if (s->w[wi].busy)
		s->w[wi].busy--;
	return 1; /* pump() finishes r when all is in */
}

/* Partial texts of a streamed job: the bytes past what was forwarded
 * go to the client. A sample decoded again elsewhere (its worker was
 * lost) sends the same bytes from offset 0: they are skipped. */
static void on_text(sched *s, int wi, const Quorum__SampleText *x)
{
	req *r = req_by_rid(s, x->request_id);
	job *j = job_of(r, x->attempt, wi);

	if (!j || !r->stream)
		return;
	for (size_t k = 0; k < x->n_parts; k++) {
		const Quorum__TextPart *p = x->parts[k];
		Quorum__ClientReply rep = QUORUM__CLIENT_REPLY__INIT;
		Quorum__SamplePart sp = QUORUM__SAMPLE_PART__INIT;
		uint32_t i = p->index;
		uint64_t end = (uint64_t)p->offset + p->text.len;
		int mine = 0;

		for (int q = 0; q < j->n; q++)
			mine |= j->idx[q] == i;
		if (!mine || r->st[i] != S_ASSIGNED || p->offset > r->fwd[i] ||
		    end <= r->fwd[i] || end > UINT32_MAX)
			continue;
		sp.index = i;
		sp.text.data = p->text.data + (r->fwd[i] - p->offset);
		sp.text.len = (size_t)(end - r->fwd[i]);
		r->fwd[i] = (uint32_t)end;
		rep.request_id = r->client_rid;
		rep.status = QUORUM__STATUS__STATUS_OK;
		rep.body_case = QUORUM__CLIENT_REPLY__BODY_PARTIAL;
		rep.partial = &sp;
		send_client(s, r->cid, r->cid_len, &rep);
	}
}

static void on_job_done(sched *s, int wi, const Quorum__JobDone *x)
{
	req *r = req_by_rid(s, x->request_id);
	job *j = job_of(r, x->attempt, wi);

	if (!j)
		return;
	r->messages++;
	r->blocks_mapped += x->blocks_mapped;
	r->blocks_copied += x->blocks_copied;
	r->gen_tokens += x->generated_tokens;
	if (x->decode_ms > r->decode_ms)
		r->decode_ms = x->decode_ms;
	if (x->status != QUORUM__STATUS__STATUS_OK) {
		fprintf(stderr, "coordinator: worker %s: job of request %llu "
			"failed: %s: %s\n", s->w[wi].id,
			(unsigned long long)r->rid, wire_status_name(x->status),
			x->error ? x->error : "");
		r->failures++;
	}
	job_drop(s, r, j);
	if (r->failures > MAX_FAILURES)
		req_fail(s, r, QUORUM__STATUS__STATUS_WORKER_LOST,
			 "decode failed on the workers");
}

void sched_on_worker(sched *s, int rc, const wire_msg *m)
{
	Quorum__WorkerMsg *wm;
	int wi, keep = 0;

	if (rc || !m->id_len)
		return;
	if (!(wm = quorum__worker_msg__unpack(NULL, m->len, m->data))) {
		fprintf(stderr, "coordinator: undecodable worker message\n");
		return;
	}
	if (wm->version != WIRE_VERSION) {
		reject(s, m, QUORUM__STATUS__STATUS_VERSION_MISMATCH,
		       "protocol version 1 expected");
		goto out;
	}
	if (wm->body_case == QUORUM__WORKER_MSG__BODY_REGISTER) {
		on_register(s, m, wm);
		goto out;
	}
	if ((wi = find_worker(s, m)) < 0 || s->w[wi].dead)
		goto out; /* unknown: it re-registers when we stay silent */
	s->w[wi].last_seen = wire_now_ms();
	switch (wm->body_case) {
	case QUORUM__WORKER_MSG__BODY_HEARTBEAT:
		s->w[wi].blocks_used = wm->heartbeat->blocks_used;
		s->w[wi].blocks_free = wm->heartbeat->blocks_free;
		s->w[wi].roots = wm->heartbeat->roots;
		break;
	case QUORUM__WORKER_MSG__BODY_PREFIX_READY:
		on_prefix_ready(s, wi, wm->prefix_ready);
		break;
	case QUORUM__WORKER_MSG__BODY_SAMPLE:
		keep = on_sample(s, wi, wm);
		break;
	case QUORUM__WORKER_MSG__BODY_JOB_DONE:
		on_job_done(s, wi, wm->job_done);
		break;
	case QUORUM__WORKER_MSG__BODY_TEXT:
		on_text(s, wi, wm->text);
		break;
	case QUORUM__WORKER_MSG__BODY_ROOT_DATA:
		on_root_data(s, wi, wm->root_data);
		break;
	case QUORUM__WORKER_MSG__BODY_IMPORTED:
		on_imported(s, wi, wm->imported);
		break;
	case QUORUM__WORKER_MSG__BODY_ERROR:
		on_worker_error(s, wi, wm->error);
		break;
	default:
		break;
	}
	pump(s);
out:
	if (!keep)
		quorum__worker_msg__free_unpacked(wm, NULL);
}

/* ---- timers ---------------------------------------------------------- */

void sched_tick(sched *s)
{
	int64_t now = wire_now_ms();
	int64_t ttl = (int64_t)s->c->heartbeat.interval_ms *
		      s->c->heartbeat.liveness;

	if (now >= s->hb_at) {
		Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
		Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;

		m.body_case = QUORUM__COORD_MSG__BODY_HEARTBEAT;
		m.heartbeat = &hb;
		for (int i = 0; i < s->n_workers; i++)
			if (s->w[i].used)
				send_worker(s, i, &m);
		s->hb_at = now + s->c->heartbeat.interval_ms;
	}
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && (s->w[i].dead || now - s->w[i].last_seen > ttl))
			worker_remove(s, i, s->w[i].dead ? "unreachable"
							 : "heartbeat expired");
	for (req *r = s->reqs, *nx; r; r = nx) {
		nx = r->next;
		if (now >= r->deadline)
			req_fail(s, r, QUORUM__STATUS__STATUS_TIMEOUT,
				 "deadline passed");
	}
	if (n_alive(s))
		s->no_worker_since = 0;
	else if (!s->no_worker_since)
		s->no_worker_since = now;
	while (s->reqs && !n_alive(s) && no_capacity(s))
		req_fail(s, s->reqs, QUORUM__STATUS__STATUS_NO_CAPACITY,
			 "no worker left to serve it");
	pump(s);
}

long sched_timeout_ms(const sched *s)
{
	int64_t t = s->hb_at - wire_now_ms();

	if (t < 0)
		t = 0;
	if (t > 100)
		t = 100;
	return (long)t;
}

void sched_shutdown(sched *s)
{
	while (s->reqs)
		req_fail(s, s->reqs, QUORUM__STATUS__STATUS_CANCELLED,
			 "coordinator shutting down");
}

int sched_new(const sched_opts *o, sched **out)
{
	sched *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->w = calloc(MAX_WORKERS, sizeof(*s->w)))) {
		free(s);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	s->o = *o;
	s->c = o->c;
	s->vocab = tok_vocab_size(o->t);
	s->hb_at = wire_now_ms() + o->c->heartbeat.interval_ms;
	s->t_started = wire_now_ms();
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
	while (s->entries) {
		entry *e = s->entries;

		s->entries = e->next;
		entry_free(e);
	}
	free(s->w);
	free(s);
	*sp = NULL;
}
