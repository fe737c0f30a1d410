/*
 * Early stopping in the engine (sc_run with a stop rule), on the shipped
 * arithmetic model so that answers really agree and disagree:
 * - exact gives the answer of running all N, over many problems, seeds and
 *   N, and reports samples byte-identical to the first k of that run;
 * - every rule stops where replaying its decision over the full run's
 *   answers (stop.h, in index order) says, with the same bytes in every
 *   mode, batch size and thread count;
 * - forks not needed are cancelled or never started, and the KV pool is
 *   fully free after every request (anonymous and fixed pools);
 * - in waves (stop_waves) the reply is the same bytes, with no sample
 *   cancelled under waves of the fewest.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "infer/model.h"
#include "text/prompt.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/fork.h"
#include "sc/stop.h"
#include "testutil.h"
#include "text/tok.h"

#define N_PROBLEMS 10
#define N_REF 16

/* The problems the exhaustive loops take (QUORUM_TEST_QUICK: 3). */
static int n_problems(void)
{
	return tu_quick() ? 3 : N_PROBLEMS;
}

static model *m;
static tok *t;
static int32_t *prompts[N_PROBLEMS];
static size_t n_prompts[N_PROBLEMS];

static int setup(void **state)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	int i = 0;

	(void)state;
	if (model_load(tu_data("models/arith.gguf"), &m) ||
	    tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	if (!(f = fopen(tu_data("train/data/test.jsonl"), "r")))
		return -1;
	while (i < N_PROBLEMS && getline(&line, &cap, f) > 0) {
		json_t *o = json_loads(line, 0, NULL);
		const char *q = o ? json_string_value(json_object_get(
					    o, "question")) : NULL;

		if (!q || prompt_build(t, NULL, q, &prompts[i], &n_prompts[i]))
			return -1;
		json_decref(o);
		i++;
	}
	free(line);
	fclose(f);
	return i == N_PROBLEMS ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_PROBLEMS; i++)
		free(prompts[i]);
	tok_free(&t);
	model_free(&m);
	return 0;
}

static sc_params params(int n, uint64_t seed, float temp, const char *rule)
{
	sc_params p = {.sp = {temp, 40, 0.95f, 0.0f}, .seed = seed, .n = n,
		       .max_new = 256, .mode = SC_BATCHED};

	assert_int_equal(stop_parse(rule, &p.stop), 0);
	return p;
}

static void run(sc_engine *e, int q, const sc_params *p, sc_result *r)
{
	if (sc_run(e, prompts[q], n_prompts[q], p, r))
		fail_msg("sc_run: %s", qerr_detail());
	if (sc_engine_kv_in_use(e) != 0)
		fail_msg("%u KV blocks held after the request",
			 sc_engine_kv_in_use(e));
}

static const char *winner(const sc_result *r)
{
	return r->vote.winner == VOTE_NONE ? "(none)"
					   : r->vote.entries[0].answer;
}

/* r's samples are the first r->n of ref's, byte for byte. */
static void assert_prefix_of(const sc_result *r, const sc_result *ref,
			     const char *what)
{
	assert_true(r->n <= ref->n);
	for (int i = 0; i < r->n; i++) {
		const sc_sample *x = &r->samples[i], *y = &ref->samples[i];

		if (x->index != i || x->len != y->len ||
		    memcmp(x->text, y->text, x->len) ||
		    x->n_tokens != y->n_tokens || x->finish != y->finish ||
		    x->has_answer != y->has_answer ||
		    strcmp(x->answer, y->answer) ||
		    memcmp(&x->mean_logprob, &y->mean_logprob,
			   sizeof(double)) ||
		    memcmp(&x->group_conf, &y->group_conf, sizeof(double)) ||
		    x->weight != y->weight)
			fail_msg("%s: sample %d differs", what, i);
	}
}

