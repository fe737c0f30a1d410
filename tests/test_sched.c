/*
 * The scheduler in-process (issue 13): sched_on_client / sched_on_worker /
 * sched_tick driven directly, with a clock the test moves and fake
 * workers that keep a KV pool's block count like the real ones — no
 * processes, no sockets, no sleeps.
 *
 *   split               samples split over the workers' slots
 *   select_pass         answer select: the selection pass as an internal
 *                       request, its choice in the reply, one reply
 *   duplicate_rid       a resend of a request in flight: one reply; the
 *                       same id for another question: BAD_REQUEST
 *   deadline            TIMEOUT at the deadline, the job cancelled; a
 *                       client's deadline is capped by the config's
 *   retry_budget        a sample whose workers are lost 3 times fails
 *                       (WORKER_LOST); another request is unaffected
 *   kv_wedge            six distinct long prompts through one 64-block
 *                       pool: cached roots are evicted (LRU), all OK
 *   never_fits          a request no pool can hold: NO_CAPACITY at once
 *   capacity_uncharged  a worker's pool fuller than it said: the refusal
 *                       is never charged nor WORKER_LOST
 *   stale_pool          a dropped root holder re-registers: its peer's
 *                       job reading its pool is cancelled and the holder
 *                       gets no work until the peer confirms
 *   identity            fingerprint from the coordinator's model, pool
 *                       names tied to ids, ids tied to CURVE keys
 *   kv_dtype_mismatch   a worker of another KV dtype is refused, naming
 *                       both dtypes
 *   worker_validation   results out of a job's bounds are dropped
 *   alts_validation     a worker's alternatives (top_logprobs) checked
 *   fairness            the queue is work conserving; when full, a
 *                       newcomer displaces the biggest holder's newest
 *                       queued request; cheap checks before tokenizing,
 *                       field caps
 *   gateway_users       a gateway's users (Ask.on_behalf_of) are clients
 *                       of their own: 60 + 4 requests all admitted and
 *                       answered, over the queue BUSY with a retry hint,
 *                       the light user displaces the heavy one; the
 *                       identity refused from an untrusted connection
 *                       (a LAN peer, CURVE key not a gateway's) and when
 *                       malformed
 *   client_limits       limits.per_client_in_flight and
 *                       limits.tokens_per_minute per user: BUSY with
 *                       retry_after_ms, admitted again after it
 *   shutdown            CANCELLED with a retry hint to every request in
 *                       flight and to asks read while draining
 *   stream_client_gone  a streamed request whose client is gone is
 *                       cancelled at the first part that cannot be sent,
 *                       counted lost once
 *   stream_text_checked a streamed part past a sample's text bound is
 *                       dropped; a result contradicting the stream too
 *   job_done_bounds     a JobDone's counts are held to what its job could
 *                       do: no client locked out by a claim of 2^63
 *   stray_messages      worker messages matching nothing: one line each
 *                       (rate-limited), late ones of ended jobs quiet
 *   oversized           a frame over the limit: TOO_LONG to its request
 *   prefix_reuse        a prompt sharing a cached prompt's first blocks
 *                       forks it on its holder (not when overloaded);
 *                       identical prompts, bypass, CURVE client keys,
 *                       share_across_clients; a prompt waits for a long
 *                       shared prefix being prefilled; a cleared cache
 *                       frees all
 *   shots               Ask.shots rendered as prior turns; bad ones refused,
 *                       and a reasoning_effort not low/medium/high
 *   chunked_copy        a root larger than one message crosses hosts in
 *                       chunks, one in flight, partial roots released
 *   chunked_cancel      the request ends mid-transfer: everything freed
 *   chunked_worker_lost importer or holder lost mid-transfer: the copy
 *                       is made again, every reply OK, pools free
 *   chunked_bad         a holder's bad chunk: the copy refused, the
 *                       importer's partial root released
 *   chunked_stuck       a holder or importer that heartbeats but never
 *                       answers a chunk: the copy fails after
 *                       limits.copy_step_timeout_ms, the samples are
 *                       decoded on the holder's host, pools free
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#include "infer/kv.h"
#include "sc/pfx.h"
#include "text/prompt.h"
#include "coordinator/sched_int.h"
#include "qerr.h"
#include "testutil.h"
#include "net/poolname.h"
#include "tests/fakeworker.h"

/* ---- the world the scheduler sees ------------------------------------- */

#define MAX_OUT 4096

typedef struct {
	int to_worker;
	char id[64];
	uint8_t *buf;
	size_t len;
} out_msg;

static out_msg outq[MAX_OUT];
static int n_out;
static int64_t clock_ms;
static tok *vocab;
static cfg *conf;
/* A client connection that is gone: sends to it fail (NULL: none). */
static const char *gone_cid;

static int io_send(void *arg, int to_worker, const unsigned char *id,
		   size_t id_len, const ProtobufCMessage *m)
{
	out_msg *o;

	(void)arg;
	if (n_out == MAX_OUT || id_len >= sizeof(o->id))
		return -1;
	if (!to_worker && gone_cid && id_len == strlen(gone_cid) &&
	    !memcmp(id, gone_cid, id_len))
		return qerr_fail(QERR_IO, "wire send: Host unreachable");
	o = &outq[n_out++];
	o->to_worker = to_worker;
	memcpy(o->id, id, id_len);
	o->id[id_len] = '\0';
	o->len = protobuf_c_message_get_packed_size(m);
	o->buf = malloc(o->len + 1);
	protobuf_c_message_pack(m, o->buf);
	return 0;
}

static int64_t io_now(void *arg)
{
	(void)arg;
	return clock_ms;
}

static void out_take(int i)
{
	free(outq[i].buf);
	memmove(&outq[i], &outq[i + 1], (size_t)(n_out - i - 1) *
					       sizeof(outq[0]));
	n_out--;
}

/* A worker gone silent: what was sent to it is never read. */
static void out_drop(const char *ident)
{
	for (int i = 0; i < n_out; i++)
		if (outq[i].to_worker && !strcmp(outq[i].id, ident))
			out_take(i--);
}

static void out_clear(void)
{
	while (n_out)
		out_take(0);
}

/* The next message to worker ident other than a heartbeat (NULL: none). */
static Quorum__CoordMsg *w_next(const char *ident)
{
	for (int i = 0; i < n_out; i++) {
		Quorum__CoordMsg *m;

		if (!outq[i].to_worker || strcmp(outq[i].id, ident))
			continue;
		m = quorum__coord_msg__unpack(NULL, outq[i].len, outq[i].buf);
		out_take(i--);
		assert_non_null(m);
		if (m->body_case == QUORUM__COORD_MSG__BODY_HEARTBEAT) {
			quorum__coord_msg__free_unpacked(m, NULL);
			continue;
		}
		return m;
	}
	return NULL;
}

/* The next reply to client cid (NULL: none). */
static Quorum__ClientReply *c_next(const char *cid)
{
	for (int i = 0; i < n_out; i++) {
		Quorum__ClientReply *r;

		if (outq[i].to_worker || strcmp(outq[i].id, cid))
			continue;
		r = quorum__client_reply__unpack(NULL, outq[i].len,
						 outq[i].buf);
		out_take(i);
		assert_non_null(r);
		return r;
	}
	return NULL;
}

/* fw_env.next: the next message to w, from the queue above */
static Quorum__CoordMsg *w_next_fw(void *arg, fw *w)
{
	(void)arg;
	return w->ident ? w_next(w->ident) : NULL;
}

/* ---- fake workers (tests/fakeworker.c) ------------------------------- */

#define FW_FP 0xfeedull
/* The fake engine's K/V bytes per token (the coordinator never knows
 * it: the holder sizes each chunk, the importer checks it). */
#define FW_TOKEN_BYTES 1024

static void fw_failed(void *arg, const char *what, const char *file,
		      int line)
{
	(void)arg;
	fail_msg("fake worker: %s (%s:%d)", what, file, line);
}

static fw_env world = {
	.block_tokens = 16,
	.token_bytes = FW_TOKEN_BYTES,
	.next = w_next_fw,
	.fail = fw_failed,
};

static uint32_t nblocks(uint64_t tokens)
{
	return (uint32_t)((tokens + 15) / 16);
}

/* A worker of cluster "t" with a pool of blocks (its name's random part
 * from its id's last character) and slots decode slots. */
static void worker_init(fw *w, const char *ident, const char *id,
			const char *host, uint32_t blocks, uint32_t slots)
{
	unsigned char rnd[POOLNAME_RND_BYTES] = {1, 2, 3, 4, 5, 6};

	world.vocab = vocab;
	rnd[5] = (unsigned char)id[strlen(id) - 1];
	assert_int_equal(fw_init(&world, w, ident, id, host, "t", rnd,
				 blocks, slots), 0);
	w->fp = FW_FP;
}

static sched *new_sched(const char *yaml_extra, uint64_t fingerprint)
{
	char text[2048];
	sched_opts o = {0};
	sched *s = NULL;

	snprintf(text, sizeof(text),
		 "model:\n  path: /nonexistent.gguf\n"
		 "cluster:\n  name: t\n"
		 "kv:\n  block_tokens: 16\n  blocks: 64\n  dtype: f32\n"
		 "heartbeat:\n  interval_ms: 100\n  liveness: 3\n"
		 "  reconnect_min_ms: 100\n  reconnect_max_ms: 400\n"
		 "%s", yaml_extra ? yaml_extra : "");
	cfg_free(&conf);
	if (cfg_parse("t.yaml", text, strlen(text), &conf))
		fail_msg("config: %s", qerr_detail());
	o.c = conf;
	o.t = vocab;
	o.prompt_family = PROMPT_PLAIN;
	o.ctx_len = 4096;
	o.fingerprint = fingerprint;
	o.has_fingerprint = 1;
	o.io.send = io_send;
	o.io.now_ms = io_now;
	assert_int_equal(sched_new(&o, &s), 0);
	return s;
}

static void free_sched(sched **s)
{
	sched_free(s);
	fw_env_reset(&world);
	out_clear();
	cfg_free(&conf);
}

static void serve_all(sched *s, fw **ws, int n)
{
	for (int busy = 1; busy;) {
		busy = 0;
		for (int i = 0; i < n; i++)
			busy += fw_serve(s, ws[i]);
	}
}

/* ---- clients ---------------------------------------------------------- */

typedef struct {
	const char *question, *system;
	uint32_t n, max_new, deadline_ms;
} ask_o;

/* Set by a case for the asks that follow: Ask.on_behalf_of (NULL none)
 * and the connection's peer address ("" local). */
static const char *ask_obo;
static const char *ask_peer = "";
/* ... and SamplingParams.answer (NULL: none) */
static const char *ask_answer;
/* ... and top_logprobs (with logprobs; 0: neither) */
static uint32_t ask_top;
/* ... and logprobs alone */
static int ask_lp;
/* ... and Ask.stream */
static int ask_stream;
/* ... and its fields written last to first (another client's encoder) */
static int ask_reorder;

/* An Ask from client connection cid with CURVE key user ("" none);
 * bypass: Ask.prefix_cache false; stop strings strs (n_strs, <= 8). */
static void c_ask_k(sched *s, const char *cid, const char *user,
		    uint64_t rid, const ask_o *o, int bypass,
		    const char *const *strs, size_t n_strs)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask a = QUORUM__ASK__INIT;
	Quorum__SamplingParams p = QUORUM__SAMPLING_PARAMS__INIT;
	ProtobufCBinaryData bin[8];
	wire_msg in = {0};
	size_t n;
	uint8_t *b;

	p.has_n = p.has_max_new_tokens = p.has_temperature = 1;
	p.n = o->n;
	p.max_new_tokens = o->max_new;
	p.temperature = 0.5f;
	/* all N samples (the cases count them; the default rule is exact) */
	p.stop = "none";
	p.answer = (char *)ask_answer;
	if (ask_top) {
		p.has_logprobs = p.has_top_logprobs = 1;
		p.logprobs = 1;
		p.top_logprobs = ask_top;
	} else if (ask_lp) {
		p.has_logprobs = 1;
		p.logprobs = 1;
	}
	for (size_t i = 0; i < n_strs && i < 8; i++) {
		bin[i].data = (uint8_t *)strs[i];
		bin[i].len = strlen(strs[i]);
	}
	p.n_stop_strings = n_strs < 8 ? n_strs : 8;
	p.stop_strings = bin;
	a.question.data = (uint8_t *)o->question;
	a.question.len = strlen(o->question);
	if (o->system) {
		a.has_system = 1;
		a.system.data = (uint8_t *)o->system;
		a.system.len = strlen(o->system);
	}
	if (o->deadline_ms) {
		a.has_deadline_ms = 1;
		a.deadline_ms = o->deadline_ms;
	}
	a.params = &p;
	if (bypass) {
		a.has_prefix_cache = 1;
		a.prefix_cache = 0;
	}
	a.on_behalf_of = (char *)ask_obo;
	if (ask_stream)
		a.has_stream = a.stream = 1;
	q.version = WIRE_VERSION;
	q.request_id = rid;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	q.ask = &a;
	n = quorum__client_request__get_packed_size(&q);
	b = malloc(n + 1);
	quorum__client_request__pack(&q, b);
	if (ask_reorder) {
		/* version (2 bytes: tag, varint), request_id (tag, one
		 * varint byte), then the Ask: the Ask first, then the
		 * id, then the version */
		uint8_t *t = malloc(n + 1);

		assert_true(b[0] == 0x08 && b[2] == 0x10 && rid < 128);
		memcpy(t, b + 4, n - 4);
		memcpy(t + n - 4, b + 2, 2);
		memcpy(t + n - 2, b, 2);
		free(b);
		b = t;
	}
	in.id_len = strlen(cid);
	memcpy(in.id, cid, in.id_len);
	snprintf(in.user, sizeof(in.user), "%s", user);
	snprintf(in.peer, sizeof(in.peer), "%s", ask_peer);
	in.data = b;
	in.len = n;
	sched_on_client(s, 0, &in);
	free(b);
}

/* c_ask with stop strings strs (n_strs) */
static void c_ask_strs(sched *s, const char *cid, uint64_t rid,
		       const ask_o *o, const char *const *strs, size_t n_strs)
{
	c_ask_k(s, cid, "", rid, o, 0, strs, n_strs);
}

static void c_ask(sched *s, const char *cid, uint64_t rid, const ask_o *o)
{
	c_ask_strs(s, cid, rid, o, NULL, 0);
}

/* The status of the next reply to cid, for rid; *retry its
 * retry_after_ms (0: none). */
