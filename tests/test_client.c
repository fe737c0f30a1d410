/*
 * test_client — `quorum ask` and `quorum status` without a cluster.
 *
 * The CLI binary (QUORUM_BIN, default build/quorum) is run as a child
 * process against (a) a closed loopback port and (b) a fake coordinator:
 * a ROUTER socket in a thread of this test that answers ClientRequests
 * from a script keyed by the question text. The end-to-end test against
 * the real coordinator and workers is tests/cluster_e2e.sh.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>
#include <zmq.h>

#include "format/ggml.h"
#include "format/gguf.h"
#include "net/spwire.h"
#include "proto/quorum.pb-c.h"
#include "testutil.h"
#include "text/constrain.h"
#include "text/prompt.h"
#include "tools/client.h"
#include "tools/evstats.h"
#include "tools/gateway/openai.h"
#include "tools/gateway/responses.h"

/* ---- running the CLI --------------------------------------------------- */

typedef struct run_out {
	int rc;        /* exit status, -1 if it did not exit */
	char *out;     /* stdout, NUL-terminated */
	char *err;     /* stderr */
	double secs;   /* wall time */
} run_out;

static const char *bin(void)
{
	const char *b = getenv("QUORUM_BIN");

	return b && *b ? b : "build/quorum";
}

/* The file at path, or "" where it cannot be read (freed by the caller). */
static char *slurp(const char *path)
{
	char *b = tu_slurp(path, NULL);

	return b ? b : strdup("");
}

