/*
 * clusterutil — helpers for tests that run a real cluster on loopback
 * (header-only, static inline: every test is its own binary): start a
 * coordinator on free ports with a generated config, start workers, a
 * minimal DEALER client (ask, status), and a teardown that kills every
 * child and unlinks the cluster's /dev/shm pools even after a failure.
 *
 * Every wait is bounded (CU_WAIT_MS). The caller sets cu_bindir (the
 * directory of build/coordinator and build/worker), cu_tmpdir and cu_zctx
 * in its group setup (cu_setup_paths does the first two).
 */
#ifndef QUORUM_CLUSTERUTIL_H
#define QUORUM_CLUSTERUTIL_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "proto/quorum.pb-c.h"
#include "testutil.h"
#include "net/wire.h"

extern char **environ;

#define CU_WAIT_MS 120000 /* bounds a wait for an event, never a speed */
#define CU_MAX_CHILDREN 16

static char cu_bindir[PATH_MAX], cu_tmpdir[2048];
static void *cu_zctx;

typedef struct {
	pid_t coord;
	pid_t kids[CU_MAX_CHILDREN];
	char kid_ids[CU_MAX_CHILDREN][32];
	int n_kids;
	char config[PATH_MAX];
	char client_ep[64], worker_ep[64];
} cu_cluster;

/* The knobs of a generated cluster.yaml (cu_cfg_defaults()). */
typedef struct {
	const char *model;
	int local, slots, threads;
	int hb_interval_ms, liveness, reconnect_min_ms, reconnect_max_ms;
	int queue_depth, request_timeout_ms, cache_entries, max_n;
	long max_message_bytes;
	const char *kv_dtype;
	int kv_blocks;        /* per worker pool */
	/* sampling.stop; NULL: not written (the default, exact). The
	 * defaults' "none": the suites compare every reply's N samples with
	 * in-process references of all N (test_cluster_stop covers the rules and
	 * the default) */
	const char *stop;
	int stop_waves;       /* sampling.stop_waves; 0: not written */
	int max_prompt_tokens; /* limits.max_prompt_tokens */
} cu_cfg;

static inline cu_cfg cu_cfg_defaults(const char *model)
{
	/* heartbeats every 200 ms, liveness 25 (5 s): a process starved of
	 * CPU on a loaded machine is not taken for dead */
	cu_cfg c = {model, 0, 32, 1, 200, 25, 200, 1000, 64, 120000, 4, 16,
		    16777216, "f32", 512, "none", 0, 200};
	return c;
}

/* The cluster name of this test process (pools are /quorum-NAME@...). */
static inline const char *cu_name(void)
{
	static char n[32];

	snprintf(n, sizeof(n), "t%d", (int)getpid() % 100000);
	return n;
}

static inline pid_t cu_spawn(char *const argv[])
{
	pid_t pid;

	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ))
		return -1;
	return pid;
}

/* SIGTERM, then SIGKILL after 5 s; reaps. */
static inline void cu_kill_wait(pid_t pid)
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

static inline char *cu_bin(const char *name)
{
	static char p[2][PATH_MAX + 32];
	static int k;

	k ^= 1;
	snprintf(p[k], sizeof(p[k]), "%s/%s", cu_bindir, name);
	return p[k];
}

/* cu_bindir from /proc/self/exe (B/tests/x -> B), a fresh cu_tmpdir. */
static inline int cu_setup_paths(const char *tag)
{
	char exe[PATH_MAX];
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -1;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(cu_bindir, sizeof(cu_bindir), "%s", exe);
	snprintf(cu_tmpdir, sizeof(cu_tmpdir), "%s/%s-XXXXXX", tu_tmpdir(),
		 tag);
	if (!mkdtemp(cu_tmpdir) || !realpath(cu_tmpdir, exe) ||
	    strlen(exe) >= sizeof(cu_tmpdir))
		return -1;
	memcpy(cu_tmpdir, exe, strlen(exe) + 1);
	return 0;
}

/* Synthesizes a cluster model (qwen2 "tiny", q8_0; weights from seed)
 * with the vocabulary and chat template of tokenizer (a tokenizer.json or
 * a GGUF) into the temp dir; its absolute path in buf (PATH_MAX). */
static inline int cu_model_tok(char *buf, uint64_t seed, const char *tokenizer)
{
	char real[PATH_MAX];

	if (tu_model(buf, PATH_MAX, "qwen2", "tiny", GGML_TYPE_Q8_0,
		     tokenizer, seed) ||
	    !realpath(buf, real))
		return -1;
	memcpy(buf, real, strlen(real) + 1);
	return 0;
}

/* The clusters' usual model: the shipped model's 809-token BPE and ChatML
 * template. The engine and transport code are the same as with a large
 * vocabulary, and the LM head — nearly all of a tiny model's work per
 * token with Qwen's 151,669 tokens — shrinks 190 times. Tests of what
 * only Qwen's tokenizer has (the qwen3 thinking template) use
 * cu_model_tok with it. */