static int reply_retry(const char *cid, uint64_t rid, uint32_t *retry)
{
	Quorum__ClientReply *r = c_next(cid);
	int st;

	assert_non_null(r);
	if (r->request_id != rid)
		fail_msg("%s: reply to %llu (%s: %s), want %llu", cid,
			 (unsigned long long)r->request_id,
			 wire_status_name(r->status), r->error ? r->error : "",
			 (unsigned long long)rid);
	st = r->status;
	*retry = r->has_retry_after_ms ? r->retry_after_ms : 0;
	quorum__client_reply__free_unpacked(r, NULL);
	return st;
}

static int reply_status(const char *cid, uint64_t rid)
{
	Quorum__ClientReply *r = c_next(cid);
	int st;

	assert_non_null(r);
	if (r->request_id != rid)
		fail_msg("%s: reply to %llu (%s: %s), want %llu", cid,
			 (unsigned long long)r->request_id,
			 wire_status_name(r->status), r->error ? r->error : "",
			 (unsigned long long)rid);
	st = r->status;
	quorum__client_reply__free_unpacked(r, NULL);
	return st;
}

/* A question of about 180 tokens, distinct per k. */
static const char *long_q(int k)
{
	static char q[8][2048];
	static const char *const w[] = {"apple", "river", "stone", "cloud",
					"table", "green", "quiet", "north"};
	size_t n = 0;

	n += (size_t)snprintf(q[k] + n, sizeof(q[k]) - n, "Case %d:", k);
	for (int i = 0; i < 150; i++)
		n += (size_t)snprintf(q[k] + n, sizeof(q[k]) - n, " %s",
				      w[(i * 7 + k * 3 + i / 8) % 8]);
	return q[k];
}

/* Advances the clock by ms in heartbeat steps; the workers in alive
 * heartbeat meanwhile. */
static void advance(sched *s, int64_t ms, fw **alive, int n)
{
	for (int64_t t = 0; t < ms; t += 50) {
		clock_ms += 50;
		for (int i = 0; i < n; i++)
			fw_heartbeat(s, alive[i]);
		sched_tick(s);
	}
}

/* ---- cases ------------------------------------------------------------ */

static void split(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a, b, *ws[2] = {&a, &b};
	ask_o o = {"What is 2 + 2?", NULL, 8, 4, 0};
	Quorum__ClientReply *r;
	Quorum__CoordMsg *m;
	int got[2] = {0, 0};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	worker_init(&b, "B", "wb", "h", 64, 4);
	a.hold = b.hold = 1;
	fw_register(s, &a);
	fw_register(s, &b);
	c_ask(s, "c1", 1, &o);
	/* the prefill goes to one worker; after it, 8 samples over 2 x 4 */
	serve_all(s, ws, 2);
	for (int i = 0; i < 2; i++) {
		/* the first worker's samples 30 ms after the ask, the
		 * second's 20 ms later: the reply's first_sample_ms and
		 * total_ms tell them apart */
		clock_ms += i == 0 ? 30 : 20;
		for (int k = 0; k < ws[i]->n_held; k++) {
			m = ws[i]->held[k];
			got[i] += (int)m->decode->n_indices;
			fw_decode(s, ws[i], m->decode, NULL);
			quorum__coord_msg__free_unpacked(m, NULL);
		}
		ws[i]->n_held = 0;
	}
	assert_int_equal(got[0], 4);
	assert_int_equal(got[1], 4);
	r = c_next("c1");
	assert_non_null(r);
	assert_int_equal(r->status, QUORUM__STATUS__STATUS_OK);
	assert_int_equal(r->answer->n_samples, 8);
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(r->answer->samples[i]->index, i);
	assert_int_equal(r->answer->n_votes, 1);
	assert_true(r->answer->timings->has_first_sample_ms);
	assert_true(r->answer->timings->first_sample_ms == 30.0);
	assert_true(r->answer->timings->total_ms == 50.0);
	/* the settings it ran with: the request's, the cluster's defaults
	 * for the rest (a client that left them learns them) */
	{
		const Quorum__SamplingParams *sp = r->answer->params;

		assert_non_null(sp);
		assert_true(sp->has_n && sp->n == 8);
		assert_true(sp->has_temperature && sp->temperature == 0.5f);
		assert_true(sp->has_max_new_tokens && sp->max_new_tokens == 4);
		assert_true(sp->has_top_k &&
			    sp->top_k == conf->sampling.p.sp.top_k);
		assert_non_null(sp->answer);
		assert_null(sp->grammar);
	}
	quorum__client_reply__free_unpacked(r, NULL);
	free_sched(&s);
}

/* answer select: the samples of the request, then its selection pass's
 * reply (what the fake workers say, by phase) */
static int select_phase;

static void select_sample(void *arg, const fw *w, uint32_t i,
			  const char *mark, fw_sample *out)
{
	(void)arg;
	(void)w;
	(void)mark;
	memset(out, 0, sizeof(*out));
	out->tokens = 5;
	if (select_phase == 0) {
		/* 0 and 1 say 41, 2 says 42: the vote is 41 */
		snprintf(out->text, sizeof(out->text), "The answer is %d.",
			 i < 2 ? 41 : 42);
		snprintf(out->answer, sizeof(out->answer), "%d",
			 i < 2 ? 41 : 42);
	} else {
		snprintf(out->text, sizeof(out->text),
			 select_phase == 1 ? "Response 2 agrees best."
					   : "I cannot tell.");
		snprintf(out->answer, sizeof(out->answer), "x");
	}
}

/* answer select on a cluster: once the samples are in, the coordinator
 * runs the selection pass as an internal request (its own prefill and
 * one greedy sample); the reply's answer is the response it names (2:
 * 42, though 41 has the votes), with Answer.select; a pass that names
 * none leaves the vote's answer and says so. No reply goes to anyone
 * for the pass itself. */
static void select_pass(void **state)
{
	ask_o o = {"What is 40 + 1?", NULL, 3, 8, 0};

	(void)state;
	for (int phase = 1; phase <= 2; phase++) {
		sched *s = new_sched(NULL, FW_FP);
		fw a, *ws[1] = {&a};
		Quorum__ClientReply *r;

		worker_init(&a, "A", "wa", "h", 256, 4);
		fw_register(s, &a);
		world.sample = select_sample;
		select_phase = 0;
		ask_answer = "select";
		c_ask(s, "c1", 1, &o);
		ask_answer = NULL;
		serve_all(s, ws, 1);
		/* the three samples are in: no reply yet, the pass starts */
		assert_null(c_next("c1"));
		select_phase = phase;
		sched_tick(s);
		serve_all(s, ws, 1);
		r = c_next("c1");
		assert_non_null(r);
		assert_int_equal(r->status, QUORUM__STATUS__STATUS_OK);
		assert_int_equal(r->answer->n_samples, 3);
		assert_non_null(r->answer->select);
		assert_true(r->answer->has_answer);
		if (phase == 1) {
			assert_int_equal(r->answer->select->chosen, 2);
			assert_memory_equal(r->answer->answer.data, "42", 2);
		} else {
			assert_int_equal(r->answer->select->chosen, -1);
			assert_memory_equal(r->answer->answer.data, "41", 2);
		}
		assert_int_equal(r->answer->select->tokens, 5);
		quorum__client_reply__free_unpacked(r, NULL);
		/* one reply only, and nothing left behind */
		assert_null(c_next("c1"));
		world.sample = NULL;
		free_sched(&s);
	}
}

static void duplicate_rid(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a, *ws[1] = {&a};
	ask_o o = {"What is 2 + 2?", NULL, 2, 4, 0};
	ask_o other = {"What is 1 + 1?", NULL, 1, 4, 0};
	Quorum__ClientReply *r;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	c_ask(s, "c1", 7, &o);
	c_ask(s, "c1", 7, &o); /* a resend */
	ask_reorder = 1;       /* ... its fields in another order */
	c_ask(s, "c1", 7, &o);
	ask_reorder = 0;
	assert_null(c_next("c1"));
	c_ask(s, "c2", 7, &o); /* another client's own 7 */
	/* the same id for another question: refused in words (the first
	 * is still answered) */
	c_ask(s, "c1", 7, &other);
	r = c_next("c1");
	assert_non_null(r);
	assert_int_equal(r->request_id, 7);
	assert_int_equal(r->status, QUORUM__STATUS__STATUS_BAD_REQUEST);
	assert_non_null(strstr(r->error, "reused for another question"));
	quorum__client_reply__free_unpacked(r, NULL);
	serve_all(s, ws, 1);
	assert_int_equal(reply_status("c1", 7), QUORUM__STATUS__STATUS_OK);
	assert_null(c_next("c1"));
	assert_int_equal(reply_status("c2", 7), QUORUM__STATUS__STATUS_OK);
	assert_int_equal(a.prefills, 1); /* c2's is a prefix-cache hit */
	free_sched(&s);
}

static void deadline(void **state)
{
	sched *s = new_sched("limits:\n  request_timeout_ms: 5000\n", FW_FP);
	fw a, *ws[1] = {&a};
	ask_o o = {"What is 2 + 2?", NULL, 2, 4, 500};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	a.hold = 1;
	fw_register(s, &a);
	c_ask(s, "c1", 1, &o);
	fw_serve(s, &a);
	advance(s, 450, ws, 1);
	assert_null(c_next("c1"));
	advance(s, 100, ws, 1);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_TIMEOUT);
	fw_serve(s, &a);
	assert_int_equal(a.cancels, 1);
	/* a client's deadline over request_timeout_ms is capped */
	o.deadline_ms = 4000000000u;
	c_ask(s, "c1", 2, &o);
	fw_serve(s, &a);
	advance(s, 4950, ws, 1);
	assert_null(c_next("c1"));
	advance(s, 100, ws, 1);
	assert_int_equal(reply_status("c1", 2), QUORUM__STATUS__STATUS_TIMEOUT);
	for (int i = 0; i < a.n_held; i++)
		quorum__coord_msg__free_unpacked(a.held[i], NULL);
	free_sched(&s);
}

