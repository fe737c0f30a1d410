/*
 * Continuous batching in the cluster: a stream of 20 mixed requests
 * (different prompts, N, max tokens, sampling params; one cancelled
 * mid-way) fired at once at a cluster of 1 and of 3 workers — whose
 * workers decode the forks of all the requests they hold in merged
 * rounds — gives every request exactly the bytes it gets alone in one
 * process (sc_run, as `quorum run`); so does the stream on 3 workers one
 * of which is killed mid-way. Afterwards every worker's KV pool is back
 * to fully free.
 *
 * Cheap on purpose: a tiny model with the shipped 809-token vocabulary,
 * short samples.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "clusterutil.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/fork.h"
#include "text/tok.h"

#define N_REQ 20
#define CANCEL_REQ 7
#define LONG_REQ 12 /* decodes long enough for the kill to land in it */

static char model_path[PATH_MAX];
static model *m;
static tok *t;

static const char *const questions[] = {
	"What is 17 * 23? Answer with a number.",
	"A farmer has 17 sheep and buys 23 more. How many sheep are there?",
	"2 + 2 = ?",
	"Name a prime number between 10 and 20.",
	"Ana has 7 stamps and gives 6 to her cousin. How many are left?",
};

static cu_ask req[N_REQ];
static sc_result ref[N_REQ];
static cu_cluster cl;

static cu_ask request(int i)
{
	static const float temps[] = {0.9f, 0.7f, 1.3f, 0.0f};
	static const float top_ps[] = {0.95f, 1.0f, 0.8f, 1.0f};
	static const int top_ks[] = {0, 20, 0, 5};
	cu_ask o = {questions[i % 5], 1 + (uint32_t)(i * 3) % 6,
		    100 + (uint64_t)i, temps[i % 4], top_ps[i % 4],
		    top_ks[i % 4], 4 + (uint32_t)(i * 5) % 13, i % 3 == 0, 0,
		    "none", NULL};

	if (i == CANCEL_REQ) {
		/* long enough to be running when its cancel arrives */
		o.n = 6;
		o.max_new = 200;
		o.ignore_eos = 1;
	}
	if (i == LONG_REQ) {
		/* keeps a worker busy while the other requests come and
		 * go: worker_lost polls until it sees one decoding */
		o.n = 4;
		o.max_new = 800;
		o.ignore_eos = 1;
	}
	return o;
}

static void reference(const cu_ask *o, sc_result *out)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = {.sp = {o->temperature, o->top_k, o->top_p, 0.0f},
		       .seed = o->seed, .n = (int)o->n,
		       .max_new = (int)o->max_new, .mode = SC_BATCHED,
		       .ignore_eos = o->ignore_eos};
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	ep.n_threads = 1;
	ep.kv_dtype = KV_F32; /* as the test config's kv.dtype */
	if (prompt_build(t, NULL, o->question, &ids, &n) ||
	    sc_engine_new(m, t, &ep, &e) || sc_run(e, ids, n, &p, out))
		fail_msg("reference: %s", qerr_detail());
	sc_engine_free(&e);
	free(ids);
}

static int group_setup(void **state)
{
	char real[PATH_MAX];

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	if (cu_setup_paths("clmerge") ||
	    tu_model(model_path, sizeof(model_path), "qwen2", "tiny",
		     GGML_TYPE_Q8_0, tu_data("models/arith.gguf"), 31) ||
	    !realpath(model_path, real))
		return -1;
	memcpy(model_path, real, strlen(real) + 1);
	if (model_load(model_path, &m) || tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	for (int i = 0; i < N_REQ; i++) {
		req[i] = request(i);
		reference(&req[i], &ref[i]);
	}
	cu_zctx = zmq_ctx_new();
	return cu_zctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_REQ; i++)
		sc_run_result_fini(&ref[i]);
	if (cu_zctx)
		zmq_ctx_shutdown(cu_zctx);
	tok_free(&t);
	model_free(&m);
	unlink(model_path);
	rmdir(cu_tmpdir);
	return 0;
}

static int test_teardown(void **state)
{
	(void)state;
	cu_stop(&cl);
	return 0;
}

static void check(const Quorum__ClientReply *r, int i)
{
	const sc_result *x = &ref[i];
	const Quorum__Answer *a;

	if (r->status != QUORUM__STATUS__STATUS_OK)
		fail_msg("request %d: %s: %s", i, wire_status_name(r->status),
			 r->error ? r->error : "");
	assert_int_equal(r->body_case, QUORUM__CLIENT_REPLY__BODY_ANSWER);
	a = r->answer;
	assert_int_equal(a->n_samples, (size_t)x->n);
	for (int k = 0; k < x->n; k++) {
		const Quorum__Sample *s = a->samples[k];

		assert_int_equal(s->index, (uint32_t)k);
		if (s->text.len != x->samples[k].len ||
		    (s->text.len && memcmp(s->text.data, x->samples[k].text,
					   s->text.len)))
			fail_msg("request %d sample %d differs from the "
				 "in-process run:\n[%.*s]\n[%s]", i, k,
				 (int)s->text.len, (const char *)s->text.data,
				 x->samples[k].text);
		assert_string_equal(s->finish,
				    sc_fork_finish_name(x->samples[k].finish));
	}
}

