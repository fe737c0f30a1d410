/*
 * Self-consistency engine: every sample's bytes are identical across the
 * reset, paged and batched modes, for several N, KV block sizes, thread
 * counts and batch widths; and the pool is fully free after each request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/kern.h"
#include "infer/model.h"
#include "text/prompt.h"
#include "sc/batch.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/fork.h"
#include "testutil.h"
#include "text/tok.h"

static char path[512];
static model *m;
static tok *t;
static int32_t *prompt;
static size_t n_prompt;

static int setup(void **state)
{
	(void)state;
	if (tu_model(path, sizeof(path), "qwen2", "tiny", GGML_TYPE_Q8_0,
		     tu_chat_tokenizer(), 11) ||
	    model_load(path, &m) || tok_load(m->gguf, &t) ||
	    prompt_build(t, NULL, "What is 17 * 23? Answer with a number.",
			 &prompt, &n_prompt)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(prompt);
	tok_free(&t);
	model_free(&m);
	unlink(path);
	return 0;
}

static sc_params params(int n, int mode)
{
	sc_params p = {.sp = {0.9f, 0, 0.95f, 0.0f}, .seed = 1234, .n = n,
		       .max_new = 24, .mode = mode};
	return p;
}

static void run(const sc_engine_params *ep, const sc_params *p,
		sc_result *r)
{
	sc_engine *e;

	assert_int_equal(sc_engine_new(m, t, ep, &e), 0);
	if (sc_run(e, prompt, n_prompt, p, r))
		fail_msg("sc_run: %s", qerr_detail());
	sc_engine_free(&e);
}

static void assert_same_samples(const sc_result *a, const sc_result *b,
				int offset_b, const char *what)
{
	for (int i = 0; i < a->n; i++) {
		const sc_sample *x = &a->samples[i];
		const sc_sample *y = &b->samples[i + offset_b];

		if (x->len != y->len || memcmp(x->text, y->text, x->len) ||
		    x->n_tokens != y->n_tokens || x->finish != y->finish ||
		    strcmp(x->answer, y->answer))
			fail_msg("%s: sample %d differs:\n[%.*s] (%d tok)\n"
				 "[%.*s] (%d tok)", what, i, (int)x->len,
				 x->text, x->n_tokens, (int)y->len, y->text,
				 y->n_tokens);
	}
}

/* The contract: bytes identical across modes, N, blocks, threads. */
static void test_modes_identical(void **state)
{
	static const int ns[] = {1, 3, 8, 17};
	static const int blocks[] = {1, 16};
	static const int threads[] = {1, 2};
	sc_result ref17;
	int distinct = 0, stops = 0;

	(void)state;
	/* the reference: 17 samples, batched, default engine */
	{
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params p = params(17, SC_BATCHED);

		run(&ep, &p, &ref17);
		for (int i = 1; i < 17; i++)
			distinct += strcmp(ref17.samples[i].text,
					   ref17.samples[0].text) != 0;
		for (int i = 0; i < 17; i++)
			stops += ref17.samples[i].finish == SC_FINISH_STOP;
		printf("  17 samples: %d differ from sample 0, %d stopped "
		       "early\n", distinct, stops);
		assert_true(distinct >= 8); /* sampling really varies */
	}
	for (size_t bi = 0; bi < 2; bi++)
		for (size_t ti = 0; ti < 2; ti++)
			/* quick: blocks and threads on a diagonal */
			for (size_t ni = 0; ni < 4 && (!tu_quick() || bi == ti);
			     ni++)
				for (int mode = SC_RESET; mode <= SC_BATCHED;
				     mode++) {
					sc_engine_params ep = SC_ENGINE_DEFAULTS;
					sc_params p = params(ns[ni], mode);
					sc_result r;
					char what[96];

					/* N samples are the first N of the
					 * 17: nothing depends on N */
					ep.block_tokens = blocks[bi];
					ep.n_threads = threads[ti];
					ep.max_batch = ni == 3 ? 5 : 64;
					run(&ep, &p, &r);
					snprintf(what, sizeof(what),
						 "N=%d %s block %d threads %d",
						 ns[ni], sc_params_mode_name(mode),
						 blocks[bi], threads[ti]);
					assert_same_samples(&r, &ref17, 0, what);
					sc_run_result_fini(&r);
				}
	sc_run_result_fini(&ref17);
}