/* The prefix the rule stops at over ref's answers, replayed in order. */
static int replay(const char *rule, const sc_result *ref, int n)
{
	stop_rule r;
	stop_state s;
	int k;

	assert_int_equal(stop_parse(rule, &r), 0);
	assert_int_equal(stop_init(&s, &r, n), 0);
	for (int i = 0; i < n; i++) {
		const sc_sample *x = &ref->samples[i];

		if (stop_push(&s, x->has_answer ? x->answer : NULL))
			break;
	}
	k = s.k;
	stop_fini(&s);
	return k;
}

static void test_exact_equals_none(void **state)
{
	static const int ns[] = {1, 2, 3, 4, 5, 7, 8, 11, 16};
	static const struct { uint64_t seed; float temp; } sd[] = {
		{0, 0.7f}, {1, 0.7f}, {7, 1.0f}, {99, 1.5f},
	};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *e;
	int runs = 0, stopped = 0, split = 0;
	uint64_t tok_none = 0, tok_exact = 0;

	(void)state;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	for (int q = 0; q < n_problems(); q++)
		for (size_t si = 0; si < sizeof(sd) / sizeof(sd[0]); si++) {
			sc_params pr = params(N_REF, sd[si].seed, sd[si].temp,
					      "none");
			sc_result ref;

			run(e, q, &pr, &ref);
			assert_int_equal(ref.n, N_REF);
			assert_int_equal(ref.stop.reported, N_REF);
			assert_int_equal(ref.stop.cancelled, 0);
			for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]);
			     ni++) {
				int n = ns[ni];

				/* quick: each seed takes every 4th N */
				if (tu_quick() && (ni + q) % 4 != si)
					continue;
				sc_params pn = params(n, sd[si].seed,
						      sd[si].temp, "none");
				sc_params px = params(n, sd[si].seed,
						      sd[si].temp, "exact");
				sc_result rn, rx;
				char what[96];

				run(e, q, &pn, &rn);
				run(e, q, &px, &rx);
				snprintf(what, sizeof(what), "q %d seed %llu "
					 "N %d", q,
					 (unsigned long long)sd[si].seed, n);
				assert_prefix_of(&rn, &ref, what);
				assert_prefix_of(&rx, &ref, what);
				if (strcmp(winner(&rn), winner(&rx)))
					fail_msg("%s: exact says %s, all N say "
						 "%s", what, winner(&rx),
						 winner(&rn));
				assert_int_equal(rx.n, replay("exact", &ref, n));
				assert_int_equal(rx.stop.reported, rx.n);
				assert_int_equal(rx.stop.started,
						 rx.stop.finished +
							 rx.stop.cancelled);
				assert_true(rx.stop.started <= n);
				assert_int_equal(rx.stop.fired, rx.n < n);
				runs++;
				stopped += rx.n < n;
				split += rn.vote.n_entries > 1;
				tok_none += rn.stats.gen_tokens;
				tok_exact += rx.stats.gen_tokens;
				sc_run_result_fini(&rn);
				sc_run_result_fini(&rx);
			}
			sc_run_result_fini(&ref);
		}
	printf("  %d requests: exact stopped %d early; %d votes were split; "
	       "tokens %llu (exact) vs %llu (none)\n", runs, stopped, split,
	       (unsigned long long)tok_exact, (unsigned long long)tok_none);
	/* the cases are not trivial: both stopping and split votes occur */
	assert_true(stopped > runs / 4);
	assert_true(split > runs / 10);
	assert_true(tok_exact < tok_none);
	sc_engine_free(&e);
}

/* Every rule, every mode, batch and thread count: the same reply bytes,
 * stopped where the replay says; the pool free after each (fixed pool). */
