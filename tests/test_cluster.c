/*
 * The cluster end to end: real coordinator and worker processes on
 * loopback, a minimal DEALER client written here. The determinism
 * contract: every sample's bytes and the majority answer equal the
 * in-process sc_run (batched) for the same model, prompt and params,
 * whatever the number of workers, the split or the host labels. Also:
 * prefix sharing (mapped / copied / transferred blocks), the prefix cache,
 * concurrent clients, typed errors for bad input, model-fingerprint
 * rejection and the loss of a worker.
 *
 * Every wait is bounded (WAIT_MS) and every child is killed in teardown.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <zmq.h>
#include <cmocka.h>

#include "model.h"
#include "prompt.h"
#include "proto/quorum.pb-c.h"
#include "sc.h"
#include "testutil.h"
#include "tok.h"
#include "wire.h"

extern char **environ;

#define WAIT_MS 30000
#define MAX_CHILDREN 16
#define N_SAMPLES 8
#define MAX_NEW 24
#define SEED 1234

static char model_path[PATH_MAX], other_model[PATH_MAX], tmpdir[2048];
static char bindir[PATH_MAX];
static model *m;
static tok *t;
static void *zctx;

static const char *const questions[] = {
	"What is 17 * 23? Answer with a number.",
	"A farmer has 17 sheep and buys 23 more. How many sheep are there?",
	"What is 2 + 2?",
};
#define N_QUESTIONS 3
static sc_result ref[N_QUESTIONS];      /* seed SEED */
static sc_result ref_seed2;             /* question 0, seed SEED + 1 */

/* ---- processes ------------------------------------------------------- */

typedef struct {
	pid_t coord;
	pid_t kids[MAX_CHILDREN];
	int n_kids;
	char config[PATH_MAX];
	char client_ep[64], worker_ep[64];
} cluster;

static pid_t spawn(char *const argv[])
{
	pid_t pid;

	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ))
		return -1;
	return pid;
}

static void kill_wait(pid_t pid)
{
	int64_t end = wire_now_ms() + 5000;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	while (wire_now_ms() < end) {
		if (waitpid(pid, NULL, WNOHANG) != 0)
			return;
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static long max_message_bytes = 16777216; /* limits.max_message_bytes */

static void write_config(cluster *c, const char *model_file, int local,
			 const char *extra)
{
	static int seq;
	FILE *f;

	snprintf(c->config, sizeof(c->config), "%s/cluster-%d.yaml", tmpdir,
		 ++seq);
	f = fopen(c->config, "w");
	assert_non_null(f);
	fprintf(f,
		"model:\n  path: %s\n"
		"cluster:\n  name: t%d\n"
		"coordinator:\n  client_endpoint: %s\n  worker_endpoint: %s\n"
		"kv:\n  block_tokens: 16\n  blocks: 512\n  dtype: f32\n"
		"limits:\n  max_n: 16\n  max_prompt_tokens: 200\n"
		"  queue_depth: 64\n  request_timeout_ms: 30000\n"
		"  max_message_bytes: %ld\n"
		"heartbeat:\n  interval_ms: 200\n  liveness: 5\n"
		"  reconnect_min_ms: 200\n  reconnect_max_ms: 1000\n"
		"workers:\n  local: %d\n  threads: 1\n  slots: 32\n"
		"prefix_cache:\n  entries: 4\n%s",
		model_file, (int)getpid() % 100000, c->client_ep, c->worker_ep,
		max_message_bytes, local, extra ? extra : "");
	fclose(f);
}

static char *bin(const char *name)
{
	static char p[2][PATH_MAX + 32];
	static int k;

	k ^= 1;
	snprintf(p[k], sizeof(p[k]), "%s/%s", bindir, name);
	return p[k];
}

/* ---- the client ------------------------------------------------------ */

static void *client_new(const cluster *c)
{
	void *s = zmq_socket(zctx, ZMQ_DEALER);
	int zero = 0, to = 500;

	assert_non_null(s);
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof(to));
	assert_int_equal(zmq_connect(s, c->client_ep), 0);
	return s;
}

/* Receives one reply within WAIT_MS (NULL on timeout); while waiting,
 * fails fast if the coordinator died. */
static Quorum__ClientReply *client_recv(const cluster *c, void *s)
{
	int64_t end = wire_now_ms() + WAIT_MS;
	zmq_msg_t msg;

	while (wire_now_ms() < end) {
		Quorum__ClientReply *r;

		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, s, 0) < 0) {
			zmq_msg_close(&msg);
			if (c && c->coord > 0 &&
			    waitpid(c->coord, NULL, WNOHANG) == c->coord)
				return NULL;
			continue;
		}
		r = quorum__client_reply__unpack(NULL, zmq_msg_size(&msg),
						 zmq_msg_data(&msg));
		zmq_msg_close(&msg);
		return r;
	}
	return NULL;
}