/* The same request on one engine twice, and the pool is free after. */
static void test_repeat_and_pool_free(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = params(5, SC_BATCHED);
	sc_result a, b;
	sc_engine *e;

	(void)state;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	assert_int_equal(sc_run(e, prompt, n_prompt, &p, &a), 0);
	assert_int_equal(sc_run(e, prompt, n_prompt, &p, &b), 0);
	assert_same_samples(&a, &b, 0, "repeat");
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	/* prefix shared: peak KV well under N unshared copies */
	assert_true(a.stats.kv_peak_bytes < a.stats.kv_unshared_bytes);
	assert_int_equal(a.stats.n_prefills, 1);
	sc_run_result_fini(&a);
	sc_run_result_fini(&b);
	sc_engine_free(&e);
}

/* The same contract on every architecture, each on its tiny shape: the
 * gemma3 and gpt-oss windows (8 tokens) are much shorter than the prompt,
 * so forks' windows reach back into the shared prefix blocks; qwen3moe's
 * and gpt-oss's forks and prefill rows share each round's expert
 * groups. */
static void test_archs_modes_identical(void **state)
{
	static const char *const shapes[] = {"tiny-qwen3", "tiny-llama3",
					     "tiny-gemma3", "tiny-qwen3moe",
					     "tiny-gptoss"};
	static const int blocks[] = {1, 16};

	(void)state;
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		const mkmodel_shape *sh = mkmodel_find_shape(shapes[si]);
		char ap[512];
		model *am;
		tok *at;
		int32_t *ids = NULL;
		size_t n_ids = 0; /* fail_msg does not return: for clang */
		sc_result ref;
		int distinct = 0;

		assert_non_null(sh);
		if (tu_model(ap, sizeof(ap), sh->arch, sh->name,
			     GGML_TYPE_Q8_0, tu_chat_tokenizer(), 21 + si) ||
		    model_load(ap, &am) || tok_load(am->gguf, &at) ||
		    prompt_build(at, NULL, "What is 17 * 23?", &ids, &n_ids))
			fail_msg("%s: %s", shapes[si], qerr_detail());
		if (sh->swa_window)
			assert_true(n_ids > 3 * (size_t)am->cfg.swa_window);
		{
			sc_engine_params ep = SC_ENGINE_DEFAULTS;
			sc_params p = params(8, SC_BATCHED);
			sc_engine *e;

			assert_int_equal(sc_engine_new(am, at, &ep, &e), 0);
			assert_int_equal(sc_run(e, ids, n_ids, &p, &ref), 0);
			sc_engine_free(&e);
		}
		for (int i = 1; i < 8; i++)
			distinct += strcmp(ref.samples[i].text,
					   ref.samples[0].text) != 0;
		printf("  %s: %zu prompt tokens, %d of 7 samples differ from "
		       "sample 0\n", shapes[si], n_ids, distinct);
		assert_true(distinct >= 3);
		for (size_t bi = 0; bi < 2; bi++)
			/* quick: one block size per architecture */
			for (int mode = SC_RESET; mode <= SC_BATCHED &&
			     (!tu_quick() || bi == si % 2); mode++) {
				sc_engine_params ep = SC_ENGINE_DEFAULTS;
				sc_params p = params(mode == SC_RESET ? 3 : 8,
						     mode);
				sc_engine *e;
				sc_result r;
				char what[96];

				ep.block_tokens = blocks[bi];
				ep.max_batch = bi ? 3 : 64;
				assert_int_equal(sc_engine_new(am, at, &ep, &e),
						 0);
				assert_int_equal(sc_run(e, ids, n_ids, &p, &r),
						 0);
				assert_int_equal(sc_engine_kv_in_use(e), 0);
				sc_engine_free(&e);
				snprintf(what, sizeof(what), "%s N=%d %s block "
					 "%d", shapes[si], p.n,
					 sc_params_mode_name(mode), blocks[bi]);
				assert_same_samples(&r, &ref, 0, what);
				sc_run_result_fini(&r);
			}
		sc_run_result_fini(&ref);
		free(ids);
		tok_free(&at);
		model_free(&am);
		unlink(ap);
	}
}

/* Stop strings: each sample is its unstopped text cut before the first
 * occurrence (finish stop, no more tokens than unstopped), the same bytes
 * in every mode and batch size; a finished sample's text is all settled. */
