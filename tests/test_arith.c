/*
 * The shipped arithmetic model (models/arith.gguf, see models/README.md):
 * its tokenizer round-trips every held-out question with digits as single
 * tokens and matches the training tokenizer's ids on pinned prompts, and a
 * fixed 20-problem subset at N = 8 scores exactly the count recorded when
 * the model was trained — an exact regression pin (results are
 * deterministic), not a threshold.
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
#include "testutil.h"
#include "text/tok.h"

/* Recorded with the model (models/README.md, "Regression pin"):
 * `quorum eval-set --model models/arith.gguf --file train/data/test.jsonl
 *  --limit 20 -n 8` (seed 0, temperature 0.7, top-k 40, top-p 0.95). */
#define PIN_PROBLEMS 20
#define PIN_N 8
#define PIN_CORRECT 16

static model *m;
static tok *t;
static json_t *set; /* array of {question, answer} */

static int setup(void **state)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;

	(void)state;
	if (model_load(tu_data("models/arith.gguf"), &m) ||
	    tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	if (!(f = fopen(tu_data("train/data/test.jsonl"), "r")))
		return -1;
	set = json_array();
	while (getline(&line, &cap, f) > 0) {
		json_t *o = json_loads(line, 0, NULL);

		if (!o)
			return -1;
		json_array_append_new(set, o);
	}
	free(line);
	fclose(f);
	return json_array_size(set) >= 500 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	json_decref(set);
	tok_free(&t);
	model_free(&m);
	return 0;
}

static const char *q_of(size_t i)
{
	return json_string_value(json_object_get(json_array_get(set, i),
						 "question"));
}

static void test_roundtrip_every_question(void **state)
{
	(void)state;
	for (size_t i = 0; i < json_array_size(set); i++) {
		const char *q = q_of(i);
		int32_t *ids;
		size_t n, len;
		char *back;

		assert_int_equal(tok_encode(t, q, strlen(q), 0, 0, &ids, &n),
				 0);
		for (size_t k = 0; k < n; k++) {
			size_t pl;
			const char *p = tok_piece(t, ids[k], 0, &pl);

			/* a digit is always a token of its own */
			for (size_t j = 0; j < pl; j++)
				if (p[j] >= '0' && p[j] <= '9')
					assert_int_equal(pl, 1);
		}
		assert_int_equal(tok_decode(t, ids, n, 0, &back, &len), 0);
		assert_int_equal(len, strlen(q));
		assert_memory_equal(back, q, len);
		free(back);
		free(ids);
	}
}

/* The ids training used (train/bpe.py) for the first held-out prompt: the
 * C tokenizer must give the model the same sequence it learned from. */
static void test_prompt_ids_as_trained(void **state)
{
	static const int32_t want[] = {
	807, 115, 306, 412, 109, 10, 805, 285, 266, 289, 97, 270, 804, 799,
	279, 565, 570, 46, 32, 82, 101, 376, 302, 794, 800, 794, 44, 357, 350,
	313, 283, 403, 633, 275, 523, 283, 317, 376, 116, 317, 320, 101, 801,
	32, 92, 98, 111, 120, 330, 123, 65, 78, 83, 87, 69, 82, 125, 46, 808,
	10, 807, 733, 264, 10, 637, 272, 283, 635, 287, 32, 51, 493, 290, 32,
	52, 56, 54, 493, 63, 808, 10, 807, 547, 803, 10
	};
	int32_t *ids;
	size_t n;

	(void)state;
	assert_int_equal(prompt_build(t, NULL, q_of(0), &ids, &n), 0);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	assert_memory_equal(ids, want, sizeof(want));
	free(ids);
}

static void test_pinned_accuracy(void **state)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params p = {.sp = {0.7f, 40, 0.95f, 0.0f}, .seed = 0, .n = PIN_N,
		       .max_new = 256, .mode = SC_BATCHED};
	sc_engine *e;
	int correct = 0;

	(void)state;
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	for (size_t i = 0; i < PIN_PROBLEMS; i++) {
		json_t *o = json_array_get(set, i);
		const char *want = json_string_value(json_object_get(o,
								     "answer"));
		int32_t *ids;
		size_t n;
		sc_result r = {0};

		assert_int_equal(prompt_build(t, NULL, q_of(i), &ids, &n), 0);
		assert_int_equal(sc_run(e, ids, n, &p, &r), 0);
		if (r.vote.winner != VOTE_NONE &&
		    !strcmp(r.vote.entries[0].answer, want))
			correct++;
		sc_run_result_fini(&r);
		free(ids);
	}
	sc_engine_free(&e);
	assert_int_equal(correct, PIN_CORRECT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_every_question),
		cmocka_unit_test(test_prompt_ids_as_trained),
		cmocka_unit_test(test_pinned_accuracy),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
