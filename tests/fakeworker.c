/*
 * fakeworker — simulated workers answering the coordinator's scheduler
 * in-process (see fakeworker.h for the contract). Owns each worker's
 * roots, refcounts and inbox; the messages it builds live on its stack
 * and are packed by the scheduler's input path at once. Linked into
 * tests/test_sched and bench/sched_sim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kv.h"
#include "fakeworker.h"
#include "net/poolname.h"

/* ---- checks and plumbing ---------------------------------------------- */

static void fw_check(const fw *w, int ok, const char *what, int line)
{
	if (ok)
		return;
	if (w->env->fail)
		w->env->fail(w->env->arg, what, __FILE__, line);
	fprintf(stderr, "%s:%d: fake worker: %s\n", __FILE__, line, what);
	abort();
}

#define FW_CHECK(w, cond) fw_check((w), !!(cond), #cond, __LINE__)

/* Allocation failures of the harness itself: a broken run, not a
 * finding about the scheduler. */
static void *fw_alloc(const fw *w, size_t n)
{
	void *p = calloc(1, n ? n : 1);

	FW_CHECK(w, p != NULL);
	return p;
}

static uint32_t fw_nblocks(const fw *w, uint64_t tokens)
{
	uint32_t bt = w->env->block_tokens;

	return (uint32_t)((tokens + bt - 1) / bt);
}

static uint32_t fw_cap(const fw *w)
{
	return w->real ? w->real : w->blocks;
}

static size_t fw_logits_len(const fw *w)
{
	return (size_t)tok_vocab_size(w->env->vocab) * sizeof(float);
}

void fw_send(sched *s, const fw *w, Quorum__WorkerMsg *m)
{
	wire_msg in = {0};
	size_t n;
	uint8_t *b;

	m->version = WIRE_VERSION;
	m->worker_id = (char *)w->id;
	n = quorum__worker_msg__get_packed_size(m);
	b = fw_alloc(w, n + 1);
	quorum__worker_msg__pack(m, b);
	in.id_len = strlen(w->ident);
	memcpy(in.id, w->ident, in.id_len);
	snprintf(in.user, sizeof(in.user), "%s", w->key);
	in.data = b;
	in.len = n;
	if (w->env->deliver)
		w->env->deliver(w->env->arg, s, &in);
	else
		sched_on_worker(s, 0, &in);
	free(b);
}

/* ---- life ------------------------------------------------------------- */

static void fw_drop_state(fw *w)
{
	for (int i = 0; i < w->n_roots; i++)
		free(w->roots[i].blk);
	free(w->roots);
	free(w->ref);
	while (w->head) {
		fw_msg *b = w->head;

		w->head = b->next;
		free(b->buf);
		free(b);
	}
	w->roots = NULL;
	w->ref = NULL;
	w->tail = NULL;
	w->n_roots = w->cap_roots = 0;
}

static void fw_unlink(fw_env *env, fw *w)
{
	for (fw **p = &env->all; *p; p = &(*p)->link)
		if (*p == w) {
			*p = w->link;
			fw_drop_state(w);
			return;
		}
}

int fw_init(fw_env *env, fw *w, const char *ident, const char *id,
	    const char *host, const char *cluster, const unsigned char *rnd,
	    uint32_t blocks, uint32_t slots)
{
	fw_unlink(env, w);
	memset(w, 0, sizeof(*w));
	w->env = env;
	w->ident = ident;
	w->id = id;
	w->host = host;
	w->blocks = blocks;
	w->slots = slots;
	if (poolname_make(w->pool, sizeof(w->pool), cluster, id, rnd))
		return -1;
	if (blocks <= FW_COUNTED_MAX &&
	    !(w->ref = calloc(blocks ? blocks : 1, sizeof(*w->ref))))
		return -1;
	w->link = env->all;
	env->all = w;
	return 0;
}