static void test_stop_strings(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = params(8, SC_BATCHED);
	sc_result full;
	char a[3] = "", b[3] = "";
	int cut = 0;

	(void)state;
	run(&ep, &p, &full);
	/* two 2-byte strings from inside samples 0 and 1 */
	assert_true(full.samples[0].len >= 4 && full.samples[1].len >= 6);
	memcpy(a, full.samples[0].text + 2, 2);
	memcpy(b, full.samples[1].text + 4, 2);
	for (int mode = SC_RESET; mode <= SC_BATCHED; mode++)
		for (int mb = 0; mb < 2; mb++) {
			sc_params q = params(mode == SC_RESET ? 4 : 8, mode);
			sc_result r;

			if (mb && mode != SC_BATCHED)
				continue;
			ep = SC_ENGINE_DEFAULTS;
			ep.max_batch = mb ? 3 : 64;
			assert_int_equal(sc_params_stop_strs_add(&q.stop_strs, a, 2), 0);
			assert_int_equal(sc_params_stop_strs_add(&q.stop_strs, b, 2), 0);
			run(&ep, &q, &r);
			for (int i = 0; i < r.n; i++) {
				const sc_sample *x = &r.samples[i];
				const sc_sample *y = &full.samples[i];
				const char *ha = memmem(y->text, y->len, a, 2);
				const char *hb = memmem(y->text, y->len, b, 2);
				const char *h = !ha ? hb : !hb ? ha
						 : ha < hb ? ha : hb;

				assert_int_equal(x->settled, x->len);
				if (!h) {
					assert_int_equal(x->len, y->len);
					assert_memory_equal(x->text, y->text,
							    x->len);
					assert_int_equal(x->finish, y->finish);
					assert_int_equal(x->n_tokens,
							 y->n_tokens);
					continue;
				}
				assert_int_equal(x->len, (size_t)(h - y->text));
				assert_memory_equal(x->text, y->text, x->len);
				assert_int_equal(x->finish, SC_FINISH_STOP);
				assert_true(x->n_tokens <= y->n_tokens);
				/* a stop string's last token is one of its
				 * tokens: no end token drawn */
				assert_int_equal(x->end_step, 0);
				cut += mode == SC_BATCHED && !mb;
			}
			/* nothing stopped early (no rule): every step
			 * reported once, none saved (a stop string's stop
			 * was counted as an end token more) */
			assert_int_equal(r.stop.tokens_reported,
					 r.stats.gen_tokens);
			assert_int_equal(r.stop.tokens_saved, 0);
			sc_run_result_fini(&r);
		}
	assert_true(cut >= 2); /* samples 0 and 1 at least */
	sc_run_result_fini(&full);
	{
		sc_stop_strs q = {0};
		char big[SC_STOP_STR_LEN + 1];

		memset(big, 'x', sizeof(big));
		assert_int_equal(sc_params_stop_strs_add(&q, big, sizeof(big)),
				 QERR_RANGE);
		assert_int_equal(sc_params_stop_strs_add(&q, "", 0), QERR_RANGE);
		assert_int_equal(sc_params_stop_strs_add(&q, "a\0b", 3), QERR_RANGE);
		for (int i = 0; i < SC_STOP_STR_MAX; i++)
			assert_int_equal(sc_params_stop_strs_add(&q, "ab", 2), 0);
		assert_int_equal(sc_params_stop_strs_add(&q, "ab", 2), QERR_RANGE);
	}
}

/* Per-token log-probabilities: recording them changes no byte; one per
 * drawn token (the end token too), their mean is mean_logprob exactly,
 * the offsets rise through the text and spell it. */
static void test_token_logprobs(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = params(8, SC_BATCHED), q = p;
	sc_result a, b;

	(void)state;
	q.logprobs = 1;
	run(&ep, &p, &a);
	run(&ep, &q, &b);
	assert_same_samples(&a, &b, 0, "with logprobs");
	for (int i = 0; i < b.n; i++) {
		const sc_sample *x = &b.samples[i];
		int drawn = x->n_tokens + (x->finish == SC_FINISH_STOP);
		double sum = 0;

		assert_null(a.samples[i].token_lp);
		assert_int_equal(x->n_token_lp, drawn);
		for (int k = 0; k < x->n_token_lp; k++) {
			sum += x->token_lp[k];
			assert_true(x->token_lp[k] <= 0);
			assert_true(x->token_off[k] <= x->len);
			if (k)
				assert_true(x->token_off[k] >=
					    x->token_off[k - 1]);
		}
		assert_int_equal(x->token_off[0], 0);
		assert_true(sum / drawn == x->mean_logprob);
	}
	sc_run_result_fini(&a);
	sc_run_result_fini(&b);
}