static void client_send(void *s, const Quorum__ClientRequest *q)
{
	size_t n = quorum__client_request__get_packed_size(q);
	uint8_t *b = malloc(n + 1);

	quorum__client_request__pack(q, b);
	assert_int_equal(zmq_send(s, b, n, 0), (int)n);
	free(b);
}

typedef struct {
	const char *question;
	uint32_t n;
	uint64_t seed;
	float temperature, top_p;
	int top_k;
	uint32_t max_new;
	int ignore_eos;
	uint32_t version;
} ask_opts;

static ask_opts ask_defaults(const char *q)
{
	ask_opts o = {q, N_SAMPLES, SEED, 0.9f, 0.95f, 0, MAX_NEW, 0,
		      WIRE_VERSION};
	return o;
}

static Quorum__ClientReply *ask(const cluster *c, void *s, uint64_t rid,
				const ask_opts *o)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__Ask a = QUORUM__ASK__INIT;
	Quorum__SamplingParams p = QUORUM__SAMPLING_PARAMS__INIT;

	p.has_n = p.has_seed = p.has_temperature = p.has_top_p = 1;
	p.has_top_k = p.has_max_new_tokens = p.has_ignore_eos = 1;
	p.n = o->n;
	p.seed = o->seed;
	p.temperature = o->temperature;
	p.top_p = o->top_p;
	p.top_k = o->top_k;
	p.max_new_tokens = o->max_new;
	p.ignore_eos = o->ignore_eos;
	a.question.data = (uint8_t *)o->question;
	a.question.len = strlen(o->question);
	a.params = &p;
	q.version = o->version;
	q.request_id = rid;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	q.ask = &a;
	client_send(s, &q);
	return client_recv(c, s);
}

static Quorum__ClientReply *status(const cluster *c, void *s)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery sq = QUORUM__STATUS_QUERY__INIT;

	q.version = WIRE_VERSION;
	q.request_id = 77;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	q.status = &sq;
	client_send(s, &q);
	return client_recv(c, s);
}

/* Waits until the coordinator reports n workers (within WAIT_MS). */
static int wait_workers(const cluster *c, int n)
{
	void *s = client_new(c);
	int64_t end = wire_now_ms() + WAIT_MS;
	int got = -1;

	while (wire_now_ms() < end) {
		Quorum__ClientReply *r = status(c, s);

		if (!r)
			break;
		got = r->body_case == QUORUM__CLIENT_REPLY__BODY_CLUSTER
			      ? (int)r->cluster->n_workers
			      : -1;
		quorum__client_reply__free_unpacked(r, NULL);
		if (got == n)
			break;
		usleep(100000);
	}
	zmq_close(s);
	return got == n ? 0 : -1;
}

/* Starts a coordinator (retrying other ports when they are taken). */
static void cluster_start(cluster *c, const char *model_file, int local,
			  const char *extra)
{
	memset(c, 0, sizeof(*c));
	for (int attempt = 0; attempt < 8; attempt++) {
		int port = 20000 + (int)((getpid() * 13 + attempt * 7919 +
					  wire_now_ms()) % 20000) * 2;
		char *argv[] = {bin("coordinator"), "--config", c->config, NULL};
		int64_t end = wire_now_ms() + 1500;
		int st;

		snprintf(c->client_ep, sizeof(c->client_ep),
			 "tcp://127.0.0.1:%d", port);
		snprintf(c->worker_ep, sizeof(c->worker_ep),
			 "tcp://127.0.0.1:%d", port + 1);
		write_config(c, model_file, local, extra);
		c->coord = spawn(argv);
		assert_true(c->coord > 0);
		/* a taken port makes it exit at once (status 4) */
		while (wire_now_ms() < end &&
		       waitpid(c->coord, &st, WNOHANG) == 0)
			usleep(20000);
		if (waitpid(c->coord, &st, WNOHANG) == 0)
			return;
		c->coord = 0;
	}
	fail_msg("coordinator does not start");
}