/* Runs "QUORUM_BIN ARGS" through sh (args already quoted). */
static run_out run(const char *fmt, ...)
{
	char args[4096], cmd[8192], o[512], e[512];
	run_out r = {0};
	struct timespec t0, t1;
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(o, sizeof(o), "%s/client-%d.out", tu_tmpdir(), (int)getpid());
	snprintf(e, sizeof(e), "%s/client-%d.err", tu_tmpdir(), (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s >%s 2>%s %s", bin(), o, e, args);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	st = system(cmd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	r.out = slurp(o);
	r.err = slurp(e);
	r.secs = (double)(t1.tv_sec - t0.tv_sec) +
		 (t1.tv_nsec - t0.tv_nsec) / 1e9;
	unlink(o);
	unlink(e);
	return r;
}

static void run_free(run_out *r)
{
	free(r->out);
	free(r->err);
}

#define assert_has(hay, needle)                                              \
	do {                                                                 \
		if (!strstr((hay), (needle)))                                \
			fail_msg("expected \"%s\" in:\n%s", (needle), (hay)); \
	} while (0)

/* A loopback port nothing listens on (bound, then closed). */
static int closed_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

/* ---- the fake coordinator ---------------------------------------------- */

#define FAKE_MAX_PENDING 256

typedef struct pending {
	unsigned char id[256];
	size_t id_len;
	Quorum__ClientReply *reply; /* packed and freed when due */
	int64_t due_ms;
} pending;

typedef struct fake {
	pthread_t th;
	void *ctx, *sock;
	char endpoint[256];
	volatile int stop;
	/* observations (read after stop) */
	int requests;          /* ClientRequests received */
	int same_id_resends;   /* a request id seen again */
	int ignore_eos_asks;   /* Asks whose params set ignore_eos */
	int grammar_asks;      /* ... a grammar */
	int min_p_asks;        /* ... min_p */
	char last_answer[64];  /* the last Ask's answer format ("" none) */
	int max_pending;       /* most replies held back at once */
	uint64_t seen[1024];
	int n_seen;
	pending pend[FAKE_MAX_PENDING];
	int n_pend;
} fake;

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void send_raw(fake *f, const void *id, size_t id_len, const void *p,
		     size_t n)
{
	zmq_send(f->sock, id, id_len, ZMQ_SNDMORE);
	zmq_send(f->sock, p, n, 0);
}

static void send_reply(fake *f, const void *id, size_t id_len,
		       Quorum__ClientReply *r)
{
	size_t n = quorum__client_reply__get_packed_size(r);
	uint8_t *b = malloc(n + 1);

	quorum__client_reply__pack(r, b);
	send_raw(f, id, id_len, b, n);
	free(b);
}

/* Frees a reply built by make_answer/make_cluster (all heap, one level of
 * arrays, owned strings). */
static void reply_free(Quorum__ClientReply *r)
{
	Quorum__Answer *a = r->body_case == QUORUM__CLIENT_REPLY__BODY_ANSWER
				    ? r->answer : NULL;

	if (a) {
		for (size_t i = 0; i < a->n_votes; i++) {
			free(a->votes[i]->answer.data);
			free(a->votes[i]);
		}
		for (size_t i = 0; i < a->n_samples; i++) {
			free(a->samples[i]->answer.data);
			free(a->samples[i]->text.data);
			free(a->samples[i]);
		}
		free(a->votes);
		free(a->samples);
		free(a->answer.data);
		free(a->timings);
		free(a->prefix);
		if (a->params)
			quorum__sampling_params__free_unpacked(a->params, NULL);
		free(a);
	}
	if (r->body_case == QUORUM__CLIENT_REPLY__BODY_CLUSTER) {
		for (size_t i = 0; i < r->cluster->n_workers; i++)
			free(r->cluster->workers[i]);
		free(r->cluster->workers);
		free(r->cluster);
	}
	free(r);
}

static ProtobufCBinaryData bytes(const char *s)
{
	ProtobufCBinaryData b = {strlen(s), (uint8_t *)strdup(s)};

	return b;
}

/* Three samples: two say ans, one says nothing (ans NULL: none do). */
static Quorum__ClientReply *make_answer(uint64_t rid, const char *ans)
{
	Quorum__ClientReply *r = calloc(1, sizeof(*r));
	Quorum__Answer *a = calloc(1, sizeof(*a));
	char text[128];

	quorum__client_reply__init(r);
	quorum__answer__init(a);
	r->version = QUORUM__CONSTANTS__PROTOCOL_VERSION;
	r->request_id = rid;
	r->status = QUORUM__STATUS__STATUS_OK;
	r->body_case = QUORUM__CLIENT_REPLY__BODY_ANSWER;
	r->answer = a;
	a->n = 3;
	if (ans) {
		a->has_answer = 1;
		a->answer = bytes(ans);
		a->n_votes = 1;
		a->votes = calloc(1, sizeof(*a->votes));
		a->votes[0] = calloc(1, sizeof(Quorum__Vote));
		quorum__vote__init(a->votes[0]);
		a->votes[0]->answer = bytes(ans);
		a->votes[0]->count = 2;
		a->votes[0]->first_index = 0;
	}
	a->n_samples = 3;
	a->samples = calloc(3, sizeof(*a->samples));
	for (unsigned i = 0; i < 3; i++) {
		Quorum__Sample *x = calloc(1, sizeof(*x));

		quorum__sample__init(x);
		x->index = i;
		x->has_answer = ans && i < 2;
		if (x->has_answer)
			x->answer = bytes(ans);
		x->tokens = 10 + i;
		x->finish = i < 2 ? "stop" : "length";
		snprintf(text, sizeof(text), "step by step... \\boxed{%s}",
			 x->has_answer ? ans : "?");
		x->text = bytes(text);
		x->worker = i % 2 ? "w1" : "w0";
		a->samples[i] = x;
	}
	a->timings = calloc(1, sizeof(*a->timings));
	quorum__timings__init(a->timings);
	a->timings->has_queue_ms = a->timings->has_prefill_ms = 1;
	a->timings->has_decode_ms = a->timings->has_total_ms = 1;
	a->timings->has_generated_tokens = a->timings->has_messages = 1;
	a->timings->queue_ms = 0.5;
	a->timings->prefill_ms = 3;
	a->timings->decode_ms = 20;
	a->timings->total_ms = 24;
	a->timings->generated_tokens = 33;
	a->timings->messages = 9;
	a->prefix = calloc(1, sizeof(*a->prefix));
	quorum__prefix_stats__init(a->prefix);
	a->prefix->prefill_worker = "w0";
	a->prefix->has_cache_hit = 1;
	a->prefix->has_prompt_tokens = a->prefix->has_prefix_blocks = 1;
	a->prefix->has_blocks_mapped = a->prefix->has_blocks_copied = 1;
	a->prefix->has_blocks_transferred = a->prefix->has_prefills = 1;
	a->prefix->prompt_tokens = 40;
	a->prefix->prefix_blocks = 3;
	a->prefix->blocks_mapped = 6;
	a->prefix->blocks_copied = 3;
	a->prefix->prefills = 1;
	return r;
}

static Quorum__ClientReply *make_status(uint64_t rid, int status,
					const char *err)
{
	Quorum__ClientReply *r = calloc(1, sizeof(*r));

	quorum__client_reply__init(r);
	r->version = QUORUM__CONSTANTS__PROTOCOL_VERSION;
	r->request_id = rid;
	r->status = status;
	r->error = (char *)err;
	return r;
}

static Quorum__ClientReply *make_cluster(uint64_t rid)
{
	Quorum__ClientReply *r = make_status(rid, QUORUM__STATUS__STATUS_OK,
					     NULL);
	Quorum__ClusterStatus *s = calloc(1, sizeof(*s));

	quorum__cluster_status__init(s);
	r->body_case = QUORUM__CLIENT_REPLY__BODY_CLUSTER;
	r->cluster = s;
	s->cluster = "fake";
	s->n_workers = 2;
	s->workers = calloc(2, sizeof(*s->workers));
	for (int i = 0; i < 2; i++) {
		Quorum__WorkerStatus *w = calloc(1, sizeof(*w));

		quorum__worker_status__init(w);
		w->id = i ? "worker-b" : "worker-a";
		w->host = "localhost";
		w->has_pid = w->has_slots = w->has_busy = 1;
		w->has_blocks_used = w->has_blocks_free = 1;
		w->has_heartbeat_age_ms = w->has_roots = 1;
		w->pid = 1000 + i;
		w->slots = 32;
		w->busy = i;
		w->blocks_used = 10;
		w->blocks_free = 4086;
		w->heartbeat_age_ms = 250;
		w->roots = 1;
		s->workers[i] = w;
	}
	s->has_queue_depth = s->has_in_flight = s->has_requests_served = 1;
	s->has_tokens_per_s = s->has_prefix_hits = s->has_prefix_misses = 1;
	s->queue_depth = 0;
	s->in_flight = 1;
	s->requests_served = 17;
	s->tokens_per_s = 123.5;
	s->prefix_hits = 5;
	s->prefix_misses = 12;
	return r;
}

static int seen_before(fake *f, uint64_t rid)
{
	for (int i = 0; i < f->n_seen; i++)
		if (f->seen[i] == rid)
			return 1;
	if (f->n_seen < 1024)
		f->seen[f->n_seen++] = rid;
	return 0;
}

/* Script, by question prefix:
 *   "busy"      STATUS_BUSY          "bad"   STATUS_BAD_REQUEST
 *   "drop"      no reply the first time this id is seen
 *   "stale"     first a garbage frame, a 2-frame message and a reply to
 *               another id, then the reply
 *   "none"      no sample answered
 *   "slow"      the reply is held back 20-80 ms (concurrency, ordering)
 *   "...=X"     the answer is X (else 42) */
static void handle(fake *f, const unsigned char *id, size_t id_len,
		   const uint8_t *p, size_t n)
{
	Quorum__ClientRequest *q = quorum__client_request__unpack(NULL, n, p);
	Quorum__ClientReply *r = NULL;
	char qs[512] = "", ans[64] = "42", *eq;
	int delay = 0, dup;

	if (!q)
		return;
	f->requests++;
	dup = seen_before(f, q->request_id);
	f->same_id_resends += dup;
	if (q->body_case == QUORUM__CLIENT_REQUEST__BODY_STATUS) {
		r = make_cluster(q->request_id);
	} else if (q->body_case == QUORUM__CLIENT_REQUEST__BODY_ASK) {
		size_t l = q->ask->question.len < sizeof(qs) - 1
				   ? q->ask->question.len : sizeof(qs) - 1;

		f->ignore_eos_asks += q->ask->params &&
				      q->ask->params->has_ignore_eos &&
				      q->ask->params->ignore_eos;
		f->grammar_asks += q->ask->params && q->ask->params->grammar;
		f->min_p_asks += q->ask->params && q->ask->params->has_min_p;
		snprintf(f->last_answer, sizeof(f->last_answer), "%s",
			 q->ask->params && q->ask->params->answer
				 ? q->ask->params->answer : "");

		memcpy(qs, q->ask->question.data, l);
		qs[l] = '\0';
		if ((eq = strrchr(qs, '=')))
			snprintf(ans, sizeof(ans), "%s", eq + 1);
		if (!strncmp(qs, "busy", 4))
			r = make_status(q->request_id,
					QUORUM__STATUS__STATUS_BUSY,
					"queue full");
		else if (!strncmp(qs, "bad", 3))
			r = make_status(q->request_id,
					QUORUM__STATUS__STATUS_BAD_REQUEST,
					"n = 65: over this cluster's "
					"limits.max_n (64)");
		else if (!strncmp(qs, "drop", 4) && !dup)
			r = NULL;
		else if (!strncmp(qs, "drain", 5) && !dup) {
			/* a coordinator draining: the same request again
			 * after the wait it asks */
			r = make_status(q->request_id,
					QUORUM__STATUS__STATUS_CANCELLED,
					"coordinator shutting down; retry");
			r->has_retry_after_ms = 1;
			r->retry_after_ms = 20;
		}
		else
			r = make_answer(q->request_id,
					strncmp(qs, "none", 4) ? ans : NULL);
		if (r && r->body_case == QUORUM__CLIENT_REPLY__BODY_ANSWER) {
			/* the settings it ran with, as a coordinator echoes
			 * them: the request's on the defaults */
			sc_params ran = SC_PARAMS_DEFAULTS;
			Quorum__SamplingParams sp;
			spwire_buf *b = malloc(sizeof(*b));
			uint8_t *pk;
			size_t pn;

			assert_non_null(b);
			assert_int_equal(spwire_decode(q->ask->params, &ran,
						       NULL), 0);
			spwire_encode(&ran, spwire_fields() &
					    ~SC_BIT(SC_S_GRAMMAR), &sp, b);
			pn = quorum__sampling_params__get_packed_size(&sp);
			pk = malloc(pn + 1);
			assert_non_null(pk);
			quorum__sampling_params__pack(&sp, pk);
			r->answer->params = quorum__sampling_params__unpack(
				NULL, pn, pk);
			assert_non_null(r->answer->params);
			free(pk);
			free(b);
		}
		if (!strncmp(qs, "stale", 5)) {
			Quorum__ClientReply *s = make_answer(q->request_id ^ 1,
							     "666");

			send_raw(f, id, id_len, "garbage", 7);
			zmq_send(f->sock, id, id_len, ZMQ_SNDMORE);
			zmq_send(f->sock, "a", 1, ZMQ_SNDMORE);
			zmq_send(f->sock, "b", 1, 0);
			send_reply(f, id, id_len, s);
			reply_free(s);
		}
		if (!strncmp(qs, "slow", 4))
			delay = 20 + (int)(q->request_id % 61);
	}
	quorum__client_request__free_unpacked(q, NULL);
	if (!r)
		return;
	if (!delay || f->n_pend == FAKE_MAX_PENDING) {
		send_reply(f, id, id_len, r);
		reply_free(r);
		return;
	}
	memcpy(f->pend[f->n_pend].id, id, id_len);
	f->pend[f->n_pend].id_len = id_len;
	f->pend[f->n_pend].reply = r;
	f->pend[f->n_pend].due_ms = ms_now() + delay;
	if (++f->n_pend > f->max_pending)
		f->max_pending = f->n_pend;
}

static void *fake_main(void *arg)
{
	fake *f = arg;

	while (!f->stop) {
		zmq_pollitem_t it = {f->sock, 0, ZMQ_POLLIN, 0};
		unsigned char id[256], p[65536];
		int idn, pn, more;
		size_t ms = sizeof(more);

		zmq_poll(&it, 1, 5);
		while ((idn = zmq_recv(f->sock, id, sizeof(id), ZMQ_DONTWAIT)) >= 0) {
			pn = zmq_recv(f->sock, p, sizeof(p), 0);
			zmq_getsockopt(f->sock, ZMQ_RCVMORE, &more, &ms);
			while (more) { /* not our protocol: drain */
				zmq_recv(f->sock, p, 0, 0);
				zmq_getsockopt(f->sock, ZMQ_RCVMORE, &more, &ms);
			}
			if (pn >= 0 && pn <= (int)sizeof(p))
				handle(f, id, (size_t)idn, p, (size_t)pn);
		}
		for (int i = 0; i < f->n_pend; i++)
			if (f->pend[i].due_ms <= ms_now()) {
				send_reply(f, f->pend[i].id, f->pend[i].id_len,
					   f->pend[i].reply);
				reply_free(f->pend[i].reply);
				f->pend[i--] = f->pend[--f->n_pend];
			}
	}
	return NULL;
}

static fake *fake_start(void)
{
	fake *f = calloc(1, sizeof(*f));
	size_t len = sizeof(f->endpoint);
	int zero = 0;

	assert_non_null(f);
	f->ctx = zmq_ctx_new();
	f->sock = zmq_socket(f->ctx, ZMQ_ROUTER);
	zmq_setsockopt(f->sock, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(zmq_bind(f->sock, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(f->sock, ZMQ_LAST_ENDPOINT,
					f->endpoint, &len), 0);
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
	return f;
}

static void fake_stop(fake **pf)
{
	fake *f = *pf;

	f->stop = 1;
	pthread_join(f->th, NULL);
	for (int i = 0; i < f->n_pend; i++)
		reply_free(f->pend[i].reply);
	zmq_close(f->sock);
	zmq_ctx_term(f->ctx);
	free(f);
	*pf = NULL;
}

static int setup(void **state)
{
	*state = fake_start();
	return 0;
}

static int teardown(void **state)
{
	fake *f = *state;

	fake_stop(&f);
	return 0;
}

/* ---- argument errors --------------------------------------------------- */

/* quorum vote on hand-written lines: each line's vote as JSON, a line's
 * own answer format; a line with a key no line has is refused naming it
 * and its line (a misspelt "answer_format" had been ignored, the default
 * format voting in its place). */
static void test_vote_cmd(void **state)
{
	run_out r;

	(void)state;
	r = run("vote <<'EOF'\n"
		"{\"samples\": [\"so 42\", \"\\\\boxed{42}\", \"41\"], "
		"\"expected\": \"42\", \"id\": \"a\"}\n"
		"{\"samples\": [\"Yes.\", \"yes\", \"No\"], "
		"\"answer_format\": \"yesno\"}\nEOF");
	assert_int_equal(r.rc, 0);
	assert_has(r.out, "\"answer\":\"42\",\"answer_text\":\"42\","
		   "\"votes\":2");
	assert_has(r.out, "\"correct\":true");
	assert_has(r.out, "\"answer\":\"yes\",\"answer_text\":\"yes\","
		   "\"votes\":2");
	run_free(&r);
	/* an expression's key is the format's notation; its text is what
	 * its first voter wrote */
	r = run("vote <<'EOF'\n"
		"{\"samples\": [\"so the answer is x + 1.\", \"1+x\"], "
		"\"answer_format\": \"math\"}\nEOF");
	assert_int_equal(r.rc, 0);
	assert_has(r.out, "\"answer\":\"f[x]:");
	assert_has(r.out, "\"answer_text\":\"x + 1\"");
	run_free(&r);
	r = run("vote <<'EOF'\n{\"samples\": [\"42\"]}\n"
		"{\"samples\": [\"Yes\"], \"answerformat\": \"yesno\"}\nEOF");
	assert_int_equal(r.rc, 1);
	assert_has(r.err, "quorum vote: -:2: unknown key \"answerformat\" (a "
		   "line has samples, answer_format, expected, question, id)");
	run_free(&r);
}

static void test_usage_errors(void **state)
{
	static const struct {
		const char *args, *msg;
	} cases[] = {
		{"ask", "give exactly one question"},
		{"ask a b", "give exactly one question"},
		{"ask -n 0 q", "quorum ask: n = 0: must be an integer in "
		 "1..65536"},
		{"ask -n x q", "quorum ask: n = x: must be an integer in "
		 "1..65536"},
		{"ask --top-p 2 q", "quorum ask: top_p = 2: must be a number in "
		 "[0, 1]"},
		{"ask --timeout 0 q", "bad value for --timeout"},
		{"ask --retries -1 q", "bad value for --retries"},
		{"ask --seed -3 q", "quorum ask: seed = -3: must be an integer "
		 "in 0..18446744073709551615"},
		{"ask --concurrency 4 q", "go with --file"},
		{"vote --answer select", "--answer select: its selection pass "
		 "needs the model"},
		{"serve --config x.yaml --workers 2", "--workers goes with "
		 "--model"},
		{"serve --config x.yaml --threads 4", "--threads goes with "
		 "--model"},
		{"ask --out x.jsonl q", "go with --file"},
		{"ask --file x.jsonl q", "not both"},
		{"ask --file x.jsonl --concurrency 0", "bad value for --concurrency"},
		{"ask --endpoint '' q", "--endpoint is empty"},
		{"ask --no-such-option q", "bad option"},
		/* getopt_long's own words lead with the command */
		{"run --no-such-option q", "quorum run: unrecognized option "
		 "'--no-such-option'"},
		/* options are taken whole: a prefix is no abbreviation
		 * ("--mode" had been --model, silently) */
		{"eval-set --model m --file x.jsonl --mode reset",
		 "quorum eval-set: unknown option '--mode' (options are taken "
		 "whole: --model?)"},
		{"run --model m --stop-s x q", "unknown option '--stop-s' "
		 "(options are taken whole: --stop-string?)"},
		{"serve --mod m", "unknown option '--mod'"},
		{"--version extra", "quorum: --version takes no argument "
		 "('extra')"},
		{"ask --endp tcp://h:1 q", "unknown option '--endp'"},
		{"ask --reasoning-effort max q", "--reasoning-effort takes low, "
		 "medium, high, not 'max'"},
		{"run --model m --reasoning-effort '' q", "--reasoning-effort "
		 "takes low, medium, high, not ''"},
		/* an empty grammar means none: an empty file or a directory
		 * (which reads as empty) constrained nothing, unsaid */
		{"run --model m --grammar /dev/null q", "quorum run: --grammar "
		 "/dev/null: empty grammar"},
		{"run --model m --grammar / q", "quorum run: --grammar /: is a "
		 "directory"},
		{"run --model m --json-schema / q", "quorum run: --json-schema "
		 "/: is a directory"},
		{"ask --grammar /dev/null q", "quorum ask: --grammar /dev/null: "
		 "empty grammar"},
		/* a constraint flag given again is said (the last had won
		 * unsaid; --choice adds) */
		{"run --model m --regex a --regex b q", "quorum run: --regex "
		 "given twice: give one"},
		/* a schema file's duplicate key is said (the last had won) */
		{"run --model m --json-schema /dev/stdin q <<'E'\n"
		 "{\"type\":\"integer\",\"maximum\":6,\"maximum\":99}\nE",
		 "quorum run: --json-schema /dev/stdin:1: duplicate object key "
		 "near '\"maximum\"'"},
		/* one setting reaches the template: the later flag won */
		{"run --model m --reasoning-effort low --think on q",
		 "quorum run: --reasoning-effort: not together with --think "
		 "(one is qwen3's, the other harmony's)"},
		{"run --model m --template qwen3 --think off --reasoning-effort "
		 "high q", "--reasoning-effort: not together with --think"},
		{"ask --timeout 0.2 --retries 0 --think on --reasoning-effort "
		 "low q", "quorum ask: "
		 "--reasoning-effort: not together with --think"},
		{"status extra", "unexpected argument"},
		{"status --timeout -1", "bad value for --timeout"},
		{"eval-set --model m.gguf", "--file is required"},
		{"eval-set --file x.jsonl", "exactly one of --model and --endpoint"},
		{"eval-set --file x.jsonl --model m --endpoint tcp://h:1",
		 "exactly one of --model and --endpoint"},
		{"eval-set --file x.jsonl --model m -n 2,4,2",
		 "quorum eval-set: -n: 2 is given twice"},
		{"eval-set --file x.jsonl --model m -n 1,0",
		 "quorum eval-set: n = 0: must be an integer in 1..65536"},
		/* one rule for every id and count list: no empty entry (a
		 * stray comma was dropped by some, refused by others) */
		{"eval-set --file x.jsonl --model m -n ,", "quorum eval-set: "
		 "-n ',': empty entry"},
		{"eval-set --file x.jsonl --model m -n 1,,2", "quorum eval-set: "
		 "-n '1,,2': empty entry"},
		{"eval-set --file x.jsonl --model m -n 1,", "quorum eval-set: "
		 "-n '1,': empty entry"},
		{"eval-set --file x.jsonl --model m -n ''", "quorum eval-set: "
		 "-n is empty"},
		{"detokenize --model m 1,", "quorum detokenize: token id list "
		 "'1,': empty entry"},
		{"detokenize --model m 1,,2", "quorum detokenize: token id list "
		 "'1,,2': empty entry"},
		{"detokenize --model m 1 ''", "quorum detokenize: token id list "
		 "is empty"},
		{"detokenize --model m 1,x", "quorum detokenize: token id list "
		 "'1,x': bad token id 'x'"},
		{"eval --model m --tokens 1,", "quorum eval: --tokens '1,': "
		 "empty entry"},
		{"eval --model m --tokens ,1", "quorum eval: --tokens ',1': "
		 "empty entry"},
		{"eval --model m --tokens ''", "quorum eval: --tokens is empty"},
		{"eval --model m --tokens 1,-2", "quorum eval: --tokens '1,-2': "
		 "bad token id '-2'"},
		/* flags that would change nothing here: said, not dropped */
		{"run --model m --top-logprobs 3 q", "quorum run: --top-logprobs "
		 "shows only in the JSON output"},
		{"run --model m --top-logprobs 0 q", "quorum run: --top-logprobs "
		 "shows only in the JSON output"},
		{"run --model m --logprobs q", "quorum run: --logprobs shows only "
		 "in the JSON output"},
		{"ask --logprobs q", "quorum ask: --logprobs shows only in the "
		 "JSON output"},
		{"run --model m --max-live 1 q", "quorum run: --max-live goes "
		 "with --file"},
		{"run --model m --prefill-tokens 1 q", "quorum run: "
		 "--prefill-tokens goes with --file"},
		{"eval-set --file x.jsonl --model m extra", "unexpected argument"},
		{"eval-set --file x.jsonl --model m --stop median",
		 "quorum eval-set: stop = median: %s"},
		{"eval-set --file x.jsonl --model m --stop window:0",
		 "quorum eval-set: stop = window:0: %s"},
		{"eval-set --file x.jsonl --model m --prefix --stop exact",
		 "needs --stop none"},
		{"run --model m --stop beta:1 q", "quorum run: stop = beta:1: %s"},
		{"ask --stop median q", "quorum ask: stop = median: %s"},
		{"run --model m --top-k -1 q", "quorum run: top_k = -1: must be "
		 "an integer in 0..16777216"},
		{"eval-set --file x.jsonl --model m --top-k 16777217",
		 "quorum eval-set: top_k = 16777217: must be an integer in "
		 "0..16777216"},
		{"ask --top-k 16777217 q", "quorum ask: top_k = 16777217: must "
		 "be an integer in 0..16777216"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_out r = run("%s", cases[i].args);
		char want[256];

		/* %s: the stop rule's requirement */
		snprintf(want, sizeof(want), cases[i].msg,
			 "must be none, exact, beta[:T] with T in (0.5, 1) or "
			 "window[:W] with W in 1..65536");
		if (r.rc != 2)
			fail_msg("'%s': exit %d, want 2; stderr: %s",
				 cases[i].args, r.rc, r.err);
		assert_has(r.err, want);
		run_free(&r);
	}
}

static void test_help(void **state)
{
	run_out r = run("ask --help");

	(void)state;
	assert_int_equal(r.rc, 0);
	assert_has(r.out, "usage: quorum ask");
	run_free(&r);
	r = run("status --help");
	assert_int_equal(r.rc, 0);
	assert_has(r.out, "usage: quorum status");
	run_free(&r);
}

/* quorum keygen --api-key: a key of 256 bits in a new 0600 file as the
 * gateway reads it, the same key on stdout, a new one each time, an
 * existing file never overwritten. */
static void test_keygen_api_key(void **state)
{
	char path[PATH_MAX], *t;
	run_out a, b;
	struct stat st;
	size_t n;

	(void)state;
	snprintf(path, sizeof(path), "%s/api-keys-%d", tu_tmpdir(),
		 (int)getpid());
	unlink(path);
	a = run("keygen --api-key %s", path);
	assert_int_equal(a.rc, 0);
	n = strlen(a.out);
	assert_int_equal(n, 10 + 43 + 1);
	assert_memory_equal(a.out, "sk-quorum-", 10);
	for (size_t i = 10; i < n - 1; i++)
		assert_true(isalnum((unsigned char)a.out[i]));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	t = slurp(path);
	assert_has(t, a.out); /* the key, a line of its own */
	assert_true(t[0] == '#');
	/* never overwritten: refused, the file as it was */
	b = run("keygen --api-key %s", path);
	assert_int_equal(b.rc, 1);
	assert_has(b.err, "never overwritten");
	{
		char *t2 = slurp(path);

		assert_string_equal(t, t2);
		free(t2);
	}
	run_free(&b);
	unlink(path);
	b = run("keygen --api-key %s", path);
	assert_int_equal(b.rc, 0);
	assert_string_not_equal(a.out, b.out);
	run_free(&b);
	b = run("keygen --api-key %s -o x", path);
	assert_int_equal(b.rc, 2);
	assert_has(b.err, "one of them");
	run_free(&b);
	/* '-' is no file name for a key (it had made files '-', '-.key') */
	b = run("keygen --api-key -");
	assert_int_equal(b.rc, 2);
	assert_has(b.err, "'-' is no file name here");
	run_free(&b);
	free(t);
	run_free(&a);
	unlink(path);
}

/* An empty question, or one of whitespace alone, is a usage error (2),
 * said before anything is sent or run (a blank one had been answered). */
static void test_empty_question(void **state)
{
	run_out r = run("ask - </dev/null");

	(void)state;
	assert_int_equal(r.rc, 2);
	assert_has(r.err, "the question is empty");
	run_free(&r);
	r = run("ask --endpoint tcp://127.0.0.1:%d ' \t '", closed_port());
	assert_int_equal(r.rc, 2);
	assert_has(r.err, "the question is empty (or only whitespace)");
	run_free(&r);
	r = run("run --model %s/models/arith.gguf '   '", tu_root());
	assert_int_equal(r.rc, 2);
	assert_has(r.err, "the question is empty (or only whitespace)");
	run_free(&r);
}

/* ---- nothing listening -------------------------------------------------- */

static void test_no_coordinator(void **state)
{
	int port = closed_port();
	char want[256];
	run_out r = run("ask --endpoint tcp://127.0.0.1:%d --timeout 0.3 "
			"--retries 1 'what is 6*7?'", port);

	(void)state;
	snprintf(want, sizeof(want), "no reply from tcp://127.0.0.1:%d within "
		 "0.6s (is the coordinator running?); a coordinator with CURVE "
		 "on answers no client without its keys (--server-key, "
		 "--client-key)", port);
	assert_int_equal(r.rc, 1);
	assert_has(r.err, want);
	assert_true(r.secs < 3.0);
	run_free(&r);

	r = run("status --endpoint tcp://127.0.0.1:%d --timeout 0.2 --retries 0",
		port);
	assert_int_equal(r.rc, 1);
	assert_has(r.err, "no reply from");
	assert_true(r.secs < 3.0);
	run_free(&r);

	/* --json still prints one object saying so */
	r = run("ask --json --endpoint tcp://127.0.0.1:%d --timeout 0.2 "
		"--retries 0 q", port);
	assert_int_equal(r.rc, 1);
	assert_has(r.out, "\"status\": \"NO_REPLY\"");
	run_free(&r);
}

static void test_file_no_coordinator(void **state)
{
	char path[512];
	FILE *f;
	run_out r;

	(void)state;
	snprintf(path, sizeof(path), "%s/client-nc-%d.jsonl", tu_tmpdir(),
		 (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 20; i++)
		fprintf(f, "{\"question\": \"q%d\", \"answer\": 1}\n", i);
	fclose(f);
	r = run("ask --file %s --endpoint tcp://127.0.0.1:%d --timeout 0.3 "
		"--retries 0 --concurrency 4", path, closed_port());
	/* fails fast: the first give-up ends the run, not 5 rounds of it —
	 * at most --concurrency requests were ever sent */
	assert_int_equal(r.rc, 1);
	{
		int unsent = 0;

		for (const char *p = r.out; (p = strstr(p, "not sent: "));
		     p++)
			unsent++;
		assert_true(unsent >= 20 - 4);
	}
	assert_has(r.err, "is the coordinator running?");
	assert_has(r.out, "\"status\":\"NO_REPLY\"");
	assert_has(r.err, "20 question(s), 20 failed");
	run_free(&r);
	unlink(path);
}

/* A --file that cannot be read (a directory) is a failure said in words,
 * never an empty success: ask, vote (they had exited 0 with no
 * results; vote without a word). */
static void test_file_unreadable(void **state)
{
	run_out r;

	(void)state;
	r = run("ask --file %s --endpoint tcp://127.0.0.1:%d --timeout 0.3 "
		"--retries 0", tu_tmpdir(), closed_port());
	assert_int_equal(r.rc, 1);
	assert_has(r.err, "reading ");
	assert_has(r.err, "Is a directory");
	run_free(&r);
	r = run("vote --file %s", tu_tmpdir());
	assert_int_equal(r.rc, 1);
	assert_has(r.err, "quorum vote: reading ");
	assert_has(r.err, "Is a directory");
	run_free(&r);
}

/* eval-set refuses an option of the mode it does not run (it had dropped
 * it: a q8_0 run reported as the cluster's, key files never read). */
static void test_evalset_mode_options(void **state)
{
	static const struct {
		int endpoint;        /* 1: --endpoint, 0: --model */
		const char *opts, *says;
	} rows[] = {
		{1, "--kv-type q8_0", "--kv-type runs in-process only"},
		{1, "--threads 1", "--threads runs in-process only"},
		{0, "--timeout 5", "--timeout is for --endpoint"},
		{0, "--server-key /nonexistent --client-key /nonexistent",
		 "--server-key is for --endpoint"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		char mode[PATH_MAX + 64];
		run_out r;

		if (rows[i].endpoint)
			snprintf(mode, sizeof(mode),
				 "--endpoint tcp://127.0.0.1:%d", closed_port());
		else
			snprintf(mode, sizeof(mode),
				 "--model %s/models/arith.gguf", tu_root());
		r = run("eval-set %s --file /dev/null %s", mode, rows[i].opts);
		assert_int_equal(r.rc, 2);
		assert_has(r.err, rows[i].says);
		run_free(&r);
	}
}

/* bench refuses what it would not run: --modes with --roofline (batched
 * decode only; it had been ignored), a row given twice (it had run it
 * twice) */
static void test_bench_options(void **state)
{
	run_out r;

	(void)state;
	r = run("bench --model %s/models/arith.gguf --roofline --modes reset",
		tu_root());
	assert_int_equal(r.rc, 2);
	assert_has(r.err, "--modes is not for it");
	run_free(&r);
	r = run("bench --model %s/models/arith.gguf --modes batched,batched",
		tu_root());
	assert_int_equal(r.rc, 2);
	assert_has(r.err, "each once");
	run_free(&r);
	r = run("bench --model %s/models/arith.gguf --ns 8,8", tu_root());
	assert_int_equal(r.rc, 2);
	assert_has(r.err, "each once");
	run_free(&r);
}

/* quantize turns a model into one of the same weights, or says which
 * weight it cannot: a NaN had come out of the quantizer as a finite
 * scale (a broken model that answered), an infinity as a scale the
 * loader then refused. */
static void test_quantize_cmd(void **state)
{
	char in[512], out[512], cmd[1200];
	const char *nm = "blk.0.attn_q.weight";
	gguf_file *g = NULL;
	unsigned char head[16];
	size_t n = 0;
	char *f, *at;
	FILE *fp;
	run_out r;
	float bad[2] = {NAN, INFINITY};
	const char *said[2] = {"is NaN", "is infinite"};

	(void)state;
	snprintf(in, sizeof(in), "%s/quant-in-%d.gguf", tu_tmpdir(),
		 (int)getpid());
	snprintf(out, sizeof(out), "%s/quant-out-%d.gguf", tu_tmpdir(),
		 (int)getpid());
	r = run("mkmodel --shape tiny --tokenizer %s/models/arith.gguf -o %s",
		tu_root(), in);
	assert_int_equal(r.rc, 0);
	run_free(&r);
	r = run("quantize %s %s Q8_0", in, out);
	assert_int_equal(r.rc, 0);
	run_free(&r);
	assert_int_equal(gguf_open(out, &g), 0);
	assert_int_equal(gguf_find_tensor(g, nm)->type, GGML_TYPE_Q8_0);
	gguf_close(&g);
	unlink(out);
	/* the tensor's data found by its first bytes, its element 5 made
	 * non-finite */
	assert_int_equal(gguf_open(in, &g), 0);
	memcpy(head, gguf_find_tensor(g, nm)->data, sizeof(head));
	gguf_close(&g);
	assert_non_null(f = tu_slurp(in, &n));
	assert_non_null(at = memmem(f, n, head, sizeof(head)));
	for (int i = 0; i < 2; i++) {
		memcpy(at + 5 * sizeof(float), &bad[i], sizeof(float));
		assert_non_null(fp = fopen(in, "wb"));
		assert_int_equal(fwrite(f, 1, n, fp), n);
		fclose(fp);
		r = run("quantize %s %s Q8_0", in, out);
		assert_int_equal(r.rc, 1);
		snprintf(cmd, sizeof(cmd), "tensor '%s' row 0 element 5 %s",
			 nm, said[i]);
		assert_has(r.err, cmd);
		assert_int_equal(access(out, F_OK), -1);
		run_free(&r);
	}
	free(f);
	unlink(in);
}

/* ---- against the fake coordinator -------------------------------------- */

static void test_ask_text(void **state)
{
	fake *f = *state;
	run_out r = run("ask --endpoint %s --timeout 5 'what is 6*7?'",
			f->endpoint);

	assert_int_equal(r.rc, 0);
	assert_has(r.out, "answer: 42  (2 of 3 votes)");
	assert_has(r.out, "(no answer)");
	/* the reason in the words of the format the reply says it used */
	assert_has(r.out, "--- sample 2: no answer (no boxed answer, stated "
		   "answer or number), 12 tokens, finish length");
	assert_has(r.out, "\\boxed{42}");
	assert_has(r.out, "--- cluster: queue 0.5 ms");
	assert_has(r.out, "prefill on w0 (cache miss");
	run_free(&r);
}

static void test_ask_json(void **state)
{
	fake *f = *state;
	run_out r = run("ask --json -n 3 --seed 7 --endpoint %s --timeout 5 "
			"'what is 6*7?'", f->endpoint);
	json_error_t e;
	json_t *o, *s0, *t, *p;

	assert_int_equal(r.rc, 0);
	o = json_loads(r.out, 0, &e);
	if (!o)
		fail_msg("not JSON (%s): %s", e.text, r.out);
	assert_string_equal(json_string_value(json_object_get(o, "status")),
			    "STATUS_OK");
	assert_true(json_is_null(json_object_get(o, "error")));
	assert_string_equal(json_string_value(json_object_get(o, "answer")),
			    "42");
	assert_int_equal(json_integer_value(json_object_get(o, "n")), 3);
	assert_int_equal(json_integer_value(json_object_get(o, "voters")), 2);
	assert_int_equal(json_integer_value(json_object_get(o, "seed")), 7);
	/* ... and the settings left to the cluster, as it says it ran them
	 * (they had been null) */
	assert_true(json_is_number(json_object_get(o, "temperature")));
	assert_true(fabs(json_number_value(json_object_get(o, "temperature")) -
			 SC_DEFAULT_TEMPERATURE) < 1e-6);
	assert_int_equal(json_integer_value(json_object_get(o, "top_k")),
			 SC_DEFAULT_TOP_K);
	assert_int_equal(json_integer_value(json_object_get(o,
			 "max_new_tokens")), SC_DEFAULT_MAX_NEW);
	assert_int_equal(json_array_size(json_object_get(o, "votes")), 1);
	assert_int_equal(json_array_size(json_object_get(o, "samples")), 3);
	s0 = json_array_get(json_object_get(o, "samples"), 0);
	assert_int_equal(json_integer_value(json_object_get(s0, "index")), 0);
	assert_string_equal(json_string_value(json_object_get(s0, "finish")),
			    "stop");
	assert_int_equal(json_integer_value(json_object_get(s0, "tokens")), 10);
	assert_non_null(json_object_get(s0, "text"));
	assert_true(json_is_null(json_object_get(
		json_array_get(json_object_get(o, "samples"), 2), "answer")));
	t = json_object_get(o, "timings");
	assert_true(json_real_value(json_object_get(t, "total_ms")) == 24);
	assert_int_equal(json_integer_value(json_object_get(t, "messages")), 9);
	assert_true(json_real_value(json_object_get(t, "tokens_per_s")) > 0);
	p = json_object_get(o, "prefix");
	assert_string_equal(json_string_value(json_object_get(p,
			    "prefill_worker")), "w0");
	assert_true(json_is_false(json_object_get(p, "cache_hit")));
	assert_int_equal(json_integer_value(json_object_get(p,
			 "blocks_mapped")), 6);
	json_decref(o);
	run_free(&r);
}

static void test_ask_stdin(void **state)
{
	fake *f = *state;
	run_out r = run("ask --endpoint %s - <<'EOF'\nhow many? =17\nEOF",
			f->endpoint);

	assert_int_equal(r.rc, 0);
	assert_has(r.out, "answer: 17");
	run_free(&r);
	/* the trailing newline is no part of the question (the fake answers
	 * what follows its '='): "echo Q | quorum ask -" asks "Q" */
	r = run("ask --json --endpoint %s - <<'EOF'\nhow many? =17\n\nEOF",
		f->endpoint);
	assert_int_equal(r.rc, 0);
	assert_has(r.out, "\"answer\": \"17\"");
	run_free(&r);
}

static void test_ask_none(void **state)
{
	fake *f = *state;
	run_out r = run("ask --json --endpoint %s none", f->endpoint);

	assert_int_equal(r.rc, 0);
	assert_has(r.out, "\"answer\": null");
	assert_has(r.out, "\"voters\": 0");
	run_free(&r);
	r = run("ask --endpoint %s none", f->endpoint);
	assert_has(r.out, "answer: (none: no sample gave an answer)");
	run_free(&r);
}

static void test_error_statuses(void **state)
{
	fake *f = *state;
	run_out r = run("ask --endpoint %s busy", f->endpoint);

	assert_int_equal(r.rc, 3);
	assert_has(r.err, "quorum ask: STATUS_BUSY: queue full");
	run_free(&r);
	r = run("ask --endpoint %s bad", f->endpoint);
	assert_int_equal(r.rc, 1);
	assert_has(r.err, "quorum ask: STATUS_BAD_REQUEST: n = 65: over "
		   "this cluster's limits.max_n (64)");
	run_free(&r);
	r = run("ask --json --endpoint %s bad", f->endpoint);
	assert_int_equal(r.rc, 1);
	assert_has(r.out, "\"status\": \"STATUS_BAD_REQUEST\"");
	assert_has(r.out, "\"error\": \"n = 65: over this cluster's "
		   "limits.max_n (64)\"");
	run_free(&r);
}

static void test_retry_same_id(void **state)
{
	fake *f = *state;
	int before = f->same_id_resends;
	run_out r = run("ask --endpoint %s --timeout 0.3 --retries 2 "
			"'drop me =5'", f->endpoint);

	assert_int_equal(r.rc, 0);
	assert_has(r.out, "answer: 5");
	/* read after the child finished: the fake saw the id a second time */
	assert_true(f->same_id_resends > before);
	run_free(&r);
}

static void test_stale_and_garbage(void **state)
{
	fake *f = *state;
	run_out r = run("ask --endpoint %s 'stale =9'", f->endpoint);

	assert_int_equal(r.rc, 0);
	assert_has(r.out, "answer: 9");
	run_free(&r);
}

static void test_status(void **state)
{
	fake *f = *state;
	run_out r = run("status --endpoint %s", f->endpoint);
	json_t *o;

	assert_int_equal(r.rc, 0);
	assert_has(r.out, "cluster fake at ");
	assert_has(r.out, "worker-a");
	assert_has(r.out, "worker-b");
	assert_has(r.out, "10/4086");
	assert_has(r.out, "requests served 17");
	assert_has(r.out, "prefix cache 5 hit(s), 12 miss(es)");
	run_free(&r);
	r = run("status --json --endpoint %s", f->endpoint);
	assert_int_equal(r.rc, 0);
	o = json_loads(r.out, 0, NULL);
	assert_non_null(o);
	assert_int_equal(json_array_size(json_object_get(o, "workers")), 2);
	assert_int_equal(json_integer_value(json_object_get(o,
			 "requests_served")), 17);
	json_decref(o);
	run_free(&r);
}

/* The JSONL reader: malformed lines are reported by number and skipped;
 * results come back in input order although replies do not. */
static void test_file(void **state)
{
	static const char *lines[] = {
		"{\"question\": \"slow a =42\", \"answer\": \"42.0\", \"id\": 1}",
		"not json at all",
		"",
		"[1, 2]",
		"{\"answer\": \"3\"}",
		"{\"question\": \"slow b =8\", \"answer\": 7}",
		"{\"question\": 5}",
		"{\"question\": \"slow c =1234\", \"answer\": \"1,234\"}",
		"{\"question\": \"slow d\", \"answer\": true}",
		"{\"question\": \"slow e =x\", \"id\": \"e\"}",
		"{\"question\": \"none\", \"answer\": \"1\"}",
		"{\"question\": \"slow f =+042\", \"answer\": 42}",
		"{\"question\": \"slow g =10\", \"answer\": \"10\"}",
		"{\"question\": \"slow h =11\", \"answer\": \"11\"}",
		"{\"question\": \"slow i =12\", \"answer\": \"12\"}",
		"{\"question\": \"slow j =13\", \"answer\": \"13\"}",
	};
	/* expected (line, correct) of the results, in order */
	static const struct {
		int line;
		const char *correct;
	} want[] = {
		{1, "true"}, {6, "false"}, {8, "true"}, {10, "null"},
		{11, "false"}, {12, "true"}, {13, "true"}, {14, "true"},
		{15, "true"}, {16, "true"},
	};
	fake *f = *state;
	char in[512], out[512];
	FILE *fp;
	run_out r;
	char *res, *line, *save = NULL;
	size_t k = 0;

	snprintf(in, sizeof(in), "%s/client-in-%d.jsonl", tu_tmpdir(),
		 (int)getpid());
	snprintf(out, sizeof(out), "%s/client-out-%d.jsonl", tu_tmpdir(),
		 (int)getpid());
	fp = fopen(in, "w");
	assert_non_null(fp);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		fprintf(fp, "%s\n", lines[i]);
	fclose(fp);
	f->max_pending = 0;
	r = run("ask --file %s --out %s --concurrency 4 --endpoint %s "
		"--timeout 5", in, out, f->endpoint);
	/* every question answered, but lines were malformed: 1, as quorum
	 * run --file says it */
	assert_int_equal(r.rc, 1);
	assert_has(r.err, ":2: not JSON");
	assert_has(r.err, ":4: not a JSON object");
	assert_has(r.err, ":5: no \"question\"");
	assert_has(r.err, ":7: \"question\" is not a string");
	assert_has(r.err, ":9: \"answer\" is not a string or a number");
	assert_null(strstr(r.err, ":3:")); /* blank lines are no questions */
	assert_has(r.out, "10 question(s), 0 failed, 5 malformed line(s)");
	/* the fake held replies back: more than one was in flight, never
	 * more than --concurrency */
	assert_true(f->max_pending >= 2);
	assert_true(f->max_pending <= 4);
	res = slurp(out);
	/* ids are echoed as given (before strtok_r cuts res up) */
	assert_has(res, "\"line\":1,\"id\":1,");
	assert_has(res, "\"id\":\"e\"");
	for (line = strtok_r(res, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), k++) {
		json_t *o = json_loads(line, 0, NULL);
		char *c;

		assert_true(k < sizeof(want) / sizeof(want[0]));
		if (!o)
			fail_msg("result %zu is not JSON: %s", k, line);
		assert_int_equal(json_integer_value(json_object_get(o, "line")),
				 want[k].line);
		c = json_dumps(json_object_get(o, "correct"), JSON_ENCODE_ANY);
		if (strcmp(c, want[k].correct))
			fail_msg("line %d: correct %s, want %s: %s",
				 want[k].line, c, want[k].correct, line);
		free(c);
		assert_string_equal(json_string_value(json_object_get(o,
				    "status")), "STATUS_OK");
		assert_non_null(json_object_get(o, "votes"));
		assert_non_null(json_object_get(o, "question"));
		assert_non_null(json_object_get(o, "expected"));
		/* the reply's samples too, as ask --json and run --file
		 * (their logprobs had no way out) */
		assert_true(json_is_array(json_object_get(o, "samples")));
		assert_non_null(json_object_get(o, "prompt_tokens"));
		json_decref(o);
	}
	assert_int_equal(k, sizeof(want) / sizeof(want[0]));
	/* after the lines, which name the one that differs */
	assert_has(r.out, "accuracy: 7/8 answered (87.5%), 7/9 total");
	free(res);
	run_free(&r);
	unlink(in);
	unlink(out);
}

static void test_file_busy_and_errors(void **state)
{
	fake *f = *state;
	run_out r = run("ask --file - --endpoint %s --timeout 2 --retries 1 "
			"<<'EOF'\n{\"question\": \"busy\"}\n"
			"{\"question\": \"q =3\", \"answer\": \"3\"}\n"
			"{\"question\": \"bad\"}\nEOF", f->endpoint);

	assert_int_equal(r.rc, 1); /* some requests failed */
	assert_has(r.out, "\"status\":\"STATUS_BUSY\"");
	assert_has(r.out, "\"status\":\"STATUS_BAD_REQUEST\"");
	assert_has(r.out, "\"correct\":true");
	assert_has(r.err, "3 question(s), 2 failed");
	assert_has(r.err, "accuracy: 1/1 answered");
	run_free(&r);
	/* none answered: no share of nothing (it said "0/0 answered
	 * (0.0%)") */
	r = run("ask --file - --endpoint %s --timeout 2 <<'EOF'\n"
		"{\"question\": \"none 1\", \"answer\": \"3\"}\n"
		"{\"question\": \"none 2\", \"answer\": \"4\"}\nEOF",
		f->endpoint);
	assert_int_equal(r.rc, 0);
	assert_has(r.err, "accuracy: none answered, 0/2 total (0.0%)");
	run_free(&r);
}

/* The Python client (clients/python) against the same fake: the dicts it
 * returns have the fields of the CLI's --json. Skipped (not passed) when
 * Debian's python3-zmq/python3-protobuf/protoc are not installed. */
/* eval-set --json's summary (rc 0) and its first row (*row). */
static json_t *evs_summary(const run_out *r, json_t **row)
{
	json_t *o;

	assert_int_equal(r->rc, 0);
	o = json_loads(r->out, 0, NULL);
	assert_non_null(o);
	*row = json_array_get(json_object_get(o, "results"), 0);
	assert_non_null(*row);
	return o;
}

/* eval-set against a cluster: the fake answers 3 samples per question,
 * two with the answer after '=' and one with none. */
static void test_evalset_cluster(void **state)
{
	fake *f = *state;
	char in[512];
	FILE *fp;
	run_out r;
	json_t *o, *row;
	int eos;

	snprintf(in, sizeof(in), "%s/evalset-in-%d.jsonl", tu_tmpdir(),
		 (int)getpid());
	fp = fopen(in, "w");
	assert_non_null(fp);
	fprintf(fp, "{\"question\": \"a =42\", \"answer\": \"42\"}\n"
		    "{\"question\": \"b =7\", \"answer\": 8}\n"
		    "{\"question\": \"none\", \"answer\": 1}\n");
	fclose(fp);
	r = run("eval-set --file %s --endpoint %s -n 3 --timeout 5 --json", in,
		f->endpoint);
	o = evs_summary(&r, &row);
	assert_int_equal(json_integer_value(json_object_get(row, "n")), 3);
	assert_int_equal(json_integer_value(json_object_get(row, "problems")),
			 3);
	/* majority right on 1 of 3; single samples 2 of 9; no answer 5 of 9 */
	assert_true(fabs(json_real_value(json_object_get(
		row, "majority_accuracy")) - 100.0 / 3) < 1e-9);
	/* its 95% Wilson interval over the 3 problems */
	{
		json_t *ci = json_object_get(row, "majority_accuracy_ci95");

		assert_true(fabs(json_real_value(json_array_get(ci, 0)) -
				 6.149194) < 1e-5);
		assert_true(fabs(json_real_value(json_array_get(ci, 1)) -
				 79.234040) < 1e-5);
	}
	assert_true(fabs(json_real_value(json_object_get(
		row, "single_sample_accuracy")) - 200.0 / 9) < 1e-9);
	assert_true(fabs(json_real_value(json_object_get(
		row, "no_answer_share")) - 500.0 / 9) < 1e-9);
	assert_int_equal(json_integer_value(json_object_get(row, "tokens")),
			 3 * (10 + 11 + 12));
	assert_false(json_is_true(json_object_get(o, "ignore_eos")));
	/* the settings left to the cluster: there, null */
	assert_true(json_is_null(json_object_get(o, "min_p")));
	assert_true(json_is_null(json_object_get(o, "grammar")));
	assert_true(json_is_null(json_object_get(o, "logit_bias")));
	json_decref(o);
	run_free(&r);
	/* --ignore-eos reaches the cluster in every Ask (read after the
	 * child finished) */
	eos = f->ignore_eos_asks;
	r = run("eval-set --file %s --endpoint %s -n 3 --timeout 5 --json "
		"--ignore-eos", in, f->endpoint);
	o = evs_summary(&r, &row);
	assert_true(json_is_true(json_object_get(o, "ignore_eos")));
	assert_int_equal(f->ignore_eos_asks, eos + 3);
	json_decref(o);
	run_free(&r);
	/* every setting given reaches the cluster (a constraint, min_p:
	 * they had stayed home), and the answer format the run scores with
	 * goes even when it is the default (the cluster's own default keyed
	 * otherwise) */
	{
		int g = f->grammar_asks, mp = f->min_p_asks;

		r = run("eval-set --file %s --endpoint %s -n 3 --timeout 5 "
			"--choice 42 --choice 7 --min-p 0.05 --json", in,
			f->endpoint);
		o = evs_summary(&r, &row);
		assert_int_equal(f->grammar_asks, g + 3);
		assert_int_equal(f->min_p_asks, mp + 3);
		/* a choice constraint's own answer format (exact) */
		assert_string_equal(f->last_answer, "exact");
		/* ... and the summary says what the run was given (min_p
		 * written as the float it is: 0.05) */
		assert_true(json_real_value(json_object_get(o, "min_p")) ==
			    0.05);
		assert_non_null(strstr(r.out, "\"min_p\": 0.05,"));
		assert_non_null(strstr(json_string_value(json_object_get(
			o, "grammar")), "\"42\""));
		assert_true(json_is_null(json_object_get(o, "presence_penalty")));
		json_decref(o);
		run_free(&r);
	}
	/* a reply with fewer samples than asked is an error, not a score */
	r = run("eval-set --file %s --endpoint %s -n 4 --timeout 5", in,
		f->endpoint);
	assert_int_equal(r.rc, 1);
	assert_has(r.err, "the cluster sent 3 samples for n = 4");
	run_free(&r);
	/* a malformed line refuses the whole set */
	fp = fopen(in, "a");
	fprintf(fp, "{\"question\": 5}\n");
	fclose(fp);
	r = run("eval-set --file %s --endpoint %s -n 3 --timeout 5", in,
		f->endpoint);
	assert_int_equal(r.rc, 1);
	assert_has(r.err, ":4: \"question\" is not a string");
	assert_has(r.err, "refusing to score a partial set");
	run_free(&r);
	/* ... but one past --limit is no part of the set scored (it
	 * refused the run) */
	r = run("eval-set --file %s --endpoint %s -n 3 --timeout 5 --limit 3",
		in, f->endpoint);
	assert_int_equal(r.rc, 0);
	assert_null(strstr(r.err, "partial set"));
	run_free(&r);
	unlink(in);
}

/* eval-set in one process on the shipped model: --ignore-eos runs every
 * sample to --max-new-tokens (the model itself ends its answers sooner),
 * and the flag is in the JSON summary. */
static void test_evalset_ignore_eos(void **state)
{
	const char *model = tu_data("models/arith.gguf");
	char in[512], mpath[1024];
	json_t *o, *row;
	FILE *fp;
	run_out r;
	json_int_t plain;

	(void)state;
	snprintf(mpath, sizeof(mpath), "%s", model);
	snprintf(in, sizeof(in), "%s/evalset-eos-%d.jsonl", tu_tmpdir(),
		 (int)getpid());
	fp = fopen(in, "w");
	assert_non_null(fp);
	fprintf(fp, "{\"question\": \"What is 3 plus 4?\", \"answer\": 7}\n"
		    "{\"question\": \"Sam has 9 pens and gives away 2. How "
		    "many pens are left?\", \"answer\": 7}\n");
	fclose(fp);
	r = run("eval-set --model %s --file %s -n 2 --max-new-tokens 48 "
		"--stop none --json", mpath, in);
	o = evs_summary(&r, &row);
	assert_false(json_is_true(json_object_get(o, "ignore_eos")));
	/* in one process every setting is the run's own: the defaults */
	assert_true(json_is_real(json_object_get(o, "min_p")) &&
		    json_real_value(json_object_get(o, "min_p")) == 0.0);
	assert_true(json_is_null(json_object_get(o, "grammar")));
	assert_true(json_is_array(json_object_get(o, "stop_strings")));
	plain = json_integer_value(json_object_get(row, "tokens"));
	assert_true(plain > 0 && plain < 2 * 2 * 48);
	json_decref(o);
	run_free(&r);
	r = run("eval-set --model %s --file %s -n 2 --max-new-tokens 48 "
		"--stop none --ignore-eos --json", mpath, in);
	o = evs_summary(&r, &row);
	assert_true(json_is_true(json_object_get(o, "ignore_eos")));
	assert_int_equal(json_integer_value(json_object_get(row, "tokens")),
			 2 * 2 * 48);
	json_decref(o);
	run_free(&r);
	unlink(in);
}

/* eval-set's paired comparison on the shipped model: each later N's
 * "paired" counts are the problems its majority alone gets right and
 * those the first N's alone does, recounted here from --out's
 * per-problem verdicts (the first 40 held-out problems, N = 1 and 8:
 * they disagree both ways, so a swapped or miscounted pairing shows),
 * with McNemar's p of those counts; the text summary says the same. */
static void test_evalset_paired(void **state)
{
	char in[1024], outp[512], mpath[1024];
	size_t gained = 0, lost = 0, problems = 0;
	json_t *o, *row, *pr;
	char *line = NULL;
	size_t cap = 0;
	FILE *fp;
	run_out r;

	(void)state;
	snprintf(mpath, sizeof(mpath), "%s", tu_data("models/arith.gguf"));
	snprintf(in, sizeof(in), "%s", tu_data("train/data/test.jsonl"));
	snprintf(outp, sizeof(outp), "%s/evalset-paired-%d.jsonl",
		 tu_tmpdir(), (int)getpid());
	r = run("eval-set --model %s --file %s --limit 40 -n 1,8 --prefix "
		"--out %s --json", mpath, in, outp);
	o = evs_summary(&r, &row);
	assert_null(json_object_get(row, "paired"));
	fp = fopen(outp, "r");
	assert_non_null(fp);
	while (getline(&line, &cap, fp) > 0) {
		json_t *l = json_loads(line, 0, NULL), *by;
		int c1, c8;

		assert_non_null(l);
		by = json_object_get(l, "by_n");
		assert_int_equal(json_integer_value(json_object_get(
			json_array_get(by, 0), "n")), 1);
		assert_int_equal(json_integer_value(json_object_get(
			json_array_get(by, 1), "n")), 8);
		c1 = json_is_true(json_object_get(json_array_get(by, 0),
						  "correct"));
		c8 = json_is_true(json_object_get(json_array_get(by, 1),
						  "correct"));
		gained += c8 && !c1;
		lost += c1 && !c8;
		problems++;
		json_decref(l);
	}
	free(line);
	fclose(fp);
	assert_int_equal(problems, 40);
	assert_true(gained > 0 && lost > 0);
	row = json_array_get(json_object_get(o, "results"), 1);
	pr = json_object_get(row, "paired");
	assert_non_null(pr);
	assert_int_equal(json_integer_value(json_object_get(pr, "against_n")),
			 1);
	assert_int_equal(json_integer_value(json_object_get(pr, "gained")),
			 (json_int_t)gained);
	assert_int_equal(json_integer_value(json_object_get(pr, "lost")),
			 (json_int_t)lost);
	assert_true(json_real_value(json_object_get(pr, "p_value")) ==
		    evstats_mcnemar(gained, lost));
	json_decref(o);
	run_free(&r);
	/* the text summary: its table's row for N = 8 */
	r = run("eval-set --model %s --file %s --limit 40 -n 1,8 --prefix",
		mpath, in);
	assert_int_equal(r.rc, 0);
	{
		char want[128];

		snprintf(want, sizeof(want), "\n     8  %8zu  %8zu  %8.3g\n",
			 gained, lost, evstats_mcnemar(gained, lost));
		assert_has(r.out, "paired with N = 1 on the same problems");
		assert_has(r.out, want);
	}
	run_free(&r);
	unlink(outp);
}

/* A set with no problem (empty, or blank lines only) is no score: exit
 * 1 naming the file, as an empty --shots file is, not "0.0%". */
static void test_evalset_empty(void **state)
{
	static const char *const texts[] = {"", "\n\n  \n"};
	char in[512], want[600];

	(void)state;
	snprintf(in, sizeof(in), "%s/evalset-empty-%d.jsonl", tu_tmpdir(),
		 (int)getpid());
	snprintf(want, sizeof(want), "quorum eval-set: %s: no problems\n", in);
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		FILE *fp = fopen(in, "w");
		run_out r;

		assert_non_null(fp);
		fputs(texts[i], fp);
		fclose(fp);
		r = run("eval-set --model %s --file %s -n 1 --json",
			tu_data("models/arith.gguf"), in);
		if (r.rc != 1 || strcmp(r.err, want) || *r.out)
			fail_msg("text %zu: exit %d, stdout '%s', stderr '%s'",
				 i, r.rc, r.out, r.err);
		run_free(&r);
	}
	unlink(in);
}

static void test_python_client(void **state)
{
	fake *f = *state;
	char dir[512], cmd[4096];
	run_out r;
	json_t *py, *cli, *v;
	const char *key;

	if (system("/usr/bin/python3 -c 'import zmq, google.protobuf' "
		   ">/dev/null 2>&1") || system("command -v protoc >/dev/null")) {
		print_message("python3-zmq, python3-protobuf or protoc missing\n");
		skip();
	}
	snprintf(dir, sizeof(dir), "%s/python-%d", tu_tmpdir(), (int)getpid());
	snprintf(cmd, sizeof(cmd), "sh clients/python/gen_pb.sh %s >/dev/null",
		 dir);
	assert_int_equal(system(cmd), 0);
	r = run("ask --json --endpoint %s 'py =42'", f->endpoint);
	assert_int_equal(r.rc, 0);
	cli = json_loads(r.out, 0, NULL);
	assert_non_null(cli);
	run_free(&r);
	/* run() runs QUORUM_BIN; this one runs python directly */
	snprintf(cmd, sizeof(cmd), "QUORUM_PB2_DIR=%s /usr/bin/python3 "
		 "clients/python/example.py --json --endpoint %s 'py =42' "
		 ">%s/out.json", dir, f->endpoint, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/out.json", dir);
	py = json_load_file(cmd, 0, NULL);
	assert_non_null(py);
	v = json_object_get(py, "ask");
	assert_string_equal(json_string_value(json_object_get(v, "status")),
			    "STATUS_OK");
	assert_string_equal(json_string_value(json_object_get(v, "answer")),
			    "42");
	assert_int_equal(json_array_size(json_object_get(v, "samples")), 3);
	json_object_foreach(cli, key, v) {
		if (!json_object_get(json_object_get(py, "ask"), key))
			fail_msg("python ask() lacks the CLI field '%s'", key);
	}
	/* ... and a sample's and the timings' (mean_logprob, first_sample_ms
	 * were missing) */
	json_object_foreach(json_array_get(json_object_get(cli, "samples"), 0),
			    key, v) {
		if (!json_object_get(json_array_get(json_object_get(
			json_object_get(py, "ask"), "samples"), 0), key))
			fail_msg("python ask()'s samples lack '%s'", key);
	}
	json_object_foreach(json_object_get(cli, "timings"), key, v) {
		if (!json_object_get(json_object_get(json_object_get(py, "ask"),
						     "timings"), key))
			fail_msg("python ask()'s timings lack '%s'", key);
	}
	/* any sampling setting by its SamplingParams name reaches the
	 * coordinator (the client took six); another name is a TypeError
	 * naming the ones there are */
	{
		int before = f->ignore_eos_asks;

		snprintf(cmd, sizeof(cmd), "QUORUM_PB2_DIR=%s "
			 "PYTHONPATH=clients/python /usr/bin/python3 -c \""
			 "import quorum_client as q\n"
			 "c = q.QuorumClient('%s', timeout=5)\n"
			 "d = c.ask('py =42', ignore_eos=True, answer='math', "
			 "stop_strings=['zz'], think=False)\n"
			 "print(d['status'], d['answer'])\n"
			 "try:\n c.ask('q', no_such=1)\n"
			 "except TypeError as e:\n print(e)\" >%s/set.txt",
			 dir, f->endpoint, dir);
		assert_int_equal(system(cmd), 0);
		assert_int_equal(f->ignore_eos_asks, before + 1);
		snprintf(cmd, sizeof(cmd), "%s/set.txt", dir);
		{
			char *t = tu_slurp(cmd, NULL);

			assert_non_null(t);
			assert_has(t, "STATUS_OK 42");
			assert_has(t, "ask(): no setting 'no_such' "
				   "(SamplingParams has: answer,");
			free(t);
		}
	}
	/* a secret key file others can read is refused, as the C loader
	 * refuses it (it was taken) */
	snprintf(cmd, sizeof(cmd), "%s keygen -o %s/k >/dev/null && "
		 "chmod 644 %s/k.key && "
		 "QUORUM_PB2_DIR=%s PYTHONPATH=clients/python /usr/bin/python3 "
		 "-c \"import quorum_client as q\n"
		 "try:\n q.QuorumClient('tcp://127.0.0.1:1', server_key='%s/k.pub',"
		 " client_key='%s/k.key')\nexcept ValueError as e:\n print(e)\" "
		 ">%s/mode.txt", bin(), dir, dir, dir, dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/mode.txt", dir);
	{
		char *t = tu_slurp(cmd, NULL);

		assert_non_null(t);
		assert_has(t, "k.key: secret key file is readable by others "
			   "(mode 644): chmod 600 it");
		free(t);
	}
	/* a draining coordinator's CANCELLED with retry_after_ms: sent
	 * again after the wait, answered (it was returned as the answer) */
	snprintf(cmd, sizeof(cmd), "QUORUM_PB2_DIR=%s /usr/bin/python3 "
		 "clients/python/example.py --json --endpoint %s 'drain =42' "
		 ">%s/drain.json", dir, f->endpoint, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/drain.json", dir);
	{
		json_t *d = json_load_file(cmd, 0, NULL), *a;

		assert_non_null(d);
		a = json_object_get(d, "ask");
		assert_string_equal(json_string_value(json_object_get(a,
				    "status")), "STATUS_OK");
		assert_string_equal(json_string_value(json_object_get(a,
				    "answer")), "42");
		json_decref(d);
	}
	/* the settings as the cluster ran them, as the CLI prints them
	 * (it had printed null for those left to the cluster) */
	{
		static const char *const ks[] = {"temperature", "top_k", "top_p",
						 "max_new_tokens", "seed"};

		for (size_t i = 0; i < sizeof(ks) / sizeof(*ks); i++) {
			json_t *a = json_object_get(cli, ks[i]),
			       *b = json_object_get(json_object_get(py, "ask"),
						    ks[i]);

			if (json_is_null(b) || !json_equal(a, b))
				fail_msg("%s: python %s, CLI %s", ks[i],
					 json_dumps(b, JSON_ENCODE_ANY),
					 json_dumps(a, JSON_ENCODE_ANY));
		}
	}
	v = json_object_get(py, "status");
	assert_int_equal(json_array_size(json_object_get(v, "workers")), 2);
	assert_int_equal(json_integer_value(json_object_get(v,
			 "requests_served")), 17);
	json_decref(py);
	json_decref(cli);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* ---- the text a client reads ----------------------------------------- */

/* client_text turns each byte of a broken UTF-8 sequence into U+FFFD, and
 * client_text_index maps a byte offset onto that text's code points (the
 * gateway's completions `text_offset`): checked against the converted
 * string itself, on whole, split and broken characters. */
/* eval-set's paired test: McNemar's exact two-sided p-values against
 * the binomial sums done in exact rationals (Python's fractions), from a
 * handful of disagreements to thousands; and the Wilson interval's ends
 * at the edges. */
static void test_evstats(void **state)
{
	static const struct {
		size_t gained, lost;
		double p;
	} c[] = {
		{12, 3, 0.03515625}, {3, 12, 0.03515625}, {0, 6, 0.03125},
		{5, 5, 1.0}, {0, 0, 1.0}, {1, 0, 1.0},
		{60, 30, 0.002060265680963076},
		{520, 480, 0.21744829320414094},
		{2000, 1900, 0.11289365225934889},
	};
	double lo, hi;

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(*c); i++) {
		double p = evstats_mcnemar(c[i].gained, c[i].lost);

		if (fabs(p - c[i].p) > 1e-9 * c[i].p)
			fail_msg("mcnemar(%zu, %zu) = %.17g, want %.17g",
				 c[i].gained, c[i].lost, p, c[i].p);
	}
	evstats_wilson95(0, 0, &lo, &hi);
	assert_true(lo == 0.0 && hi == 100.0);
	evstats_wilson95(0, 10, &lo, &hi);
	assert_true(fabs(lo) < 1e-9 && fabs(hi - 27.753280) < 1e-5);
	evstats_wilson95(10, 10, &lo, &hi);
	assert_true(fabs(lo - 72.246720) < 1e-5 && fabs(hi - 100.0) < 1e-9);
}

/* client_dumps: every real the shortest text of the same double, a
 * real still; integers, strings and the rest byte for byte. */
static void test_dumps_reals(void **state)
{
	static const double v[] = {0.7, 0.95, 1.0, -0.0, 1e20, 2.5e-300,
				   0.1 + 0.2, 1.0 / 3, -0.015645580925047399,
				   5187.0627739363254, 123456789.0, 100.0,
				   0.0001, 1.5e-5, 1e15, 1.2345678901234567e16,
				   -2.0e-7};
	static const char *const want[] = {
		"0.7", "0.95", "1.0", "-0.0", "1e20", "2.5e-300",
		"0.30000000000000004", "0.3333333333333333",
		"-0.0156455809250474", "5187.062773936325", "123456789.0",
		"100.0", "0.0001", "1.5e-5", "1000000000000000.0",
		"1.2345678901234568e16", "-2e-7"};
	json_t *a = json_array();
	char *s, *p;

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++)
		json_array_append_new(a, json_real(v[i]));
	s = client_dumps(a, JSON_COMPACT);
	assert_non_null(s);
	p = s + 1;
	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++) {
		size_t n = strlen(want[i]);

		if (strncmp(p, want[i], n) || (p[n] != ',' && p[n] != ']'))
			fail_msg("real %zu: got '%s', want '%s'", i, p,
				 want[i]);
		p += n + 1;
	}
	/* and each reads back as the very double */
	{
		json_t *b = json_loads(s, 0, NULL);

		assert_non_null(b);
		for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++) {
			double d = json_real_value(json_array_get(b, i));

			assert_true(json_is_real(json_array_get(b, i)));
			assert_memory_equal(&d, &v[i], sizeof(d));
		}
		json_decref(b);
	}
	free(s);
	json_decref(a);
	/* the texts that grow most (jansson's 20 bytes, 22 here), many of
	 * them: the output's room holds them (ASan's build checks it) */
	a = json_array();
	for (int i = 0; i < 4096; i++)
		json_array_append_new(a, json_real(-1.2345678901234567e16));
	s = client_dumps(a, JSON_COMPACT);
	assert_non_null(s);
	assert_int_equal(strlen(s), 2 + 4096 * 23 - 1);
	assert_non_null(strstr(s, "-1.2345678901234568e16,"));
	free(s);
	json_decref(a);
	/* numbers in strings, keys and escapes untouched; integers too */
	a = json_pack("{s:s, s:i, s:s, s:f}", "0.69999999999999996", "x",
		      "n", 7, "q", "say \"0.69999999999999996\"", "t",
		      0.7);
	s = client_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"0.69999999999999996\":\"x\",\"n\":7,"
			    "\"q\":\"say \\\"0.69999999999999996\\\"\","
			    "\"t\":0.7}");
	free(s);
	json_decref(a);
}

static void test_text_index(void **state)
{
	/* "a", "é" (2 bytes), "€" (3), a stray continuation byte, "😀" (4),
	 * a truncated "€" at the end */
	static const char s[] = "a\xc3\xa9\xe2\x82\xac\x80\xf0\x9f\x98\x80\xe2\x82";
	size_t n = sizeof(s) - 1;
	/* the character (code point index) each byte belongs to */
	static const size_t at[] = {0, 1, 1, 2, 2, 2, 3, 4, 4, 4, 4, 5, 6};
	json_t *t = client_text(s, n);

	(void)state;
	assert_non_null(t);
	/* 5 characters, then U+FFFD for the stray byte and for each of the
	 * truncated sequence's 2 bytes */
	assert_string_equal(json_string_value(t),
			    "a\xc3\xa9\xe2\x82\xac\xef\xbf\xbd\xf0\x9f\x98\x80"
			    "\xef\xbf\xbd\xef\xbf\xbd");
	json_decref(t);
	for (size_t b = 0; b < n; b++)
		assert_int_equal(client_text_index(s, n, b), at[b]);
	assert_int_equal(client_text_index(s, n, n), 7);
	assert_int_equal(client_text_index(s, n, n + 5), 7);
	assert_int_equal(client_text_index(s, 0, 0), 0);
	/* a prefix cut inside "€": its bytes are U+FFFD there, each its own
	 * code point */
	assert_int_equal(client_text_index(s, 5, 4), 3);
	assert_int_equal(client_text_index(s, 5, 5), 4);
}


/* The gateway's chat message: reasoning_content apart from content
 * (harmony's analysis and final channels; a <think> block), unless
 * reasoning_format is "none"; a bad reasoning_format names the field.
 * In-process: openai.c's parse, result and response, and a chunk. */
/* The reply of parsed request r (freed) to one sample of text ending
 * with finish: chat's (openai_response), or the Responses API's. */
static json_t *one_sample_reply(openai_req *r, const char *text,
				const char *finish)
{
	Quorum__Answer a = QUORUM__ANSWER__INIT;
	Quorum__Sample smp = QUORUM__SAMPLE__INIT, *sp = &smp;
	openai_result x;
	json_t *o;

	smp.text.data = (uint8_t *)text;
	smp.text.len = strlen(text);
	smp.finish = (char *)finish;
	a.n_samples = 1;
	a.samples = &sp;
	assert_int_equal(openai_result_make(r, &a, &x), 0);
	o = r->responses ? responses_object(r, &x, &a, "resp_00000000000000ab",
					    1, "m")
			 : openai_response(r, &x, &a, "chatcmpl-t", 1, "m");
	assert_non_null(o);
	openai_result_fini(&x);
	openai_req_free(r);
	return o;
}

static json_t *chat_reply(const char *body, const char *text)
{
	openai_req r;
	char msg[256];
	const char *param;

	assert_int_equal(openai_parse(1, body, strlen(body), 64, &r, msg,
				      sizeof(msg), &param), 0);
	return one_sample_reply(&r, text, "stop");
}

/* o's first message: content, and reasoning_content (NULL: absent). */
static void check_message(json_t *o, const char *content,
			  const char *reasoning)
{
	json_t *m = json_object_get(json_array_get(json_object_get(
		o, "choices"), 0), "message");

	assert_string_equal(json_string_value(json_object_get(m, "content")),
			    content);
	/* OpenAI's message has refusal: null */
	assert_true(json_is_null(json_object_get(m, "refusal")));
	if (reasoning)
		assert_string_equal(json_string_value(json_object_get(
			m, "reasoning_content")), reasoning);
	else
		assert_null(json_object_get(m, "reasoning_content"));
	json_decref(o);
}

static void test_gateway_reasoning(void **state)
{
	static const char harmony[] =
		"<|channel|>analysis<|message|>17+25 is 42<|end|><|start|>"
		"assistant<|channel|>final<|message|>\\boxed{42}<|return|>";
	static const char think[] = "<think>\nadd them\n</think>\n\n42";
	const char *q = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]%s}";
	char body[256], msg[256];
	const char *param = NULL;
	openai_req r;
	json_t *o, *d;

	(void)state;
	snprintf(body, sizeof(body), q, "");
	check_message(chat_reply(body, harmony), "\\boxed{42}", "17+25 is 42");
	check_message(chat_reply(body, think), "42", "\nadd them\n");
	check_message(chat_reply(body, "plain 42"), "plain 42", NULL);
	snprintf(body, sizeof(body), q, ",\"reasoning_format\":\"none\"");
	check_message(chat_reply(body, harmony), harmony, NULL);
	snprintf(body, sizeof(body), q, ",\"reasoning_format\":\"deepseek\"");
	check_message(chat_reply(body, think), "42", "\nadd them\n");
	snprintf(body, sizeof(body), q, ",\"reasoning_format\":\"raw\"");
	assert_int_equal(openai_parse(1, body, strlen(body), 64, &r, msg,
				      sizeof(msg), &param), -1);
	assert_string_equal(param, "reasoning_format");
	assert_non_null(strstr(msg, "auto, deepseek, none"));
	/* a stream's delta: both parts, content absent when empty */
	snprintf(body, sizeof(body), q, "");
	assert_int_equal(openai_parse(1, body, strlen(body), 64, &r, msg,
				      sizeof(msg), &param), 0);
	o = openai_chunk(&r, "chatcmpl-t", 1, "m", 0, NULL, 0, "why", 3, 1,
			 NULL);
	d = json_object_get(json_array_get(json_object_get(o, "choices"), 0),
			    "delta");
	assert_string_equal(json_string_value(json_object_get(
		d, "reasoning_content")), "why");
	assert_null(json_object_get(d, "content"));
	assert_string_equal(json_string_value(json_object_get(d, "role")),
			    "assistant");
	json_decref(o);
	openai_req_free(&r);
}

/* A Responses API reply in-process (responses.c): body parsed, one
 * sample of text ending with finish. */
static json_t *resp_reply(const char *body, const char *text,
			  const char *finish)
{
	openai_req r;
	char msg[256];
	const char *param;

	if (responses_parse(body, strlen(body), 64, &r, msg, sizeof(msg),
			    &param))
		fail_msg("%s: %s", body, msg);
	return one_sample_reply(&r, text, finish);
}

static void collect_event(void *ctx, json_t *e)
{
	json_array_append_new(ctx, e);
}

/* The Responses API's output: a reasoning item (its text the chain's
 * reasoning, harmony's analysis channel or a <think> block) before the
 * message (the answer), none with reasoning_format "none" or without
 * reasoning; "incomplete" at max_output_tokens; the events of each item
 * in order, the last the response whole. */
static void test_gateway_responses(void **state)
{
	static const char harmony[] =
		"<|channel|>analysis<|message|>17+25 is 42<|end|><|start|>"
		"assistant<|channel|>final<|message|>\\boxed{42}<|return|>";
	static const char *const events[] = {
		"response.output_item.added", "response.content_part.added",
		"response.reasoning_text.delta", "response.reasoning_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.incomplete",
	};
	json_t *o, *out, *ev;

	(void)state;
	o = resp_reply("{\"input\":\"q\"}", harmony, "stop");
	out = json_object_get(o, "output");
	assert_int_equal(json_array_size(out), 2);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(out, 0), "type")), "reasoning");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(out, 0), "id")), "rs_00000000000000ab");
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(json_array_get(out, 0), "content"), 0),
		"text")), "17+25 is 42");
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(json_array_get(out, 1), "content"), 0),
		"text")), "\\boxed{42}");
	assert_string_equal(json_string_value(json_object_get(o, "status")),
			    "completed");
	assert_true(json_is_null(json_object_get(o, "incomplete_details")));
	json_decref(o);
	o = resp_reply("{\"input\":\"q\",\"reasoning_format\":\"none\"}",
		       harmony, "stop");
	out = json_object_get(o, "output");
	assert_int_equal(json_array_size(out), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(json_array_get(out, 0), "content"), 0),
		"text")), harmony);
	json_decref(o);
	o = resp_reply("{\"input\":\"q\",\"max_output_tokens\":5}",
		       "<think>\nadd\n</think>\n\n4", "length");
	assert_string_equal(json_string_value(json_object_get(o, "status")),
			    "incomplete");
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		o, "incomplete_details"), "reason")), "max_output_tokens");
	assert_int_equal(json_integer_value(json_object_get(
		o, "max_output_tokens")), 5);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(o, "output"), 1), "status")), "incomplete");
	ev = json_array();
	responses_events(o, "resp_00000000000000ab", collect_event, ev);
	assert_int_equal(json_array_size(ev), sizeof(events) / sizeof(*events));
	for (size_t i = 0; i < json_array_size(ev); i++)
		assert_string_equal(json_string_value(json_object_get(
			json_array_get(ev, i), "type")), events[i]);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		json_array_get(ev, 1), "part"), "type")), "reasoning_text");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 2), "delta")), "\nadd\n");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 8), "delta")), "4");
	assert_true(json_equal(json_object_get(json_array_get(ev, 12),
					       "response"), o));
	json_decref(ev);
	json_decref(o);
}