/* Sample x's alternatives equal y's, bit for bit. */
static void assert_same_alts(const sc_sample *x, const sc_sample *y,
			     const char *what)
{
	if (x->n_token_lp != y->n_token_lp || x->n_alt != y->n_alt ||
	    memcmp(x->alt_n, y->alt_n, (size_t)x->n_token_lp * sizeof(uint32_t)) ||
	    memcmp(x->alt_id, y->alt_id, x->n_alt * sizeof(uint32_t)) ||
	    memcmp(x->alt_lp, y->alt_lp, x->n_alt * sizeof(double)))
		fail_msg("%s: sample %d's alternatives differ", what, x->index);
}

/* top_logprobs: asking for alternatives changes no byte and no
 * log-probability; each token has 1..K of them, distinct, never rising,
 * the drawn token among them with its own value whenever it ranks above
 * the last; and sample i's list is the same bits for any N, mode, thread
 * count (2 threads draw ahead on the pool) and batch width, with the
 * logits shaped (penalties, logit_bias) and with top-k. */
static void test_top_logprobs(void **state)
{
	static const int ns[] = {8, 3, 5};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = params(8, SC_BATCHED), q;
	sc_result a, b, r;

	(void)state;
	p.logprobs = 1;
	for (int variant = 0; variant < 2; variant++) {
		if (variant) {
			p.sp.top_k = 40;
			p.presence_penalty = 0.5f;
			p.frequency_penalty = 0.3f;
			assert_int_equal(sc_params_parse(SC_S_LOGIT_BIAS,
							 "5:2,40:-1", &p), 0);
		}
		q = p;
		q.top_logprobs = 5;
		ep = (sc_engine_params)SC_ENGINE_DEFAULTS;
		run(&ep, &p, &a);
		run(&ep, &q, &b);
		assert_same_samples(&a, &b, 0, "with top_logprobs");
		for (int i = 0; i < b.n; i++) {
			const sc_sample *x = &b.samples[i];
			size_t at = 0;

			assert_null(a.samples[i].alt_n);
			assert_int_equal(x->n_token_lp,
					 a.samples[i].n_token_lp);
			assert_memory_equal(x->token_lp, a.samples[i].token_lp,
					    (size_t)x->n_token_lp *
						    sizeof(double));
			for (int k = 0; k < x->n_token_lp; k++) {
				uint32_t c = x->alt_n[k];
				int seen = 0;

				assert_true(c >= 1 && c <= 5);
				for (uint32_t j = 0; j < c; j++) {
					double v = x->alt_lp[at + j];

					assert_true(v <= 0);
					if (j)
						assert_true(v <= x->alt_lp[at + j - 1]);
					for (uint32_t o = 0; o < j; o++)
						assert_true(x->alt_id[at + o] !=
							    x->alt_id[at + j]);
					seen |= v == x->token_lp[k];
				}
				if (x->token_lp[k] > x->alt_lp[at + c - 1])
					assert_true(seen);
				at += c;
			}
			assert_int_equal(at, x->n_alt);
		}
		for (size_t ni = 0; ni < 3; ni++) {
			char what[64];

			ep = (sc_engine_params)SC_ENGINE_DEFAULTS;
			ep.n_threads = ni ? 2 : 1;
			ep.max_batch = ni == 1 ? 2 : 64;
			q.n = ns[ni];
			q.mode = ni == 2 ? SC_PAGED : SC_BATCHED;
			run(&ep, &q, &r);
			snprintf(what, sizeof(what), "variant %d N=%d threads %d",
				 variant, q.n, ep.n_threads);
			assert_same_samples(&r, &b, 0, what);
			for (int i = 0; i < r.n; i++)
				assert_same_alts(&r.samples[i], &b.samples[i],
						 what);
			sc_run_result_fini(&r);
		}
		q.n = 8;
		q.mode = SC_BATCHED;
		sc_run_result_fini(&a);
		sc_run_result_fini(&b);
	}
}

/* The settings that shape the logits (logit_bias, presence and
 * frequency penalties over a sample's own tokens) and min-p keep the
 * contract: sample i's bytes are the same for any N, mode, thread count
 * and batch width; and they do what they say. */
