/*
 * Prefix reuse in the engine (issue 16): a root started from a cached
 * root's first k tokens (sc_root_prefill_from) holds the same K/V rows and
 * last logits, bit for bit, as a fresh prefill of the whole prompt — at
 * every block boundary k and mid-block, for two block sizes and odd
 * prefill chunks — so its samples are the same bytes; the base can go
 * first; bad bases are refused; every block returns to free. And sc_run's
 * own prefix cache over few-shot prompts: the same samples as without.
 *
 * Cheap by construction: a tiny synthesized model over the shipped
 * model's 809-token vocabulary (the LM head is most of a tiny model's
 * cost), prompts of ~60 tokens.
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
static int32_t *pa, *pb;   /* two prompts sharing a long prefix */
static size_t na, nb, common;

static int setup(void **state)
{
	(void)state;
	if (tu_model(path, sizeof(path), "qwen2", "tiny", GGML_TYPE_Q8_0,
		     tu_data("models/arith.gguf"), 16) ||
	    model_load(path, &m) || tok_load(m->gguf, &t) ||
	    prompt_build(t, "Solve it. Show the steps, then the answer.",
			 "Tom has 12 apples and eats 5. How many are left?",
			 &pa, &na) ||
	    prompt_build(t, "Solve it. Show the steps, then the answer.",
			 "Tom has 12 pears and buys 30 more. How many now?",
			 &pb, &nb)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	while (common < na && common < nb && pa[common] == pb[common])
		common++;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(pa);
	free(pb);
	tok_free(&t);
	model_free(&m);
	unlink(path);
	return 0;
}

/* Rows and logits of two roots are the same bytes. */
static void assert_same_root(sc_engine *e, uint32_t x, uint32_t y,
			     const char *what)
{
	sc_root_desc dx, dy;
	void *bx, *by;
	size_t lx, ly;

	assert_int_equal(sc_root_get(e, x, &dx), 0);
	assert_int_equal(sc_root_get(e, y, &dy), 0);
	assert_int_equal(dx.n_tokens, dy.n_tokens);
	assert_int_equal(sc_root_export(e, x, &bx, &lx), 0);
	assert_int_equal(sc_root_export(e, y, &by, &ly), 0);
	assert_int_equal(lx, ly);
	if (memcmp(bx, by, lx))
		fail_msg("%s: K/V rows differ", what);
	if (memcmp(dx.logits, dy.logits, (size_t)m->cfg.vocab * sizeof(float)))
		fail_msg("%s: logits differ", what);
	free(bx);
	free(by);
}

static int count_cb(void *ctx, const sc_sample *s)
{
	char **texts = ctx;

	texts[s->index] = strndup(s->text, s->len);
	return 0;
}

/* Samples 0..3 of a root, texts into out[4]. */
static void decode4(sc_engine *e, uint32_t root, char **out)
{
	static const int idx[] = {0, 1, 2, 3};
	sc_params p = {.sp = {0.9f, 0, 0.95f, 0.0f}, .seed = 77, .n = 4,
		       .max_new = 12, .mode = SC_BATCHED};
	sc_root_desc d;
	sc_root_ref rr;
	sc_decode_stats st;

	assert_int_equal(sc_root_get(e, root, &d), 0);
	rr = (sc_root_ref){d.pool_name, d.n_tokens, d.n_blocks, d.blocks,
			   d.logits};
	assert_int_equal(sc_batch_decode_job(e, &rr, idx, 4, &p, count_cb, NULL, out,
				   &st), 0);
}

static void one_block_size(int B)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *e;
	uint32_t base, fresh, from;
	char *want[4] = {0}, *got[4] = {0};
	size_t ks[64];
	int nk = 0;

	ep.block_tokens = B;
	ep.pool_blocks = 256;
	ep.n_threads = 1;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	/* the cached root: prompt A; the new prompt B shares `common` */
	assert_true(common >= (size_t)2 * B && common < nb);
	assert_int_equal(sc_root_prefill(e, pa, na, &base), 0);
	assert_int_equal(sc_root_prefill(e, pb, nb, &fresh), 0);
	decode4(e, fresh, want);
	/* every block boundary inside the shared part, and mid-block */
	for (size_t k = (size_t)B; k <= common && nk < 60; k += (size_t)B)
		ks[nk++] = k;
	ks[nk++] = (size_t)B + 3;
	ks[nk++] = common; /* wherever it ends */
	ks[nk++] = 1;
	for (int i = 0; i < nk; i++) {
		char what[64];
		int chunk = 1 + i % 7; /* odd chunkings too */

		snprintf(what, sizeof(what), "B %d, from %zu of %zu, chunk %d",
			 B, ks[i], nb, chunk);
		assert_int_equal(sc_root_prefill_from(e, base, (uint32_t)ks[i],
						      pb, nb, chunk, NULL, NULL,
						      &from), 0);
		assert_same_root(e, fresh, from, what);
		if (i == 1 || ks[i] % (size_t)B) {
			decode4(e, from, got);
			for (int s = 0; s < 4; s++) {
				if (strcmp(want[s], got[s]))
					fail_msg("%s: sample %d differs", what,
						 s);
				free(got[s]);
			}
		}
		assert_int_equal(sc_root_release(e, from), 0);
	}
	/* the base may go first: the shared blocks live on in the child */
	assert_int_equal(sc_root_prefill_from(e, base, (uint32_t)(2 * B), pb,
					      nb, 64, NULL, NULL, &from), 0);
	assert_int_equal(sc_root_release(e, base), 0);
	assert_same_root(e, fresh, from, "base released first");
	/* a child is a base in turn (its tokens are kept) */
	assert_int_equal(sc_root_prefill_from(e, from, (uint32_t)nb - 1, pb,
					      nb, 64, NULL, NULL, &base), 0);
	assert_same_root(e, fresh, base, "grandchild");
	assert_int_equal(sc_root_release(e, from), 0);
	assert_int_equal(sc_root_release(e, base), 0);
	assert_int_equal(sc_root_release(e, fresh), 0);
	for (int s = 0; s < 4; s++)
		free(want[s]);
	assert_int_equal(sc_root_count(e), 0);
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	assert_int_equal(sc_engine_kv_free(e), 256);
	sc_engine_free(&e);
}