/* The worker decoding the most samples now (its pid), or 0. */
static pid_t busiest_worker(void *s)
{
	Quorum__ClientReply *r = cu_status(s);
	uint32_t most = 0;
	pid_t pid = 0;

	if (r && r->body_case == QUORUM__CLIENT_REPLY__BODY_CLUSTER)
		for (size_t w = 0; w < r->cluster->n_workers; w++)
			if (r->cluster->workers[w]->busy > most) {
				most = r->cluster->workers[w]->busy;
				pid = (pid_t)r->cluster->workers[w]->pid;
			}
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return pid;
}

/* Fires the 20 requests at once on one connection, cancels one, and
 * checks every reply; then waits for the pools to be free. With kill,
 * the busiest worker is SIGKILLed while the stream runs: the requests
 * whose forks shared its rounds are decoded again elsewhere, every byte
 * the same. */
static void stream(int workers, int kill_one)
{
	cu_cfg k = cu_cfg_defaults(model_path);
	int got[N_REQ] = {0}, n_got = 0, cancelled = 0, killed = 0;
	void *s;

	k.local = workers;
	if (kill_one) {
		/* a lost worker is noticed within a second (a worker
		 * wrongly taken for dead changes no byte either) */
		k.hb_interval_ms = 100;
		k.liveness = 10;
	}
	k.slots = 8;           /* fewer than the stream's samples: merged
				* rounds, and requests waiting for slots */
	k.cache_entries = 0;   /* nothing kept: the pools end free */
	if (cu_start(&cl, &k))
		fail_msg("coordinator does not start");
	assert_true(cu_wait_workers(&cl, workers, CU_WAIT_MS) >= 0);
	assert_non_null(s = cu_client(&cl));
	for (int i = 0; i < N_REQ; i++)
		assert_int_equal(cu_ask_send(s, 1000 + (uint64_t)i, &req[i]), 0);
	{
		Quorum__ClientRequest q = QUORUM__CLIENT_REQUEST__INIT;
		Quorum__CancelAsk c = QUORUM__CANCEL_ASK__INIT;

		q.version = WIRE_VERSION;
		q.request_id = 1000 + CANCEL_REQ;
		q.body_case = QUORUM__CLIENT_REQUEST__BODY_CANCEL;
		q.cancel = &c;
		assert_int_equal(cu_send(s, &q), 0);
	}
	if (kill_one) {
		/* status on a socket of its own (cu_status drops replies) */
		void *st = cu_client(&cl);

		assert_non_null(st);
		/* LONG_REQ holds a worker for hundreds of rounds; the time
		 * bound is a hang guard only */
		for (int64_t end = wire_now_ms() + CU_WAIT_MS;
		     !killed && wire_now_ms() < end;) {
			pid_t v = busiest_worker(st);

			if (v > 0) {
				/* the coordinator reaps it and starts
				 * a new one */
				kill(v, SIGKILL);
				killed = 1;
			}
		}
		zmq_close(st);
		assert_true(killed); /* some worker was decoding */
	}
	while (n_got < N_REQ) {
		Quorum__ClientReply *r = cu_recv_live(&cl, s, CU_WAIT_MS);
		int i;

		if (!r)
			fail_msg("%d of %d replies, then none", n_got, N_REQ);

		i = (int)(r->request_id - 1000);
		assert_true(i >= 0 && i < N_REQ);
		assert_false(got[i]); /* exactly one reply each */
		got[i] = 1;
		n_got++;
		if (i == CANCEL_REQ &&
		    r->status == QUORUM__STATUS__STATUS_CANCELLED)
			cancelled = 1;
		else
			check(r, i); /* the cancel came too late: all of it */
		quorum__client_reply__free_unpacked(r, NULL);
	}
	printf("  %d worker(s)%s: %d replies identical to the in-process runs;"
	       " request %d %s\n", workers,
	       killed ? ", one killed mid-stream" : "", N_REQ - cancelled,
	       CANCEL_REQ, cancelled ? "cancelled"
				     : "finished before its cancel");
	/* every worker's pool back to free (heartbeats report it) */
	for (int64_t end = wire_now_ms() + CU_WAIT_MS;;) {
		Quorum__ClientReply *r = cu_status(s);
		int busy = -1;

		char what[256] = "";

		if (r && r->body_case == QUORUM__CLIENT_REPLY__BODY_CLUSTER &&
		    r->cluster->n_workers == (size_t)workers) {
			busy = 0;
			for (size_t w = 0; w < r->cluster->n_workers; w++) {
				const Quorum__WorkerStatus *x =
					r->cluster->workers[w];

				busy += x->blocks_used + x->busy;
				snprintf(what + strlen(what),
					 sizeof(what) - strlen(what),
					 " %s: %u blocks, %u busy, %u roots;",
					 x->id, x->blocks_used, x->busy,
					 x->roots);
			}
		}
		if (r)
			quorum__client_reply__free_unpacked(r, NULL);
		if (busy == 0)
			break;
		if (wire_now_ms() > end)
			fail_msg("KV blocks still held after the stream:%s",
				 what);
		usleep(100000);
	}
	zmq_close(s);
}

static void one_worker(void **state)
{
	(void)state;
	stream(1, 0);
}

static void three_workers(void **state)
{
	(void)state;
	stream(3, 0);
}

static void worker_lost(void **state)
{
	(void)state;
	stream(3, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(one_worker, test_teardown),
		cmocka_unit_test_teardown(three_workers, test_teardown),
		cmocka_unit_test_teardown(worker_lost, test_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