static void test_shaping(void **state)
{
	static const int ns[] = {9, 4, 2};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params base = params(9, SC_BATCHED), p = base, g;
	sc_result plain, ref, r;
	int differ = 0, x = -1;
	const char *piece;
	size_t plen;

	(void)state;
	p.presence_penalty = 0.7f;
	p.frequency_penalty = 0.9f;
	p.sp.min_p = 0.05f;
	assert_int_equal(sc_params_parse(SC_S_LOGIT_BIAS, "5:3,7:-2.5,40:1.5",
					 &p), 0);
	run(&ep, &base, &plain);
	run(&ep, &p, &ref);
	for (int i = 0; i < 9; i++)
		differ += strcmp(plain.samples[i].text, ref.samples[i].text) != 0;
	assert_true(differ >= 3);
	for (size_t ni = 0; ni < 3; ni++) {
		char what[64];

		ep = (sc_engine_params)SC_ENGINE_DEFAULTS;
		ep.n_threads = ni ? 2 : 1;
		ep.max_batch = ni == 1 ? 3 : 64;
		p.n = ns[ni];
		p.mode = ni == 2 ? SC_PAGED : SC_BATCHED;
		run(&ep, &p, &r);
		snprintf(what, sizeof(what), "shaped N=%d threads %d", p.n,
			 ep.n_threads);
		assert_same_samples(&r, &ref, 0, what);
		sc_run_result_fini(&r);
	}
	sc_run_result_fini(&plain);
	sc_run_result_fini(&ref);

	/* greedy with +100 on one token: that token every time; with a
	 * frequency penalty of 2 it gives way once 2 x its count outweighs
	 * the bias, and never before half of it */
	for (int id = 0; id < 200 && x < 0; id++)
		if (!tok_is_eog(t, id) &&
		    (piece = tok_piece(t, id, 0, &plen)) && plen == 1 &&
		    piece[0] == 'q')
			x = id;
	assert_true(x >= 0);
	g = params(1, SC_BATCHED);
	g.sp.temperature = 0;
	g.max_new = 80;
	{
		char b[32];

		snprintf(b, sizeof(b), "%d:100", x);
		assert_int_equal(sc_params_parse(SC_S_LOGIT_BIAS, b, &g), 0);
	}
	ep = (sc_engine_params)SC_ENGINE_DEFAULTS;
	run(&ep, &g, &r);
	assert_int_equal(r.samples[0].n_tokens, 80);
	assert_int_equal((int)strspn(r.samples[0].text, "q"), 80);
	sc_run_result_fini(&r);
	g.frequency_penalty = 2;
	run(&ep, &g, &r);
	{
		int k = (int)strspn(r.samples[0].text, "q");

		print_message("  +100 and frequency 2: %d q's first\n", k);
		assert_true(k >= 25 && k < 80);
	}
	sc_run_result_fini(&r);
	/* an id past the model's vocabulary: refused, in words */
	assert_int_equal(sc_params_parse(SC_S_LOGIT_BIAS, "16777215:1", &g), 0);
	{
		sc_engine *e;

		assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
		assert_int_equal(sc_run(e, prompt, n_prompt, &g, &r),
				 QERR_RANGE);
		assert_non_null(strstr(qerr_detail(), "logit_bias: token "
				       "16777215 is not in the model's "
				       "vocabulary"));
		sc_engine_free(&e);
	}
}

static void test_bad_params(void **state)
{
	static const struct {
		sc_params p;
		int code;
	} cases[] = {
#define BP(t_, k_, p_, n_, x_, m_) .sp = {t_, k_, p_, 0}, .n = n_, \
				  .max_new = x_, .mode = m_
		{{BP(-1.0f, 0, 1.0f, 1, 8, SC_BATCHED)}, QERR_RANGE},
		{{BP(1.0f, -1, 1.0f, 1, 8, SC_BATCHED)}, QERR_RANGE},
		{{BP(1.0f, 0, 1.5f, 1, 8, SC_BATCHED)}, QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 0, 8, SC_BATCHED)}, QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 1, 0, SC_BATCHED)}, QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 1, 8, 7)}, QERR_RANGE},
		/* prompt + max_new over the 4096-token context */
		{{BP(1.0f, 0, 1.0f, 1, 5000, SC_BATCHED)}, QERR_TOOLONG},
		/* stop rules, votes, confidence out of range */
		{{BP(1.0f, 0, 1.0f, 4, 8, SC_BATCHED),
		  .stop = {STOP_BETA, 0.5, 4}}, QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 4, 8, SC_BATCHED),
		  .stop = {STOP_WINDOW, 0.9, 0}}, QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 4, 8, SC_BATCHED), .stop = {9, 0.9, 4}},
		 QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 4, 8, SC_BATCHED), .vote = 2}, QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 4, 8, SC_BATCHED), .conf_window = -1},
		 QERR_RANGE},
		{{BP(1.0f, 0, 1.0f, 4, 8, SC_BATCHED), .filter_warmup = 2,
		  .filter_pct = 101}, QERR_RANGE},