static pid_t worker_start(cluster *c, const char *config, const char *id,
			  const char *host)
{
	char *argv[] = {bin("worker"), "--config", (char *)config, "--id",
			(char *)id, "--host", (char *)host, NULL};
	pid_t pid = spawn(argv);

	assert_true(pid > 0);
	assert_true(c->n_kids < MAX_CHILDREN);
	c->kids[c->n_kids++] = pid;
	return pid;
}

static void cluster_stop(cluster *c)
{
	kill_wait(c->coord);
	for (int i = 0; i < c->n_kids; i++)
		kill_wait(c->kids[i]);
	unlink(c->config);
	memset(c, 0, sizeof(*c));
}

/* ---- checks ---------------------------------------------------------- */

static void check_answer(const Quorum__ClientReply *r, const sc_result *x,
			 const char *what)
{
	const Quorum__Answer *a;

	if (!r)
		fail_msg("%s: no reply", what);
	if (r->status != QUORUM__STATUS__STATUS_OK)
		fail_msg("%s: status %s: %s", what,
			 wire_status_name(r->status), r->error ? r->error : "");
	assert_int_equal(r->body_case, QUORUM__CLIENT_REPLY__BODY_ANSWER);
	a = r->answer;
	assert_int_equal(a->n, (uint32_t)x->n);
	assert_int_equal(a->n_samples, (size_t)x->n);
	for (int i = 0; i < x->n; i++) {
		const Quorum__Sample *s = a->samples[i];
		const sc_sample *y = &x->samples[i];

		assert_int_equal(s->index, (uint32_t)i);
		if (s->text.len != y->len || memcmp(s->text.data, y->text, y->len))
			fail_msg("%s: sample %d text differs:\n[%.*s]\n[%.*s]",
				 what, i, (int)s->text.len, s->text.data,
				 (int)y->len, y->text);
		assert_int_equal(s->tokens, (uint32_t)y->n_tokens);
		assert_string_equal(s->finish, sc_finish_name(y->finish));
		assert_int_equal(s->has_answer, y->has_answer);
		if (y->has_answer) {
			assert_int_equal(s->answer.len, strlen(y->answer));
			assert_memory_equal(s->answer.data, y->answer,
					    s->answer.len);
		}
	}
	assert_int_equal(a->has_answer, x->vote.winner != VOTE_NONE);
	if (a->has_answer) {
		const char *w = x->vote.entries[0].answer;

		assert_int_equal(a->answer.len, strlen(w));
		assert_memory_equal(a->answer.data, w, a->answer.len);
		assert_int_equal(a->n_votes, x->vote.n_entries);
		for (size_t i = 0; i < a->n_votes; i++)
			assert_int_equal(a->votes[i]->count,
					 (uint32_t)x->vote.entries[i].count);
	}
}

static int distinct_workers(const Quorum__Answer *a)
{
	const char *seen[MAX_CHILDREN];
	int n = 0;

	for (size_t i = 0; i < a->n_samples; i++) {
		const char *w = a->samples[i]->worker;
		int k;

		if (!w)
			continue;
		for (k = 0; k < n && strcmp(seen[k], w); k++)
			;
		if (k == n && n < MAX_CHILDREN)
			seen[n++] = w;
	}
	return n;
}

/* Forks whose first append copies the partly filled tail block. */
static uint32_t expected_copies(const sc_result *x, uint32_t prompt_tokens)
{
	uint32_t n = 0;

	if (prompt_tokens % 16 == 0)
		return 0;
	for (int i = 0; i < x->n; i++)
		n += x->samples[i].n_tokens > 1 ||
		     x->samples[i].finish == SC_FINISH_LENGTH;
	return n;
}

/* ---- setup ----------------------------------------------------------- */

static void reference(const char *q, uint64_t seed, sc_result *out)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = {.sp = {0.9f, 0, 0.95f}, .seed = seed, .n = N_SAMPLES,
		       .max_new = MAX_NEW, .mode = SC_BATCHED};
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	ep.n_threads = 1;
	ep.kv_dtype = KV_F32; /* as the test config's kv.dtype */
	if (prompt_build(t, NULL, q, &ids, &n) || sc_engine_new(m, t, &ep, &e) ||
	    sc_run(e, ids, n, &p, out))
		fail_msg("reference: %s", qerr_detail());
	sc_engine_free(&e);
	free(ids);
}