/* A live Responses stream in-process (responses_live): the reasoning
 * item opens with the first reasoning piece and closes, whole, when the
 * answer's first piece opens the message; the end closes the message
 * with the finished response's item; an answer that never came (only
 * reasoning streamed) still gets its message item opened and closed. */
static void test_gateway_responses_live(void **state)
{
	static const char *const events[] = {
		"response.output_item.added", "response.content_part.added",
		"response.reasoning_text.delta",
		"response.reasoning_text.delta", "response.reasoning_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.completed",
	};
	const char *id = "resp_00000000000000ab";
	json_t *o, *ev, *out;
	responses_live l;

	(void)state;
	o = resp_reply("{\"input\":\"q\"}", "<think>add them</think>42",
		       "stop");
	out = json_object_get(o, "output");
	ev = json_array();
	responses_live_init(&l, id, collect_event, ev);
	responses_live_text(&l, "add", 3, NULL, 0, NULL);
	responses_live_text(&l, " them", 5, "", 0, NULL);
	responses_live_text(&l, NULL, 0, "42", 2, NULL);
	responses_live_end(&l, o);
	responses_live_fini(&l);
	assert_int_equal(json_array_size(ev), sizeof(events) / sizeof(*events));
	for (size_t i = 0; i < json_array_size(ev); i++)
		assert_string_equal(json_string_value(json_object_get(
			json_array_get(ev, i), "type")), events[i]);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 4), "text")), "add them");
	assert_true(json_equal(json_object_get(json_array_get(ev, 6), "item"),
			       json_array_get(out, 0)));
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(ev, 7), "output_index")), 1);
	assert_true(json_equal(json_object_get(json_array_get(ev, 12), "item"),
			       json_array_get(out, 1)));
	json_decref(ev);
	json_decref(o);
	/* only reasoning streamed: the empty answer's item at the end */
	o = resp_reply("{\"input\":\"q\"}", "<think>hm</think>", "length");
	ev = json_array();
	responses_live_init(&l, id, collect_event, ev);
	responses_live_text(&l, "hm", 2, NULL, 0, NULL);
	responses_live_end(&l, o);
	responses_live_fini(&l);
	assert_int_equal(json_array_size(ev), 12);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 6), "type")), "response.output_item.added");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 8), "type")), "response.output_text.done");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 8), "text")), "");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(ev, 11), "type")), "response.incomplete");
	json_decref(ev);
	json_decref(o);
}

