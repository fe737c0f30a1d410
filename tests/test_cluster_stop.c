/*
 * Early stopping in the cluster, on the shipped arithmetic model: under
 * every rule the reply — which samples, their bytes, the answer, the vote
 * and where the rule fired — is the in-process sc_run's with the same
 * rule, with 1 worker and with 3; exact gives the answer of none; the
 * coordinator cancels what it no longer needs (started < N or cancelled
 * work reported) and `status` counts the tokens saved; in waves
 * (sampling.stop_waves) the replies are the same, and with waves of the
 * fewest nothing is cancelled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include "clusterutil.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/fork.h"
#include "text/tok.h"

#define N_Q 4
#define N_BUDGET 16
#define MAX_NEW 256
#define SEED 5

/* The questions the cases take (QUORUM_TEST_QUICK: 2, and each cluster
 * asks half of the (rule, question) pairs, 1 worker the other half from 3
 * workers: every pair and every rule still meets a cluster, every rule
 * both worker counts). */
static int n_q(void)
{
	return tu_quick() ? 2 : N_Q;
}

static char model_path[PATH_MAX];
static model *m;
static tok *t;
static char *questions[N_Q];
/* rule, vote: the last one a confidence vote */
static const char *const rules[] = {"none", "exact", "beta", "window:2",
				    "exact"};
#define N_RULES 5
#define CONF_RULE 4
static sc_result ref[N_RULES][N_Q];
static cu_cluster cl;

static void reference(const char *q, const char *rule, int vote,
		      sc_result *out)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = {.sp = {1.0f, 0, 0.95f, 0.0f}, .seed = SEED, .n = N_BUDGET,
		       .max_new = MAX_NEW, .mode = SC_BATCHED};
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	ep.kv_dtype = KV_F32; /* as the test config's kv.dtype */
	p.vote = vote;
	if (stop_parse(rule, &p.stop) || prompt_build(t, NULL, q, &ids, &n) ||
	    sc_engine_new(m, t, &ep, &e) || sc_run(e, ids, n, &p, out))
		fail_msg("reference: %s", qerr_detail());
	sc_engine_free(&e);
	free(ids);
}

static int group_setup(void **state)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	int i = 0;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	if (cu_setup_paths("clstop") ||
	    !realpath(tu_data("models/arith.gguf"), model_path))
		return -1;
	if (model_load(model_path, &m) || tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	if (!(f = fopen(tu_data("train/data/test.jsonl"), "r")))
		return -1;
	while (i < N_Q && getline(&line, &cap, f) > 0) {
		json_t *o = json_loads(line, 0, NULL);
		const char *q = o ? json_string_value(json_object_get(
					    o, "question")) : NULL;

		if (!q || !(questions[i] = strdup(q)))
			return -1;
		json_decref(o);
		i++;
	}
	free(line);
	fclose(f);
	for (int r = 0; r < N_RULES; r++)
		for (int q = 0; q < n_q(); q++)
			reference(questions[q], rules[r],
				  r == CONF_RULE ? SC_VOTE_CONFIDENCE
						 : SC_VOTE_MAJORITY,
				  &ref[r][q]);
	cu_zctx = zmq_ctx_new();
	return cu_zctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int r = 0; r < N_RULES; r++)
		for (int q = 0; q < N_Q; q++)
			sc_run_result_fini(&ref[r][q]);
	for (int q = 0; q < N_Q; q++)
		free(questions[q]);
	if (cu_zctx)
		zmq_ctx_shutdown(cu_zctx);
	tok_free(&t);
	model_free(&m);
	rmdir(cu_tmpdir);
	return 0;
}

static int test_teardown(void **state)
{
	(void)state;
	cu_stop(&cl);
	return 0;
}