#undef BP
	};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *e;

	(void)state;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sc_result r;
		int rc = sc_run(e, prompt, n_prompt, &cases[i].p, &r);

		if (rc != cases[i].code)
			fail_msg("case %zu: rc %d (%s)", i, rc, qerr_detail());
		assert_null(r.samples);
		assert_int_equal(sc_engine_kv_in_use(e), 0);
	}
	sc_engine_free(&e);
}

typedef struct {
	sc_result *ref;
	int seen;
	int rounds;
	int texts;            /* on_text calls */
	size_t last_len[32];  /* by sample index: text seen so far */
} cb_ctx;

static int on_sample(void *ctx, const sc_sample *s)
{
	cb_ctx *c = ctx;
	const sc_sample *r = &c->ref->samples[s->index];

	if (s->len != r->len || memcmp(s->text, r->text, s->len) ||
	    s->n_tokens != r->n_tokens || s->finish != r->finish ||
	    s->has_answer != r->has_answer || strcmp(s->answer, r->answer))
		fail_msg("sample %d differs from the in-process run", s->index);
	c->seen++;
	return 0;
}

/* Streaming: every text seen mid-decode is a prefix of the sample's
 * final bytes, and only grows. */
static void on_text(void *ctx, const sc_sample *s, int n)
{
	cb_ctx *c = ctx;

	c->texts++;
	for (int i = 0; i < n; i++) {
		const sc_sample *r = &c->ref->samples[s[i].index];

		if (s[i].len > r->len || (s[i].len && memcmp(s[i].text, r->text,
							     s[i].len)) ||
		    s[i].len < c->last_len[s[i].index])
			fail_msg("sample %d: partial text is not a growing "
				 "prefix of the final one", s[i].index);
		c->last_len[s[i].index] = s[i].len;
	}
}

static int on_round(void *ctx)
{
	((cb_ctx *)ctx)->rounds++;
	return 0;
}

/* Cluster building blocks: a root kept in one engine's named pool, its
 * samples decoded in subsets by that engine, by another engine mapping the
 * pool read-only, and by a third that imported the exported rows — every
 * sample's bytes equal the one-process run with the same KV dtype (f16,
 * and the 8-bit q8_0 cache: its rows mapped, copied on write and
 * exported as whole blocks). */
/* windows: the reference keeps every row (free_windows 0), the engines
 * holding, mapping and importing the root release windowed rows */
static void roots_and_subsets(int dtype, int windows)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = params(17, SC_BATCHED);
	sc_engine *a, *b, *c;
	sc_result ref;
	sc_root_desc d;
	sc_root_ref rr;
	sc_decode_stats st;
	cb_ctx cx = {0};
	char name[64];
	uint32_t root, imported;
	void *bytes;
	size_t len;
	static const int sa[] = {0, 5, 9}, sb[] = {1, 2, 3, 4, 6, 7, 8},
			 sc[] = {10, 11, 12, 13, 14, 15, 16};

	ep.kv_dtype = dtype;
	ep.free_windows = !windows;
	run(&ep, &p, &ref);
	ep.free_windows = 1;
	cx.ref = &ref;
	snprintf(name, sizeof(name), "/quorum-test-sc-%d", (int)getpid());
	ep.pool_name = name;
	ep.pool_blocks = 512;
	assert_int_equal(sc_engine_new(m, t, &ep, &a), 0);
	ep.pool_name = NULL;
	ep.n_threads = 1;
	ep.max_batch = 3;
	assert_int_equal(sc_engine_new(m, t, &ep, &b), 0);
	assert_int_equal(sc_engine_new(m, t, &ep, &c), 0);

	assert_int_equal(sc_root_prefill(a, prompt, n_prompt, &root), 0);
	assert_int_equal(sc_root_count(a), 1);
	assert_int_equal(sc_root_get(a, root, &d), 0);
	assert_int_equal(d.n_tokens, n_prompt);
	assert_string_equal(d.pool_name, name);
	rr = (sc_root_ref){d.pool_name, d.n_tokens, d.n_blocks, d.blocks,
			   d.logits};
	/* the holder decodes a subset */
	assert_int_equal(sc_batch_decode_job(a, &rr, sa, 3, &p, on_sample, on_round,
				   &cx, &st), 0);
	assert_int_equal(cx.seen, 3);
	assert_true(cx.rounds > 0);
	/* another engine maps the pool by name and decodes another subset:
	 * full prefix blocks read in place, one tail copy per fork */
	assert_int_equal(sc_batch_decode_job_text(b, &rr, sb, 7, &p, on_sample, NULL,
					on_text, &cx, &st), 0);
	assert_int_equal(cx.seen, 10);
	assert_true(cx.texts > 1);
	assert_int_equal(st.blocks_mapped, 7 * (n_prompt / 16));
	assert_int_equal(st.blocks_copied, n_prompt % 16 ? 7 : 0);
	assert_int_equal(sc_engine_kv_in_use(b), 0);
	/* a third engine imports the rows (another host) */
	assert_int_equal(sc_root_export(a, root, &bytes, &len), 0);
	assert_int_equal(sc_root_import(c, (uint32_t)n_prompt, bytes, len,
					d.logits, &imported), 0);
	free(bytes);
	assert_int_equal(sc_root_get(c, imported, &d), 0);
	rr = (sc_root_ref){NULL, d.n_tokens, d.n_blocks, d.blocks, d.logits};
	assert_int_equal(sc_batch_decode_job(c, &rr, sc, 7, &p, on_sample, NULL, &cx,
				   &st), 0);
	assert_int_equal(cx.seen, 17);
	/* bad references are refused, not followed */
	{
		uint32_t bad = 100000;
		sc_root_ref br = {NULL, 16, 1, &bad, d.logits};

		assert_int_not_equal(sc_batch_decode_job(c, &br, sa, 1, &p, NULL, NULL,
					       NULL, &st), 0);
		br.pool_name = "/quorum-no-such-pool";
		assert_int_not_equal(sc_batch_decode_job(c, &br, sa, 1, &p, NULL, NULL,
					       NULL, &st), 0);
	}
	assert_int_equal(sc_root_release(c, imported), 0);
	assert_int_equal(sc_engine_kv_in_use(c), 0);
	assert_int_equal(sc_root_release(a, root), 0);
	assert_int_equal(sc_root_release(a, root), QERR_MISSING);
	assert_int_equal(sc_engine_kv_in_use(a), 0);
	sc_engine_free(&c);
	sc_engine_free(&b);
	sc_engine_free(&a);
	sc_run_result_fini(&ref);
}