static inline int cu_model(char *buf, uint64_t seed)
{
	return cu_model_tok(buf, seed, tu_chat_tokenizer());
}

static inline void cu_write_config(cu_cluster *c, const cu_cfg *k)
{
	static int seq;
	FILE *f;

	snprintf(c->config, sizeof(c->config), "%s/cluster-%d.yaml",
		 cu_tmpdir, ++seq);
	f = fopen(c->config, "w");
	if (!f)
		return;
	fprintf(f,
		"model:\n  path: %s\n"
		"cluster:\n  name: %s\n"
		"coordinator:\n  client_endpoint: %s\n  worker_endpoint: %s\n"
		"kv:\n  block_tokens: 16\n  blocks: %d\n  dtype: %s\n"
		"limits:\n  max_n: %d\n  max_prompt_tokens: %d\n"
		"  queue_depth: %d\n  request_timeout_ms: %d\n"
		"  max_message_bytes: %ld\n"
		"heartbeat:\n  interval_ms: %d\n  liveness: %d\n"
		"  reconnect_min_ms: %d\n  reconnect_max_ms: %d\n"
		"workers:\n  local: %d\n  threads: %d\n  slots: %d\n"
		"prefix_cache:\n  entries: %d\n",
		k->model, cu_name(), c->client_ep, c->worker_ep, k->kv_blocks,
		k->kv_dtype,
		k->max_n, k->max_prompt_tokens, k->queue_depth,
		k->request_timeout_ms,
		k->max_message_bytes, k->hb_interval_ms, k->liveness,
		k->reconnect_min_ms, k->reconnect_max_ms, k->local, k->threads,
		k->slots, k->cache_entries);
	if (k->stop || k->stop_waves)
		fputs("sampling:\n", f);
	if (k->stop)
		fprintf(f, "  stop: %s\n", k->stop);
	if (k->stop_waves)
		fprintf(f, "  stop_waves: %d\n", k->stop_waves);
	fclose(f);
}

/* Starts a coordinator on c's config; 0 when it runs (a taken port makes
 * it exit at once with status 4). */
static inline int cu_coord_spawn(cu_cluster *c)
{
	char *argv[] = {cu_bin("coordinator"), "--config", c->config, NULL};
	int64_t end = wire_now_ms() + 1500;
	int st;

	c->coord = cu_spawn(argv);
	if (c->coord <= 0)
		return -1;
	while (wire_now_ms() < end && waitpid(c->coord, &st, WNOHANG) == 0)
		usleep(20000);
	if (waitpid(c->coord, &st, WNOHANG) == 0)
		return 0;
	c->coord = 0;
	return -1;
}

/* Picks free-looking ports and starts a coordinator (retrying). */
static inline int cu_start(cu_cluster *c, const cu_cfg *k)
{
	memset(c, 0, sizeof(*c));
	for (int attempt = 0; attempt < 8; attempt++) {
		int port = 20000 + (int)((getpid() * 17 + attempt * 7919 +
					  wire_now_ms()) % 20000) * 2;

		snprintf(c->client_ep, sizeof(c->client_ep),
			 "tcp://127.0.0.1:%d", port);
		snprintf(c->worker_ep, sizeof(c->worker_ep),
			 "tcp://127.0.0.1:%d", port + 1);
		cu_write_config(c, k);
		if (!cu_coord_spawn(c))
			return 0;
		unlink(c->config);
	}
	return -1;
}

/* A worker started on another config (its kill is still c's). */
static inline pid_t cu_worker_config(cu_cluster *c, const char *config,
				     const char *id, const char *host)
{
	char *argv[] = {cu_bin("worker"), "--config", (char *)config, "--id",
			(char *)id, "--host", (char *)host, NULL};
	pid_t pid;

	if (c->n_kids >= CU_MAX_CHILDREN || (pid = cu_spawn(argv)) <= 0)
		return -1;
	snprintf(c->kid_ids[c->n_kids], sizeof(c->kid_ids[0]), "%s", id);
	c->kids[c->n_kids++] = pid;
	return pid;
}

static inline pid_t cu_worker(cu_cluster *c, const char *id, const char *host)
{
	return cu_worker_config(c, c->config, id, host);
}

/* SIGKILLs a worker started by cu_worker and reaps it. */
static inline void cu_worker_kill9(cu_cluster *c, pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < c->n_kids; i++)
		if (c->kids[i] == pid)
			c->kids[i] = 0;
}

/* Pools of workers that were SIGKILLed cannot unlink themselves. */
static inline void cu_unlink_pools(void)
{
	char prefix[64];
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), "quorum-%s@",
				    cu_name());
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

/* Kills the coordinator and the workers started here (local workers of
 * the coordinator exit with it: worker --parent), unlinks the pools. */