/* The reply is the in-process result x, byte for byte. */
static void check_reply(const Quorum__ClientReply *r, const sc_result *x,
			const char *what)
{
	const Quorum__Answer *a;
	const Quorum__StopReport *st;

	if (!r)
		fail_msg("%s: no reply", what);
	if (r->status != QUORUM__STATUS__STATUS_OK)
		fail_msg("%s: status %s: %s", what,
			 wire_status_name(r->status), r->error ? r->error : "");
	a = r->answer;
	assert_int_equal(a->n, N_BUDGET);
	if (a->n_samples != (size_t)x->n)
		fail_msg("%s: %zu samples, in-process %d", what, a->n_samples,
			 x->n);
	for (int i = 0; i < x->n; i++) {
		const Quorum__Sample *s = a->samples[i];
		const sc_sample *y = &x->samples[i];

		assert_int_equal(s->index, (uint32_t)i);
		if (s->text.len != y->len ||
		    (y->len && memcmp(s->text.data, y->text, y->len)))
			fail_msg("%s: sample %d text differs", what, i);
		assert_int_equal(s->tokens, (uint32_t)y->n_tokens);
		assert_int_equal(s->has_answer, y->has_answer);
		assert_true(s->has_mean_logprob && s->has_group_confidence);
		assert_memory_equal(&s->mean_logprob, &y->mean_logprob,
				    sizeof(double));
		assert_memory_equal(&s->group_confidence, &y->group_conf,
				    sizeof(double));
	}
	assert_int_equal(a->has_answer, x->vote.winner != VOTE_NONE);
	if (a->has_answer) {
		const char *w = x->vote.entries[0].answer;

		assert_int_equal(a->answer.len, strlen(w));
		assert_memory_equal(a->answer.data, w, a->answer.len);
		assert_int_equal(a->n_votes, x->vote.n_entries);
		for (size_t i = 0; i < a->n_votes; i++) {
			assert_int_equal(a->votes[i]->count,
					 x->vote.entries[i].count);
			if (a->votes[i]->has_weight)
				assert_true(a->votes[i]->weight ==
					    (double)x->vote.entries[i].weight /
						    0x1p32);
		}
	}
	st = a->stop;
	assert_non_null(st);
	assert_int_equal(st->reported, (uint32_t)x->n);
	assert_int_equal(st->stopped_early, x->stop.fired);
	assert_int_equal(st->leader_count, x->stop.leader);
	assert_int_equal(st->second_count, x->stop.second);
	assert_int_equal(st->tokens_reported, x->stop.tokens_reported);
	if (st->has_posterior)
		assert_memory_equal(&st->posterior, &x->stop.posterior,
				    sizeof(double));
	assert_true(st->started <= N_BUDGET);
	assert_int_equal(st->started, st->finished + st->cancelled);
	assert_true(st->finished >= st->reported);
	assert_true(st->tokens_generated >= st->tokens_reported);
}

/* waves: sampling.stop_waves (the replies stay the in-process ones of no
 * waves; with waves of the fewest nothing is cancelled) */
static void run_rules(int workers, int waves)
{
	void *s;
	int fired = 0;
	uint64_t rid = 1;

	{
		cu_cfg k = cu_cfg_defaults(model_path);

		k.local = workers;
		k.threads = 1;
		k.stop = NULL; /* sampling.stop left to its default */
		k.stop_waves = waves;
		if (cu_start(&cl, &k))
			fail_msg("coordinator does not start");
	}
	if (cu_wait_workers(&cl, workers, CU_WAIT_MS) < 0)
		fail_msg("%d workers did not register", workers);
	s = cu_client(&cl);
	assert_non_null(s);
	for (int r = 0; r < N_RULES; r++)
		for (int q = 0; q < n_q(); q++) {
			cu_ask o = {questions[q], N_BUDGET, SEED, 1.0f, 0.95f, 0,
				    MAX_NEW, 0, 0, rules[r], NULL};
			Quorum__ClientReply *rep;
			char what[96];

			if (tu_quick() && (r + q + (workers > 1)) % 2)
				continue; /* the other worker count's half */
			o.vote = r == CONF_RULE ? "confidence" : NULL;
			assert_int_equal(cu_ask_send(s, rid, &o), 0);
			rep = cu_recv_live(&cl, s, CU_WAIT_MS);
			snprintf(what, sizeof(what), "%d workers, %s, q %d",
				 workers, rules[r], q);
			check_reply(rep, &ref[r][q], what);
			if (waves == 1 &&
			    (rep->answer->stop->cancelled ||
			     rep->answer->stop->started !=
				     rep->answer->stop->reported))
				fail_msg("%s, waves 1: %u started, %u cancelled, "
					 "%u reported", what,
					 rep->answer->stop->started,
					 rep->answer->stop->cancelled,
					 rep->answer->stop->reported);
			fired += rep->answer->stop->stopped_early;
			quorum__client_reply__free_unpacked(rep, NULL);
			rid++;
		}
	/* a request naming no rule gets the config's default: exact */
	for (int q = 0; q < n_q(); q++) {
		cu_ask o = {questions[q], N_BUDGET, SEED, 1.0f, 0.95f, 0,
			    MAX_NEW, 0, 0, NULL, NULL};
		Quorum__ClientReply *rep;
		char what[96];

		if (tu_quick() && q != (workers > 1))
			continue;
		assert_int_equal(cu_ask_send(s, rid++, &o), 0);
		rep = cu_recv_live(&cl, s, CU_WAIT_MS);
		snprintf(what, sizeof(what), "%d workers, default rule, q %d",
			 workers, q);
		assert_string_equal(rules[1], "exact");
		check_reply(rep, &ref[1][q], what);
		assert_string_equal(rep->answer->stop->rule, "exact");
		quorum__client_reply__free_unpacked(rep, NULL);
	}
	assert_true(fired > 0);
	{
		Quorum__ClientReply *st = cu_status(s);

		assert_non_null(st);
		assert_true(st->cluster->has_tokens_saved);
		assert_true(st->cluster->tokens_saved > 0);
		quorum__client_reply__free_unpacked(st, NULL);
	}
	zmq_close(s);
}