static void test_roots_and_subsets(void **state)
{
	(void)state;
	roots_and_subsets(KV_F16, 0);
	roots_and_subsets(KV_Q8_0, 0);
}

/* ---- sliding windows: released rows never change a byte --------------
 *
 * Long chains (ignore_eos) on the tiny gemma3 (window 8, layers 0, 1, 3
 * windowed) and gpt-oss (window 8, layers 0 and 2) shapes: every sample
 * is the same with window parts released (the default) as with every row
 * kept, across modes, N, block sizes, threads, batch widths, the prefix
 * cache and the cluster's root paths; and the KV held is bounded by the
 * window on the windowed layers. */
static const struct {
	const char *name;
	int mode, n, block, threads, max_batch;
} win_cases[] = {
	{"batched N=8 block 16", SC_BATCHED, 8, 16, 2, 64},
	{"batched N=8 block 1, 3 rows a forward", SC_BATCHED, 8, 1, 1, 3},
	{"batched N=3 block 4", SC_BATCHED, 3, 4, 2, 64},
	{"paged N=3 block 16", SC_PAGED, 3, 16, 1, 64},
	{"reset N=2 block 4", SC_RESET, 2, 4, 2, 64},
	{"batched N=1 block 16", SC_BATCHED, 1, 16, 1, 64},
};

static sc_params win_params(int n, int mode)
{
	sc_params p = params(n, mode);

	p.max_new = tu_quick() ? 64 : 160;
	p.ignore_eos = 1;
	return p;
}