/* The request's objects read only the keys the API reads: a typo inside
 * "quorum", "stream_options" or "chat_template_kwargs" is a 400 naming
 * it, as an unknown top-level field is; a setting given at the top
 * level and inside its object too is a 400, not one silently. */
static void test_gateway_nested_fields(void **state)
{
	static const struct {
		const char *fields, *param, *words; /* param NULL: accepted */
	} rows[] = {
		{",\"quorum\":{\"sample\":4}", "quorum", "'quorum.sample' is not "
		 "a field this API reads (quorum reads: samples, "
		 "stream_samples)"},
		{",\"quorum\":{\"samples\":4}", NULL, NULL},
		{",\"quorum\":4", "quorum", "must be an object"},
		{",\"samples\":1,\"quorum\":{\"samples\":2}", "samples",
		 "both given"},
		{",\"stream\":true,\"stream_options\":{\"foo\":1}",
		 "stream_options", "'stream_options.foo'"},
		{",\"stream\":true,\"stream_options\":{\"include_usage\":"
		 "true}", NULL, NULL},
		{",\"chat_template_kwargs\":\"x\"", "chat_template_kwargs",
		 "must be an object"},
		{",\"chat_template_kwargs\":{\"foo\":1}",
		 "chat_template_kwargs", "'chat_template_kwargs.foo'"},
		{",\"chat_template_kwargs\":{\"enable_thinking\":false}",
		 NULL, NULL},
		{",\"think\":true,\"chat_template_kwargs\":"
		 "{\"enable_thinking\":false}", "think", "both given"},
		/* OpenAI's padding switch: no padding here, accepted */
		{",\"stream\":true,\"stream_options\":{\"include_obfuscation\":"
		 "false}", NULL, NULL},
		{",\"stream\":true,\"stream_options\":{\"include_obfuscation\":"
		 "1}", "stream_options", "boolean 'include_usage' and "
		 "'include_obfuscation'"},
		/* response_format's json_schema as OpenAI has it: a name,
		 * strict a boolean, no other key (they were taken unread) */
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"n\",\"strict\":true,\"schema\":{}}}", NULL, NULL},
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"schema\":{}}}", "response_format", "needs a string 'name'"},
		/* OpenAI's identifier (a space, 65 characters) */
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"my schema\",\"schema\":{}}}", "response_format",
		 "'response_format.json_schema.name' is 1 to 64"},
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		 "aaaaaaaaaa\",\"schema\":{}}}", "response_format",
		 "'response_format.json_schema.name' is 1 to 64"},
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"Math_Answer-2\",\"schema\":{}}}", NULL, NULL},
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"n\",\"strict\":\"yes\",\"schema\":{}}}",
		 "response_format", "'strict' is a boolean"},
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"n\",\"schema\":{},\"strictt\":true}}",
		 "response_format.json_schema",
		 "'response_format.json_schema.strictt'"},
		/* keys beside text and json_object: a schema is read where
		 * llama.cpp's server reads it, anything else refused (they
		 * were dropped: text took a json_schema unconstrained) */
		{",\"response_format\":{\"type\":\"text\",\"json_schema\":"
		 "{\"name\":\"n\",\"schema\":{}}}", "response_format",
		 "'response_format.json_schema'"},
		{",\"response_format\":{\"type\":\"json_object\",\"foo\":1}",
		 "response_format", "'response_format.foo'"},
		/* a schema as text keeps the body's rule: no key twice (the
		 * last had won) */
		{",\"guided_json\":\"{\\\"type\\\":\\\"integer\\\",\\\"maximum\\\":"
		 "1,\\\"maximum\\\":2}\"", "guided_json",
		 "duplicate object key"},
		{",\"response_format\":{\"type\":\"json_object\",\"schema\":"
		 "{\"type\":\"integer\"}}", NULL, NULL},
		/* a setting and its older name: one value, or a 400 (the
		 * older one had been dropped in silence) */
		{",\"max_completion_tokens\":3,\"max_tokens\":4",
		 "max_tokens", "'max_completion_tokens' and 'max_tokens' are "
		 "both given, with different values: give one"},
		{",\"max_completion_tokens\":3,\"max_tokens\":3", NULL, NULL},
		/* one setting reaches the template: the coordinator and
		 * the CLI refuse the pair, so does the gateway */
		{",\"think\":false,\"reasoning_effort\":\"low\"",
		 "reasoning_effort", PROMPT_THINK_EFFORT_CLASH},
		{",\"chat_template_kwargs\":{\"enable_thinking\":true},"
		 "\"reasoning_effort\":\"high\"", "reasoning_effort",
		 "'reasoning_effort' and 'think'"},
		{",\"think\":null,\"reasoning_effort\":\"high\"", NULL, NULL},
	};
	const char *q = "{\"messages\":[{\"role\":\"user\",\"content\":"
			"\"q\"}]%s}";
	char body[512], msg[256];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		const char *param = NULL;
		openai_req r;
		int rc;

		snprintf(body, sizeof(body), q, rows[i].fields);
		rc = openai_parse(1, body, strlen(body), 64, &r, msg,
				  sizeof(msg), &param);
		if (!rows[i].param) {
			if (rc)
				fail_msg("%s: refused: %s", rows[i].fields, msg);
			openai_req_free(&r);
			continue;
		}
		if (!rc)
			fail_msg("%s: accepted", rows[i].fields);
		assert_string_equal(param, rows[i].param);
		if (!strstr(msg, rows[i].words))
			fail_msg("%s: \"%s\" does not say %s", rows[i].fields,
				 msg, rows[i].words);
	}
}