static void one_worker(void **state)
{
	(void)state;
	run_rules(1, 0);
}

static void one_worker_waves(void **state)
{
	(void)state;
	run_rules(1, 1);
}

static void three_workers_waves(void **state)
{
	(void)state;
	run_rules(3, 2);
}

static void three_workers(void **state)
{
	(void)state;
	run_rules(3, 0);
}

/* busy of worker id in a status reply (-1: not listed). */
static int busy_of(void *s, const char *id)
{
	Quorum__ClientReply *r = cu_status(s);
	int busy = -1;

	for (size_t i = 0; r && i < r->cluster->n_workers; i++)
		if (!strcmp(r->cluster->workers[i]->id, id))
			busy = (int)r->cluster->workers[i]->busy;
	if (r)
		quorum__client_reply__free_unpacked(r, NULL);
	return busy;
}

/* A worker SIGKILLed while it decodes samples of a request with a stop
 * rule: its samples are decoded again by the other, and the reply is
 * still the in-process one, byte for byte. */
static void worker_killed(void **state)
{
	cu_cfg k = cu_cfg_defaults(model_path);
	cu_ask o = {questions[1], N_BUDGET, SEED, 1.0f, 0.95f, 0, MAX_NEW, 1,
		    0, "exact", NULL};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = {.sp = {1.0f, 0, 0.95f, 0.0f}, .seed = SEED, .n = N_BUDGET,
		       .max_new = MAX_NEW, .mode = SC_BATCHED,
		       .ignore_eos = 1};
	Quorum__ClientReply *r = NULL;
	sc_result x;
	sc_engine *e = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	int64_t end;
	pid_t w2;
	void *s, *st;

	(void)state;
	ep.kv_dtype = KV_F32;
	assert_int_equal(stop_parse("exact", &p.stop), 0);
	if (prompt_build(t, NULL, questions[1], &ids, &n) ||
	    sc_engine_new(m, t, &ep, &e) || sc_run(e, ids, n, &p, &x))
		fail_msg("reference: %s", qerr_detail());
	sc_engine_free(&e);
	free(ids);
	k.hb_interval_ms = 100;
	k.liveness = 30;
	assert_int_equal(cu_start(&cl, &k), 0);
	cu_worker(&cl, "w1", "a");
	assert_true(cu_wait_workers(&cl, 1, CU_WAIT_MS) >= 0);
	w2 = cu_worker(&cl, "w2", "a");
	assert_true(cu_wait_workers(&cl, 2, CU_WAIT_MS) >= 0);
	s = cu_client(&cl);
	st = cu_client(&cl);
	assert_int_equal(cu_ask_send(s, 1, &o), 0);
	/* the event: both decode (if the request is done first, the kill
	 * tests nothing but the reply must still match) */
	end = wire_now_ms() + CU_WAIT_MS;
	while (wire_now_ms() < end && !(r = cu_recv(s, 10)) &&
	       !(busy_of(st, "w1") > 0 && busy_of(st, "w2") > 0))
		;
	fprintf(stderr, "# w2 SIGKILLed %s; exact stopped after %d of %d\n",
		r ? "after the reply (nothing to redo)" : "while both decoded",
		x.n, N_BUDGET);
	cu_worker_kill9(&cl, w2);
	if (!r)
		r = cu_recv_live(&cl, s, CU_WAIT_MS);
	check_reply(r, &x, "worker killed");
	quorum__client_reply__free_unpacked(r, NULL);
	sc_run_result_fini(&x);
	zmq_close(st);
	zmq_close(s);
}

/* The in-process references themselves: exact answers as none does. */
static void exact_is_none(void **state)
{
	(void)state;
	for (int q = 0; q < n_q(); q++) {
		const sc_result *a = &ref[0][q], *b = &ref[1][q];

		assert_int_equal(a->vote.winner == VOTE_NONE,
				 b->vote.winner == VOTE_NONE);
		if (a->vote.winner != VOTE_NONE)
			assert_string_equal(a->vote.entries[0].answer,
					    b->vote.entries[0].answer);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exact_is_none),
		cmocka_unit_test_teardown(one_worker, test_teardown),
		cmocka_unit_test_teardown(three_workers, test_teardown),
		cmocka_unit_test_teardown(one_worker_waves, test_teardown),
		cmocka_unit_test_teardown(three_workers_waves, test_teardown),
		cmocka_unit_test_teardown(worker_killed, test_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