static int group_setup(void **state)
{
	char exe[PATH_MAX];
	ssize_t n;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -1;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';          /* B/tests */
	*strrchr(exe, '/') = '\0';          /* B */
	snprintf(bindir, sizeof(bindir), "%s", exe);
	snprintf(tmpdir, sizeof(tmpdir), "%s/cluster-XXXXXX", tu_tmpdir());
	if (!mkdtemp(tmpdir) || !realpath(tmpdir, exe))
		return -1;
	if (strlen(exe) >= sizeof(tmpdir))
		return -1;
	memcpy(tmpdir, exe, strlen(exe) + 1);
	if (tu_model(model_path, sizeof(model_path), "qwen2", "tiny",
		     GGML_TYPE_Q8_0,
		     tu_data("data/tokenizers/qwen2/tokenizer.json"), 11) ||
	    tu_model(other_model, sizeof(other_model), "qwen2", "tiny",
		     GGML_TYPE_Q8_0,
		     tu_data("data/tokenizers/qwen2/tokenizer.json"), 12) ||
	    !realpath(model_path, exe))
		return -1;
	snprintf(model_path, sizeof(model_path), "%s", exe);
	if (!realpath(other_model, exe))
		return -1;
	snprintf(other_model, sizeof(other_model), "%s", exe);
	if (model_load(model_path, &m) || tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	for (int i = 0; i < N_QUESTIONS; i++)
		reference(questions[i], SEED, &ref[i]);
	reference(questions[0], SEED + 1, &ref_seed2);
	zctx = zmq_ctx_new();
	return zctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_QUESTIONS; i++)
		sc_result_fini(&ref[i]);
	sc_result_fini(&ref_seed2);
	/* not zmq_ctx_term: a failed case longjmps past its zmq_close, and
	 * term would wait for that socket forever (the run hung under ASan);
	 * shutdown returns at once and the process exits anyway */
	if (zctx)
		zmq_ctx_shutdown(zctx);
	tok_free(&t);
	model_free(&m);
	unlink(model_path);
	unlink(other_model);
	rmdir(tmpdir);
	return 0;
}

static cluster cl; /* the running test's, stopped in teardown */

/* Pools of workers that were SIGKILLed cannot unlink themselves. */
static void unlink_pools(void)
{
	char prefix[64];
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), "quorum-t%d-",
				    (int)getpid() % 100000);
	DIR *d = opendir("/dev/shm");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char name[300];

		if (strncmp(de->d_name, prefix, n))
			continue;
		snprintf(name, sizeof(name), "/%s", de->d_name);
		shm_unlink(name);
	}
	if (d)
		closedir(d);
}

static int test_teardown(void **state)
{
	(void)state;
	cluster_stop(&cl);
	unlink_pools();
	return 0;
}

/* ---- tests ----------------------------------------------------------- */