static void test_bit_identity_every_boundary(void **state)
{
	(void)state;
	one_block_size(16);
	one_block_size(tu_quick() ? 5 : 4);
}

static void test_bad_bases(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *e;
	sc_root_desc d;
	uint32_t base, imp, r;
	void *bytes;
	size_t len;

	(void)state;
	ep.pool_blocks = 64;
	ep.n_threads = 1;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	assert_int_equal(sc_root_prefill(e, pa, na, &base), 0);
	/* tokens that differ from the base's */
	assert_int_equal(sc_root_prefill_from(e, base, (uint32_t)common + 1,
					      pb, nb, 64, NULL, NULL, &r),
			 QERR_ARG);
	/* the whole prompt (nothing left to prefill), or none of it */
	assert_int_equal(sc_root_prefill_from(e, base, (uint32_t)na, pa, na,
					      64, NULL, NULL, &r), QERR_RANGE);
	assert_int_equal(sc_root_prefill_from(e, base, 0, pb, nb, 64, NULL,
					      NULL, &r), QERR_RANGE);
	assert_int_equal(sc_root_prefill_from(e, base + 99, 16, pb, nb, 64,
					      NULL, NULL, &r), QERR_MISSING);
	/* an imported root's tokens are unknown: never a base */
	assert_int_equal(sc_root_get(e, base, &d), 0);
	assert_int_equal(sc_root_export(e, base, &bytes, &len), 0);
	assert_int_equal(sc_root_import(e, (uint32_t)na, bytes, len, d.logits,
					&imp), 0);
	free(bytes);
	assert_int_equal(sc_root_prefill_from(e, imp, 16, pb, nb, 64, NULL,
					      NULL, &r), QERR_ARG);
	assert_int_equal(sc_root_count(e), 2);
	assert_int_equal(sc_root_release(e, imp), 0);
	assert_int_equal(sc_root_release(e, base), 0);
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	sc_engine_free(&e);
}

/* A copy to another host that holds a root sharing the first k tokens:
 * only rows k.. travel (sc_root_export_from), the importer forks its own
 * root's first k (sc_root_import_from): the same rows and logits. */