void fw_env_reset(fw_env *env)
{
	while (env->all)
		fw_unlink(env, env->all);
}

void fw_env_forget(fw_env *env)
{
	env->all = NULL;
}

int fw_post(fw *w, const ProtobufCMessage *m)
{
	fw_msg *b = malloc(sizeof(*b));

	if (!b)
		return -1;
	b->len = protobuf_c_message_get_packed_size(m);
	if (!(b->buf = malloc(b->len + 1))) {
		free(b);
		return -1;
	}
	protobuf_c_message_pack(m, b->buf);
	b->next = NULL;
	if (w->tail)
		w->tail->next = b;
	else
		w->head = b;
	w->tail = b;
	return 0;
}

static Quorum__CoordMsg *fw_inbox_next(fw *w)
{
	fw_msg *b = w->head;
	Quorum__CoordMsg *m;

	if (!b)
		return NULL;
	w->head = b->next;
	if (!w->head)
		w->tail = NULL;
	m = quorum__coord_msg__unpack(NULL, b->len, b->buf);
	free(b->buf);
	free(b);
	FW_CHECK(w, m != NULL);
	return m;
}

/* ---- the pool ----------------------------------------------------------- */

/* Fills blocks[keep..nb) with free block ids; 0, or -1 when they do not
 * fit (nothing taken). */
static int fw_take(fw *w, uint32_t *blocks, uint32_t keep, uint32_t nb)
{
	uint32_t got = 0;

	if (!w->ref) {
		for (uint32_t i = keep; i < nb; i++)
			blocks[i] = w->next_block++ % w->blocks;
		return 0;
	}
	for (uint32_t b = 0; b < fw_cap(w) && keep + got < nb; b++)
		if (!w->ref[b])
			blocks[keep + got++] = b;
	return keep + got < nb ? -1 : 0;
}

/* A new root of n_tokens over blocks (nb, copied): its id. */
static uint32_t fw_add_root(fw *w, const uint32_t *blocks, uint32_t nb,
			    uint32_t n_tokens)
{
	fw_root_rec *r;

	if (w->n_roots == w->cap_roots) {
		int cap = w->cap_roots ? 2 * w->cap_roots : 16;
		fw_root_rec *t = realloc(w->roots, (size_t)cap * sizeof(*t));

		FW_CHECK(w, t != NULL);
		w->roots = t;
		w->cap_roots = cap;
	}
	r = &w->roots[w->n_roots++];
	r->id = ++w->next_root;
	r->n_tokens = n_tokens;
	r->nb = nb;
	r->blk = fw_alloc(w, nb * sizeof(*blocks));
	memcpy(r->blk, blocks, nb * sizeof(*blocks));
	if (w->ref)
		for (uint32_t i = 0; i < nb; i++)
			w->used += !w->ref[blocks[i]]++;
	return r->id;
}

int fw_root(const fw *w, uint32_t id)
{
	for (int i = w->n_roots - 1; i >= 0; i--)
		if (w->roots[i].id == id)
			return i;
	return -1;
}

void fw_release(fw *w, uint32_t root)
{
	int i = fw_root(w, root);

	w->releases++;
	if (i < 0)
		return;
	if (w->ref)
		for (uint32_t b = 0; b < w->roots[i].nb; b++)
			w->used -= !--w->ref[w->roots[i].blk[b]];
	free(w->roots[i].blk);
	w->roots[i] = w->roots[--w->n_roots];
}

/* ---- messages to the scheduler ----------------------------------------- */

