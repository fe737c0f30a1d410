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
 * Processes, the config and the client come from clusterutil.h. Every
 * wait is bounded (CU_WAIT_MS) and every child is killed in teardown.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "clusterutil.h"
#include "infer/mkmodel.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/fork.h"
#include "text/tok.h"

#define N_SAMPLES 8
#define MAX_NEW 24
#define SEED 1234

static char model_path[PATH_MAX], other_model[PATH_MAX];
static model *m;
static tok *t;

static const char *const questions[] = {
	"What is 17 * 23? Answer with a number.",
	"A farmer has 17 sheep and buys 23 more. How many sheep are there?",
	"What is 2 + 2?",
};
#define N_QUESTIONS 3
static sc_result ref[N_QUESTIONS];      /* seed SEED */
static sc_result ref_seed2;             /* question 0, seed SEED + 1 */

/* ---- processes and the client (clusterutil.h), asserting ------------- */

static void *client_new(const cu_cluster *c)
{
	void *s = cu_client(c);

	assert_non_null(s);
	return s;
}

/* Receives one reply within CU_WAIT_MS (NULL on timeout); while waiting,
 * fails fast if the coordinator died. */
static Quorum__ClientReply *client_recv(const cu_cluster *c, void *s)
{
	return cu_recv_live(c, s, CU_WAIT_MS);
}

static cu_ask ask_defaults(const char *q)
{
	cu_ask o = {q, N_SAMPLES, SEED, 0.9f, 0.95f, 0, MAX_NEW, 0, 0, NULL, NULL};
	return o;
}

static Quorum__ClientReply *ask_version(const cu_cluster *c, void *s,
					uint64_t rid, const cu_ask *o,
					uint32_t version)
{
	assert_int_equal(cu_ask_send_version(s, rid, o, version), 0);
	return client_recv(c, s);
}

static Quorum__ClientReply *ask(const cu_cluster *c, void *s, uint64_t rid,
				const cu_ask *o)
{
	return ask_version(c, s, rid, o, WIRE_VERSION);
}

/* The next reply after a StatusQuery, whatever it is. */
static Quorum__ClientReply *status(const cu_cluster *c, void *s)
{
	assert_int_equal(cu_status_send(s, 77), 0);
	return client_recv(c, s);
}

/* Waits until the coordinator reports n workers (within CU_WAIT_MS). */
static int wait_workers(const cu_cluster *c, int n)
{
	return cu_wait_workers(c, n, CU_WAIT_MS) >= 0 ? 0 : -1;
}

/* Starts a coordinator (retrying other ports when they are taken). */
static void cluster_start_cfg(cu_cluster *c, const cu_cfg *k)
{
	if (cu_start(c, k))
		fail_msg("coordinator does not start");
}

static void cluster_start(cu_cluster *c, const char *model_file, int local)
{
	cu_cfg k = cu_cfg_defaults(model_file);

	k.local = local;
	cluster_start_cfg(c, &k);
}

static pid_t worker_start(cu_cluster *c, const char *config, const char *id,
			  const char *host)
{
	pid_t pid = cu_worker_config(c, config, id, host);

	assert_true(pid > 0);
	return pid;
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
		if (s->text.len != y->len ||
		    (y->len && memcmp(s->text.data, y->text, y->len)))
			fail_msg("%s: sample %d text differs:\n[%.*s]\n[%.*s]",
				 what, i, (int)s->text.len, s->text.data,
				 (int)y->len, y->text);
		assert_int_equal(s->tokens, (uint32_t)y->n_tokens);
		assert_string_equal(s->finish, sc_fork_finish_name(y->finish));
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
	const char *seen[CU_MAX_CHILDREN];
	int n = 0;

	for (size_t i = 0; i < a->n_samples; i++) {
		const char *w = a->samples[i]->worker;
		int k;

		if (!w)
			continue;
		for (k = 0; k < n && strcmp(seen[k], w); k++)
			;
		if (k == n && n < CU_MAX_CHILDREN)
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

static void reference_of(model *mm, tok *tt, const char *q, uint64_t seed,
			 sc_result *out)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = {.sp = {0.9f, 0, 0.95f, 0.0f}, .seed = seed, .n = N_SAMPLES,
		       .max_new = MAX_NEW, .mode = SC_BATCHED};
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	ep.n_threads = 1;
	ep.kv_dtype = KV_F32; /* as the test config's kv.dtype */
	if (prompt_build(tt, NULL, q, &ids, &n) ||
	    sc_engine_new(mm, tt, &ep, &e) || sc_run(e, ids, n, &p, out))
		fail_msg("reference: %s", qerr_detail());
	sc_engine_free(&e);
	free(ids);
}

static void reference(const char *q, uint64_t seed, sc_result *out)
{
	reference_of(m, t, q, seed, out);
}

static int group_setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	if (cu_setup_paths("cluster") || cu_model(model_path, 11) ||
	    cu_model(other_model, 12))
		return -1;
	if (model_load(model_path, &m) || tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	for (int i = 0; i < N_QUESTIONS; i++)
		reference(questions[i], SEED, &ref[i]);
	reference(questions[0], SEED + 1, &ref_seed2);
	cu_zctx = zmq_ctx_new();
	return cu_zctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_QUESTIONS; i++)
		sc_run_result_fini(&ref[i]);
	sc_run_result_fini(&ref_seed2);
	/* not zmq_ctx_term: a failed case longjmps past its zmq_close, and
	 * term would wait for that socket forever (the run hung under ASan);
	 * shutdown returns at once and the process exits anyway */
	if (cu_zctx)
		zmq_ctx_shutdown(cu_zctx);
	tok_free(&t);
	model_free(&m);
	unlink(model_path);
	unlink(other_model);
	rmdir(cu_tmpdir);
	return 0;
}