static void test_delta_copy(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *a, *b;
	sc_root_desc d;
	uint32_t ra, rb, ca, cb, cb_full;
	void *bytes, *full;
	size_t len, flen;
	uint32_t k = (uint32_t)(common / 16 * 16);

	(void)state;
	ep.pool_blocks = 64;
	ep.n_threads = 1;
	assert_int_equal(sc_engine_new(m, t, &ep, &a), 0);
	assert_int_equal(sc_engine_new(m, t, &ep, &b), 0);
	assert_true(k >= 16);
	assert_int_equal(sc_root_prefill(a, pa, na, &ra), 0);
	assert_int_equal(sc_root_prefill(a, pb, nb, &rb), 0);
	/* host b holds a copy of prompt A */
	assert_int_equal(sc_root_get(a, ra, &d), 0);
	assert_int_equal(sc_root_export(a, ra, &bytes, &len), 0);
	assert_int_equal(sc_root_import(b, (uint32_t)na, bytes, len, d.logits,
					&ca), 0);
	free(bytes);
	/* prompt B's root goes over as a delta from it */
	assert_int_equal(sc_root_get(a, rb, &d), 0);
	assert_int_equal(sc_root_export_from(a, rb, k, &bytes, &len), 0);
	assert_int_equal(sc_root_export(a, rb, &full, &flen), 0);
	assert_true(len < flen);
	assert_int_equal(sc_root_import_from(b, ca, k, (uint32_t)nb, bytes, len,
					     d.logits, &cb), 0);
	assert_int_equal(sc_root_import(b, (uint32_t)nb, full, flen, d.logits,
					&cb_full), 0);
	assert_same_root(b, cb_full, cb, "delta copy");
	/* bad deltas are refused */
	assert_int_equal(sc_root_import_from(b, ca + 99, k, (uint32_t)nb, bytes,
					     len, d.logits, &cb_full),
			 QERR_MISSING);
	assert_int_equal(sc_root_import_from(b, ca, k, (uint32_t)nb, bytes,
					     len - 1, d.logits, &cb_full),
			 QERR_FORMAT);
	assert_int_equal(sc_root_export_from(a, rb, (uint32_t)nb, &full, &flen),
			 QERR_RANGE);
	free(bytes);
	free(full);
	assert_int_equal(sc_root_release(b, ca), 0); /* the delta lives on */
	assert_int_equal(sc_root_get(b, cb, &d), 0);
	assert_int_equal(d.n_tokens, nb);
	for (uint32_t id = 1; id < 16; id++)
		sc_root_release(b, id);
	qerr_clear();
	assert_int_equal(sc_root_count(b), 0);
	assert_int_equal(sc_engine_kv_in_use(b), 0);
	assert_int_equal(sc_root_release(a, ra), 0);
	assert_int_equal(sc_root_release(a, rb), 0);
	assert_int_equal(sc_engine_kv_in_use(a), 0);
	sc_engine_free(&b);
	sc_engine_free(&a);
}

/* A copy in chunks (the cluster's cross-host transfer): rows of one block
 * at a time (sc_root_export_rows), each imported on top of the partial
 * root of the chunks before it, which is then released; the last brings
 * the logits. The same rows and logits as a copy in one piece, and only
 * the root's own blocks in use at the end. */
static void test_chunked_copy(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *a, *b;
	sc_root_desc d;
	uint32_t ra, part = 0, whole, at = 0;
	float *zeros = calloc((size_t)m->cfg.vocab, sizeof(float));
	void *bytes;
	size_t len;

	(void)state;
	ep.pool_blocks = 64;
	ep.n_threads = 1;
	assert_non_null(zeros);
	assert_int_equal(sc_engine_new(m, t, &ep, &a), 0);
	assert_int_equal(sc_engine_new(m, t, &ep, &b), 0);
	assert_true(nb > 16); /* two chunks at least */
	assert_int_equal(sc_root_prefill(a, pb, nb, &ra), 0);
	assert_int_equal(sc_root_get(a, ra, &d), 0);
	while (at < nb) {
		uint32_t to = at + 16 < nb ? at + 16 : (uint32_t)nb, next;

		assert_int_equal(sc_root_export_rows(a, ra, at, to, &bytes,
						     &len), 0);
		assert_int_equal(len, (size_t)(to - at) * sc_engine_token_kv_bytes(a));
		assert_int_equal(sc_root_import_from(b, part, at, to, bytes,
						     len, to < nb ? zeros
								  : d.logits,
						     &next), 0);
		free(bytes);
		if (at)
			assert_int_equal(sc_root_release(b, part), 0);
		part = next;
		at = to;
		assert_int_equal(sc_root_count(b), 1);
		assert_int_equal(sc_engine_kv_in_use(b), (at + 15) / 16);
	}
	assert_int_equal(sc_root_export(a, ra, &bytes, &len), 0);
	assert_int_equal(sc_root_import(b, (uint32_t)nb, bytes, len, d.logits,
					&whole), 0);
	free(bytes);
	assert_same_root(b, whole, part, "copy in chunks");
	/* rows out of the root are refused */
	assert_int_equal(sc_root_export_rows(a, ra, 16, 16, &bytes, &len),
			 QERR_RANGE);
	assert_int_equal(sc_root_export_rows(a, ra, 0, (uint32_t)nb + 1,
					     &bytes, &len), QERR_RANGE);
	qerr_clear();
	assert_int_equal(sc_root_release(b, whole), 0);
	assert_int_equal(sc_root_release(b, part), 0);
	assert_int_equal(sc_engine_kv_in_use(b), 0);
	assert_int_equal(sc_root_release(a, ra), 0);
	sc_engine_free(&b);
	sc_engine_free(&a);
	free(zeros);
}