void fw_register(sched *s, fw *w)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__Register r = QUORUM__REGISTER__INIT;

	r.host = (char *)w->host;
	r.pid = 100;
	r.slots = w->slots;
	r.pool_name = w->pool;
	r.model_fingerprint = w->fp;
	r.has_pool_blocks = r.has_block_tokens = r.has_kv_dtype = 1;
	r.has_vocab = 1;
	r.pool_blocks = w->blocks;
	r.block_tokens = w->env->block_tokens;
	r.kv_dtype = w->kv_dtype;
	r.vocab = (uint32_t)tok_vocab_size(w->env->vocab);
	r.has_heartbeat_interval_ms = w->hb_interval_ms != 0;
	r.heartbeat_interval_ms = w->hb_interval_ms;
	m.body_case = QUORUM__WORKER_MSG__BODY_REGISTER;
	m.register_ = &r;
	/* a re-registering worker released everything it held */
	for (int i = 0; i < w->n_roots; i++)
		free(w->roots[i].blk);
	w->n_roots = 0;
	w->used = 0;
	if (w->ref)
		memset(w->ref, 0, (w->blocks ? w->blocks : 1) * sizeof(*w->ref));
	fw_send(s, w, &m);
}

void fw_heartbeat(sched *s, fw *w)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;

	m.body_case = QUORUM__WORKER_MSG__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	fw_send(s, w, &m);
}

void fw_error(sched *s, fw *w, uint64_t rid, uint32_t attempt, int status)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__WorkerError e = QUORUM__WORKER_ERROR__INIT;

	e.has_request_id = e.has_attempt = 1;
	e.request_id = rid;
	e.attempt = attempt;
	e.status = status;
	e.error = "KV pool exhausted";
	m.body_case = QUORUM__WORKER_MSG__BODY_ERROR;
	m.error = &e;
	fw_send(s, w, &m);
}

/* ---- answers ------------------------------------------------------------ */

void fw_prefill(sched *s, fw *w, const Quorum__Prefill *p)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__PrefixReady r = QUORUM__PREFIX_READY__INIT;
	uint32_t bt = w->env->block_tokens, nb = fw_nblocks(w, p->n_tokens);
	uint32_t *blocks = fw_alloc(w, nb * sizeof(*blocks)), keep = 0;
	size_t ll = fw_logits_len(w);
	uint8_t *logits = fw_alloc(w, ll);

	w->prefills++;
	if (p->has_base_root_id) {
		/* the coordinator only names a root of ours, block-aligned,
		 * leaving at least one token */
		int bi = fw_root(w, p->base_root_id);

		FW_CHECK(w, bi >= 0 && p->has_base_tokens);
		FW_CHECK(w, p->base_tokens % bt == 0 && p->base_tokens > 0 &&
				    p->base_tokens < p->n_tokens &&
				    p->base_tokens <= w->roots[bi].n_tokens);
		keep = (uint32_t)(p->base_tokens / bt);
		memcpy(blocks, w->roots[bi].blk, keep * sizeof(*blocks));
		w->based++;
		w->reused += p->base_tokens;
		r.has_reused_tokens = 1;
		r.reused_tokens = p->base_tokens;
	}
	if (fw_take(w, blocks, keep, nb)) {
		fw_error(s, w, p->request_id, p->attempt,
			 QUORUM__STATUS__STATUS_NO_CAPACITY);
		free(blocks);
		free(logits);
		return;
	}
	r.request_id = p->request_id;
	r.attempt = p->attempt;
	r.root_id = fw_add_root(w, blocks, nb, (uint32_t)p->n_tokens);
	r.n_tokens = (uint32_t)p->n_tokens;
	r.n_blocks = nb;
	r.blocks = blocks;
	r.logits.data = logits;
	r.logits.len = ll;
	r.pool_name = w->pool;
	m.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
	m.prefix_ready = &r;
	fw_send(s, w, &m);
	free(blocks);
	free(logits);
}

static void fw_default_sample(uint32_t i, const char *mark, fw_sample *out)
{
	snprintf(out->text, sizeof(out->text), "%s%u", mark ? mark : "s", i);
	snprintf(out->answer, sizeof(out->answer), "42");
	out->tokens = 1;
}