static void retry_budget(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw w[4], *alive[4];
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	ask_o o2 = {"What is 3 + 3?", NULL, 1, 4, 0};
	const char *idents[4] = {"A", "B", "C", "D"};
	const char *ids[4] = {"w0", "w1", "w2", "w3"};

	(void)state;
	for (int i = 0; i < 4; i++) {
		worker_init(&w[i], idents[i], ids[i], "h", 64, 4);
		w[i].hold = 1;
		fw_register(s, &w[i]);
	}
	c_ask(s, "c1", 1, &o);
	/* three times: the worker decoding the one sample is lost */
	for (int loss = 0; loss < 3; loss++) {
		int victim = -1, n = 0;

		for (int round = 0; round < 4 && victim < 0; round++)
			for (int i = 0; i < 4; i++) {
				if (!w[i].ident)
					continue;
				fw_serve(s, &w[i]);
				if (w[i].n_held && victim < 0)
					victim = i;
			}
		assert_true(victim >= 0);
		for (int i = 0; i < w[victim].n_held; i++)
			quorum__coord_msg__free_unpacked(w[victim].held[i],
							 NULL);
		w[victim].n_held = 0;
		w[victim].ident = NULL; /* silent from now on */
		for (int i = 0; i < 4; i++)
			if (w[i].ident)
				alive[n++] = &w[i];
		if (loss == 2) /* another request, on the survivors */
			c_ask(s, "c2", 9, &o2);
		advance(s, 400, alive, n);
	}
	assert_int_equal(reply_status("c1", 1),
			 QUORUM__STATUS__STATUS_WORKER_LOST);
	/* the other request is served by the last worker */
	for (int i = 0; i < 4; i++)
		if (w[i].ident) {
			w[i].hold = 0;
			for (int k = 0; k < w[i].n_held; k++) {
				fw_decode(s, &w[i], w[i].held[k]->decode, NULL);
				quorum__coord_msg__free_unpacked(w[i].held[k],
								 NULL);
			}
			w[i].n_held = 0;
			fw_serve(s, &w[i]);
		}
	assert_int_equal(reply_status("c2", 9), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

static void kv_wedge(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a, *ws[1] = {&a};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 32);
	fw_register(s, &a);
	/* eight long prompts sharing their first blocks (the system prompt
	 * and "Case "): 12 blocks each, 10 of them their own */
	for (int k = 0; k < 8; k++) {
		ask_o o = {long_q(k), NULL, 1, 4, 0};
		Quorum__ClientReply *r;

		c_ask(s, "c1", (uint64_t)k + 1, &o);
		serve_all(s, ws, 1);
		r = c_next("c1");
		assert_non_null(r);
		if (r->status != QUORUM__STATUS__STATUS_OK)
			fail_msg("prompt %d: %s: %s", k,
				 wire_status_name(r->status), r->error);
		assert_true(r->answer->prefix->prefix_blocks >= 11);
		/* the first prefills all, the others fork its prefix */
		assert_int_equal(r->answer->prefix->prompt_tokens_reused +
					 r->answer->prefix->prompt_tokens_prefilled,
				 r->answer->prefix->prompt_tokens);
		assert_true(k ? r->answer->prefix->prompt_tokens_reused >= 16
			      : r->answer->prefix->prompt_tokens_reused == 0);
		quorum__client_reply__free_unpacked(r, NULL);
		assert_true(a.used <= 64);
	}
	/* the pool never overflowed: least recently used roots went */
	assert_true(a.releases >= 1);
	assert_int_equal(a.prefills, 8);
	assert_int_equal(a.based, 7);
	free_sched(&s);
}

/* Serves everything and returns the reply to (cid, rid)'s prefix stats:
 * OK, reused + prefilled = the prompt. */
static void prefix_of(sched *s, fw **ws, int n, const char *cid,
		      uint32_t *reused, uint32_t *prefilled, int *hit)
{
	Quorum__ClientReply *r;

	serve_all(s, ws, n);
	r = c_next(cid);
	assert_non_null(r);
	if (r->status != QUORUM__STATUS__STATUS_OK)
		fail_msg("%s: %s", wire_status_name(r->status), r->error);
	assert_true(r->answer->prefix->has_prompt_tokens_reused);
	*reused = r->answer->prefix->prompt_tokens_reused;
	*prefilled = r->answer->prefix->prompt_tokens_prefilled;
	*hit = r->answer->prefix->cache_hit;
	assert_int_equal(*reused + *prefilled,
			 r->answer->prefix->prompt_tokens);
	assert_int_equal(*reused % 16 == 0 || *hit, 1);
	quorum__client_reply__free_unpacked(r, NULL);
}

/* Issue 16: a prompt sharing a cached one's first blocks (few-shot
 * exemplars in the system prompt) is forked from it on its holder and
 * only the rest prefilled; an identical one reuses the root whole; the
 * holder is passed over when overloaded; a bypassing request neither
 * reuses nor leaves a root; with CURVE on, clients share only their own
 * prefixes unless prefix_cache.share_across_clients; clearing the cache
 * frees every block of both pools. */
static void prefix_reuse(void **state)
{
	static const char ex[] =
		"Q: Ann has 3 boxes of 12 pens and gives away 7. How many are "
		"left? A: 3 * 12 = 36 pens; 36 - 7 = 29. The answer is 29.\n"
		"Q: A train goes 60 km an hour for 3 hours. How far? A: 60 * 3 "
		"= 180 km. The answer is 180.\nQ: Bo reads 15 pages a day for "
		"6 days. How many pages? A: 15 * 6 = 90. The answer is 90.";
	sched *s = new_sched(NULL, FW_FP);
	fw a, b, *ws[2] = {&a, &b};
	ask_o o = {"Cy has 4 bags of 9 marbles. How many marbles?", ex, 2, 4,
		   0};
	uint32_t reused, filled, n_prompt;
	int hit, dummy_zap, holder;
	uint64_t before;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 8);
	worker_init(&b, "B", "wb", "h", 64, 8);
	fw_register(s, &a);
	fw_register(s, &b);
	/* cold: everything prefilled */
	c_ask(s, "c1", 1, &o);
	prefix_of(s, ws, 2, "c1", &reused, &filled, &hit);
	assert_int_equal(reused, 0);
	assert_false(hit);
	n_prompt = filled;
	assert_true(n_prompt > 64);
	holder = a.prefills ? 0 : 1;
	/* the holder overloaded: a fresh prefill on the other worker */
	s->w[holder].busy = 1000;
	o.question = "Di walks 5 km a day for 7 days. How far in all?";
	c_ask(s, "c1", 2, &o);
	prefix_of(s, ws, 2, "c1", &reused, &filled, &hit);
	assert_int_equal(reused, 0);
	assert_int_equal(a.prefills, 1);
	assert_int_equal(b.prefills, 1);
	s->w[holder].busy = 0;
	/* warm: the exemplars come from the cache, only the question is
	 * prefilled, on a holder of the prefix */
	o.question = "Ed buys 6 packs of 8 cards and loses 5. How many left?";
	c_ask(s, "c1", 3, &o);
	prefix_of(s, ws, 2, "c1", &reused, &filled, &hit);
	assert_true(reused >= 64 && filled < 32 && !hit);
	assert_int_equal(a.based + b.based, 1);
	assert_int_equal(a.reused + b.reused, reused);
	assert_int_equal(s->partial_hits, 1);
	/* identical: the root whole, nothing prefilled */
	before = (uint64_t)a.prefills + b.prefills;
	c_ask(s, "c1", 4, &o);
	prefix_of(s, ws, 2, "c1", &reused, &filled, &hit);
	assert_true(hit && filled == 0 && reused > 64);
	assert_int_equal(a.prefills + b.prefills, before);
	/* bypass: prefilled whole, its root released after the reply; no
	 * miss of a cache it did not ask (status's prefix_misses) */
	before = (uint64_t)a.releases + b.releases;
	{
		uint64_t misses = s->misses;

		c_ask_k(s, "c1", "", 5, &o, 1, NULL, 0);
		prefix_of(s, ws, 2, "c1", &reused, &filled, &hit);
		assert_true(reused == 0 && !hit && filled > 64);
		assert_int_equal(s->misses, misses);
	}
	assert_int_equal(a.based + b.based, 1);
	assert_int_equal(a.releases + b.releases, before + 1);
	/* CURVE on: another client key shares nothing of c1's ... */
	s->zap = (const curve_zap *)&dummy_zap; /* only "on" is read */
	o.question = "Fay has 7 rows of 6 chairs. How many chairs?";
	c_ask_k(s, "c2", "KEY-2", 1, &o, 0, NULL, 0);
	prefix_of(s, ws, 2, "c2", &reused, &filled, &hit);
	assert_int_equal(reused, 0);
	/* ... but its own prefixes */
	o.question = "Gus has 9 shelves of 11 books. How many books?";
	c_ask_k(s, "c2", "KEY-2", 2, &o, 0, NULL, 0);
	prefix_of(s, ws, 2, "c2", &reused, &filled, &hit);
	assert_true(reused >= 64);
	/* the same question as c1's asked by c3: no whole hit either */
	o.question = "Ed buys 6 packs of 8 cards and loses 5. How many left?";
	c_ask_k(s, "c3", "KEY-3", 1, &o, 0, NULL, 0);
	prefix_of(s, ws, 2, "c3", &reused, &filled, &hit);
	assert_true(reused == 0 && !hit);
	/* shared when configured */
	conf->prefix_cache.share_across_clients = 1;
	o.question = "Hal runs 4 laps of 400 m. How far?";
	c_ask_k(s, "c4", "KEY-4", 1, &o, 0, NULL, 0);
	prefix_of(s, ws, 2, "c4", &reused, &filled, &hit);
	assert_true(reused >= 64);
	assert_true(s->tokens_reused > 0 && s->tokens_prefilled > 0);
	s->zap = NULL;
	/* two prompts sharing the examples asked together (new ones): the
	 * second waits for the first's root instead of prefilling the
	 * examples again, then forks it */
	{
		int prefills = 0;
		uint64_t based = (uint64_t)a.based + b.based;

		for (int i = 0; i < 2; i++)
			assert_true(roots_make_room(s, i, 64)); /* cold */
		serve_all(s, ws, 2);
		o.question = "Ivy packs 5 boxes of 12 cups. How many cups?";
		c_ask_k(s, "c4", "KEY-4", 2, &o, 0, NULL, 0);
		o.question = "Jo has 8 rows of 7 trees. How many trees?";
		c_ask_k(s, "c4", "KEY-4", 3, &o, 0, NULL, 0);
		for (int i = 0; i < n_out; i++)
			if (outq[i].to_worker) {
				Quorum__CoordMsg *m = quorum__coord_msg__unpack(
					NULL, outq[i].len, outq[i].buf);

				prefills += m->body_case ==
					    QUORUM__COORD_MSG__BODY_PREFILL;
				quorum__coord_msg__free_unpacked(m, NULL);
			}
		assert_int_equal(prefills, 1);
		prefix_of(s, ws, 2, "c4", &reused, &filled, &hit);
		prefix_of(s, ws, 2, "c4", &reused, &filled, &hit);
		assert_int_equal(a.based + b.based, based + 1);
	}
	/* the cache cleared: every block of both pools is free again */
	assert_true(a.used > 0 || b.used > 0);
	for (int i = 0; i < 2; i++)
		assert_true(roots_make_room(s, i, 64));
	serve_all(s, ws, 2);
	assert_int_equal(a.used, 0);
	assert_int_equal(b.used, 0);
	assert_null(s->entries);
	assert_int_equal(pfx_blocks(s->index), 0);
	free_sched(&s);
}

/* Ask.reasoning_effort of the asks c_ask_shots sends (NULL: none), and
 * Ask.think (-1: none). */
static const char *shots_effort;
static int shots_think = -1;

/* An Ask with n_shots few-shot examples (empty_answer: the last one's
 * answer is empty). */
static void c_ask_shots(sched *s, const char *cid, uint64_t rid,
			const char *q, size_t n_shots, int empty_answer)
{
	Quorum__ClientRequest cr = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask a = QUORUM__ASK__INIT;
	Quorum__SamplingParams p = QUORUM__SAMPLING_PARAMS__INIT;
	Quorum__Shot sh[70], *sp[70];
	wire_msg in = {0};
	size_t n;
	uint8_t *b;

	assert_true(n_shots <= 70);
	for (size_t i = 0; i < n_shots; i++) {
		quorum__shot__init(&sh[i]);
		sh[i].question.data = (uint8_t *)"What is 1 + 1?";
		sh[i].question.len = 14;
		sh[i].answer.data = (uint8_t *)"1 + 1 = 2.";
		sh[i].answer.len = empty_answer && i + 1 == n_shots ? 0 : 10;
		sp[i] = &sh[i];
	}
	p.has_n = p.has_max_new_tokens = 1;
	p.n = 1;
	p.max_new_tokens = 4;
	a.question.data = (uint8_t *)q;
	a.question.len = strlen(q);
	a.n_shots = n_shots;
	a.shots = sp;
	a.params = &p;
	a.reasoning_effort = (char *)shots_effort;
	a.has_think = shots_think >= 0;
	a.think = shots_think > 0;
	cr.version = WIRE_VERSION;
	cr.request_id = rid;
	cr.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	cr.ask = &a;
	n = quorum__client_request__get_packed_size(&cr);
	b = malloc(n + 1);
	quorum__client_request__pack(&cr, b);
	in.id_len = strlen(cid);
	memcpy(in.id, cid, in.id_len);
	in.data = b;
	in.len = n;
	sched_on_client(s, 0, &in);
	free(b);
}

/* Few-shot examples in an Ask: the prompt is prompt_build_shots' (the
 * template's prior turns), checked fields refused. */