static void same_run(const sc_result *a, const sc_result *b, const char *what)
{
	assert_int_equal(a->n, b->n);
	for (int i = 0; i < a->n; i++)
		if (a->samples[i].len != b->samples[i].len ||
		    memcmp(a->samples[i].text, b->samples[i].text,
			   a->samples[i].len) ||
		    a->samples[i].n_tokens != b->samples[i].n_tokens)
			fail_msg("%s: sample %d differs", what, i);
}

/* sc_run's prefix cache over few-shot prompts: the same samples as an
 * engine without it, the shared exemplars forked (n_reused), LRU bounded
 * to its size, never in reset mode; cleared, the pool is all free. */
static void test_run_cache(void **state)
{
	static const prompt_shot shots[] = {
		{"Ann has 3 boxes of 12 pens. How many pens?",
		 "3 * 12 = 36. \\boxed{36}"},
		{"A bus has 40 seats and 13 are empty. How many people?",
		 "40 - 13 = 27. \\boxed{27}"},
		{"Bo reads 15 pages a day for 6 days. How many pages?",
		 "15 * 6 = 90. \\boxed{90}"},
	};
	static const char *const qs[] = {
		"Cy has 4 bags of 9 marbles. How many marbles?",
		"Di walks 5 km a day for 7 days. How far?",
		"Cy has 4 bags of 9 marbles. How many marbles?",
		"Ed buys 6 packs of 8 cards. How many cards?",
		NULL, /* no shots, another system prompt: no overlap */
		"Di walks 5 km a day for 7 days. How far?",
	};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *plain, *cached;
	int seen_reuse = 0;

	(void)state;
	ep.n_threads = 1;
	assert_int_equal(sc_engine_new(m, t, &ep, &plain), 0);
	ep.prefix_cache = 3;
	assert_int_equal(sc_engine_new(m, t, &ep, &cached), 0);
	for (int i = 0; i < 6; i++) {
		sc_params p = {.sp = {0.9f, 0, 0.95f, 0.0f}, .seed = 5, .n = 4,
			       .max_new = 10,
			       .mode = i == 3 ? SC_PAGED : SC_BATCHED};
		sc_result a, b;
		int32_t *ids;
		size_t n;
		char what[32];

		if (qs[i])
			assert_int_equal(prompt_build_shots(
				t, prompt_family(t), -1, "Solve.", shots, 3,
				qs[i], &ids, &n), 0);
		else
			assert_int_equal(prompt_build(t, "Be brief.", "2 + 2?",
						      &ids, &n), 0);
		snprintf(what, sizeof(what), "prompt %d", i);
		assert_int_equal(sc_run(plain, ids, n, &p, &a), 0);
		assert_int_equal(sc_run(cached, ids, n, &p, &b), 0);
		same_run(&a, &b, what);
		assert_int_equal(a.stats.n_reused, 0);
		assert_int_equal(b.stats.n_reused % 16, 0);
		if (i == 0 || i == 4)
			assert_int_equal(b.stats.n_reused, 0);
		else
			assert_true(b.stats.n_reused >= 64);
		if (i == 2) /* identical: all but the last block's tokens */
			assert_int_equal(b.stats.n_reused, (n - 1) / 16 * 16);
		seen_reuse += b.stats.n_reused > 0;
		assert_true(sc_cache_count(cached) <= 3);
		/* reset mode prefills every sample: never the cache */
		if (i == 5) {
			sc_result c;

			p.mode = SC_RESET;
			assert_int_equal(sc_run(cached, ids, n, &p, &c), 0);
			same_run(&a, &c, "reset");
			assert_int_equal(c.stats.n_reused, 0);
			sc_run_result_fini(&c);
		}
		sc_run_result_fini(&a);
		sc_run_result_fini(&b);
		free(ids);
	}
	assert_int_equal(seen_reuse, 4);
	assert_int_equal(sc_cache_count(cached), 3);
	assert_true(sc_engine_kv_in_use(cached) > 0);
	sc_cache_clear(cached);
	assert_int_equal(sc_cache_count(cached), 0);
	assert_int_equal(sc_engine_kv_in_use(cached), 0);
	assert_int_equal(sc_engine_kv_in_use(plain), 0);
	sc_engine_free(&cached);
	sc_engine_free(&plain);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bit_identity_every_boundary),
		cmocka_unit_test(test_bad_bases),
		cmocka_unit_test(test_run_cache),
		cmocka_unit_test(test_delta_copy),
		cmocka_unit_test(test_chunked_copy),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