void fw_decode(sched *s, fw *w, const Quorum__DecodeJob *d,
	       const char *mark)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__JobDone done = QUORUM__JOB_DONE__INIT;
	uint32_t bt = w->env->block_tokens;
	uint32_t tail = fw_nblocks(w, d->root->n_tokens % bt +
					      d->params->max_new_tokens);
	uint32_t need = (uint32_t)d->n_indices * tail;

	w->decodes++;
	done.request_id = d->request_id;
	done.attempt = d->attempt;
	if (w->ref && w->used + need > fw_cap(w)) {
		done.status = QUORUM__STATUS__STATUS_NO_CAPACITY;
		done.error = "KV pool exhausted";
	} else {
		for (size_t k = 0; k < d->n_indices; k++) {
			Quorum__WorkerMsg sm = QUORUM__WORKER_MSG__INIT;
			Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
			Quorum__Sample x = QUORUM__SAMPLE__INIT;
			fw_sample o;

			memset(&o, 0, sizeof(o));
			if (w->env->sample)
				w->env->sample(w->env->arg, w, d->indices[k],
					       mark, &o);
			else
				fw_default_sample(d->indices[k], mark, &o);
			x.index = d->indices[k];
			x.has_answer = 1;
			x.answer.data = (uint8_t *)o.answer;
			x.answer.len = strlen(o.answer);
			x.tokens = o.tokens;
			x.finish = "stop";
			x.text.data = (uint8_t *)o.text;
			x.text.len = strlen(o.text);
			x.worker = (char *)w->id;
			x.has_mean_logprob = x.has_group_confidence =
				o.has_logprobs;
			x.mean_logprob = o.mean_logprob;
			x.group_confidence = o.group_confidence;
			r.request_id = d->request_id;
			r.attempt = d->attempt;
			r.sample = &x;
			sm.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
			sm.sample = &r;
			fw_send(s, w, &sm);
			w->env->results++;
		}
		done.status = QUORUM__STATUS__STATUS_OK;
		done.has_generated_tokens = 1;
		done.generated_tokens = (uint64_t)d->n_indices; /* 1 each */
	}
	m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
	m.job_done = &done;
	fw_send(s, w, &m);
}

/* A chunk of a root for another host, sized as a worker does (whole
 * blocks within ExportRoot.chunk_bytes, all the rest when it fits). */
void fw_export(sched *s, fw *w, const Quorum__ExportRoot *x)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__RootData d = QUORUM__ROOT_DATA__INIT;
	uint32_t from = x->has_from_tokens ? x->from_tokens : 0, n, to;
	uint32_t bt = w->env->block_tokens, tb = w->env->token_bytes;
	size_t ll = fw_logits_len(w);
	int ri = fw_root(w, x->root_id);
	uint8_t *kv, *logits;

	w->exports++;
	FW_CHECK(w, ri >= 0);
	n = w->roots[ri].n_tokens;
	FW_CHECK(w, from < n && from % bt == 0);
	to = n;
	if (x->has_chunk_bytes && (uint64_t)(n - from) * tb > x->chunk_bytes) {
		to = (uint32_t)((from + x->chunk_bytes / tb) / bt * bt);
		FW_CHECK(w, to > from);
	}
	d.request_id = x->request_id;
	d.attempt = x->attempt;
	d.n_tokens = to;
	d.has_from_tokens = x->has_from_tokens;
	d.from_tokens = x->from_tokens;
	d.has_partial = d.partial = to < n;
	w->partials += to < n;
	if (w->exports == w->bad_chunk) {
		if (w->bad_how == 1)
			d.n_tokens = to + 1;
		else if (w->bad_how == 2)
			d.n_tokens = n + bt;
		else if (w->bad_how == 3) {
			d.has_from_tokens = 1;
			d.from_tokens = from + bt;
		} else
			d.has_partial = d.partial = 1;
	}
	kv = fw_alloc(w, (size_t)(d.n_tokens - from) * tb + 1);
	logits = fw_alloc(w, ll);
	d.kv.data = kv;
	d.kv.len = (size_t)(d.n_tokens - from) * tb;
	if (!d.partial || (w->exports == w->bad_chunk && w->bad_how == 4)) {
		d.logits.data = logits;
		d.logits.len = ll;
	}
	m.body_case = QUORUM__WORKER_MSG__BODY_ROOT_DATA;
	m.root_data = &d;
	fw_send(s, w, &m);
	free(kv);
	free(logits);
}