static void test_rules_deterministic(void **state)
{
	static const char *rules[] = {"none", "exact", "beta", "beta:0.8",
				      "window", "window:2"};
	static const struct { int mode, max_batch, threads; } cf[] = {
		{SC_BATCHED, 64, 2}, {SC_BATCHED, 3, 1}, {SC_PAGED, 64, 2},
		{SC_RESET, 64, 1},
	};
	int fired = 0, cancelled = 0;

	/* temperature 1.5: issue 34's model writes most problems' chains
	 * in one length at 1.0, so every fork ended in the round the rule
	 * fired in and none was cancelled in flight */
	(void)state;
	for (int q = 0; q < (tu_quick() ? 2 : 4); q++) {
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params pr = params(N_REF, 5, 1.5f, "none");
		sc_result ref;
		sc_engine *e;

		assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
		run(e, q, &pr, &ref);
		sc_engine_free(&e);
		for (size_t ri = 0; ri < sizeof(rules) / sizeof(rules[0]); ri++)
			for (size_t ci = 0; ci < sizeof(cf) / sizeof(cf[0]);
			     ci++) {
				sc_params p = params(N_REF, 5, 1.5f, rules[ri]);
				sc_result r;
				char what[96];

				/* quick: the first configuration (where
				 * forks are cancelled in flight) and one
				 * other, a different one each problem */
				if (tu_quick() && ci &&
				    ci != (ri + (size_t)q) % 4)
					continue;

				ep = SC_ENGINE_DEFAULTS;
				ep.max_batch = cf[ci].max_batch;
				ep.n_threads = cf[ci].threads;
				ep.pool_blocks = ci == 1 ? 512 : 0;
				p.mode = cf[ci].mode;
				assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
				run(e, q, &p, &r);
				snprintf(what, sizeof(what), "q %d %s %s batch "
					 "%d", q, rules[ri],
					 sc_params_mode_name(p.mode), ep.max_batch);
				assert_prefix_of(&r, &ref, what);
				if (r.n != replay(rules[ri], &ref, N_REF))
					fail_msg("%s: stopped at %d, replay %d",
						 what, r.n,
						 replay(rules[ri], &ref, N_REF));
				if (p.mode != SC_BATCHED) /* one at a time */
					assert_int_equal(r.stop.cancelled, 0);
				fired += r.stop.fired;
				cancelled += r.stop.cancelled;
				if (ep.pool_blocks) /* every block back */
					assert_int_equal(sc_engine_kv_free(e),
							 ep.pool_blocks);
				sc_run_result_fini(&r);
				sc_engine_free(&e);
			}
		sc_run_result_fini(&ref);
	}
	printf("  rules fired %d times; %d forks cancelled in flight\n", fired,
	       cancelled);
	assert_true(fired > 0);
	assert_true(cancelled > 0);
}

/* Confidence voting: exact (over weights) gives the weighted answer of
 * all N; the weights are positive and at most 1; a weight-free vote of
 * the same samples is the majority one. */
static void test_confidence_vote(void **state)
{
	static const int ns[] = {3, 6, 16};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *e;
	int stopped = 0, differ = 0, runs = 0;

	(void)state;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	for (int q = 0; q < n_problems(); q++)
		for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
			sc_params pn = params(ns[ni], 3, 1.2f, "none");
			sc_params px = params(ns[ni], 3, 1.2f, "exact");
			sc_params pm = params(ns[ni], 3, 1.2f, "none");
			sc_result rn, rx, rm;

			/* quick: each problem one N, each N one problem */
			if (tu_quick() && ni != (size_t)q % 3)
				continue;
			pn.vote = px.vote = SC_VOTE_CONFIDENCE;
			run(e, q, &pn, &rn);
			run(e, q, &px, &rx);
			run(e, q, &pm, &rm);
			assert_prefix_of(&rx, &rn, "confidence exact");
			assert_prefix_of(&rm, &rn, "majority vs confidence");
			if (strcmp(winner(&rn), winner(&rx)))
				fail_msg("q %d N %d: weighted exact says %s, "
					 "all N say %s", q, ns[ni], winner(&rx),
					 winner(&rn));
			for (int i = 0; i < rn.n; i++) {
				assert_true(rn.samples[i].weight > 0);
				assert_true(rn.samples[i].weight <=
					    STOP_WEIGHT_ONE);
				assert_true(rn.samples[i].group_conf <= 0 &&
					    rn.samples[i].mean_logprob <= 0);
			}
			stopped += rx.n < ns[ni];
			differ += strcmp(winner(&rn), winner(&rm)) != 0;
			runs++;
			sc_run_result_fini(&rn);
			sc_run_result_fini(&rx);
			sc_run_result_fini(&rm);
		}
	printf("  %d requests: weighted exact stopped %d early; confidence "
	       "and majority disagree on %d\n", runs, stopped, differ);
	assert_true(stopped > 0);
	sc_engine_free(&e);
}