static cu_cluster cl; /* the running test's, stopped in teardown */

static int test_teardown(void **state)
{
	(void)state;
	cu_stop(&cl); /* also unlinks the pools of SIGKILLed workers */
	return 0;
}

/* ---- tests ----------------------------------------------------------- */

static void one_worker(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	cu_ask o = ask_defaults(questions[0]);
	const Quorum__PrefixStats *px;

	(void)state;
	cluster_start(&cl, model_path, 1);
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
	assert_int_equal(px->prompt_tokens_reused, 0);
	assert_int_equal(px->prompt_tokens_prefilled, px->prompt_tokens);
	quorum__client_reply__free_unpacked(r, NULL);
	/* another question: its system prompt's blocks come from the
	 * cached root, only the rest is prefilled — the same bytes */
	o = ask_defaults(questions[1]);
	r = ask(&cl, s, 2, &o);
	check_answer(r, &ref[1], "1 worker, shared prefix");
	px = r->answer->prefix;
	assert_true(px->prompt_tokens_reused >= 16);
	assert_int_equal(px->prompt_tokens_reused % 16, 0);
	assert_int_equal(px->prompt_tokens_reused + px->prompt_tokens_prefilled,
			 px->prompt_tokens);
	assert_false(px->cache_hit);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

static void three_workers_and_cache(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	cu_ask o = ask_defaults(questions[0]);
	const Quorum__PrefixStats *px;

	(void)state;
	cluster_start(&cl, model_path, 3);
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
	assert_int_equal(r->cluster->prefix_partial_hits, 0);
	quorum__client_reply__free_unpacked(r, NULL);

	/* a question sharing the system prompt: forked on the holder,
	 * decoded on three workers mapping it, the same bytes */
	o = ask_defaults(questions[1]);
	r = ask(&cl, s, 12, &o);
	check_answer(r, &ref[1], "3 workers, shared prefix");
	assert_true(r->answer->prefix->prompt_tokens_reused >= 16);
	quorum__client_reply__free_unpacked(r, NULL);
	r = status(&cl, s);
	assert_non_null(r);
	assert_int_equal(r->cluster->prefix_partial_hits, 1);
	assert_true(r->cluster->prompt_tokens_reused >= 16);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

static void two_hosts(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	cu_ask o = ask_defaults(questions[0]);
	const Quorum__PrefixStats *px;

	(void)state;
	cluster_start(&cl, model_path, 0);
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

	/* another question sharing the system prompt: forked on host a,
	 * copied to host b, the same bytes on both */
	o = ask_defaults(questions[1]);
	r = ask(&cl, s, 22, &o);
	check_answer(r, &ref[1], "2 hosts, shared prefix");
	px = r->answer->prefix;
	assert_true(px->prompt_tokens_reused >= 16);
	assert_int_equal(distinct_workers(r->answer), 4);
	/* host b holds question 0's copy: only the blocks after the shared
	 * ones travel */
	assert_true(px->blocks_transferred > 0);
	assert_int_equal(px->blocks_transferred,
			 px->prefix_blocks - px->prompt_tokens_reused / 16);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

/* A root whose every chunk is too large for one message cannot go to
 * host b: the samples are decoded on host a alone, same bytes. (Messages
 * here fit a DecodeJob's logits, 809 x 4 bytes, but not one KV block of
 * 16 KiB beside them.) */
static void two_hosts_root_too_large(void **state)
{
	Quorum__ClientReply *r;
	void *s;
	cu_ask o = ask_defaults(questions[0]);
	cu_cfg k = cu_cfg_defaults(model_path);

	(void)state;
	k.max_message_bytes = 16384; /* above any other message, below the root */
	cluster_start_cfg(&cl, &k);
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

/* A question of about 1,000 tokens (k selects it): the two share their
 * first half. */
static const char *long_question(int k)
{
	static char q[2][8192];
	static const char *const w[] = {"apple", "river", "stone", "cloud",
					"table", "green", "quiet", "north",
					"seven", "bread"};
	size_t n = 0;

	n += (size_t)snprintf(q[k] + n, sizeof(q[k]) - n, "Read the list:");
	for (int i = 0; i < 640; i++)
		n += (size_t)snprintf(q[k] + n, sizeof(q[k]) - n, " %s",
				      w[(i * 7 + i / 10 + (k && i >= 320)) % 10]);
	snprintf(q[k] + n, sizeof(q[k]) - n, k ? " Which word comes last?"
						: " Which word comes first?");
	return q[k];
}

/* A host's pool as its last heartbeat told: roots held, blocks used. */
static int pool_is(void *s, const char *id, uint32_t roots, uint32_t used)
{
	Quorum__ClientReply *r = cu_status(s);
	int ok = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->cluster->n_workers; i++)
		if (!strcmp(r->cluster->workers[i]->id, id))
			ok = r->cluster->workers[i]->roots == roots &&
			     r->cluster->workers[i]->blocks_used == used &&
			     r->cluster->workers[i]->busy == 0;
	quorum__client_reply__free_unpacked(r, NULL);
	return ok;
}

/* A root many times larger than one message (limits.max_message_bytes
 * fits 4 blocks of the tiny model's K/V beside the logits) goes to host
 * b in chunks, and so does the rest of a second prompt sharing most of
 * it (a delta from the copy b holds): every sample byte-identical to the
 * in-process run, every block sent once, and afterwards each pool holds
 * exactly the two cached roots — no partial root of the chunks is left
 * behind. */
static void two_hosts_chunked(void **state)
{
	Quorum__ClientReply *r;
	void *s, *st;
	cu_ask o;
	cu_cfg k = cu_cfg_defaults(model_path);
	sc_result want[2];
	uint32_t blocks[2], reused = 0, moved = 0;
	int64_t end;

	(void)state;
	k.max_message_bytes = 809 * 4 + WIRE_ROOT_HEADROOM + 4 * 16 * 1024;
	k.max_prompt_tokens = 2048;
	cluster_start_cfg(&cl, &k);
	worker_start(&cl, cl.config, "a1", "a");
	worker_start(&cl, cl.config, "b1", "b");
	assert_int_equal(wait_workers(&cl, 2), 0);
	s = client_new(&cl);
	for (int q = 0; q < 2; q++) {
		const Quorum__PrefixStats *px;

		reference(long_question(q), SEED, &want[q]);
		o = ask_defaults(long_question(q));
		r = ask(&cl, s, 60 + (uint64_t)q, &o);
		check_answer(r, &want[q], q ? "delta in chunks to host b"
					    : "root in chunks to host b");
		sc_run_result_fini(&want[q]);
		assert_int_equal(distinct_workers(r->answer), 2);
		px = r->answer->prefix;
		assert_true(px->prompt_tokens >= 800);
		blocks[q] = px->prefix_blocks;
		if (q) { /* only the blocks after the shared ones */
			reused = px->prompt_tokens_reused;
			assert_true(reused >= 320);
			moved = px->prefix_blocks - reused / 16;
			assert_int_equal(px->blocks_transferred, moved);
			assert_true(moved >= 16); /* several chunks too */
		} else {
			assert_int_equal(px->blocks_transferred, blocks[0]);
		}
		/* many messages' worth, f32 rows of 2 layers x 64 */
		assert_int_equal(px->bytes_transferred,
				 (uint64_t)(px->prompt_tokens -
					    (q ? reused : 0)) * 1024);
		assert_true(px->bytes_transferred >
			    3 * (uint64_t)k.max_message_bytes);
		quorum__client_reply__free_unpacked(r, NULL);
	}
	/* the pools settle (as heartbeats report them) on the cached roots:
	 * a1 the prefix of both once, b1 its copy and the delta's blocks */
	st = client_new(&cl);
	end = wire_now_ms() + CU_WAIT_MS; /* hang guard only */
	while (!(pool_is(st, "a1", 2, blocks[0] + blocks[1] - reused / 16) &&
		 pool_is(st, "b1", 2, blocks[0] + moved)) &&
	       wire_now_ms() < end)
		usleep(50000);
	assert_true(pool_is(st, "a1", 2, blocks[0] + blocks[1] - reused / 16));
	assert_true(pool_is(st, "b1", 2, blocks[0] + moved));
	zmq_close(st);
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
		cu_ask o = ask_defaults(questions[qi]);
		Quorum__ClientReply *r = ask(&cl, s, 100u * j->id + q, &o);
		const sc_result *x = &ref[qi];
		int ok = r && r->status == QUORUM__STATUS__STATUS_OK &&
			 r->request_id == 100u * j->id + q &&
			 r->answer->n_samples == (size_t)x->n;

		for (int i = 0; ok && i < x->n; i++)
			ok = r->answer->samples[i]->text.len == x->samples[i].len &&
			     (!x->samples[i].len ||
			      !memcmp(r->answer->samples[i]->text.data,
				      x->samples[i].text, x->samples[i].len));
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
	cluster_start(&cl, model_path, 3);
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
	cu_ask o;
	char long_q[4000];
	zmq_msg_t part;

	(void)state;
	cluster_start(&cl, model_path, 1);
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
	o.top_p = -0.5f;
	expect_status(ask(&cl, s, 5, &o), 5, QUORUM__STATUS__STATUS_BAD_REQUEST,
		      "top_p -0.5");
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
	expect_status(ask_version(&cl, s, 9, &o, 2), 9,
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
	cu_ask o = ask_defaults(questions[0]);

	(void)state;
	cluster_start(&cl, model_path, 0);
	assert_int_equal(wait_workers(&cl, 0), 0);
	s = client_new(&cl);
	expect_status(ask(&cl, s, 5, &o), 5, QUORUM__STATUS__STATUS_NO_CAPACITY,
		      "no workers");
	zmq_close(s);
}

static void fingerprint_reject(void **state)
{
	cu_cluster other;
	cu_cfg k = cu_cfg_defaults(other_model);
	pid_t w;
	int st = 0;
	int64_t end;

	(void)state;
	cluster_start(&cl, model_path, 0);
	worker_start(&cl, cl.config, "good", "a");
	assert_int_equal(wait_workers(&cl, 1), 0);
	/* same endpoints, another model */
	other = cl;
	cu_write_config(&other, &k);
	assert_int_equal(access(other.config, R_OK), 0);
	w = worker_start(&cl, other.config, "bad", "a");
	end = wire_now_ms() + CU_WAIT_MS;
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
	cu_ask o = ask_defaults(questions[0]);
	pid_t victim;

	(void)state;
	cluster_start(&cl, model_path, 0);
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
	cu_worker_kill9(&cl, victim);
	o.seed = SEED;
	r = ask(&cl, s, 32, &o);
	check_answer(r, &ref[0], "after a worker was killed");
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
}

/* SIGTERM with requests in flight: each client gets CANCELLED before
 * the coordinator's sockets close (issue 13). The requests are long
 * (ignore_eos) and known to be under way (the status shows a busy
 * worker) before the signal. */
static void sigterm_cancels(void **state)
{
	void *s[2], *st;
	cu_ask o = ask_defaults(questions[0]);
	int64_t end;
	int busy = 0;

	(void)state;
	o.max_new = 2000;
	o.ignore_eos = 1;
	cluster_start(&cl, model_path, 0);
	worker_start(&cl, cl.config, "w1", "a");
	assert_int_equal(wait_workers(&cl, 1), 0);
	for (int i = 0; i < 2; i++) {
		s[i] = client_new(&cl);
		assert_int_equal(cu_ask_send(s[i], 40 + (uint64_t)i, &o), 0);
	}
	st = client_new(&cl);
	end = wire_now_ms() + CU_WAIT_MS;
	while (!busy && wire_now_ms() < end) {
		Quorum__ClientReply *r = cu_status(st);

		for (size_t i = 0; r && i < r->cluster->n_workers; i++)
			busy |= r->cluster->workers[i]->busy > 0;
		if (r)
			quorum__client_reply__free_unpacked(r, NULL);
	}
	assert_true(busy);
	kill(cl.coord, SIGTERM);
	for (int i = 0; i < 2; i++) {
		Quorum__ClientReply *r = cu_recv(s[i], CU_WAIT_MS);

		assert_non_null(r);
		assert_int_equal(r->request_id, 40 + (uint64_t)i);
		assert_int_equal(r->status, QUORUM__STATUS__STATUS_CANCELLED);
		quorum__client_reply__free_unpacked(r, NULL);
		zmq_close(s[i]);
	}
	zmq_close(st);
}


/* A Q4_K_M file made by our quantizer with llama.cpp's per-tensor recipe
 * (for 4 layers: Q4_K, Q6_K attn_v on layers 2-3, ffn_down Q5_0 / Q8_0
 * where its 640-wide rows are not whole 256-blocks, Q6_K output) runs on
 * the integer-activation kernels: the cluster's samples equal the
 * in-process engine's, byte for byte, split over two workers. */
static void quantized_q4_k_m(void **state)
{
	char path[PATH_MAX];
	mkmodel_opts o = {0};
	mkmodel_info info;
	model *qm = NULL;
	tok *qt = NULL;
	sc_result x;
	Quorum__ClientReply *r;
	void *s;
	cu_ask a = ask_defaults(questions[1]);

	(void)state;
	snprintf(path, sizeof(path), "%s/q4km.gguf", cu_tmpdir);
	o.arch = "qwen2";
	o.shape = "small";
	o.ftype = quant_ftype_find("Q4_K_M");
	o.tokenizer = tu_chat_tokenizer();
	o.seed = 21;
	o.out = path;
	assert_non_null(o.ftype);
	if (mkmodel_write(&o, &info) || model_load(path, &qm) ||
	    tok_load(qm->gguf, &qt))
		fail_msg("q4_k_m model: %s", qerr_detail());
	assert_int_equal(qm->layers[0].wq.type, GGML_TYPE_Q4_K);
	assert_int_equal(qm->layers[0].wv.type, GGML_TYPE_Q4_K);
	assert_int_equal(qm->layers[3].wv.type, GGML_TYPE_Q6_K);
	assert_int_equal(qm->layers[1].w_down.type, GGML_TYPE_Q5_0);
	assert_int_equal(qm->layers[3].w_down.type, GGML_TYPE_Q8_0);
	reference_of(qm, qt, questions[1], SEED, &x);
	tok_free(&qt);
	model_free(&qm);

	cluster_start(&cl, path, 2);
	assert_int_equal(wait_workers(&cl, 2), 0);
	s = client_new(&cl);
	r = ask(&cl, s, 60, &a);
	check_answer(r, &x, "Q4_K_M, 2 workers");
	assert_int_equal(distinct_workers(r->answer), 2);
	quorum__client_reply__free_unpacked(r, NULL);
	zmq_close(s);
	sc_run_result_fini(&x);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(one_worker, test_teardown),
		cmocka_unit_test_teardown(three_workers_and_cache, test_teardown),
		cmocka_unit_test_teardown(two_hosts, test_teardown),
		cmocka_unit_test_teardown(two_hosts_chunked, test_teardown),
		cmocka_unit_test_teardown(two_hosts_root_too_large,
					  test_teardown),
		cmocka_unit_test_teardown(concurrent_clients, test_teardown),
		cmocka_unit_test_teardown(bad_input, test_teardown),
		cmocka_unit_test_teardown(no_capacity, test_teardown),
		cmocka_unit_test_teardown(fingerprint_reject, test_teardown),
		cmocka_unit_test_teardown(worker_lost, test_teardown),
		cmocka_unit_test_teardown(sigterm_cancels, test_teardown),
		cmocka_unit_test_teardown(quantized_q4_k_m, test_teardown),
	};

	/* QUORUM_TEST_FILTER=name runs one case (while iterating) */
	if (getenv("QUORUM_TEST_FILTER"))
		cmocka_set_test_filter(getenv("QUORUM_TEST_FILTER"));
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