/* A constrained request votes on what its constraint makes an answer
 * unless it names an answer_format: a JSON value's canonical form, a
 * choice's or a regex's whole text (auto had read JSON as prose: every
 * sample keyed by a const field, or by nothing; the choice "a" as an
 * article, no answer); a GBNF grammar keeps auto. */
static void test_gateway_constraint_answer(void **state)
{
	static const struct {
		const char *fields, *answer; /* NULL: not set (auto) */
	} rows[] = {
		{",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
		 "{\"name\":\"n\",\"schema\":{\"type\":\"object\"}}}", "json:"},
		{",\"response_format\":{\"type\":\"json_object\"}", "json:"},
		{",\"guided_json\":{\"type\":\"integer\"}", "json:"},
		{",\"response_format\":{\"type\":\"json_object\",\"schema\":"
		 "{\"type\":\"integer\"}}", "json:"},
		{",\"guided_choice\":[\"a\",\"b\"]", "exact"},
		{",\"regex\":\"[0-9]{3}\"", "exact"},
		{",\"grammar\":\"root ::= \\\"x\\\"\"", NULL},
		{",\"guided_choice\":[\"a\",\"b\"],\"answer_format\":\"text\"",
		 "text"},
		{",\"answer_format\":\"yesno\",\"response_format\":{\"type\":"
		 "\"json_object\"}", "yesno"},
	};
	const char *q = "{\"messages\":[{\"role\":\"user\",\"content\":"
			"\"q\"}]%s}";
	char body[512], msg[256], name[ANSWER_PATTERN_MAX + 16];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		const char *param = NULL;
		openai_req r;

		snprintf(body, sizeof(body), q, rows[i].fields);
		if (openai_parse(1, body, strlen(body), 64, &r, msg,
				 sizeof(msg), &param))
			fail_msg("%s: refused: %s", rows[i].fields, msg);
		/* json_object's schema (llama.cpp's server's) is the
		 * constraint: the integer grammar, not any object's */
		if (strstr(rows[i].fields, "\"schema\":{\"type\":\"integer\"}")) {
			json_t *js = json_pack("{s:s}", "type", "integer");
			char *g = NULL;

			assert_int_equal(constrain_gbnf(CONSTRAIN_JSON_SCHEMA,
							js, &g), 0);
			assert_string_equal(r.p.grammar, g);
			free(g);
			json_decref(js);
		}
		if (!rows[i].answer) {
			if (r.given & SC_BIT(SC_S_ANSWER))
				fail_msg("%s: an answer format set",
					 rows[i].fields);
		} else {
			if (!(r.given & SC_BIT(SC_S_ANSWER)))
				fail_msg("%s: no answer format",
					 rows[i].fields);
			assert_string_equal(answer_format_name(
				&r.p.answer, name, sizeof(name)), rows[i].answer);
		}
		openai_req_free(&r);
	}
}