static inline void cu_stop(cu_cluster *c)
{
	cu_kill_wait(c->coord);
	for (int i = 0; i < c->n_kids; i++)
		cu_kill_wait(c->kids[i]);
	if (c->config[0])
		unlink(c->config);
	memset(c, 0, sizeof(*c));
	cu_unlink_pools();
}

/* ---- the client ------------------------------------------------------ */

static inline void *cu_client(const cu_cluster *c)
{
	void *s = zmq_socket(cu_zctx, ZMQ_DEALER);
	int zero = 0, to = 200;

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &to, sizeof(to));
	if (zmq_connect(s, c->client_ep)) {
		zmq_close(s);
		return NULL;
	}
	return s;
}

/* One reply within wait_ms (NULL on timeout); with c, NULL as soon as
 * c's coordinator has exited (it is reaped then). */
static inline Quorum__ClientReply *cu_recv_live(const cu_cluster *c, void *s,
						int wait_ms)
{
	int64_t end = wire_now_ms() + wait_ms;

	do {
		zmq_msg_t msg;
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
	} while (wire_now_ms() < end);
	return NULL;
}

/* One reply within wait_ms (NULL on timeout). */
static inline Quorum__ClientReply *cu_recv(void *s, int wait_ms)
{
	return cu_recv_live(NULL, s, wait_ms);
}

static inline int cu_send(void *s, const Quorum__ClientRequest *q)
{
	size_t n = quorum__client_request__get_packed_size(q);
	uint8_t *b = malloc(n + 1);
	int rc;

	if (!b)
		return -1;
	quorum__client_request__pack(q, b);
	rc = zmq_send(s, b, n, 0) == (int)n ? 0 : -1;
	free(b);
	return rc;
}

typedef struct {
	const char *question;
	uint32_t n;
	uint64_t seed;
	float temperature, top_p;
	int top_k;
	uint32_t max_new;
	int ignore_eos;
	uint32_t deadline_ms;   /* 0: the configured timeout */
	const char *stop;       /* early-stopping rule; NULL: the config's */
	const char *vote;       /* NULL: majority */
} cu_ask;

/* Sends an Ask of protocol version (no wait). */
static inline int cu_ask_send_version(void *s, uint64_t rid, const cu_ask *o,
				      uint32_t version)
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
	p.stop = (char *)o->stop;
	p.vote = (char *)o->vote;
	a.question.data = (uint8_t *)o->question;
	a.question.len = strlen(o->question);
	a.params = &p;
	if (o->deadline_ms) {
		a.has_deadline_ms = 1;
		a.deadline_ms = o->deadline_ms;
	}
	q.version = version;
	q.request_id = rid;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_ASK;
	q.ask = &a;
	return cu_send(s, &q);
}

/* Sends an Ask (no wait). */
static inline int cu_ask_send(void *s, uint64_t rid, const cu_ask *o)
{
	return cu_ask_send_version(s, rid, o, WIRE_VERSION);
}

/* Sends a StatusQuery (no wait). */
static inline int cu_status_send(void *s, uint64_t rid)
{
	Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
	Quorum__StatusQuery sq = QUORUM__STATUS_QUERY__INIT;

	q.version = WIRE_VERSION;
	q.request_id = rid;
	q.body_case = QUORUM__CLIENT_REQUEST__BODY_STATUS;
	q.status = &sq;
	return cu_send(s, &q);
}

/* The cluster status (NULL when the coordinator does not answer in 2 s;
 * callers poll again). Each query has its own request id, so a late reply to an
 * earlier query is never taken for this one; replies to other requests
 * arriving meanwhile are dropped (poll status on a socket of its own). */
static inline Quorum__ClientReply *cu_status(void *s)
{
	static uint64_t seq;
	uint64_t rid = 0x57570000ull + ++seq;
	int64_t end = wire_now_ms() + 2000;

	if (cu_status_send(s, rid))
		return NULL;
	while (wire_now_ms() < end) {
		Quorum__ClientReply *r = cu_recv(s, 200);

		if (r && r->request_id == rid &&
		    r->body_case == QUORUM__CLIENT_REPLY__BODY_CLUSTER)
			return r;
		if (r)
			quorum__client_reply__free_unpacked(r, NULL);
	}
	return NULL;
}

/* Waits until the coordinator reports n workers; returns the ms waited,
 * or -1 after wait_ms. */
static inline long cu_wait_workers(const cu_cluster *c, int n, int wait_ms)
{
	void *s = cu_client(c);
	int64_t t0 = wire_now_ms(), end = t0 + wait_ms;
	int got = -1;

	while (s && wire_now_ms() < end) {
		Quorum__ClientReply *r = cu_status(s);

		if (r) {
			got = (int)r->cluster->n_workers;
			quorum__client_reply__free_unpacked(r, NULL);
		}
		if (got == n)
			break;
		if (!r) { /* a dead coordinator's socket: start over */
			zmq_close(s);
			s = cu_client(c);
		}
		usleep(50000);
	}
	if (s)
		zmq_close(s);
	return got == n ? (long)(wire_now_ms() - t0) : -1;
}

#endif