static void windows_freed(const char *shape, int seed)
{
	const mkmodel_shape *sh = mkmodel_find_shape(shape);
	char ap[512];
	model *am = NULL;
	tok *at = NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;
	sc_result ref, r;
	model *m0 = m;
	tok *t0 = t;
	int32_t *p0 = prompt;
	size_t n0 = n_prompt;

	assert_non_null(sh);
	if (tu_model(ap, sizeof(ap), sh->arch, sh->name, GGML_TYPE_Q8_0,
		     tu_chat_tokenizer(), seed) ||
	    model_load(ap, &am) || tok_load(am->gguf, &at) ||
	    prompt_build(at, NULL, "What is 17 * 23?", &ids, &n_ids))
		fail_msg("%s: %s", shape, qerr_detail());
	assert_true(am->cfg.swa_window == 8);
	{
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params p = win_params(8, SC_BATCHED);
		sc_engine *e;

		ep.free_windows = 0;
		assert_int_equal(sc_engine_new(am, at, &ep, &e), 0);
		assert_int_equal(sc_run(e, ids, n_ids, &p, &ref), 0);
		sc_engine_free(&e);
	}
	for (size_t i = 0; i < sizeof(win_cases) / sizeof(win_cases[0]); i++) {
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params p = win_params(win_cases[i].n, win_cases[i].mode);
		sc_engine *e;
		char what[128];

		if (tu_quick() && i % 2)
			continue;
		ep.block_tokens = win_cases[i].block;
		ep.n_threads = win_cases[i].threads;
		ep.max_batch = win_cases[i].max_batch;
		assert_int_equal(sc_engine_new(am, at, &ep, &e), 0);
		assert_int_equal(sc_run(e, ids, n_ids, &p, &r), 0);
		assert_int_equal(sc_engine_kv_in_use(e), 0);
		sc_engine_free(&e);
		snprintf(what, sizeof(what), "%s %s", shape, win_cases[i].name);
		assert_same_samples(&r, &ref, 0, what);
		sc_run_result_fini(&r);
	}
	/* the prefix cache: the second run forks the cached prompt */
	{
		sc_engine_params ep = SC_ENGINE_DEFAULTS;
		sc_params p = win_params(8, SC_BATCHED);
		sc_engine *e;

		ep.prefix_cache = 2;
		assert_int_equal(sc_engine_new(am, at, &ep, &e), 0);
		for (int k = 0; k < 2; k++) {
			assert_int_equal(sc_run(e, ids, n_ids, &p, &r), 0);
			assert_same_samples(&r, &ref, 0, "prefix cache");
			sc_run_result_fini(&r);
		}
		sc_engine_free(&e);
	}
	/* KV held, N = 1: the global layers hold every row, the windowed
	 * ones the prompt's (the root keeps them) and a few blocks past */
	{
		int B = 16, n_full = 0, n_win = 0;
		uint64_t part = 2ull * B * kv_row_bytes(KV_F16, am->cfg.kv_dim);
		uint64_t pb = (n_ids + B - 1) / B;
		uint64_t tb = (n_ids + win_params(1, 0).max_new + B - 1) / B;
		uint64_t peak[2];

		for (int l = 0; l < am->cfg.n_layers; l++)
			am->layers[l].swa ? n_win++ : n_full++;
		for (int on = 0; on < 2; on++) {
			sc_engine_params ep = SC_ENGINE_DEFAULTS;
			sc_params p = win_params(1, SC_BATCHED);
			sc_engine *e;

			ep.free_windows = on;
			assert_int_equal(sc_engine_new(am, at, &ep, &e), 0);
			assert_int_equal(sc_run(e, ids, n_ids, &p, &r), 0);
			sc_engine_free(&e);
			assert_same_samples(&r, &ref, 0, "N=1 bytes");
			peak[on] = r.stats.kv_peak_bytes;
			sc_run_result_fini(&r);
		}
		printf("  %s: %zu prompt + %d new tokens, N = 1: KV peak %llu "
		       "bytes kept, %llu released\n", shape, n_ids,
		       win_params(1, 0).max_new, (unsigned long long)peak[0],
		       (unsigned long long)peak[1]);
		/* kept: the root's and the fork's blocks, every layer */
		assert_true(peak[0] >= tb * (n_full + n_win) * part);
		assert_true(peak[1] <= tb * n_full * part +
					       (pb + 3) * n_win * part);
		assert_true(peak[1] < peak[0]);
	}
	/* the cluster's paths: a root held, mapped by name, imported */
	m = am;
	t = at;
	prompt = ids;
	n_prompt = n_ids;
	roots_and_subsets(KV_F16, 1);
	m = m0;
	t = t0;
	prompt = p0;
	n_prompt = n0;
	sc_run_result_fini(&ref);
	free(ids);
	tok_free(&at);
	model_free(&am);
	unlink(ap);
}

static void test_windows_freed(void **state)
{
	(void)state;
	windows_freed("tiny-gemma3", 31);
	windows_freed("tiny-gptoss", 32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes_identical),
		cmocka_unit_test(test_repeat_and_pool_free),
		cmocka_unit_test(test_archs_modes_identical),
		cmocka_unit_test(test_stop_strings),
		cmocka_unit_test(test_token_logprobs),
		cmocka_unit_test(test_top_logprobs),
		cmocka_unit_test(test_shaping),
		cmocka_unit_test(test_bad_params),
		cmocka_unit_test(test_roots_and_subsets),
		cmocka_unit_test(test_windows_freed),
	};

	return cmocka_run_group_tests_name("sc", tests, setup, teardown);
}