/* A refused setting is said as the request's field that gave it, here
 * and in the coordinator's words, and named in param. */
static void test_gateway_setting_words(void **state)
{
	static const struct {
		const char *fields, *param, *starts;
	} rows[] = {
		{",\"early_stop\":\"bogus\"", "early_stop",
		 "early_stop = bogus: must be"},
		{",\"answer_format\":\"bogus\"", "answer_format",
		 "answer_format = bogus: must be"},
		{",\"max_tokens\":0", "max_tokens", "max_tokens = 0: must be"},
		{",\"max_completion_tokens\":-1", "max_completion_tokens",
		 "max_completion_tokens = -1: must be"},
		/* this API's seed range (any int64), not the CLI's */
		{",\"seed\":\"abc\"", "seed", "seed = \"abc\": must be an integer "
		 "in -9223372036854775808..9223372036854775807"},
	};
	const char *q = "{\"messages\":[{\"role\":\"user\",\"content\":"
			"\"q\"}]%s}";
	char body[512], msg[256], out[256];
	const char *param = NULL;
	openai_req r;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		snprintf(body, sizeof(body), q, rows[i].fields);
		assert_int_equal(openai_parse(1, body, strlen(body), 64, &r, msg,
					      sizeof(msg), &param), -1);
		assert_string_equal(param, rows[i].param);
		if (strncmp(msg, rows[i].starts, strlen(rows[i].starts)))
			fail_msg("\"%s\" does not start \"%s\"", msg,
				 rows[i].starts);
	}
	/* an integer past 64 bits: said so, not "not valid JSON" */
	snprintf(body, sizeof(body), q, ",\"seed\":99999999999999999999");
	assert_int_equal(openai_parse(1, body, strlen(body), 64, &r, msg,
				      sizeof(msg), &param), -1);
	if (!strstr(msg, "outside the 64-bit range"))
		fail_msg("seed 1e20: \"%s\"", msg);
	/* the body null: valid JSON, not an object */
	assert_int_equal(openai_parse(1, "null", 4, 64, &r, msg, sizeof(msg),
				      &param), -1);
	assert_string_equal(msg, "the body must be a JSON object");
	/* the coordinator's words: its setting as the field the request
	 * used, else the API's first name for it */
	assert_string_equal(openai_setting_words(NULL, "max_new_tokens = "
		"100000: over the model's context (1024 tokens)", out,
		sizeof(out)), "max_completion_tokens");
	assert_string_equal(out, "max_completion_tokens = 100000: over the "
			    "model's context (1024 tokens)");
	snprintf(body, sizeof(body), q, ",\"max_tokens\":100000");
	assert_int_equal(openai_parse(1, body, strlen(body), 64, &r, msg,
				      sizeof(msg), &param), 0);
	assert_string_equal(openai_setting_words(&r, "max_new_tokens = "
		"100000: over the model's context", out, sizeof(out)),
		"max_tokens");
	assert_string_equal(openai_setting_words(&r, "logit_bias: token 900 "
		"is not in the model's vocabulary", out, sizeof(out)),
		"logit_bias");
	assert_null(openai_setting_words(&r, "queue full", out, sizeof(out)));
	assert_string_equal(out, "queue full");
	openai_req_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantize_cmd),
		cmocka_unit_test(test_gateway_constraint_answer),
		cmocka_unit_test(test_text_index),
		cmocka_unit_test(test_dumps_reals),
		cmocka_unit_test(test_evstats),
		cmocka_unit_test(test_gateway_responses),
		cmocka_unit_test(test_gateway_responses_live),
		cmocka_unit_test(test_gateway_setting_words),
		cmocka_unit_test(test_gateway_nested_fields),
		cmocka_unit_test(test_gateway_reasoning),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_vote_cmd),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_empty_question),
		cmocka_unit_test(test_keygen_api_key),
		cmocka_unit_test(test_no_coordinator),
		cmocka_unit_test(test_file_no_coordinator),
		cmocka_unit_test(test_file_unreadable),
		cmocka_unit_test(test_evalset_mode_options),
		cmocka_unit_test(test_bench_options),
		cmocka_unit_test_setup_teardown(test_ask_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ask_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ask_stdin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ask_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_statuses, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_retry_same_id, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stale_and_garbage, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_busy_and_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_evalset_cluster, setup,
						teardown),
		cmocka_unit_test(test_evalset_ignore_eos),
		cmocka_unit_test(test_evalset_paired),
		cmocka_unit_test(test_evalset_empty),
		cmocka_unit_test_setup_teardown(test_python_client, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