/* A chunk from another host: a root of its tokens, the first from_tokens
 * shared with the base root named (the partial root of the chunks before
 * it, or a delta's base). */
void fw_import(sched *s, fw *w, const Quorum__RootData *d)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__ImportedRoot r = QUORUM__IMPORTED_ROOT__INIT;
	uint32_t bt = w->env->block_tokens;
	uint32_t from = d->has_from_tokens ? d->from_tokens : 0;
	uint32_t nb = fw_nblocks(w, d->n_tokens), keep = from / bt;
	int partial = d->has_partial && d->partial;
	uint32_t *blocks;

	w->imports++;
	FW_CHECK(w, from < d->n_tokens);
	FW_CHECK(w, d->kv.len ==
			    (size_t)(d->n_tokens - from) * w->env->token_bytes);
	FW_CHECK(w, d->logits.len == (partial ? 0 : fw_logits_len(w)));
	blocks = fw_alloc(w, nb * sizeof(*blocks));
	if (from) {
		int bi = fw_root(w, d->base_root_id);

		FW_CHECK(w, d->has_base_root_id && bi >= 0 && from % bt == 0 &&
				    w->roots[bi].n_tokens >= from);
		memcpy(blocks, w->roots[bi].blk, keep * sizeof(*blocks));
	}
	if (fw_take(w, blocks, keep, nb)) {
		fw_error(s, w, d->request_id, d->attempt,
			 QUORUM__STATUS__STATUS_NO_CAPACITY);
		free(blocks);
		return;
	}
	r.request_id = d->request_id;
	r.attempt = d->attempt;
	r.root_id = fw_add_root(w, blocks, nb, d->n_tokens);
	r.n_tokens = d->n_tokens;
	r.n_blocks = nb;
	r.blocks = blocks;
	r.pool_name = w->pool;
	m.body_case = QUORUM__WORKER_MSG__BODY_IMPORTED;
	m.imported = &r;
	fw_send(s, w, &m);
	free(blocks);
}

int fw_serve(sched *s, fw *w)
{
	Quorum__CoordMsg *m;
	int n = 0;

	while ((m = w->env->next ? w->env->next(w->env->arg, w)
				 : fw_inbox_next(w))) {
		n++;
		switch (m->body_case) {
		case QUORUM__COORD_MSG__BODY_PREFILL:
			fw_prefill(s, w, m->prefill);
			break;
		case QUORUM__COORD_MSG__BODY_DECODE:
			if (w->hold) {
				FW_CHECK(w, w->n_held < 16);
				w->held[w->n_held++] = m;
				continue;
			}
			fw_decode(s, w, m->decode, NULL);
			break;
		case QUORUM__COORD_MSG__BODY_RELEASE:
			fw_release(w, m->release->root_id);
			break;
		case QUORUM__COORD_MSG__BODY_CANCEL:
			w->cancels++;
			break;
		case QUORUM__COORD_MSG__BODY_EXPORT_ROOT:
			if (w->mute_copies)
				w->muted++;
			else
				fw_export(s, w, m->export_root);
			break;
		case QUORUM__COORD_MSG__BODY_IMPORT_ROOT:
			if (w->mute_copies)
				w->muted++;
			else
				fw_import(s, w, m->import_root);
			break;
		default:
			break;
		}
		quorum__coord_msg__free_unpacked(m, NULL);
	}
	return n;
}