/* The online confidence filter: the same bytes in every mode, batch and
 * thread count; warm-up samples are never cut, cut ones have no answer
 * and are shorter than they would be unfiltered; tokens are saved. */
static void test_conf_filter(void **state)
{
	static const struct { int mode, max_batch, threads; } cf[] = {
		{SC_BATCHED, 64, 2}, {SC_BATCHED, 3, 1}, {SC_PAGED, 64, 2},
		{SC_RESET, 64, 1},
	};
	int cut = 0;
	uint64_t tok_f = 0, tok_n = 0;

	(void)state;
	for (int q = 0; q < (tu_quick() ? 2 : 4); q++) {
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params pn = params(N_REF, 11, 1.2f, "none");
		sc_params pf = pn;
		sc_result full, ref;
		sc_engine *e;

		pf.filter_warmup = 6;
		pf.filter_pct = 50;
		pf.conf_window = 8;
		pn.conf_window = 8;
		assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
		run(e, q, &pn, &full);
		run(e, q, &pf, &ref);
		sc_engine_free(&e);
		assert_int_equal(ref.n, N_REF);
		for (int i = 0; i < N_REF; i++) {
			const sc_sample *x = &ref.samples[i], *y = &full.samples[i];

			if (x->finish != SC_FINISH_FILTERED) {
				assert_int_equal(x->len, y->len);
				assert_memory_equal(x->text, y->text, x->len);
				continue;
			}
			assert_true(i >= 6);
			assert_false(x->has_answer);
			/* cut where it fell below: a prefix of the full text */
			assert_true(x->len <= y->len);
			assert_memory_equal(x->text, y->text, x->len);
			cut++;
		}
		{
			int nf = 0;

			for (int i = 0; i < N_REF; i++)
				nf += ref.samples[i].finish == SC_FINISH_FILTERED;
			assert_int_equal(ref.stop.filtered, nf);
		}
		tok_f += ref.stats.gen_tokens;
		tok_n += full.stats.gen_tokens;
		for (size_t ci = 1; ci < sizeof(cf) / sizeof(cf[0]); ci++) {
			sc_params p = pf;
			sc_result r;

			/* quick: the other configurations shared out over
			 * the problems, each one taken */
			if (tu_quick() && (ci - 1) % 2 != (size_t)q)
				continue;
			ep = SC_ENGINE_DEFAULTS;
			ep.max_batch = cf[ci].max_batch;
			ep.n_threads = cf[ci].threads;
			p.mode = cf[ci].mode;
			assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
			run(e, q, &p, &r);
			assert_int_equal(r.n, ref.n);
			assert_prefix_of(&r, &ref, "filter across modes");
			for (int i = 0; i < r.n; i++)
				assert_int_equal(r.samples[i].finish,
						 ref.samples[i].finish);
			sc_run_result_fini(&r);
			sc_engine_free(&e);
		}
		sc_run_result_fini(&ref);
		sc_run_result_fini(&full);
	}
	printf("  filter cut %d samples; tokens %llu vs %llu unfiltered\n",
	       cut, (unsigned long long)tok_f, (unsigned long long)tok_n);
	assert_true(cut > 0);
	assert_true(tok_f < tok_n);
}

/* The same two replies: samples, vote, where the rule fired. */
static void assert_same_reply(const sc_result *a, const sc_result *b,
			      const char *what)
{
	if (a->n != b->n)
		fail_msg("%s: %d samples, %d without waves", what, a->n, b->n);
	assert_prefix_of(a, b, what);
	if (strcmp(winner(a), winner(b)) ||
	    a->vote.n_entries != b->vote.n_entries)
		fail_msg("%s: the vote differs", what);
	for (size_t i = 0; i < a->vote.n_entries; i++)
		if (strcmp(a->vote.entries[i].answer,
			   b->vote.entries[i].answer) ||
		    a->vote.entries[i].count != b->vote.entries[i].count ||
		    a->vote.entries[i].first_index !=
			    b->vote.entries[i].first_index ||
		    a->vote.entries[i].weight != b->vote.entries[i].weight)
			fail_msg("%s: vote entry %zu differs", what, i);
	assert_int_equal(a->stop.fired, b->stop.fired);
	assert_int_equal(a->stop.reported, b->stop.reported);
}