static void shots(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	Quorum__CoordMsg *m;
	prompt_shot ps[2] = {{"What is 1 + 1?", "1 + 1 = 2."},
			     {"What is 1 + 1?", "1 + 1 = 2."}};
	int32_t *ids;
	size_t n;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	c_ask_shots(s, "c1", 1, "What is 3 + 4?", 2, 0);
	m = w_next("A");
	assert_non_null(m);
	assert_int_equal(m->body_case, QUORUM__COORD_MSG__BODY_PREFILL);
	assert_int_equal(prompt_build_shots(vocab, PROMPT_PLAIN, -1, NULL, ps,
					    2, "What is 3 + 4?", &ids, &n), 0);
	assert_int_equal(m->prefill->n_tokens, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(m->prefill->tokens[i], (uint32_t)ids[i]);
	free(ids);
	fw_prefill(s, &a, m->prefill);
	quorum__coord_msg__free_unpacked(m, NULL);
	fw_serve(s, &a);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_OK);
	c_ask_shots(s, "c1", 2, "What is 3 + 4?", 1, 1);
	assert_int_equal(reply_status("c1", 2),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	c_ask_shots(s, "c1", 3, "What is 3 + 4?", 65, 0);
	assert_int_equal(reply_status("c1", 3),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	/* a reasoning effort is low, medium or high */
	shots_effort = "max";
	c_ask_shots(s, "c1", 4, "What is 3 + 4?", 0, 0);
	shots_effort = NULL;
	assert_int_equal(reply_status("c1", 4),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	/* think with a reasoning effort: refused in the CLI's and the
	 * config's words, not the effort silently kept */
	for (int t = 0; t < 2; t++) {
		Quorum__ClientReply *r;

		shots_effort = "low";
		shots_think = t;
		c_ask_shots(s, "c1", 5 + t, "What is 3 + 4?", 0, 0);
		shots_effort = NULL;
		shots_think = -1;
		r = c_next("c1");
		assert_non_null(r);
		assert_int_equal(r->request_id, 5 + t);
		assert_int_equal(r->status, QUORUM__STATUS__STATUS_BAD_REQUEST);
		assert_non_null(r->error);
		if (!strstr(r->error, "reasoning_effort: not together with "
				      "think (" PROMPT_THINK_EFFORT_CLASH ")"))
			fail_msg("think %d with an effort: '%s'", t, r->error);
		quorum__client_reply__free_unpacked(r, NULL);
	}
	/* a question of whitespace alone is none (it had been answered) */
	{
		Quorum__ClientReply *r;

		c_ask_shots(s, "c1", 7, " \t\n ", 0, 0);
		r = c_next("c1");
		assert_non_null(r);
		assert_int_equal(r->request_id, 7);
		assert_int_equal(r->status, QUORUM__STATUS__STATUS_BAD_REQUEST);
		assert_non_null(r->error);
		assert_string_equal(r->error, "the question is empty (or only "
					      "whitespace)");
		quorum__client_reply__free_unpacked(r, NULL);
	}
	free_sched(&s);
}

static void never_fits(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {long_q(0), NULL, 1, 900, 0};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	/* ~12 blocks of prompt + a 57-block tail > 64: refused at once */
	c_ask(s, "c1", 1, &o);
	assert_int_equal(reply_status("c1", 1),
			 QUORUM__STATUS__STATUS_NO_CAPACITY);
	assert_null(w_next("A"));
	free_sched(&s);
}

static void capacity_uncharged(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a, *ws[1] = {&a};

	(void)state;
	/* it says 64 blocks; 20 are really free (memory pressure) */
	worker_init(&a, "A", "wa", "h", 64, 4);
	a.real = 20;
	fw_register(s, &a);
	for (int k = 0; k < 5; k++) {
		ask_o o = {long_q(k), NULL, 1, 4, 0};

		c_ask(s, "c1", (uint64_t)k + 1, &o);
		serve_all(s, ws, 1);
		/* refused prefills cost nothing: each is answered OK */
		assert_int_equal(reply_status("c1", (uint64_t)k + 1),
				 QUORUM__STATUS__STATUS_OK);
	}
	assert_true(a.prefills > 5); /* there were refusals */
	/* a pool that can never hold it: NO_CAPACITY, never WORKER_LOST */
	a.real = 4;
	{
		ask_o o = {long_q(6), NULL, 1, 4, 0};

		c_ask(s, "c1", 50, &o);
		serve_all(s, ws, 1);
		assert_int_equal(reply_status("c1", 50),
				 QUORUM__STATUS__STATUS_NO_CAPACITY);
	}
	free_sched(&s);
}

static void stale_pool(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw h, p, *both[2] = {&h, &p}, *peer[1] = {&p};
	ask_o o = {long_q(1), NULL, 2, 4, 0};
	ask_o o2 = {long_q(2), NULL, 2, 4, 0};
	Quorum__CoordMsg *m;
	Quorum__ClientReply *r;
	uint32_t old_attempt;

	(void)state;
	worker_init(&h, "H", "holder", "h", 64, 1);
	worker_init(&p, "P", "peer", "h", 64, 1);
	fw_register(s, &h);
	fw_register(s, &p);
	c_ask(s, "c1", 1, &o);
	h.hold = p.hold = 1;
	serve_all(s, both, 2);
	/* one sample each; the peer's reads the holder's pool */
	assert_int_equal(p.n_held, 1);
	assert_string_equal(p.held[0]->decode->root->pool_name, h.pool);
	old_attempt = p.held[0]->decode->attempt;
	/* the holder stalls past the heartbeat expiry, then comes back and
	 * registers again (releasing everything it held) */
	advance(s, 400, peer, 1);
	fw_serve(s, &p);
	assert_int_equal(p.cancels, 1); /* the peer's job is cancelled */
	for (int i = 0; i < h.n_held; i++)
		quorum__coord_msg__free_unpacked(h.held[i], NULL);
	h.n_held = 0;
	h.hold = 0;
	fw_register(s, &h);
	c_ask(s, "c2", 2, &o2);
	/* while the peer may still read its old pool, the holder gets no
	 * work at all */
	while ((m = w_next("H"))) {
		assert_true(m->body_case != QUORUM__COORD_MSG__BODY_PREFILL &&
			    m->body_case != QUORUM__COORD_MSG__BODY_DECODE &&
			    m->body_case != QUORUM__COORD_MSG__BODY_IMPORT_ROOT);
		quorum__coord_msg__free_unpacked(m, NULL);
	}
	/* the peer ends the cancelled job: late results of it are dropped */
	assert_int_equal(p.held[0]->decode->attempt, old_attempt);
	fw_decode(s, &p, p.held[0]->decode, "stale");
	p.hold = 0;
	for (int i = 0; i < p.n_held; i++) {
		if (i) /* held meanwhile: jobs of now */
			fw_decode(s, &p, p.held[i]->decode, NULL);
		quorum__coord_msg__free_unpacked(p.held[i], NULL);
	}
	p.n_held = 0;
	serve_all(s, both, 2);
	for (int k = 0; k < 2; k++) {
		const char *cid = k ? "c2" : "c1";

		r = c_next(cid);
		assert_non_null(r);
		if (r->status != QUORUM__STATUS__STATUS_OK)
			fail_msg("%s: %s: %s", cid, wire_status_name(r->status),
				 r->error);
		for (size_t i = 0; i < r->answer->n_samples; i++)
			assert_null(memmem(r->answer->samples[i]->text.data,
					   r->answer->samples[i]->text.len,
					   "stale", 5));
		quorum__client_reply__free_unpacked(r, NULL);
	}
	assert_true(h.prefills >= 1); /* the holder works again */
	free_sched(&s);
}

static int rejected(const char *ident)
{
	Quorum__CoordMsg *m;
	int rej = 0;

	while ((m = w_next(ident))) {
		rej |= m->body_case == QUORUM__COORD_MSG__BODY_REJECT;
		quorum__coord_msg__free_unpacked(m, NULL);
	}
	return rej;
}

/* The reject's reason sent to ident (and the messages drained), or "". */
static void reject_why(const char *ident, char *why, size_t len)
{
	Quorum__CoordMsg *m;

	why[0] = 0;
	while ((m = w_next(ident))) {
		if (m->body_case == QUORUM__COORD_MSG__BODY_REJECT &&
		    m->reject->error)
			snprintf(why, len, "%s", m->reject->error);
		quorum__coord_msg__free_unpacked(m, NULL);
	}
}

/* A worker whose KV dtype or block size is not the config's is refused,
 * naming both (the config here: f32; Register.kv_dtype 2 is q8_0, 1
 * f16). */
static void kv_dtype_mismatch(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw q8, f16, bs, ok; /* linked into the env: alive to the end */
	char why[256], want[256];

	(void)state;
	worker_init(&q8, "Q", "q8", "h", 64, 4);
	q8.kv_dtype = 2;
	fw_register(s, &q8);
	reject_why("Q", why, sizeof(why));
	assert_string_equal(why, "KV dtype q8_0 of the worker differs from "
			    "the config's kv.dtype f32");
	worker_init(&f16, "H", "f16", "h", 64, 4);
	f16.kv_dtype = 1;
	fw_register(s, &f16);
	reject_why("H", why, sizeof(why));
	assert_string_equal(why, "KV dtype f16 of the worker differs from "
			    "the config's kv.dtype f32");
	/* a block size not the config's, named with it */
	{
		uint32_t keep;

		worker_init(&bs, "B", "bs", "h", 64, 4);
		keep = bs.env->block_tokens;
		bs.env->block_tokens = keep * 2;
		fw_register(s, &bs);
		bs.env->block_tokens = keep;
		reject_why("B", why, sizeof(why));
		snprintf(want, sizeof(want), "KV block size %u of the worker "
			 "differs from the config's kv.block_tokens %u",
			 keep * 2, keep);
		assert_string_equal(why, want);
	}
	worker_init(&ok, "K", "ok", "h", 64, 4);
	fw_register(s, &ok);
	reject_why("K", why, sizeof(why));
	assert_string_equal(why, "");
	assert_int_equal(sched_n_workers(s), 1);
	free_sched(&s);
}

/* A worker whose heartbeat settings are not the config's is refused,
 * naming both (it beat slower than expected and was dropped as dead
 * between its beats, or kept reconnecting); the config's, or none (an
 * older worker), are taken. */
static void heartbeat_mismatch(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw slow, same, old;
	char why[256], want[256];

	(void)state;
	worker_init(&slow, "S", "slow", "h", 64, 4);
	slow.hb_interval_ms = (uint32_t)s->c->heartbeat.interval_ms * 5;
	fw_register(s, &slow);
	reject_why("S", why, sizeof(why));
	snprintf(want, sizeof(want), "heartbeat.interval_ms %d of the worker "
		 "differs from the config's %d", s->c->heartbeat.interval_ms * 5,
		 s->c->heartbeat.interval_ms);
	assert_string_equal(why, want);
	worker_init(&same, "M", "same", "h", 64, 4);
	same.hb_interval_ms = (uint32_t)s->c->heartbeat.interval_ms;
	fw_register(s, &same);
	reject_why("M", why, sizeof(why));
	assert_string_equal(why, "");
	worker_init(&old, "O", "old", "h2", 64, 4);
	fw_register(s, &old);
	reject_why("O", why, sizeof(why));
	assert_string_equal(why, "");
	assert_int_equal(sched_n_workers(s), 2);
	free_sched(&s);
}

static void identity(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw bad, good, thief, other;
	char pool[128];

	(void)state;
	/* the first to register does not set the fingerprint: the
	 * coordinator's model does */
	worker_init(&bad, "X", "bad", "h", 64, 4);
	bad.fp = 0xbad;
	fw_register(s, &bad);
	assert_true(rejected("X"));
	worker_init(&good, "G", "good", "h", 64, 4);
	snprintf(good.key, sizeof(good.key), "KEY-GOOD");
	fw_register(s, &good);
	assert_false(rejected("G"));
	assert_int_equal(sched_n_workers(s), 1);
	/* another key cannot take the id over */
	worker_init(&thief, "T", "good", "h", 64, 4);
	snprintf(thief.key, sizeof(thief.key), "KEY-THIEF");
	fw_register(s, &thief);
	assert_true(rejected("T"));
	assert_int_equal(sched_n_workers(s), 1);
	/* nor claim its pool under another id */
	worker_init(&other, "O", "other", "h", 64, 4);
	snprintf(other.pool, sizeof(other.pool), "%s", good.pool);
	fw_register(s, &other);
	assert_true(rejected("O"));
	/* the separator keeps (cluster, id) pairs apart */
	assert_int_equal(poolname_make(pool, sizeof(pool), "a", "b-c",
					   (const unsigned char *)"123456"),
			 0);
	assert_true(poolname_ok(pool, "a", "b-c"));
	assert_false(poolname_ok(pool, "a-b", NULL));
	assert_false(poolname_ok(pool, "a", "b"));
	assert_false(poolname_ok("/quorum-a@b@12345", "a", NULL));
	assert_false(poolname_ok("/quorum-a@b/c@0123456789ab", "a", NULL));
	/* the same key may come back (a restart) */
	worker_init(&thief, "G2", "good", "h", 64, 4);
	snprintf(thief.key, sizeof(thief.key), "KEY-GOOD");
	snprintf(thief.pool, sizeof(thief.pool), "%s", good.pool);
	fw_register(s, &thief);
	assert_false(rejected("G2"));
	assert_int_equal(sched_n_workers(s), 1);
	/* ... and the connection it replaced is told so (a live second
	 * process with the id stops, where the two had displaced each
	 * other without end) */
	{
		char why[256];

		reject_why("G", why, sizeof(why));
		assert_non_null(strstr(why, "worker id good registered again "
					    "from another connection"));
		assert_non_null(strstr(why, "worker ids must be unique"));
	}
	free_sched(&s);
}

static void cap_begin(void);
static const char *cap_end(void);

/* One connection registering ever new ids with key key (each replacing
 * the one before): n registrations, none refused. */
static void register_ids(sched *s, fw *w, const char *key, int from, int n)
{
	unsigned char rnd[POOLNAME_RND_BYTES] = {1, 2, 3, 4, 5, 6};
	char id[32];

	snprintf(w->key, sizeof(w->key), "%s", key);
	w->id = id;
	for (int i = from; i < from + n; i++) {
		snprintf(id, sizeof(id), "w%d", i);
		assert_int_equal(poolname_make(w->pool, sizeof(w->pool), "t",
					       id, rnd), 0);
		fw_register(s, w);
		if (rejected(w->ident))
			fail_msg("%s refused", id);
	}
	w->id = "gone";
}

/* The ids bound to the CURVE keys they registered with stay bounded:
 * a connection registering ever new ids (or pods named anew at each
 * restart) had grown the list without end. The newest stay bound, the
 * oldest ids not registered now are forgotten first; without CURVE
 * (every key "") nothing is bound. */
static void bindings_bounded(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw w, live, thief;
	char id[32];

	(void)state;
	cap_begin(); /* two log lines a registration */
	/* on another host: no ForgetPool for each id that goes */
	worker_init(&live, "L", "live0", "h2", 64, 4);
	snprintf(live.key, sizeof(live.key), "KEY-A");
	fw_register(s, &live);
	assert_false(rejected("L"));
	worker_init(&w, "X", "w0", "h", 64, 4);
	register_ids(s, &w, "KEY-A", 0, BINDINGS_MAX + 300);
	(void)cap_end();
	assert_int_equal(s->n_bindings, BINDINGS_MAX);
	/* the newest id is still bound: another key is refused it */
	snprintf(id, sizeof(id), "w%d", BINDINGS_MAX + 299);
	worker_init(&thief, "T", id, "h", 64, 4);
	snprintf(thief.key, sizeof(thief.key), "KEY-B");
	fw_register(s, &thief);
	assert_true(rejected("T"));
	/* the oldest binding of an id not live went: w0's; the live
	 * worker's, older, stayed */
	worker_init(&thief, "T", "w0", "h", 64, 4);
	snprintf(thief.key, sizeof(thief.key), "KEY-B");
	fw_register(s, &thief);
	assert_false(rejected("T"));
	worker_init(&thief, "T2", "live0", "h", 64, 4);
	snprintf(thief.key, sizeof(thief.key), "KEY-B");
	fw_register(s, &thief);
	assert_true(rejected("T2"));
	free_sched(&s);
	/* CURVE off: no key, no bindings */
	s = new_sched(NULL, FW_FP);
	cap_begin();
	worker_init(&w, "Y", "w0", "h", 64, 4);
	register_ids(s, &w, "", 0, 100);
	(void)cap_end();
	assert_int_equal(s->n_bindings, 0);
	free_sched(&s);
}

/* stderr into a file from here to cap_end(), which returns what was
 * written (static). */
static int cap_fd = -1, cap_saved = -1;
static char cap_path[512];

static void cap_begin(void)
{
	snprintf(cap_path, sizeof(cap_path), "%s/sched-err-%d", tu_tmpdir(),
		 (int)getpid());
	fflush(stderr);
	cap_saved = dup(2);
	cap_fd = open(cap_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(cap_saved >= 0 && cap_fd >= 0);
	dup2(cap_fd, 2);
}

static const char *cap_end(void)
{
	static char text[16384];
	ssize_t n;

	fflush(stderr);
	dup2(cap_saved, 2);
	close(cap_saved);
	n = pread(cap_fd, text, sizeof(text) - 1, 0);
	close(cap_fd);
	unlink(cap_path);
	text[n > 0 ? n : 0] = '\0';
	return text;
}

static int count_lines(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Worker w's messages drained, its prefills answered: the decode job
 * that follows (the caller frees it), or NULL. */
static Quorum__CoordMsg *prefill_to_decode(sched *s, fw *w)
{
	Quorum__CoordMsg *m, *d = NULL;

	while ((m = w_next(w->ident))) {
		if (m->body_case == QUORUM__COORD_MSG__BODY_PREFILL) {
			fw_prefill(s, w, m->prefill);
			quorum__coord_msg__free_unpacked(m, NULL);
		} else if (m->body_case == QUORUM__COORD_MSG__BODY_DECODE &&
			   !d) {
			d = m;
		} else {
			quorum__coord_msg__free_unpacked(m, NULL);
		}
	}
	return d;
}

static void worker_validation(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	Quorum__CoordMsg *d;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	c_ask(s, "c1", 1, &o);
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	{
		Quorum__WorkerMsg sm = QUORUM__WORKER_MSG__INIT;
		Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
		Quorum__Sample x = QUORUM__SAMPLE__INIT;
		static char big[4 * 256 + 2048];

		r.request_id = d->decode->request_id;
		r.attempt = d->decode->attempt;
		r.sample = &x;
		x.finish = "stop";
		x.text.data = (uint8_t *)"ok";
		x.text.len = 2;
		sm.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
		sm.sample = &r;
		x.index = 5; /* not the job's */
		fw_send(s, &a, &sm);
		x.index = 0;
		x.tokens = 5; /* more than max_new_tokens */
		fw_send(s, &a, &sm);
		x.tokens = 1;
		memset(big, 'x', sizeof(big));
		x.text.data = (uint8_t *)big; /* over 4 x 256 + 1024 bytes */
		x.text.len = sizeof(big);
		fw_send(s, &a, &sm);
		x.text.data = (uint8_t *)"ok";
		x.text.len = 2;
		x.has_steps = 1; /* steps: tokens, or one more */
		x.steps = 3;
		fw_send(s, &a, &sm);
		x.has_steps = 0;
		x.has_reasoning_tokens = 1; /* more than its tokens */
		x.reasoning_tokens = 2;
		fw_send(s, &a, &sm);
		x.reasoning_tokens = 1; /* all of them: fine, but... */
		x.finish = "maybe";
		fw_send(s, &a, &sm);
		assert_null(c_next("c1"));
		/* none of them taken: the sample is still the worker's */
		assert_non_null(s->reqs);
		assert_int_equal(s->reqs->st[0], S_ASSIGNED);
		/* a sample its grammar ended is a good one (it had been
		 * dropped as bad, and decoded again) */
		x.finish = "grammar";
		x.has_steps = 1;
		x.steps = 2;
		fw_send(s, &a, &sm);
		assert_int_equal(s->reqs->st[0], S_DONE);
		/* ...and taken with its count */
		assert_true(s->reqs->res[0]->sample->sample->has_reasoning_tokens &&
			    s->reqs->res[0]->sample->sample->reasoning_tokens == 1);
		/* a worker sending bad results as fast as it likes: their
		 * lines are held to SCHED_DROP_LOGS a second */
		{
			const char *t;

			clock_ms += 1000;
			cap_begin();
			for (int i = 0; i < 100; i++)
				fw_send(s, &a, &sm);
			t = cap_end();
			fputs(t, stderr);
			assert_int_equal(count_lines(t, "bad SampleResult"),
					 SCHED_DROP_LOGS);
		}
		assert_null(c_next("c1"));
	}
	fw_decode(s, &a, d->decode, NULL);
	quorum__coord_msg__free_unpacked(d, NULL);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

/* A worker's alternatives (top_logprobs) are checked before a client
 * sees them: a count over K or not one per token, values over 0, NaN or
 * rising, a duplicate id or one past the vocabulary, a piece that is not
 * the token's bytes — each result dropped; a good one reaches the client
 * as it was sent. */
static void alts_validation(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	Quorum__CoordMsg *d;
	size_t l0, l1;
	const char *p0 = tok_piece(vocab, 40, 1, &l0),
		   *p1 = tok_piece(vocab, 41, 1, &l1);

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	ask_top = 2;
	c_ask(s, "c1", 1, &o);
	ask_top = 0;
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	assert_true(d->decode->params->has_top_logprobs &&
		    d->decode->params->top_logprobs == 2);
	{
		Quorum__WorkerMsg sm = QUORUM__WORKER_MSG__INIT;
		Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
		Quorum__Sample x = QUORUM__SAMPLE__INIT;
		Quorum__ClientReply *rep;
		double lp[1] = {-0.5}, alp[3] = {-0.5, -1.5, -2};
		uint32_t off[1] = {0}, cnt[2] = {2, 0}, ids[3] = {40, 41, 42};
		ProtobufCBinaryData pc[3] = {{l0, (uint8_t *)p0},
					     {l1, (uint8_t *)p1},
					     {l1, (uint8_t *)p1}};
		static const struct {
			const char *what;
			uint32_t cnt0;
			double lp1;
			uint32_t id1;
			size_t n_counts;
			int piece1; /* the second piece is token 40's */
		} bad[] = {
			{"count over K", 3, -1.5, 41, 1, 0},
			{"no count per token", 2, -1.5, 41, 2, 0},
			{"a value over 0", 2, 0.5, 41, 1, 0},
			{"NaN", 2, NAN, 41, 1, 0},
			{"rising", 2, -0.25, 41, 1, 0},
			{"-inf", 2, -INFINITY, 41, 1, 0},
			{"duplicate id", 2, -1.5, 40, 1, 0},
			{"past the vocabulary", 2, -1.5, 1u << 30, 1, 0},
			{"not its bytes", 2, -1.5, 41, 1, 1},
		};

		r.request_id = d->decode->request_id;
		r.attempt = d->decode->attempt;
		r.sample = &x;
		x.finish = "stop";
		x.text.data = (uint8_t *)"ok";
		x.text.len = 2;
		x.tokens = 1;
		x.n_token_logprobs = x.n_token_offsets = 1;
		x.token_logprobs = lp;
		x.token_offsets = off;
		x.alt_counts = cnt;
		x.alt_tokens = ids;
		x.alt_logprobs = alp;
		x.alt_pieces = pc;
		sm.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
		sm.sample = &r;
		for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
			cnt[0] = bad[k].cnt0;
			alp[1] = bad[k].lp1;
			ids[1] = bad[k].id1;
			x.n_alt_counts = bad[k].n_counts;
			x.n_alt_tokens = x.n_alt_logprobs = x.n_alt_pieces =
				bad[k].cnt0;
			pc[1] = bad[k].piece1 ? pc[0]
					      : (ProtobufCBinaryData){
							l1, (uint8_t *)p1};
			fw_send(s, &a, &sm);
			if (c_next("c1"))
				fail_msg("%s: taken", bad[k].what);
		}
		cnt[0] = 2;
		alp[1] = -1.5;
		ids[1] = 41;
		pc[1] = (ProtobufCBinaryData){l1, (uint8_t *)p1};
		x.n_alt_counts = 1;
		x.n_alt_tokens = x.n_alt_logprobs = x.n_alt_pieces = 2;
		fw_send(s, &a, &sm);
		/* the job's end (its sample 0 again is a duplicate) */
		fw_decode(s, &a, d->decode, NULL);
		rep = c_next("c1");
		assert_non_null(rep);
		assert_int_equal(rep->status, QUORUM__STATUS__STATUS_OK);
		assert_int_equal(rep->answer->n_samples, 1);
		{
			const Quorum__Sample *y = rep->answer->samples[0];

			assert_int_equal(y->n_alt_counts, 1);
			assert_int_equal(y->alt_counts[0], 2);
			assert_int_equal(y->n_alt_tokens, 2);
			assert_int_equal(y->alt_tokens[1], 41);
			assert_true(y->alt_logprobs[1] == -1.5);
			assert_int_equal(y->alt_pieces[1].len, l1);
		}
		quorum__client_reply__free_unpacked(rep, NULL);
	}
	quorum__coord_msg__free_unpacked(d, NULL);
	free_sched(&s);
}

/* A PrefixReady naming a block outside the worker's own pool (past its
 * registered size, or another pool's slot) is refused: the root is
 * released and prefilled again; the request still gets its answer. */
static void bad_blocks(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a, *ws[1] = {&a};
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	static const uint32_t bad[2] = {64, KV_REF(1, 0)};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	for (int k = 0; k < 2; k++) {
		Quorum__CoordMsg *m;
		Quorum__WorkerMsg wm = QUORUM__WORKER_MSG__INIT;
		Quorum__PrefixReady r = QUORUM__PREFIX_READY__INIT;
		size_t ll = (size_t)tok_vocab_size(vocab) * sizeof(float);
		uint8_t *logits = calloc(1, ll);
		uint32_t blocks[16];

		if (k == 0)
			c_ask(s, "c1", 1, &o);
		m = w_next("A");
		assert_non_null(m);
		assert_int_equal(m->body_case, QUORUM__COORD_MSG__BODY_PREFILL);
		r.request_id = m->prefill->request_id;
		r.attempt = m->prefill->attempt;
		r.root_id = 90 + (uint32_t)k;
		r.n_tokens = m->prefill->n_tokens;
		r.n_blocks = nblocks(r.n_tokens);
		assert_true(r.n_blocks <= 16);
		for (uint32_t b = 0; b < r.n_blocks; b++)
			blocks[b] = b; /* all fine but the last */
		blocks[r.n_blocks - 1] = bad[k];
		r.blocks = blocks;
		r.pool_name = a.pool;
		r.logits.data = logits;
		r.logits.len = ll;
		wm.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
		wm.prefix_ready = &r;
		fw_send(s, &a, &wm);
		free(logits);
		quorum__coord_msg__free_unpacked(m, NULL);
		/* released at once, and the prompt prefilled again */
		m = w_next("A");
		assert_non_null(m);
		assert_int_equal(m->body_case, QUORUM__COORD_MSG__BODY_RELEASE);
		assert_int_equal(m->release->root_id, 90 + (uint32_t)k);
		quorum__coord_msg__free_unpacked(m, NULL);
		assert_null(c_next("c1"));
	}
	serve_all(s, ws, 1);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

static void fairness(void **state)
{
	sched *s = new_sched("limits:\n  queue_depth: 4\n"
			     "  max_prompt_tokens: 64\n", FW_FP);
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	ask_o longp = {long_q(3), NULL, 1, 4, 0};
	static char sys[WIRE_SYSTEM_MAX + 2];
	uint32_t retry;

	(void)state;
	/* no worker yet (within the grace): everything queues. Alone, a
	 * client may fill the queue */
	for (uint64_t i = 1; i <= 4; i++)
		c_ask(s, "greedy", i, &o);
	assert_null(c_next("greedy"));
	c_ask(s, "greedy", 5, &o);
	assert_int_equal(reply_retry("greedy", 5, &retry),
			 QUORUM__STATUS__STATUS_BUSY);
	assert_true(retry > 0);
	/* full, the cheap refusal comes before tokenizing: BUSY, not
	 * TOO_LONG */
	c_ask(s, "greedy", 6, &longp);
	assert_int_equal(reply_status("greedy", 6), QUORUM__STATUS__STATUS_BUSY);
	/* another client still gets in: greedy's newest queued request
	 * makes room (BUSY with a retry hint) */
	c_ask(s, "polite", 1, &o);
	assert_null(c_next("polite"));
	assert_int_equal(reply_retry("greedy", 4, &retry),
			 QUORUM__STATUS__STATUS_BUSY);
	assert_true(retry > 0);
	assert_int_equal(s->n_reqs, 4);
	/* field caps */
	memset(sys, 'x', sizeof(sys) - 1);
	o.system = sys;
	c_ask(s, "polite", 2, &o);
	assert_int_equal(reply_status("polite", 2),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	o.system = NULL;
	/* stop strings: at most 4, each 1..64 bytes */
	{
		static const char *const five[] = {"a", "b", "c", "d", "e"};
		char big[66];
		const char *one[1] = {big};

		c_ask_strs(s, "polite", 3, &o, five, 5);
		assert_int_equal(reply_status("polite", 3),
				 QUORUM__STATUS__STATUS_BAD_REQUEST);
		memset(big, 'y', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		c_ask_strs(s, "polite", 4, &o, one, 1);
		assert_int_equal(reply_status("polite", 4),
				 QUORUM__STATUS__STATUS_BAD_REQUEST);
	}
	/* a refused newcomer displaces nobody */
	c_ask(s, "third", 1, &longp);
	assert_int_equal(reply_status("third", 1),
			 QUORUM__STATUS__STATUS_TOO_LONG);
	assert_null(c_next("greedy"));
	assert_int_equal(s->n_reqs, 4);
	free_sched(&s);
}

static void pools_free(sched *s, fw **ws, int n);

/* n asks of gateway connection gw on behalf of user, ids from *rid. */
static void gw_asks(sched *s, const char *user, int n, uint64_t *rid,
		    const ask_o *o)
{
	ask_obo = user;
	for (int i = 0; i < n; i++)
		c_ask(s, "gw", (*rid)++, o);
	ask_obo = NULL;
}

static void gateway_users(void **state)
{
	sched *s = new_sched("limits:\n  queue_depth: 64\n", FW_FP);
	fw a;
	fw *ws[1] = {&a};
	ask_o o = {"What is 2 + 2?", NULL, 4, 4, 0};
	uint64_t rid = 1;
	uint32_t retry;
	int ok = 0;
	static const char dummy_zap;
	static const char gwkey[1][CURVE_Z85_LEN + 1] = {
		"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"};

	(void)state;
	/* one gateway connection, two users: 60 requests of n = 4 and 4:
	 * none refused while the queue has room */
	gw_asks(s, "key:0123456789abcdef", 60, &rid, &o);
	gw_asks(s, "key:fedcba9876543210", 4, &rid, &o);
	assert_null(c_next("gw"));
	assert_int_equal(s->n_reqs, 64);
	/* the heavy user over the full queue: BUSY with a retry hint */
	gw_asks(s, "key:0123456789abcdef", 1, &rid, &o);
	assert_int_equal(reply_retry("gw", 65, &retry),
			 QUORUM__STATUS__STATUS_BUSY);
	assert_true(retry > 0);
	/* the light one still gets in: the heavy one's newest queued
	 * request (60) makes room */
	gw_asks(s, "key:fedcba9876543210", 1, &rid, &o);
	assert_int_equal(reply_retry("gw", 60, &retry),
			 QUORUM__STATUS__STATUS_BUSY);
	assert_true(retry > 0);
	assert_null(c_next("gw"));
	/* every admitted request is answered */
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	serve_all(s, ws, 1);
	for (Quorum__ClientReply *r; (r = c_next("gw"));) {
		assert_int_equal(r->status, QUORUM__STATUS__STATUS_OK);
		assert_true(r->request_id <= 64 || r->request_id == 66);
		assert_true(r->request_id != 60);
		ok++;
		quorum__client_reply__free_unpacked(r, NULL);
	}
	assert_int_equal(ok, 64);
	assert_int_equal(s->n_reqs, 0);
	/* an ordinary client (not loopback, CURVE off) naming a user */
	ask_peer = "10.1.2.3";
	gw_asks(s, "key:0123456789abcdef", 1, &rid, &o);
	ask_peer = "";
	assert_int_equal(reply_status("gw", 67),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	/* ipc:// and IPv6 loopback peers are local */
	ask_peer = ":1000:1000:4242";
	gw_asks(s, "ip:127.0.0.1", 1, &rid, &o);
	ask_peer = "::1";
	gw_asks(s, "ip:::1", 1, &rid, &o);
	ask_peer = "";
	serve_all(s, ws, 1);
	assert_int_equal(reply_status("gw", 68), QUORUM__STATUS__STATUS_OK);
	assert_int_equal(reply_status("gw", 69), QUORUM__STATUS__STATUS_OK);
	/* malformed identities */
	gw_asks(s, "key:has space", 1, &rid, &o);
	assert_int_equal(reply_status("gw", 70),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	gw_asks(s, "", 1, &rid, &o);
	assert_int_equal(reply_status("gw", 71),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	{
		char big[WHO_NAME_MAX + 2];

		memset(big, 'k', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		gw_asks(s, big, 1, &rid, &o);
		assert_int_equal(reply_status("gw", 72),
				 QUORUM__STATUS__STATUS_BAD_REQUEST);
	}
	/* CURVE on: only a gateway key may name a user, loopback or not */
	s->zap = (const curve_zap *)&dummy_zap; /* only "on" is read */
	s->o.gateway_keys = gwkey;
	s->o.n_gateway_keys = 1;
	ask_obo = "key:0123456789abcdef";
	c_ask_k(s, "c9", "KEY-OTHER", rid++, &o, 0, NULL, 0);
	assert_int_equal(reply_status("c9", 73),
			 QUORUM__STATUS__STATUS_BAD_REQUEST);
	c_ask_k(s, "g2", gwkey[0], rid++, &o, 0, NULL, 0);
	ask_obo = NULL;
	serve_all(s, ws, 1);
	assert_int_equal(reply_status("g2", 74), QUORUM__STATUS__STATUS_OK);
	s->zap = NULL;
	fw_serve(s, &a);
	pools_free(s, ws, 1);
	free_sched(&s);
}

static void client_limits(void **state)
{
	sched *s = new_sched("limits:\n  per_client_in_flight: 2\n"
			     "  tokens_per_minute: 8\n", FW_FP);
	fw a;
	fw *ws[1] = {&a};
	ask_o o = {"What is 2 + 2?", NULL, 4, 4, 0};
	uint64_t rid = 1;
	uint32_t retry;

	(void)state;
	/* two in flight per user; a third BUSY, another user admitted */
	gw_asks(s, "key:aaaa", 3, &rid, &o);
	assert_int_equal(reply_retry("gw", 3, &retry),
			 QUORUM__STATUS__STATUS_BUSY);
	assert_true(retry > 0);
	gw_asks(s, "key:bbbb", 1, &rid, &o);
	assert_null(c_next("gw"));
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	serve_all(s, ws, 1);
	for (int i = 0; i < 3; i++) {
		Quorum__ClientReply *r = c_next("gw");

		assert_non_null(r);
		quorum__client_reply__free_unpacked(r, NULL);
	}
	/* aaaa generated 2 x 4 tokens: its minute's 8 are spent; its next
	 * ask is BUSY until a token is back (60000 / 8 ms), bbbb's is not */
	gw_asks(s, "key:aaaa", 1, &rid, &o);
	assert_int_equal(reply_retry("gw", 5, &retry),
			 QUORUM__STATUS__STATUS_BUSY);
	assert_true(retry >= 7500 && retry <= 7502);
	gw_asks(s, "key:bbbb", 1, &rid, &o);
	serve_all(s, ws, 1);
	assert_int_equal(reply_status("gw", 6), QUORUM__STATUS__STATUS_OK);
	advance(s, retry, ws, 1);
	gw_asks(s, "key:aaaa", 1, &rid, &o);
	serve_all(s, ws, 1);
	assert_int_equal(reply_status("gw", 7), QUORUM__STATUS__STATUS_OK);
	pools_free(s, ws, 1);
	free_sched(&s);
}

static void fair_start(void **state)
{
	sched *s = new_sched("limits:\n  queue_depth: 16\n", FW_FP);
	fw a;
	/* N = 2 on a worker of 4 slots: two requests claim every slot */
	ask_o o[4] = {{"one?", NULL, 2, 4, 0}, {"two?", NULL, 2, 4, 0},
		      {"three?", NULL, 2, 4, 0}, {"four?", NULL, 2, 4, 0}};
	int started_y = 0, started_x = 0;

	(void)state;
	/* no worker yet: everything queues, x first */
	c_ask(s, "x", 1, &o[0]);
	c_ask(s, "x", 2, &o[1]);
	c_ask(s, "x", 3, &o[2]);
	c_ask(s, "y", 1, &o[3]);
	worker_init(&a, "A", "wa", "h", 64, 4);
	a.hold = 1;
	/* one worker, two requests under way: one of each client */
	fw_register(s, &a);
	for (const req *r = s->reqs; r; r = r->next)
		if (r->state != Q_QUEUED) {
			started_x += r->cid[0] == 'x';
			started_y += r->cid[0] == 'y';
		}
	assert_int_equal(started_x, 1);
	assert_int_equal(started_y, 1);
	fw_serve(s, &a);
	for (int i = 0; i < a.n_held; i++)
		quorum__coord_msg__free_unpacked(a.held[i], NULL);
	free_sched(&s);
}

/* Slots are shared by max-min fairness: a request of N=16 that came
 * first and filled the worker's 8 slots does not keep them when they
 * free — the request of N=4 behind it gets its share at once (the worker
 * interleaves both in merged rounds). */
static void slot_share(void **state)
{
	sched *s = new_sched("limits:\n  queue_depth: 16\n", FW_FP);
	fw a;
	ask_o big = {"big?", NULL, 16, 4, 0}, small = {"small?", NULL, 4, 4, 0};
	uint64_t rid_x = 0, rid_y = 0;
	Quorum__CoordMsg *first;
	int got_x = 0, got_y = 0;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 8);
	a.hold = 1;
	fw_register(s, &a);
	c_ask(s, "x", 1, &big);
	fw_serve(s, &a); /* x's prefill; its first job is held */
	c_ask(s, "y", 1, &small);
	fw_serve(s, &a); /* y's prefill; no slot free for y */
	for (const req *r = s->reqs; r; r = r->next) {
		if (r->cid[0] == 'x')
			rid_x = r->rid;
		if (r->cid[0] == 'y')
			rid_y = r->rid;
	}
	assert_int_equal(a.n_held, 1);
	assert_int_equal(a.held[0]->decode->request_id, rid_x);
	assert_int_equal(a.held[0]->decode->n_indices, 8);
	/* x's first 8 samples end: the 8 slots go 4 to y, 4 to x */
	first = a.held[0];
	a.n_held = 0;
	fw_decode(s, &a, first->decode, NULL);
	quorum__coord_msg__free_unpacked(first, NULL);
	fw_serve(s, &a);
	for (int i = 0; i < a.n_held; i++) {
		const Quorum__DecodeJob *d = a.held[i]->decode;

		got_x += d->request_id == rid_x ? (int)d->n_indices : 0;
		got_y += d->request_id == rid_y ? (int)d->n_indices : 0;
	}
	assert_int_equal(got_y, 4);
	assert_int_equal(got_x, 4);
	/* the rest runs to the end: both answered */
	a.hold = 0;
	while (a.n_held) {
		Quorum__CoordMsg *m = a.held[--a.n_held];

		fw_decode(s, &a, m->decode, NULL);
		quorum__coord_msg__free_unpacked(m, NULL);
		fw_serve(s, &a);
	}
	assert_int_equal(reply_status("x", 1), QUORUM__STATUS__STATUS_OK);
	assert_int_equal(reply_status("y", 1), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

/* ---- cross-host copies in chunks ------------------------------------- */

/* Messages hold chunks of 3 blocks (FW_TOKEN_BYTES a token) beside the
 * logits: wire_root_chunk_bytes. */
static sched *new_sched_chunks(const char *extra)
{
	char y[512];

	snprintf(y, sizeof(y), "limits:\n  max_message_bytes: %ld\n%s",
		 (long)tok_vocab_size(vocab) * 4 + WIRE_ROOT_HEADROOM +
			 3 * 16 * FW_TOKEN_BYTES,
		 extra ? extra : "");
	return new_sched(y, FW_FP);
}

/* Chunk requests and chunks on their way (ExportRoot, ImportRoot). */
static int xfers_queued(void)
{
	int n = 0;

	for (int i = 0; i < n_out; i++) {
		Quorum__CoordMsg *m;

		if (!outq[i].to_worker)
			continue;
		m = quorum__coord_msg__unpack(NULL, outq[i].len, outq[i].buf);
		assert_non_null(m);
		n += m->body_case == QUORUM__COORD_MSG__BODY_EXPORT_ROOT ||
		     m->body_case == QUORUM__COORD_MSG__BODY_IMPORT_ROOT;
		quorum__coord_msg__free_unpacked(m, NULL);
	}
	return n;
}

/* Serves the workers one message queue at a time until all are quiet,
 * checking that a transfer never has more than one chunk in flight (a
 * chunk is asked for only once the last one is imported). */
static void serve_stepwise(sched *s, fw **ws, int n)
{
	for (int busy = 1; busy;) {
		busy = 0;
		for (int i = 0; i < n; i++) {
			busy += fw_serve(s, ws[i]);
			assert_true(xfers_queued() <= 1);
		}
	}
}

/* The reply to (cid, rid): OK with n samples; its prefix stats out. */
static void reply_ok(const char *cid, uint64_t rid, uint32_t n,
		     uint32_t *prompt, uint32_t *transferred, uint64_t *bytes)
{
	Quorum__ClientReply *r = c_next(cid);

	assert_non_null(r);
	if (r->status != QUORUM__STATUS__STATUS_OK)
		fail_msg("%s: %s", wire_status_name(r->status), r->error);
	assert_int_equal(r->request_id, rid);
	assert_int_equal(r->answer->n_samples, n);
	*prompt = r->answer->prefix->prompt_tokens;
	*transferred = r->answer->prefix->blocks_transferred;
	*bytes = r->answer->prefix->bytes_transferred;
	quorum__client_reply__free_unpacked(r, NULL);
}

/* Every pool back to free: the cached roots evicted and Released. */
static void pools_free(sched *s, fw **ws, int n)
{
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used)
			assert_true(roots_make_room(s, i, s->w[i].pool_blocks));
	serve_all(s, ws, n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(ws[i]->used, 0);
		assert_int_equal(ws[i]->n_roots, 0);
	}
	assert_null(s->entries);
}

/* Workers A (host h1) and B (host h2), 64 blocks and 4 slots each,
 * registered: the two hosts of the copy cases. */
static void two_hosts(sched *s, fw *a, fw *b)
{
	worker_init(a, "A", "wa", "h1", 64, 4);
	worker_init(b, "B", "wb", "h2", 64, 4);
	fw_register(s, a);
	fw_register(s, b);
}

/* A root larger than one message goes to the other host in chunks of
 * whole blocks, one in flight at a time, each imported on top of the
 * last (whose partial root is then Released); only the last carries the
 * logits. The copy is whole and usable: host h2 decodes from it; a
 * second request finds it there and nothing moves. */
static void chunked_copy(void **state)
{
	sched *s = new_sched_chunks(NULL);
	fw a, b, *ws[2] = {&a, &b};
	ask_o o = {long_q(0), NULL, 8, 4, 0};
	uint32_t prompt, moved, chunks;
	uint64_t bytes;

	(void)state;
	two_hosts(s, &a, &b);
	c_ask(s, "c1", 1, &o);
	serve_stepwise(s, ws, 2);
	reply_ok("c1", 1, 8, &prompt, &moved, &bytes);
	chunks = (prompt + 47) / 48;
	assert_true(chunks >= 4); /* the prompt is ~180 tokens */
	assert_int_equal(a.exports, chunks);
	assert_int_equal(a.partials, chunks - 1);
	assert_int_equal(b.imports, chunks);
	assert_true(b.decodes >= 1);
	/* every block once; the partial roots released */
	assert_int_equal(moved, nblocks(prompt));
	assert_int_equal(bytes, (uint64_t)prompt * FW_TOKEN_BYTES);
	assert_int_equal(b.releases, chunks - 1);
	assert_int_equal(b.n_roots, 1);
	assert_int_equal(b.used, nblocks(prompt));
	assert_int_equal(roots_committed(s, 1), nblocks(prompt));
	/* cached on both hosts: nothing moves again */
	c_ask(s, "c1", 2, &o);
	serve_stepwise(s, ws, 2);
	reply_ok("c1", 2, 8, &prompt, &moved, &bytes);
	assert_int_equal(moved, 0);
	assert_int_equal(a.exports, chunks);
	pools_free(s, ws, 2);
	free_sched(&s);
}

/* The transfer's request ends mid-transfer (its deadline; it bypassed
 * the cache, so nobody wants the root): the importer's partial root is
 * Released, so are the chunk in flight when it lands and the holder's
 * root — every pool back to free. */
static void chunked_cancel(void **state)
{
	sched *s = new_sched_chunks(NULL);
	fw a, b, *ws[2] = {&a, &b};
	ask_o o = {long_q(1), NULL, 8, 4, 500};

	(void)state;
	two_hosts(s, &a, &b);
	c_ask_k(s, "c1", "", 1, &o, 1, NULL, 0);
	/* the prefill, A's samples, chunk 1; B imports it; chunk 2 */
	fw_serve(s, &a);
	fw_serve(s, &b);
	fw_serve(s, &a);
	assert_int_equal(a.exports, 2);
	assert_int_equal(b.imports, 1);
	assert_int_equal(b.n_roots, 1); /* the partial root of chunk 1 */
	assert_int_equal(xfers_queued(), 1); /* chunk 2, to B */
	advance(s, 600, ws, 2);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_TIMEOUT);
	serve_all(s, ws, 2);
	assert_int_equal(b.imports, 2);
	assert_int_equal(a.exports, 2); /* no chunk 3 asked for */
	assert_int_equal(a.n_roots, 0);
	assert_int_equal(b.n_roots, 0);
	assert_int_equal(a.used, 0);
	assert_int_equal(b.used, 0);
	assert_null(s->entries);
	free_sched(&s);
}

/* A worker lost mid-transfer. The importer: its peer on that host gets
 * the copy from the start (the new transfer's partial roots released as
 * it goes). The holder: its root dies with it, the importer releases
 * the partial root (and the chunk in flight when it lands), the prompt
 * is prefilled again on the holder's peer and copied from there. Every
 * reply OK, all pools free at the end. */
static void chunked_worker_lost(void **state)
{
	sched *s = new_sched_chunks(NULL);
	fw a, b, c, *ws[3] = {&a, &b, &c}, *imp, *peer;
	ask_o o = {long_q(2), NULL, 8, 4, 0};
	uint32_t prompt, moved;
	uint64_t bytes;

	(void)state;
	worker_init(&a, "A", "wa", "h1", 64, 4);
	worker_init(&b, "B", "wb", "h2", 64, 4);
	worker_init(&c, "C", "wc", "h2", 64, 4);
	for (int i = 0; i < 3; i++)
		fw_register(s, ws[i]);
	/* the importer: the h2 worker the first chunk goes to */
	c_ask(s, "c1", 1, &o);
	fw_serve(s, &a);
	fw_serve(s, &b);
	fw_serve(s, &c); /* chunk 1 imported, chunk 2 asked for */
	imp = b.imports ? &b : &c;
	peer = imp == &b ? &c : &b;
	assert_int_equal(imp->imports, 1);
	assert_int_equal(peer->imports, 0);
	fw_serve(s, &a); /* chunk 2 on its way to the importer */
	{
		fw *alive[2] = {&a, peer};

		out_drop(imp->ident);
		imp->ident = NULL; /* silent from now on */
		advance(s, 400, alive, 2);
		serve_stepwise(s, alive, 2);
		reply_ok("c1", 1, 8, &prompt, &moved, &bytes);
		/* the peer got the whole copy, chunk by chunk */
		assert_int_equal(peer->imports, (prompt + 47) / 48);
		assert_int_equal(peer->n_roots, 1);
		assert_int_equal(peer->used, nblocks(prompt));
		pools_free(s, alive, 2);
	}
	free_sched(&s);

	/* the holder lost while a chunk is at the importer */
	s = new_sched_chunks(NULL);
	worker_init(&a, "A", "wa", "h1", 64, 4);
	worker_init(&b, "B", "wb", "h1", 64, 4);
	worker_init(&c, "C", "wc", "h2", 64, 4);
	for (int i = 0; i < 3; i++)
		fw_register(s, ws[i]);
	c_ask(s, "c1", 2, &o);
	fw_serve(s, &a); /* the prefill is A's (first of the least loaded) */
	assert_int_equal(a.prefills, 1);
	fw_serve(s, &b);
	fw_serve(s, &c);
	fw_serve(s, &a); /* chunk 2 to C */
	assert_int_equal(c.imports, 1);
	assert_int_equal(c.n_roots, 1);
	{
		fw *alive[2] = {&b, &c};

		out_drop(a.ident);
		a.ident = NULL;
		advance(s, 400, alive, 2);
		/* chunk 2 lands at C: Released at once */
		assert_int_equal(xfers_queued(), 1);
		c.releases = 0;
		fw_serve(s, &c);
		assert_int_equal(c.imports, 2);
		assert_int_equal(c.n_roots, 0);
		assert_int_equal(c.used, 0);
		serve_stepwise(s, alive, 2);
		reply_ok("c1", 2, 8, &prompt, &moved, &bytes);
		assert_int_equal(b.prefills, 1);
		/* C: chunk 1 of A's root, chunk 2 (released on arrival),
		 * then B's root whole in chunks */
		assert_int_equal(c.imports, 2 + (prompt + 47) / 48);
		assert_int_equal(c.n_roots, 1);
		assert_int_equal(c.used, nblocks(prompt));
		pools_free(s, alive, 2);
	}
	free_sched(&s);
}

/* A holder sending a bad chunk — off a block boundary, past the root's
 * end, starting elsewhere, partial with logits — gets its copy refused:
 * the importer releases what it built, nothing bad is forwarded (the
 * fake importer asserts each chunk's sizes), the other host's samples
 * are decoded on the holder's host, the reply is OK. */
static void chunked_bad(void **state)
{
	for (int how = 1; how <= 4; how++) {
		sched *s = new_sched_chunks(NULL);
		fw a, b, *ws[2] = {&a, &b};
		ask_o o = {long_q(3), NULL, 8, 4, 0};
		uint32_t prompt, moved;
		uint64_t bytes;

		(void)state;
		two_hosts(s, &a, &b);
		a.bad_chunk = 2;
		a.bad_how = how;
		c_ask(s, "c1", 1, &o);
		serve_stepwise(s, ws, 2);
		reply_ok("c1", 1, 8, &prompt, &moved, &bytes);
		assert_int_equal(a.exports, 2);
		assert_int_equal(b.imports, 1);
		assert_int_equal(b.decodes, 0);
		assert_int_equal(b.n_roots, 0); /* chunk 1's, released */
		assert_int_equal(b.used, 0);
		assert_true(roots_transfer_failed(s->entries, "h2"));
		pools_free(s, ws, 2);
		free_sched(&s);
	}
}

/* A worker that heartbeats but never answers its step of a copy — the
 * holder asked for chunk 2, or the importer sent chunk 1 — would leave
 * the other host's samples waiting until the request's deadline. After
 * limits.copy_step_timeout_ms the copy fails instead: the samples are
 * decoded on the holder's host, the reply is OK long before the
 * deadline, and what the copy built is released. */
static void chunked_stuck(void **state)
{
	for (int who = 0; who < 2; who++) {
		sched *s = new_sched_chunks("  copy_step_timeout_ms: 500\n");
		fw a, b, *ws[2] = {&a, &b};
		ask_o o = {long_q(4), NULL, 8, 4, 0};
		uint32_t prompt, moved;
		uint64_t bytes;

		(void)state;
		two_hosts(s, &a, &b);
		c_ask(s, "c1", 1, &o);
		if (who == 0) {
			/* chunk 1 goes through; chunk 2 is never sent */
			fw_serve(s, &a);
			fw_serve(s, &b);
			assert_int_equal(b.imports, 1);
			a.mute_copies = 1;
			fw_serve(s, &a);
		} else {
			/* the importer swallows chunk 1 */
			fw_serve(s, &a);
			b.mute_copies = 1;
			fw_serve(s, &b);
		}
		assert_int_equal(a.muted + b.muted, 1);
		assert_null(c_next("c1")); /* h2's samples wait */
		advance(s, 400, ws, 2);
		serve_all(s, ws, 2);
		assert_null(c_next("c1")); /* still within the limit */
		advance(s, 200, ws, 2);
		serve_all(s, ws, 2);
		reply_ok("c1", 1, 8, &prompt, &moved, &bytes);
		assert_int_equal(b.decodes, 0);
		assert_int_equal(b.n_roots, 0); /* chunk 1's root released */
		assert_int_equal(b.used, 0);
		assert_true(roots_transfer_failed(s->entries, "h2"));
		pools_free(s, ws, 2);
		free_sched(&s);
	}
}

/* One streamed part of sample index of job d, from w, with its run of
 * tokens (NULL: none). */
static void w_part(sched *s, fw *w, const Quorum__DecodeJob *d,
		   uint32_t index, uint32_t offset, const char *text,
		   Quorum__TokenRun *run)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleText t = QUORUM__SAMPLE_TEXT__INIT;
	Quorum__TextPart p = QUORUM__TEXT_PART__INIT, *pp = &p;

	p.index = index;
	p.offset = offset;
	p.text.data = (uint8_t *)text;
	p.text.len = strlen(text);
	p.tokens = run;
	t.request_id = d->request_id;
	t.attempt = d->attempt;
	t.n_parts = 1;
	t.parts = &pp;
	m.body_case = QUORUM__WORKER_MSG__BODY_TEXT;
	m.text = &t;
	fw_send(s, w, &m);
}

static void w_text(sched *s, fw *w, const Quorum__DecodeJob *d,
		   uint32_t index, uint32_t offset, const char *text)
{
	w_part(s, w, d, index, offset, text, NULL);
}

/* The next message to w is a Cancel of request rid. */
static void expect_cancel(fw *w, uint64_t rid)
{
	Quorum__CoordMsg *m = w_next(w->ident);

	assert_non_null(m);
	assert_int_equal(m->body_case, QUORUM__COORD_MSG__BODY_CANCEL);
	assert_int_equal(m->cancel->request_id, rid);
	quorum__coord_msg__free_unpacked(m, NULL);
}

/* A streamed request whose client is gone is cancelled at the first
 * part that cannot be sent — a streamed text, a sample, or the stream's
 * start — as a CancelAsk would: its job cancelled, its slots free, no
 * reply, one reply counted lost (not one per part). */
static void stream_client_gone(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 2, 4, 0};
	Quorum__ClientReply *rep;
	Quorum__CoordMsg *d;
	uint64_t rid;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	ask_stream = 1;
	/* gone while a text streams */
	c_ask(s, "c1", 1, &o);
	rep = c_next("c1");
	assert_non_null(rep);
	assert_int_equal(rep->body_case, QUORUM__CLIENT_REPLY__BODY_STARTED);
	quorum__client_reply__free_unpacked(rep, NULL);
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	assert_true(d->decode->stream);
	rid = d->decode->request_id;
	gone_cid = "c1";
	w_text(s, &a, d->decode, 0, 0, "The");
	w_text(s, &a, d->decode, 0, 3, " answer");
	w_text(s, &a, d->decode, 1, 0, "The");
	assert_int_equal(s->unroutable, 1);
	assert_int_equal(s->n_reqs, 0);
	assert_int_equal(s->failed, 1);
	assert_int_equal(s->w[0].busy, 0);
	expect_cancel(&a, rid);
	/* what the worker still sends finds no job */
	fw_decode(s, &a, d->decode, NULL);
	quorum__coord_msg__free_unpacked(d, NULL);
	assert_int_equal(s->unroutable, 1);
	assert_null(c_next("c1"));
	gone_cid = NULL;

	/* gone when the first sample comes (no text streamed) */
	c_ask(s, "c2", 2, &o);
	rep = c_next("c2");
	assert_non_null(rep);
	quorum__client_reply__free_unpacked(rep, NULL);
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	gone_cid = "c2";
	fw_decode(s, &a, d->decode, NULL);
	quorum__coord_msg__free_unpacked(d, NULL);
	assert_int_equal(s->unroutable, 2);
	assert_int_equal(s->n_reqs, 0);
	assert_int_equal(s->w[0].busy, 0);
	assert_null(c_next("c2"));
	gone_cid = NULL;

	/* gone before the stream's start: nothing is prefilled for it */
	gone_cid = "c3";
	c_ask(s, "c3", 3, &o);
	assert_int_equal(s->unroutable, 3);
	assert_int_equal(s->n_reqs, 0);
	gone_cid = NULL;
	ask_stream = 0;

	/* the worker still serves a request of a client that is there */
	o.question = "What is 3 + 3?";
	c_ask(s, "c4", 4, &o);
	serve_all(s, (fw *[]){&a}, 1);
	assert_int_equal(reply_status("c4", 4), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

/* A streamed sample's result from w: text, answer 5, one token. */
static void w_result(sched *s, fw *w, const Quorum__DecodeJob *d,
		     uint32_t index, const char *text)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
	Quorum__Sample x = QUORUM__SAMPLE__INIT;

	x.index = index;
	x.finish = "stop";
	x.tokens = 1;
	x.has_answer = 1;
	x.answer.data = (uint8_t *)"5";
	x.answer.len = 1;
	x.text.data = (uint8_t *)text;
	x.text.len = strlen(text);
	r.request_id = d->request_id;
	r.attempt = d->attempt;
	r.sample = &x;
	m.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
	m.sample = &r;
	fw_send(s, w, &m);
}

/* The JobDone of job d from w: OK, tokens generated. */
static void w_done(sched *s, fw *w, const Quorum__DecodeJob *d,
		   uint64_t tokens)
{
	Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
	Quorum__JobDone x = QUORUM__JOB_DONE__INIT;

	x.request_id = d->request_id;
	x.attempt = d->attempt;
	x.status = QUORUM__STATUS__STATUS_OK;
	x.has_generated_tokens = 1;
	x.generated_tokens = tokens;
	m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
	m.job_done = &x;
	fw_send(s, w, &m);
}

/* A worker's streamed text is checked: a part past the bytes a sample's
 * text may have is dropped (WIRE_SAMPLE_TEXT_MAX, as a result's), and a
 * result whose text does not begin with the bytes streamed is a bad
 * result (dropped); the client's parts concatenate to the sample's
 * text. */
static void stream_text_checked(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	Quorum__ClientReply *rep;
	Quorum__CoordMsg *d;
	static char big[WIRE_SAMPLE_TEXT_MAX(4) + 2]; /* + its NUL */

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	ask_stream = 1;
	c_ask(s, "c1", 1, &o);
	ask_stream = 0;
	rep = c_next("c1");
	assert_non_null(rep);
	assert_int_equal(rep->body_case, QUORUM__CLIENT_REPLY__BODY_STARTED);
	quorum__client_reply__free_unpacked(rep, NULL);
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	memset(big, 'A', sizeof(big) - 1);
	w_text(s, &a, d->decode, 0, 0, big); /* one byte over */
	assert_null(c_next("c1"));
	w_text(s, &a, d->decode, 0, 0, "The answer is 99");
	rep = c_next("c1");
	assert_non_null(rep);
	assert_int_equal(rep->body_case, QUORUM__CLIENT_REPLY__BODY_PARTIAL);
	assert_int_equal(rep->partial->text.len, 16);
	quorum__client_reply__free_unpacked(rep, NULL);
	/* the result contradicts the stream: dropped */
	w_result(s, &a, d->decode, 0, "The answer is 5.");
	assert_null(c_next("c1"));
	w_result(s, &a, d->decode, 0, "The answer is 9");
	assert_null(c_next("c1"));
	/* one that extends it: the rest and the sample */
	w_result(s, &a, d->decode, 0, "The answer is 99.");
	rep = c_next("c1");
	assert_non_null(rep);
	assert_int_equal(rep->body_case, QUORUM__CLIENT_REPLY__BODY_PARTIAL);
	assert_int_equal(rep->partial->text.len, 1);
	assert_memory_equal(rep->partial->text.data, ".", 1);
	assert_non_null(rep->partial->done);
	quorum__client_reply__free_unpacked(rep, NULL);
	w_done(s, &a, d->decode, 1);
	quorum__coord_msg__free_unpacked(d, NULL);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

/* A streamed part of sample 0 of job d from w: text at offset, and a run
 * of n tokens from first (values lp, offsets off, ending at end). */
static void w_text_run(sched *s, fw *w, const Quorum__DecodeJob *d,
		       uint32_t offset, const char *text, uint32_t first,
		       uint32_t end, size_t n, double *lp, uint32_t *off)
{
	Quorum__TokenRun run = QUORUM__TOKEN_RUN__INIT;

	run.first = first;
	run.end = end;
	run.n_token_logprobs = run.n_token_offsets = n;
	run.token_logprobs = lp;
	run.token_offsets = off;
	w_part(s, w, d, 0, offset, text, &run);
}

/* The next reply to c1 is a part: its text's length, and the tokens it
 * forwards (first, count; count 0: none). */
static void expect_part(size_t len, uint32_t first, size_t n)
{
	Quorum__ClientReply *rep = c_next("c1");

	assert_non_null(rep);
	assert_int_equal(rep->body_case, QUORUM__CLIENT_REPLY__BODY_PARTIAL);
	assert_int_equal(rep->partial->text.len, len);
	if (!n) {
		assert_null(rep->partial->tokens);
	} else {
		assert_non_null(rep->partial->tokens);
		assert_int_equal(rep->partial->tokens->first, first);
		assert_int_equal(rep->partial->tokens->n_token_logprobs, n);
	}
	quorum__client_reply__free_unpacked(rep, NULL);
}

/* A worker's streamed tokens are checked as a sample's are, within the
 * text so far: a bad run is dropped (its text goes on), a run past the
 * tokens forwarded (a gap) forwards none, one overlapping them only the
 * new ones; and a result whose first tokens differ from those forwarded
 * is a bad result, as one contradicting the streamed text is. */
static void stream_tokens_checked(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 1, 8, 0};
	Quorum__CoordMsg *d;
	double lp[3] = {-0.5, -0.25, -1};
	uint32_t off[3] = {0, 3, 7};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	ask_stream = ask_lp = 1;
	c_ask(s, "c1", 1, &o);
	ask_stream = ask_lp = 0;
	quorum__client_reply__free_unpacked(c_next("c1"), NULL); /* started */
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	/* a value above 0, offsets falling, an end past the part: dropped */
	lp[0] = 0.5;
	w_text_run(s, &a, d->decode, 0, "The", 0, 3, 1, lp, off);
	expect_part(3, 0, 0);
	lp[0] = -0.5;
	off[1] = 0;
	w_text_run(s, &a, d->decode, 3, " a", 0, 5, 2, lp, (uint32_t[]){4, 2});
	expect_part(2, 0, 0);
	off[1] = 3;
	w_text_run(s, &a, d->decode, 5, "n", 0, 9, 2, lp, off);
	expect_part(1, 0, 0);
	/* good: tokens 0 and 1 ("The", " an") */
	w_text_run(s, &a, d->decode, 6, "s", 0, 6, 2, lp, off);
	expect_part(1, 0, 2);
	/* a gap (from token 3): none; an overlap (1..2): token 2 only */
	w_text_run(s, &a, d->decode, 7, "w", 3, 8, 1, lp + 2, off + 2);
	expect_part(1, 0, 0);
	w_text_run(s, &a, d->decode, 8, "er", 1, 10, 2, lp + 1, off + 1);
	expect_part(2, 2, 1);
	/* the result: its first three tokens must be those forwarded */
	{
		Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
		Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
		Quorum__Sample x = QUORUM__SAMPLE__INIT;
		double flp[4] = {-0.5, -0.25, -1, -2};
		uint32_t foff[4] = {0, 3, 7, 10};

		x.finish = "stop";
		x.tokens = 3;
		x.text.data = (uint8_t *)"The answer";
		x.text.len = 10;
		x.n_token_logprobs = x.n_token_offsets = 4;
		x.token_logprobs = flp;
		x.token_offsets = foff;
		r.request_id = d->decode->request_id;
		r.attempt = d->decode->attempt;
		r.sample = &x;
		m.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
		m.sample = &r;
		flp[1] = -0.3; /* not what the client was shown */
		fw_send(s, &a, &m);
		assert_null(c_next("c1"));
		flp[1] = -0.25;
		fw_send(s, &a, &m);
		expect_part(0, 0, 0);
	}
	w_done(s, &a, d->decode, 3);
	quorum__coord_msg__free_unpacked(d, NULL);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

/* A JobDone's stats are held to what its job could have done: a claim
 * of 2^63 tokens is neither in the reply nor in the client's
 * tokens_per_minute debt (its next ask is admitted), absurd block counts
 * and decode times are held too. */
static void job_done_bounds(void **state)
{
	sched *s = new_sched("limits:\n  tokens_per_minute: 100000\n", FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 2, 4, 0};
	Quorum__ClientReply *rep;
	Quorum__CoordMsg *d;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	fw_register(s, &a);
	c_ask(s, "c1", 1, &o);
	d = prefill_to_decode(s, &a);
	assert_non_null(d);
	assert_int_equal(d->decode->n_indices, 2);
	w_result(s, &a, d->decode, 0, "The answer is 5.");
	w_result(s, &a, d->decode, 1, "The answer is 5.");
	{
		Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
		Quorum__JobDone x = QUORUM__JOB_DONE__INIT;

		x.request_id = d->decode->request_id;
		x.attempt = d->decode->attempt;
		x.status = QUORUM__STATUS__STATUS_OK;
		x.has_generated_tokens = x.has_blocks_mapped = 1;
		x.has_blocks_copied = x.has_decode_ms = 1;
		x.generated_tokens = 1ull << 63;
		x.blocks_mapped = UINT32_MAX;
		x.blocks_copied = UINT32_MAX;
		x.decode_ms = NAN;
		m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
		m.job_done = &x;
		fw_send(s, &a, &m);
	}
	quorum__coord_msg__free_unpacked(d, NULL);
	rep = c_next("c1");
	assert_non_null(rep);
	assert_int_equal(rep->status, QUORUM__STATUS__STATUS_OK);
	assert_true(rep->answer->timings->generated_tokens <= 2 * (4 + 1));
	assert_true(rep->answer->stop->tokens_generated <= 2 * (4 + 1));
	assert_true(rep->answer->prefix->blocks_mapped <=
		    2 * rep->answer->prefix->prefix_blocks);
	assert_true(rep->answer->prefix->blocks_copied <= 2);
	assert_true(rep->answer->timings->decode_ms == 0);
	quorum__client_reply__free_unpacked(rep, NULL);
	/* the client owes at most what 2 samples could take */
	c_ask(s, "c1", 2, &o);
	serve_all(s, (fw *[]){&a}, 1);
	assert_int_equal(reply_status("c1", 2), QUORUM__STATUS__STATUS_OK);
	free_sched(&s);
}

/* Worker messages that match nothing are dropped with a line naming why
 * (a malformed one, one from an unregistered peer, results for a job
 * never sent), at most SCHED_DROP_LOGS lines a second: a flood is
 * counted, not written; a late message of a job that ended is quiet. */
static void stray_messages(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a, z;
	const char *t;
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	worker_init(&z, "Z", "wz", "h", 64, 4); /* never registers */
	fw_register(s, &a);
	/* a served request: its late messages are quiet */
	c_ask(s, "c1", 1, &o);
	serve_all(s, (fw *[]){&a}, 1);
	assert_int_equal(reply_status("c1", 1), QUORUM__STATUS__STATUS_OK);
	cap_begin();
	{
		wire_msg in = {0};

		in.id_len = 1;
		in.id[0] = 'A';
		sched_on_worker(s, QERR_FORMAT, &in); /* 2 frames */
	}
	fw_heartbeat(s, &z);
	{
		Quorum__WorkerMsg m = QUORUM__WORKER_MSG__INIT;
		Quorum__SampleResult r = QUORUM__SAMPLE_RESULT__INIT;
		Quorum__Sample x = QUORUM__SAMPLE__INIT;
		Quorum__JobDone jd = QUORUM__JOB_DONE__INIT;
		Quorum__PrefixReady px = QUORUM__PREFIX_READY__INIT;
		Quorum__RootData rd = QUORUM__ROOT_DATA__INIT;

		x.finish = "stop";
		r.request_id = 999999;
		r.attempt = 1;
		r.sample = &x;
		m.body_case = QUORUM__WORKER_MSG__BODY_SAMPLE;
		m.sample = &r;
		fw_send(s, &z, &m); /* unregistered */
		fw_send(s, &a, &m); /* never sent */
		jd.request_id = 999999;
		jd.attempt = 1;
		m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
		m.job_done = &jd;
		fw_send(s, &a, &m);
		px.request_id = 999999;
		px.attempt = 1;
		px.pool_name = a.pool;
		m.body_case = QUORUM__WORKER_MSG__BODY_PREFIX_READY;
		m.prefix_ready = &px;
		fw_send(s, &a, &m);
		rd.request_id = 999999;
		rd.attempt = 1;
		m.body_case = QUORUM__WORKER_MSG__BODY_ROOT_DATA;
		m.root_data = &rd;
		fw_send(s, &a, &m);
		/* late: request 1's job ended (the ids were issued) */
		jd.request_id = 1;
		m.body_case = QUORUM__WORKER_MSG__BODY_JOB_DONE;
		m.job_done = &jd;
		fw_send(s, &a, &m);
		/* a flood: SCHED_DROP_LOGS lines a second at most */
		jd.request_id = 999999;
		for (int i = 0; i < 100; i++)
			fw_send(s, &a, &m);
		clock_ms += 1000;
		fw_send(s, &a, &m);
	}
	{
		/* bytes that are no WorkerMsg, a flood of them: as
		 * rate-limited (each had been a line) */
		wire_msg in = {0};
		uint8_t junk[] = {0xff, 0xff, 0xff};

		clock_ms += 1000;
		in.id_len = 1;
		in.id[0] = 'A';
		in.data = junk;
		in.len = sizeof(junk);
		for (int i = 0; i < 100; i++)
			sched_on_worker(s, 0, &in);
	}
	t = cap_end();
	fputs(t, stderr);
	assert_non_null(strstr(t, "worker wa: a malformed message (not one "
				  "frame) dropped"));
	assert_non_null(strstr(t, "from wz dropped: not registered"));
	assert_int_equal(count_lines(t, "not registered"), 2);
	assert_non_null(strstr(t, "worker wa: SampleResult for a job never "
				  "sent (request 999999, attempt 1)"));
	assert_non_null(strstr(t, "worker wa: PrefixReady for a job never"));
	assert_non_null(strstr(t, "worker wa: RootData for a job never"));
	assert_null(strstr(t, "(request 1,"));
	assert_int_equal(count_lines(t, "JobDone for a job never sent"),
			 SCHED_DROP_LOGS - 6 + 1);
	assert_non_null(strstr(t, "more such lines held back"));
	assert_non_null(strstr(t, "worker wa: an undecodable message "
				  "dropped"));
	assert_int_equal(count_lines(t, "an undecodable message dropped"),
			 SCHED_DROP_LOGS);
	free_sched(&s);
}

static void shutdown_cancels(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	fw a;
	ask_o o = {"What is 2 + 2?", NULL, 1, 4, 0};
	uint32_t retry;

	(void)state;
	worker_init(&a, "A", "wa", "h", 64, 4);
	a.hold = 1;
	fw_register(s, &a);
	c_ask(s, "c1", 1, &o);
	c_ask(s, "c2", 2, &o);
	fw_serve(s, &a);
	sched_shutdown(s);
	/* with a retry hint: the successor computes the same bytes */
	assert_int_equal(reply_retry("c1", 1, &retry),
			 QUORUM__STATUS__STATUS_CANCELLED);
	assert_true(retry > 0);
	assert_int_equal(reply_status("c2", 2),
			 QUORUM__STATUS__STATUS_CANCELLED);
	/* an ask read while draining: the same answer, at once */
	c_ask(s, "c3", 3, &o);
	assert_int_equal(reply_retry("c3", 3, &retry),
			 QUORUM__STATUS__STATUS_CANCELLED);
	assert_true(retry > 0);
	assert_null(s->reqs);
	for (int i = 0; i < a.n_held; i++)
		quorum__coord_msg__free_unpacked(a.held[i], NULL);
	free_sched(&s);
}

/* A frame over limits.max_message_bytes (wire_recv's too_big, its first
 * bytes kept): TOO_LONG to the request id read from them. */
static void oversized(void **state)
{
	sched *s = new_sched(NULL, FW_FP);
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery sq = QUORUM__STATUS_QUERY__INIT;
	wire_msg in = {0};
	uint8_t b[64];
	size_t n;

	(void)state;
	q.version = WIRE_VERSION;
	q.request_id = 0x123456789abcull;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	q.status = &sq;
	n = quorum__client_request__pack(&q, b);
	in.id_len = 2;
	memcpy(in.id, "c1", 2);
	in.too_big = (size_t)40 << 20;
	in.head_len = n < sizeof(in.head) ? n : sizeof(in.head);
	memcpy(in.head, b, in.head_len);
	sched_on_client(s, QERR_FORMAT, &in);
	assert_int_equal(reply_status("c1", 0x123456789abcull),
			 QUORUM__STATUS__STATUS_TOO_LONG);
	/* first bytes that are not a request's header: id 0 */
	memset(in.head, 0xff, sizeof(in.head));
	sched_on_client(s, QERR_FORMAT, &in);
	assert_int_equal(reply_status("c1", 0), QUORUM__STATUS__STATUS_TOO_LONG);
	free_sched(&s);
}

static int group_setup(void **state)
{
	gguf_file *g = NULL;

	(void)state;
	if (gguf_open(tu_data("data/tokenizer-vectors/ggml-vocab-gpt-2.gguf"),
		      &g) ||
	    tok_load(g, &vocab)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		gguf_close(&g);
		return -1;
	}
	gguf_close(&g);
	clock_ms = 1000000;
	return 0;
}

/* a failed case leaves its messages behind: never seen by the next */
static int case_setup(void **state)
{
	(void)state;
	out_clear();
	fw_env_forget(&world);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	tok_free(&vocab);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(split, case_setup),
		cmocka_unit_test_setup(duplicate_rid, case_setup),
		cmocka_unit_test_setup(deadline, case_setup),
		cmocka_unit_test_setup(retry_budget, case_setup),
		cmocka_unit_test_setup(kv_wedge, case_setup),
		cmocka_unit_test_setup(never_fits, case_setup),
		cmocka_unit_test_setup(capacity_uncharged, case_setup),
		cmocka_unit_test_setup(stale_pool, case_setup),
		cmocka_unit_test_setup(identity, case_setup),
		cmocka_unit_test_setup(bindings_bounded, case_setup),
		cmocka_unit_test_setup(kv_dtype_mismatch, case_setup),
		cmocka_unit_test_setup(heartbeat_mismatch, case_setup),
		cmocka_unit_test_setup(prefix_reuse, case_setup),
		cmocka_unit_test_setup(shots, case_setup),
		cmocka_unit_test_setup(worker_validation, case_setup),
		cmocka_unit_test_setup(alts_validation, case_setup),
		cmocka_unit_test_setup(bad_blocks, case_setup),
		cmocka_unit_test_setup(fairness, case_setup),
		cmocka_unit_test_setup(gateway_users, case_setup),
		cmocka_unit_test_setup(client_limits, case_setup),
		cmocka_unit_test_setup(fair_start, case_setup),
		cmocka_unit_test_setup(slot_share, case_setup),
		cmocka_unit_test_setup(shutdown_cancels, case_setup),
		cmocka_unit_test_setup(stream_client_gone, case_setup),
		cmocka_unit_test_setup(stream_text_checked, case_setup),
		cmocka_unit_test_setup(stream_tokens_checked, case_setup),
		cmocka_unit_test_setup(job_done_bounds, case_setup),
		cmocka_unit_test_setup(stray_messages, case_setup),
		cmocka_unit_test_setup(oversized, case_setup),
		cmocka_unit_test_setup(chunked_copy, case_setup),
		cmocka_unit_test_setup(chunked_cancel, case_setup),
		cmocka_unit_test_setup(chunked_worker_lost, case_setup),
		cmocka_unit_test_setup(chunked_bad, case_setup),
		cmocka_unit_test_setup(chunked_stuck, case_setup),
		cmocka_unit_test_setup(select_pass, case_setup),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