static void one_worker(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	ask_opts o = ask_defaults(questions[0]);
	const Quorum__PrefixStats *px;

	(void)state;
	cluster_start(&cl, model_path, 1, NULL);
	assert_int_equal(wait_workers(&cl, 1), 0);
	s = client_new(&cl);
	r = ask(&cl, s, 1, &o);
	check_answer(r, &ref[0], "1 worker");
	assert_int_equal(r->request_id, 1);
	px = r->answer->prefix;
	assert_non_null(px);
	assert_int_equal(px->prefills, 1);
	assert_false(px->cache_hit);
	assert_int_equal(px->prefix_blocks, (px->prompt_tokens + 15) / 16);
	assert_int_equal(px->blocks_mapped, N_SAMPLES * (px->prompt_tokens / 16));
	assert_int_equal(px->blocks_copied,
			 expected_copies(&ref[0], px->prompt_tokens));
	assert_int_equal(px->blocks_transferred, 0);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

static void three_workers_and_cache(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	ask_opts o = ask_defaults(questions[0]);
	const Quorum__PrefixStats *px;

	(void)state;
	cluster_start(&cl, model_path, 3, NULL);
	assert_int_equal(wait_workers(&cl, 3), 0);
	s = client_new(&cl);
	r = ask(&cl, s, 10, &o);
	check_answer(r, &ref[0], "3 workers");
	assert_int_equal(distinct_workers(r->answer), 3);
	px = r->answer->prefix;
	assert_int_equal(px->prefills, 1);
	/* two workers mapped the holder's pool, each fork reads in place */
	assert_int_equal(px->blocks_mapped, N_SAMPLES * (px->prompt_tokens / 16));
	assert_true(px->blocks_mapped > 0);
	assert_int_equal(px->blocks_copied,
			 expected_copies(&ref[0], px->prompt_tokens));
	assert_int_equal(px->blocks_transferred, 0);
	quorum__client_reply__free_unpacked(r, NULL);

	/* the same prompt again, another seed: prefix cache, no prefill */
	o.seed = SEED + 1;
	r = ask(&cl, s, 11, &o);
	check_answer(r, &ref_seed2, "3 workers, cached prefix");
	assert_true(r->answer->prefix->cache_hit);
	assert_int_equal(r->answer->prefix->prefills, 0);
	quorum__client_reply__free_unpacked(r, NULL);

	r = status(&cl, s);
	assert_non_null(r);
	assert_int_equal(r->body_case, QUORUM__CLIENT_REPLY__BODY_CLUSTER);
	assert_int_equal(r->cluster->n_workers, 3);
	assert_true(r->cluster->prefix_hits >= 1);
	assert_int_equal(r->cluster->prefix_misses, 1);
	assert_int_equal(r->cluster->requests_served, 2);
	for (size_t i = 0; i < r->cluster->n_workers; i++) {
		assert_int_equal(r->cluster->workers[i]->slots, 32);
		assert_int_equal(r->cluster->workers[i]->busy, 0);
	}
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

static void two_hosts(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	ask_opts o = ask_defaults(questions[0]);
	const Quorum__PrefixStats *px;

	(void)state;
	cluster_start(&cl, model_path, 0, NULL);
	worker_start(&cl, cl.config, "a1", "a");
	worker_start(&cl, cl.config, "a2", "a");
	worker_start(&cl, cl.config, "b1", "b");
	worker_start(&cl, cl.config, "b2", "b");
	assert_int_equal(wait_workers(&cl, 4), 0);
	s = client_new(&cl);
	r = ask(&cl, s, 20, &o);
	check_answer(r, &ref[0], "2 hosts x 2 workers");
	assert_int_equal(distinct_workers(r->answer), 4);
	px = r->answer->prefix;
	/* the root went to host b once, whole */
	assert_int_equal(px->blocks_transferred, px->prefix_blocks);
	assert_true(px->bytes_transferred > 0);
	assert_int_equal(px->blocks_mapped, N_SAMPLES * (px->prompt_tokens / 16));
	assert_int_equal(px->blocks_copied,
			 expected_copies(&ref[0], px->prompt_tokens));
	quorum__client_reply__free_unpacked(r, NULL);

	/* cached: host b already holds its copy, nothing moves */
	o.seed = SEED + 1;
	r = ask(&cl, s, 21, &o);
	check_answer(r, &ref_seed2, "2 hosts, cached prefix");
	assert_true(r->answer->prefix->cache_hit);
	assert_int_equal(r->answer->prefix->blocks_transferred, 0);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

/* A root too large for one message cannot go to host b: the samples are
 * decoded on host a alone, same bytes. (Messages here fit the logits of a
 * DecodeJob, 151936 x 4 bytes, but not logits + the root's K/V rows.) */
static void two_hosts_root_too_large(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	ask_opts o = ask_defaults(questions[0]);

	(void)state;
	max_message_bytes = 640000;
	cluster_start(&cl, model_path, 0, NULL);
	max_message_bytes = 16777216;
	worker_start(&cl, cl.config, "a1", "a");
	worker_start(&cl, cl.config, "b1", "b");
	assert_int_equal(wait_workers(&cl, 2), 0);
	s = client_new(&cl);
	r = ask(&cl, s, 40, &o);
	check_answer(r, &ref[0], "root too large for host b");
	assert_int_equal(distinct_workers(r->answer), 1);
	assert_int_equal(r->answer->prefix->blocks_transferred, 0);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

typedef struct {
	int id;
	int failures;
	char why[256];
} client_job;

static void *client_thread(void *arg)
{
	client_job *j = arg;
	void *s = client_new(&cl);

	for (int q = 0; q < N_QUESTIONS; q++) {
		int qi = (q + j->id) % N_QUESTIONS;
		ask_opts o = ask_defaults(questions[qi]);
		Quorum__ClientReply *r = ask(&cl, s, 100u * j->id + q, &o);
		const sc_result *x = &ref[qi];
		int ok = r && r->status == QUORUM__STATUS__STATUS_OK &&
			 r->request_id == 100u * j->id + q &&
			 r->answer->n_samples == (size_t)x->n;

		for (int i = 0; ok && i < x->n; i++)
			ok = r->answer->samples[i]->text.len == x->samples[i].len &&
			     !memcmp(r->answer->samples[i]->text.data,
				     x->samples[i].text, x->samples[i].len);
		if (!ok) {
			j->failures++;
			snprintf(j->why, sizeof(j->why), "client %d q %d: %s",
				 j->id, qi,
				 r ? (r->error ? r->error
					       : wire_status_name(r->status))
				   : "no reply");
		}
		if (r)
			quorum__client_reply__free_unpacked(r, NULL);
	}
	zmq_close(s);
	return NULL;
}

static void concurrent_clients(void **state)
{
	pthread_t th[4];
	client_job jobs[4] = {{0}};

	(void)state;
	cluster_start(&cl, model_path, 3, NULL);
	assert_int_equal(wait_workers(&cl, 3), 0);
	for (int i = 0; i < 4; i++) {
		jobs[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, client_thread,
						&jobs[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 4; i++)
		if (jobs[i].failures)
			fail_msg("%s", jobs[i].why);
}

static void expect_status(Quorum__ClientReply *r, uint64_t rid, int st,
			  const char *what)
{
	if (!r)
		fail_msg("%s: no reply", what);
	if ((int)r->status != st)
		fail_msg("%s: got %s (%s), want %s", what,
			 wire_status_name(r->status), r->error ? r->error : "",
			 wire_status_name(st));
	assert_int_equal(r->request_id, rid);
	quorum__client_reply__free_unpacked(r, NULL);
}

static void bad_input(void **state)
{
	void *s;
	ask_opts o;
	char long_q[4000];
	zmq_msg_t part;

	(void)state;
	cluster_start(&cl, model_path, 1, NULL);
	assert_int_equal(wait_workers(&cl, 1), 0);
	s = client_new(&cl);

	o = ask_defaults("");
	expect_status(ask(&cl, s, 1, &o), 1, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "empty question");
	o = ask_defaults(questions[0]);
	o.n = 17;
	expect_status(ask(&cl, s, 2, &o), 2, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "n over max_n");
	o.n = 0;
	expect_status(ask(&cl, s, 3, &o), 3, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "n zero");
	o = ask_defaults(questions[0]);
	o.temperature = -1;
	expect_status(ask(&cl, s, 4, &o), 4, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "negative temperature");
	o = ask_defaults(questions[0]);
	o.top_p = 0;
	expect_status(ask(&cl, s, 5, &o), 5, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "top_p 0");
	o.top_p = 1.5f;
	expect_status(ask(&cl, s, 6, &o), 6, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "top_p 1.5");
	for (size_t i = 0; i + 1 < sizeof(long_q); i++)
		long_q[i] = i % 5 == 4 ? ' ' : 'a' + (char)(i % 7);
	long_q[sizeof(long_q) - 1] = '\0';
	o = ask_defaults(long_q);
	expect_status(ask(&cl, s, 7, &o), 7, QUORUM__STATUS__STATUS_TOO_LONG,
		      "prompt over max_prompt_tokens");
	o = ask_defaults(questions[0]);
	o.max_new = 4090;
	expect_status(ask(&cl, s, 8, &o), 8, QUORUM__STATUS__STATUS_TOO_LONG,
		      "prompt + max_new over the context");
	o = ask_defaults(questions[0]);
	o.version = 2;
	expect_status(ask(&cl, s, 9, &o), 9,
		      QUORUM__STATUS__STATUS_VERSION_MISMATCH, "version 2");
	/* garbage bytes */
	assert_int_equal(zmq_send(s, "\xff\xfe garbage \x01", 12, 0), 12);
	expect_status(client_recv(&cl, s), 0, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "garbage");
	/* two frames */
	assert_int_equal(zmq_send(s, "a", 1, ZMQ_SNDMORE), 1);
	assert_int_equal(zmq_send(s, "b", 1, 0), 1);
	expect_status(client_recv(&cl, s), 0, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "two frames");
	/* an empty frame is an empty ClientRequest: missing fields */
	zmq_msg_init(&part);
	assert_int_equal(zmq_msg_send(&part, s, 0), 0);
	expect_status(client_recv(&cl, s), 0, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "empty frame");
	/* and the cluster still serves */
	o = ask_defaults(questions[0]);
	{
		Quorum__ClientReply *r = ask(&cl, s, 10, &o);

		check_answer(r, &ref[0], "after bad input");
		quorum__client_reply__free_unpacked(r, NULL);
	}
	zmq_close(s);
}

static void no_capacity(void **state)
{
	void *s;
	ask_opts o = ask_defaults(questions[0]);

	(void)state;
	cluster_start(&cl, model_path, 0, NULL);
	assert_int_equal(wait_workers(&cl, 0), 0);
	s = client_new(&cl);
	expect_status(ask(&cl, s, 5, &o), 5, QUORUM__STATUS__STATUS_NO_CAPACITY,
		      "no workers");
	zmq_close(s);
}

static void fingerprint_reject(void **state)
{
	cluster other;
	pid_t w;
	int st = 0;
	int64_t end;

	(void)state;
	cluster_start(&cl, model_path, 0, NULL);
	worker_start(&cl, cl.config, "good", "a");
	assert_int_equal(wait_workers(&cl, 1), 0);
	/* same endpoints, another model */
	other = cl;
	write_config(&other, other_model, 0, NULL);
	w = worker_start(&cl, other.config, "bad", "a");
	end = wire_now_ms() + WAIT_MS;
	while (wire_now_ms() < end && waitpid(w, &st, WNOHANG) == 0)
		usleep(50000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
	cl.kids[cl.n_kids - 1] = 0;
	assert_int_equal(wait_workers(&cl, 1), 0);
	unlink(other.config);
}

/* A worker lost mid-request. w2 is stopped (SIGSTOP) while the
 * coordinator still counts it: the jobs it gets sit unanswered until its
 * heartbeat expires, then its sample indices are decoded by w1 and the
 * reply is byte-identical. Resumed, w2's stale results are dropped and it
 * registers again. Then a worker killed outright. */
static void worker_lost(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	ask_opts o = ask_defaults(questions[0]);
	pid_t victim;

	(void)state;
	cluster_start(&cl, model_path, 0, NULL);
	worker_start(&cl, cl.config, "w1", "a");
	victim = worker_start(&cl, cl.config, "w2", "a");
	assert_int_equal(wait_workers(&cl, 2), 0);
	s = client_new(&cl);
	kill(victim, SIGSTOP);
	r = ask(&cl, s, 30, &o);
	check_answer(r, &ref[0], "a worker stopped mid-request");
	quorum__client_reply__free_unpacked(r, NULL);
	kill(victim, SIGCONT);
	assert_int_equal(wait_workers(&cl, 2), 0);
	o.seed = SEED + 1;
	r = ask(&cl, s, 31, &o);
	check_answer(r, &ref_seed2, "after the worker came back");
	quorum__client_reply__free_unpacked(r, NULL);
	/* killed: the coordinator sees the connection go */
	kill(victim, SIGKILL);
	waitpid(victim, NULL, 0);
	cl.kids[cl.n_kids - 1] = 0;
	o.seed = SEED;
	r = ask(&cl, s, 32, &o);
	check_answer(r, &ref[0], "after a worker was killed");
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(one_worker, test_teardown),
		cmocka_unit_test_teardown(three_workers_and_cache, test_teardown),
		cmocka_unit_test_teardown(two_hosts, test_teardown),
		cmocka_unit_test_teardown(two_hosts_root_too_large,
					  test_teardown),
		cmocka_unit_test_teardown(concurrent_clients, test_teardown),
		cmocka_unit_test_teardown(bad_input, test_teardown),
		cmocka_unit_test_teardown(no_capacity, test_teardown),
		cmocka_unit_test_teardown(fingerprint_reject, test_teardown),
		cmocka_unit_test_teardown(worker_lost, test_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