/* Waves (sc_params.stop_waves): every rule, N, vote, batch and thread
 * count gives the reply of no waves byte for byte; with waves of the
 * fewest (1) no sample is cancelled or started past the reply, and the
 * tokens never exceed those without waves. */
static void test_waves_same_reply(void **state)
{
	static const char *rules[] = {"none", "exact", "beta", "beta:0.8",
				      "window:2"};
	static const int ns[] = {5, 16, 32};
	static const struct { int max_batch, threads, pool; } cf[] = {
		{64, 2, 0}, {3, 1, 512},
	};
	uint64_t tok[4] = {0};
	uint64_t base1 = 0;   /* no waves' tokens where waves of 1 ran */
	int runs = 0;

	(void)state;
	for (int q = 0; q < (tu_quick() ? 2 : 4); q++)
	for (size_t ci = 0; ci < sizeof(cf) / sizeof(cf[0]); ci++) {
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_engine *e;

		ep.max_batch = cf[ci].max_batch;
		ep.n_threads = cf[ci].threads;
		ep.pool_blocks = cf[ci].pool;
		assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
		for (size_t ri = 0; ri < sizeof(rules) / sizeof(rules[0]); ri++)
		for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
		for (int vote = 0; vote < 2; vote++) {
			sc_params p0 = params(ns[ni], 3, 1.0f, rules[ri]);
			sc_result r0;

			if (tu_quick() && (ri + ni + (size_t)vote) % 2 != ci)
				continue;
			p0.vote = vote;
			run(e, q, &p0, &r0);
			for (int w = 1; w <= 3; w++) {
				sc_params pw = p0;
				sc_result rw;
				char what[128];

				/* quick (sanitizer builds): one wave size
				 * per combination, each size still taken */
				if (tu_quick() &&
				    w != 1 + (int)((ri + ni + (size_t)q) % 3))
					continue;
				pw.stop_waves = w;
				run(e, q, &pw, &rw);
				snprintf(what, sizeof(what), "q %d %s N %d vote "
					 "%d batch %d waves %d", q, rules[ri],
					 ns[ni], vote, ep.max_batch, w);
				assert_same_reply(&rw, &r0, what);
				if (w == 1) {
					base1 += r0.stats.gen_tokens;
					if (rw.stop.cancelled ||
					    rw.stop.started != rw.n)
						fail_msg("%s: %d started, %d "
							 "cancelled for %d "
							 "reported", what,
							 rw.stop.started,
							 rw.stop.cancelled,
							 rw.n);
					assert_true(rw.stats.gen_tokens <=
						    r0.stats.gen_tokens);
				}
				if (cf[ci].pool)
					assert_int_equal(sc_engine_kv_free(e),
							 cf[ci].pool);
				tok[w] += rw.stats.gen_tokens;
				sc_run_result_fini(&rw);
			}
			tok[0] += r0.stats.gen_tokens;
			runs++;
			sc_run_result_fini(&r0);
		}
		sc_engine_free(&e);
	}
	printf("  %d requests: tokens %llu without waves, %llu / %llu / %llu "
	       "with waves of 1 / 2 / 3\n", runs, (unsigned long long)tok[0],
	       (unsigned long long)tok[1], (unsigned long long)tok[2],
	       (unsigned long long)tok[3]);
	assert_true(tok[1] < base1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_equals_none),
		cmocka_unit_test(test_rules_deterministic),
		cmocka_unit_test(test_confidence_vote),
		cmocka_unit_test(test_conf_filter),
		cmocka_unit_test(test_waves_same_reply),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
