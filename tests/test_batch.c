/*
 * The merged decode loop (sc_batch, sc_run_many): continuous batching
 * across jobs. Every sample's bytes are identical whether its job ran
 * alone or merged with other jobs (different prompts, N, max tokens,
 * sampling params), in any arrival order, with any prefill chunking and
 * fork cap; a cancelled job leaves without touching anyone's bytes; a long
 * prefill never stalls running samples (counted in rounds); fork admission
 * is round-robin across jobs; a fork never fails for lack of KV blocks;
 * and the pool is back to free afterwards.
 *
 * Cheap on purpose: a tiny model with the shipped 809-token vocabulary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "infer/model.h"
#include "text/prompt.h"
#include "qerr.h"
#include "sc/batch.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "sc/run.h"
#include "sc/fork.h"
#include "sc/stop.h"
#include "testutil.h"
#include "text/tok.h"

#define NQ 4
#define MAXS 8

static char path[512];
static model *m;
static tok *t;
static int32_t *prompts[NQ + 1];
static size_t n_prompts[NQ + 1];
static const char *questions[NQ + 1] = {
	"What is 17 * 23? Answer with a number.",
	"Name a prime number between 10 and 20.",
	"2 + 2 = ?",
	"Give the capital of France, then explain in a few words why it is "
	"the capital.",
	/* the long one (prefilled while others decode) */
	"Please read this long paragraph carefully. It talks about many "
	"numbers: one, two, three, four, five, six, seven, eight, nine, ten, "
	"eleven, twelve, thirteen, fourteen, fifteen, sixteen, seventeen. "
	"Add the first three and tell me the sum, then multiply it by the "
	"last one you read, and answer with just the number at the end.",
};

static int setup(void **state)
{
	(void)state;
	if (tu_model(path, sizeof(path), "qwen2", "tiny", GGML_TYPE_Q8_0,
		     tu_data("models/arith.gguf"), 29) ||
	    model_load(path, &m) || tok_load(m->gguf, &t)) {
		fprintf(stderr, "setup: %s\n", qerr_detail());
		return -1;
	}
	for (int q = 0; q <= NQ; q++)
		if (prompt_build(t, NULL, questions[q], &prompts[q],
				 &n_prompts[q])) {
			fprintf(stderr, "setup: %s\n", qerr_detail());
			return -1;
		}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int q = 0; q <= NQ; q++)
		free(prompts[q]);
	tok_free(&t);
	model_free(&m);
	unlink(path);
	return 0;
}

/* Four jobs as unlike as possible: N, max tokens, sampling, seed. */
static sc_params job_params(int q)
{
	static const sc_params ps[NQ] = {
		{.sp = {0.9f, 0, 0.95f, 0.0f}, .seed = 1, .n = 5, .max_new = 14},
		{.sp = {0.7f, 20, 1.0f, 0.0f}, .seed = 77, .n = 3, .max_new = 9},
		{.sp = {0.0f, 0, 1.0f, 0.0f}, .seed = 5, .n = 1, .max_new = 17},
		{.sp = {1.2f, 0, 0.8f, 0.0f}, .seed = 9, .n = 7, .max_new = 11,
		 .ignore_eos = 1},
	};
	sc_params p = ps[q];

	p.mode = SC_BATCHED;
	return p;
}

typedef struct {
	char *text[MAXS];
	size_t len[MAXS];
	int n_tokens[MAXS], finish[MAXS], seen;
	int done, rc, ready;
	uint32_t root;
	uint64_t text_rounds;   /* on_text calls */
	sc_job_stats st;
} jrec;

static int rec_sample(void *ctx, const sc_sample *s)
{
	jrec *r = ctx;

	assert_true(s->index >= 0 && s->index < MAXS);
	assert_null(r->text[s->index]);
	r->text[s->index] = malloc(s->len + 1);
	memcpy(r->text[s->index], s->text, s->len + 1);
	r->len[s->index] = s->len;
	r->n_tokens[s->index] = s->n_tokens;
	r->finish[s->index] = s->finish;
	r->seen++;
	return 0;
}

static void rec_text(void *ctx, const sc_sample *s, int n)
{
	(void)s;
	(void)n;
	((jrec *)ctx)->text_rounds++;
}

static int rec_ready(void *ctx, uint32_t job, uint32_t root)
{
	jrec *r = ctx;

	(void)job;
	r->ready = 1;
	r->root = root;
	return 0;
}

static void rec_done(void *ctx, uint32_t job, int rc, const sc_job_stats *st)
{
	jrec *r = ctx;

	(void)job;
	assert_int_equal(r->done, 0); /* exactly once */
	r->done = 1;
	r->rc = rc;
	r->st = *st;
}

static void rec_fini(jrec *r)
{
	for (int i = 0; i < MAXS; i++)
		free(r->text[i]);
	memset(r, 0, sizeof(*r));
}

static sc_job_cbs cbs(jrec *r)
{
	return (sc_job_cbs){rec_sample, rec_text, rec_ready, rec_done, r};
}

static sc_engine *engine(uint32_t blocks)
{
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_engine *e;

	ep.pool_blocks = blocks;
	ep.block_tokens = 4; /* many partly filled tails */
	ep.max_batch = 3;    /* a round's forks span several forwards */
	assert_int_equal(sc_engine_new(m, t, &ep, &e), 0);
	return e;
}

static sc_root_ref ref_of(sc_engine *e, uint32_t root)
{
	sc_root_desc d;

	assert_int_equal(sc_root_get(e, root, &d), 0);
	return (sc_root_ref){d.pool_name, d.n_tokens, d.n_blocks, d.blocks,
			     d.logits};
}

static const int idx_all[MAXS] = {0, 1, 2, 3, 4, 5, 6, 7};

static void assert_same(const jrec *a, const jrec *b, int n, const char *w)
{
	for (int i = 0; i < n; i++) {
		if (!a->text[i] || !b->text[i])
			fail_msg("%s: sample %d missing", w, i);
		if (a->len[i] != b->len[i] ||
		    memcmp(a->text[i], b->text[i], a->len[i]) ||
		    a->n_tokens[i] != b->n_tokens[i] ||
		    a->finish[i] != b->finish[i])
			fail_msg("%s: sample %d differs:\n[%s]\n[%s]", w, i,
				 a->text[i], b->text[i]);
	}
}

/* Each job alone: its own engine, one prefill, sc_batch_decode_job. */
static void alone(jrec ref[NQ])
{
	sc_engine *e = engine(256);

	for (int q = 0; q < NQ; q++) {
		sc_params p = job_params(q);
		sc_decode_stats st;
		sc_root_ref rr;
		uint32_t root;

		memset(&ref[q], 0, sizeof(ref[q]));
		assert_int_equal(sc_root_prefill(e, prompts[q], n_prompts[q],
						 &root), 0);
		rr = ref_of(e, root);
		assert_int_equal(sc_batch_decode_job(e, &rr, idx_all, p.n, &p,
					   rec_sample, NULL, &ref[q], &st), 0);
		assert_int_equal(ref[q].seen, p.n);
		assert_int_equal(sc_root_release(e, root), 0);
	}
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	sc_engine_free(&e);
}

/* Jobs arrive at staggered rounds, prefilled in chunks inside the loop,
 * under a fork cap below their total; one is cancelled mid-way. Every
 * byte equals the job alone; the pool ends free. */
static void merged_run(const jrec ref[NQ], int max_live, int chunk,
		       const int order[NQ], int cancel_q)
{
	sc_batch_params bp = {max_live, chunk, NULL, NULL};
	sc_engine *e = engine(256);
	sc_batch *b;
	jrec pf[NQ] = {0}, dj[NQ] = {0};
	uint32_t djob[NQ];
	int added = 0, decoding[NQ] = {0}, cancelled = 0;
	uint64_t guard = 0;
	char what[96];

	assert_int_equal(sc_batch_new(e, &bp, &b), 0);
	while (guard++ < 10000) {
		/* a new job's prompt every third round, in the given order */
		if (added < NQ && sc_batch_rounds(b) % 3 == 0) {
			sc_job_cbs c = cbs(&pf[order[added]]);

			assert_int_equal(sc_batch_prefill(b,
				prompts[order[added]],
				n_prompts[order[added]], &c, NULL), 0);
			added++;
		}
		/* a prefilled root starts its decode at the next round */
		for (int q = 0; q < NQ; q++)
			if (pf[q].ready && !decoding[q]) {
				sc_params p = job_params(q);
				sc_root_ref rr = ref_of(e, pf[q].root);
				sc_job_cbs c = cbs(&dj[q]);

				assert_int_equal(sc_batch_decode(b, &rr,
					idx_all, p.n, &p, &c, &djob[q]), 0);
				decoding[q] = 1;
			}
		/* cancel one job once it has a sample in and more to come */
		if (cancel_q >= 0 && !cancelled && decoding[cancel_q] &&
		    !dj[cancel_q].done && dj[cancel_q].seen >= 1) {
			assert_int_equal(sc_batch_cancel(b, djob[cancel_q],
							 QERR_CANCELLED), 0);
			assert_true(dj[cancel_q].done);
			assert_int_equal(dj[cancel_q].rc, QERR_CANCELLED);
			cancelled = 1;
		}
		if (added == NQ && !sc_batch_jobs(b) &&
		    decoding[0] + decoding[1] + decoding[2] + decoding[3] == NQ)
			break;
		assert_true(sc_batch_live(b) <= max_live);
		assert_int_equal(sc_batch_round(b), 0);
	}
	for (int q = 0; q < NQ; q++) {
		sc_params p = job_params(q);

		snprintf(what, sizeof(what), "job %d (cap %d, chunk %d)", q,
			 max_live, chunk);
		assert_true(pf[q].done && pf[q].rc == 0);
		assert_true(dj[q].done);
		if (q == cancel_q) {
			/* what it sent before the cancel is its bytes */
			for (int i = 0; i < p.n; i++)
				if (dj[q].text[i])
					assert_string_equal(dj[q].text[i],
							    ref[q].text[i]);
			assert_true(dj[q].seen < p.n);
		} else {
			assert_int_equal(dj[q].rc, 0);
			assert_int_equal(dj[q].seen, p.n);
			assert_same(&ref[q], &dj[q], p.n, what);
		}
		assert_int_equal(sc_root_release(e, pf[q].root), 0);
	}
	/* the long prompts went in in several chunks */
	assert_true(pf[3].st.prefill_chunks >=
		    (n_prompts[3] + (size_t)chunk - 1) / (size_t)chunk);
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	sc_batch_free(&b);
	sc_engine_free(&e);
	for (int q = 0; q < NQ; q++) {
		rec_fini(&pf[q]);
		rec_fini(&dj[q]);
	}
}

static void test_merged_identical(void **state)
{
	static const int fwd[NQ] = {0, 1, 2, 3}, rev[NQ] = {3, 2, 1, 0},
			 mix[NQ] = {2, 0, 3, 1};
	jrec ref[NQ];

	(void)state;
	alone(ref);
	merged_run(ref, 64, 256, fwd, -1); /* everything at once */
	merged_run(ref, 4, 5, rev, 0);     /* tight cap, small chunks */
	if (!tu_quick())
		merged_run(ref, 7, 11, mix, 3);
	for (int q = 0; q < NQ; q++)
		rec_fini(&ref[q]);
}

static void count_forward(void *ctx)
{
	(*(int *)ctx)++;
}

/* A long prompt arriving while others decode: every round of its prefill
 * also advanced the running samples (tokens counted per round); the
 * on_forward hook runs after each of the round's two forwards. */
static void test_prefill_interleaved(void **state)
{
	int forwards = 0;
	sc_batch_params bp = {16, 8, count_forward, &forwards};
	sc_engine *e = engine(256);
	sc_params p = job_params(3); /* ignore_eos: runs to max_new */
	sc_batch *b;
	jrec a = {0}, pf = {0}, lp = {0};
	sc_job_cbs c = cbs(&pf);
	uint64_t r0, text0;
	uint32_t root;

	(void)state;
	p.max_new = 40;
	assert_int_equal(sc_root_prefill(e, prompts[0], n_prompts[0], &root),
			 0);
	{
		sc_root_ref rr = ref_of(e, root);
		sc_job_cbs ca = cbs(&a);

		assert_int_equal(sc_batch_new(e, &bp, &b), 0);
		assert_int_equal(sc_batch_decode(b, &rr, idx_all, 3, &p, &ca,
						 NULL), 0);
	}
	assert_int_equal(sc_batch_round(b), 0);
	assert_int_equal(sc_batch_round(b), 0);
	assert_int_equal(sc_batch_live(b), 3);
	r0 = sc_batch_rounds(b);
	text0 = a.text_rounds;
	c = cbs(&lp);
	assert_true(n_prompts[NQ] > 8 * 8);
	assert_int_equal(sc_batch_prefill(b, prompts[NQ], n_prompts[NQ], &c,
					  NULL), 0);
	while (!lp.done)
		assert_int_equal(sc_batch_round(b), 0);
	assert_int_equal(lp.rc, 0);
	assert_true(lp.ready);
	/* chunks of at most 8 tokens, one per round */
	assert_int_equal(lp.st.prefill_chunks, (n_prompts[NQ] + 7) / 8);
	assert_int_equal(sc_batch_rounds(b) - r0, lp.st.prefill_chunks);
	/* a forward per round for the 3 forks (max_batch 3), one more for
	 * each prefill chunk */
	assert_int_equal(forwards, (int)(sc_batch_rounds(b) +
					 lp.st.prefill_chunks));
	/* ... and in each of those rounds the three samples drew a token */
	assert_int_equal(a.text_rounds - text0, lp.st.prefill_chunks);
	assert_int_equal(sc_batch_live(b), 3);
	while (!a.done)
		assert_int_equal(sc_batch_round(b), 0);
	assert_int_equal(a.rc, 0);
	assert_int_equal(a.seen, 3);
	assert_int_equal(a.st.gen_tokens, 3 * 40);
	sc_batch_free(&b);
	/* the long root is the prefill of sc_root_prefill, bit for bit */
	{
		uint32_t r2;
		sc_root_desc d1, d2;

		assert_int_equal(sc_root_prefill(e, prompts[NQ], n_prompts[NQ],
						 &r2), 0);
		assert_int_equal(sc_root_get(e, lp.root, &d1), 0);
		assert_int_equal(sc_root_get(e, r2, &d2), 0);
		assert_memory_equal(d1.logits, d2.logits,
				    (size_t)m->cfg.vocab * sizeof(float));
		assert_int_equal(sc_root_release(e, r2), 0);
	}
	/* from a cached root's prefix (mid-block: block_tokens 4): only the
	 * rest is prefilled, the root is the same bits */
	{
		jrec fr = {0};
		sc_job_cbs cf = cbs(&fr);
		sc_root_desc d1, d2;
		uint32_t base;

		assert_int_equal(sc_root_prefill(e, prompts[NQ], 41, &base), 0);
		assert_int_equal(sc_batch_new(e, &bp, &b), 0);
		assert_int_equal(sc_batch_prefill_from(b, base, 41, prompts[NQ],
						       n_prompts[NQ], &cf, NULL),
				 0);
		assert_int_equal(sc_root_release(e, base), 0); /* held */
		while (!fr.done)
			assert_int_equal(sc_batch_round(b), 0);
		assert_int_equal(fr.rc, 0);
		assert_int_equal(fr.st.prefill_chunks,
				 (n_prompts[NQ] - 41 + 7) / 8);
		assert_int_equal(sc_root_get(e, fr.root, &d1), 0);
		assert_int_equal(sc_root_get(e, lp.root, &d2), 0);
		assert_int_equal(d1.n_tokens, d2.n_tokens);
		assert_memory_equal(d1.logits, d2.logits,
				    (size_t)m->cfg.vocab * sizeof(float));
		/* a prompt that does not share the prefix is refused */
		{
			int32_t *other = malloc(n_prompts[NQ] * sizeof(*other));

			memcpy(other, prompts[NQ],
			       n_prompts[NQ] * sizeof(*other));
			other[30] = other[30] ? 0 : 1;
			assert_int_equal(sc_batch_prefill_from(b, fr.root, 41,
							       other,
							       n_prompts[NQ],
							       &cf, NULL),
					 QERR_ARG);
			free(other);
		}
		sc_batch_free(&b);
		assert_int_equal(sc_root_release(e, fr.root), 0);
		rec_fini(&fr);
	}
	assert_int_equal(sc_root_release(e, lp.root), 0);
	assert_int_equal(sc_root_release(e, root), 0);
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	sc_engine_free(&e);
	rec_fini(&a);
	rec_fini(&pf);
	rec_fini(&lp);
}

/* Fairness: a job of N=8 that came first does not starve one of N=2
 * behind it: under a cap of 4 both have forks in the first round. Blocks:
 * with a pool that holds only two forks' worst case besides the root,
 * forks wait for room instead of failing, and all bytes are the same; a
 * job that can never fit ends with QERR_FULL. */
static void test_fairness_and_blocks(void **state)
{
	sc_batch_params bp = {4, 0, NULL, NULL};
	sc_params big = job_params(0), small = job_params(1);
	jrec x = {0}, y = {0}, rx = {0}, ry = {0};
	sc_job_cbs cx = cbs(&x), cy = cbs(&y);
	sc_engine *e = engine(128);
	sc_batch *b;
	sc_root_ref rr;
	uint32_t root;

	(void)state;
	big.n = 8;
	small.n = 2;
	assert_int_equal(sc_root_prefill(e, prompts[0], n_prompts[0], &root),
			 0);
	rr = ref_of(e, root);
	assert_int_equal(sc_batch_new(e, &bp, &b), 0);
	assert_int_equal(sc_batch_decode(b, &rr, idx_all, big.n, &big, &cx,
					 NULL), 0);
	assert_int_equal(sc_batch_decode(b, &rr, idx_all, small.n, &small,
					 &cy, NULL), 0);
	assert_int_equal(sc_batch_round(b), 0);
	assert_int_equal(sc_batch_live(b) + x.seen + y.seen, 4);
	assert_true(y.text_rounds == 1 || y.seen > 0); /* not starved */
	assert_true(x.text_rounds == 1 || x.seen > 0);
	while (sc_batch_jobs(b))
		assert_int_equal(sc_batch_round(b), 0);
	sc_batch_free(&b);
	assert_int_equal(x.rc, 0);
	assert_int_equal(y.rc, 0);
	/* alone: the same bytes */
	assert_int_equal(sc_batch_decode_job(e, &rr, idx_all, big.n, &big, rec_sample,
				   NULL, &rx, &(sc_decode_stats){0}), 0);
	assert_int_equal(sc_batch_decode_job(e, &rr, idx_all, small.n, &small,
				   rec_sample, NULL, &ry, &(sc_decode_stats){0}),
			 0);
	assert_same(&rx, &x, big.n, "fair: big");
	assert_same(&ry, &y, small.n, "fair: small");
	assert_int_equal(sc_root_release(e, root), 0);
	sc_engine_free(&e);

	/* a pool of root + two forks' worst case (block_tokens 4) */
	{
		uint32_t rb = (uint32_t)(n_prompts[0] + 3) / 4;
		uint32_t tail = (uint32_t)(n_prompts[0] % 4 + big.max_new + 3) /
				4;
		jrec z = {0}, w = {0};
		sc_job_cbs cz = cbs(&z), cw = cbs(&w);
		sc_params huge = big;
		int max_live_seen = 0;

		e = engine(rb + 2 * tail + 1);
		assert_int_equal(sc_root_prefill(e, prompts[0], n_prompts[0],
						 &root), 0);
		rr = ref_of(e, root);
		bp.max_live = 8;
		assert_int_equal(sc_batch_new(e, &bp, &b), 0);
		assert_int_equal(sc_batch_decode(b, &rr, idx_all, big.n, &big,
						 &cz, NULL), 0);
		while (sc_batch_jobs(b)) {
			assert_int_equal(sc_batch_round(b), 0);
			if (sc_batch_live(b) > max_live_seen)
				max_live_seen = sc_batch_live(b);
		}
		assert_int_equal(z.rc, 0);
		assert_true(max_live_seen <= 2);
		assert_same(&rx, &z, big.n, "blocks: waited for room");
		/* never fits: fails alone, nothing else disturbed */
		huge.max_new = 4 * (int)(rb + 2 * tail + 1);
		assert_int_equal(sc_batch_decode(b, &rr, idx_all, 1, &huge, &cw,
						 NULL), 0);
		assert_int_equal(sc_batch_round(b), 0);
		assert_true(w.done);
		assert_int_equal(w.rc, QERR_FULL);
		sc_batch_free(&b);
		assert_int_equal(sc_root_release(e, root), 0);
		assert_int_equal(sc_engine_kv_in_use(e), 0);
		sc_engine_free(&e);
		rec_fini(&z);
		rec_fini(&w);
	}
	rec_fini(&x);
	rec_fini(&y);
	rec_fini(&rx);
	rec_fini(&ry);
}

/* sc_run_many: each question's result is sc_run's, bit for bit (samples,
 * vote, early stopping), whatever the fork cap and prefill chunk. */
typedef struct {
	sc_result r[NQ];
	int got[NQ], order;
} many_rec;

static int take(void *ctx, int q, int rc, const char *err, sc_result *r)
{
	many_rec *mr = ctx;

	if (rc)
		fail_msg("question %d: %s", q, err);
	assert_int_equal(q, mr->order++); /* in question order */
	mr->r[q] = *r;
	mr->got[q] = 1;
	return 0;
}

static int count_distinct(const sc_result *r)
{
	int d = 0;

	for (int i = 1; i < r->n; i++)
		d += r->samples[i].len != r->samples[0].len ||
		     memcmp(r->samples[i].text, r->samples[0].text,
			    r->samples[0].len);
	return d;
}

/* On the shipped arithmetic model (real answers, so early stopping and
 * the confidence filter really act): each question's result from
 * sc_run_many equals sc_run's alone, whatever the fork cap and chunk. */
static void test_run_many(void **state)
{
	static const char *aq[NQ] = {
		"What is the total of 3 bricks and 486 bricks?",
		"Ana has 7 stamps and gives 6 to her cousin. How many stamps "
		"are left?",
		"Raj has 899 pencils. He gets 303 more, gives away 151, and "
		"then finds 9. How many pencils does he have now?",
		"What is 12 plus 30?",
	};
	static const char *rules[NQ] = {"window:2", "none", "beta", "exact"};
	sc_engine_params ep = SC_ENGINE_DEFAULTS;
	sc_params ps[NQ];
	sc_question qs[NQ];
	sc_result ref[NQ];
	int32_t *ids[NQ];
	size_t n_ids[NQ];
	model *am;
	tok *at;
	sc_engine *e;
	static const int caps[] = {64, 3};
	int fired = 0;

	(void)state;
	assert_int_equal(model_load(tu_data("models/arith.gguf"), &am), 0);
	assert_int_equal(tok_load(am->gguf, &at), 0);
	ep.block_tokens = 4;
	assert_int_equal(sc_engine_new(am, at, &ep, &e), 0);
	for (int q = 0; q < NQ; q++) {
		ps[q] = (sc_params){.sp = {1.0f, 40, 0.95f, 0.0f}, .seed = 7 + q,
				    .n = 6 + q, .max_new = 48,
				    .mode = SC_BATCHED};
		assert_int_equal(stop_parse(rules[q], &ps[q].stop), 0);
		if (q == 1) {
			ps[q].sp.temperature = 2.0f;
			ps[q].vote = SC_VOTE_CONFIDENCE;
			ps[q].filter_warmup = 3;
			ps[q].filter_pct = 50;
		}
		assert_int_equal(prompt_build(at, NULL, aq[q], &ids[q],
					      &n_ids[q]), 0);
		qs[q] = (sc_question){ids[q], n_ids[q], &ps[q]};
		assert_int_equal(sc_run(e, ids[q], n_ids[q], &ps[q], &ref[q]),
				 0);
		printf("  question %d: %d of %d samples reported (%s), %d "
		       "filtered, %d differ from sample 0\n", q, ref[q].n,
		       ps[q].n, rules[q], ref[q].stop.filtered,
		       count_distinct(&ref[q]));
		fired += ref[q].stop.fired;
	}
	assert_true(fired >= 1); /* a rule really stopped early */
	for (size_t c = 0; c < 2; c++) {
		many_rec mr = {0};

		assert_int_equal(sc_run_many(e, qs, NQ, caps[c], c ? 3 : 0,
					     take, &mr), 0);
		for (int q = 0; q < NQ; q++) {
			assert_true(mr.got[q]);
			assert_int_equal(mr.r[q].n, ref[q].n);
			for (int i = 0; i < ref[q].n; i++) {
				const sc_sample *x = &ref[q].samples[i],
						*y = &mr.r[q].samples[i];

				assert_int_equal(x->len, y->len);
				if (x->len)
					assert_memory_equal(x->text, y->text,
							    x->len);
				assert_int_equal(x->finish, y->finish);
				assert_true(x->weight == y->weight);
			}
			assert_int_equal(mr.r[q].vote.winner,
					 ref[q].vote.winner);
			assert_int_equal(mr.r[q].stop.fired, ref[q].stop.fired);
			assert_int_equal(mr.r[q].stop.reported,
					 ref[q].stop.reported);
			assert_int_equal(mr.r[q].stop.filtered,
					 ref[q].stop.filtered);
			sc_run_result_fini(&mr.r[q]);
		}
	}
	for (int q = 0; q < NQ; q++) {
		sc_run_result_fini(&ref[q]);
		free(ids[q]);
	}
	assert_int_equal(sc_engine_kv_in_use(e), 0);
	sc_engine_free(&e);
	tok_free(&at);
	model_free(&am);
}

/* Parameters a batch cannot honour are refused, naming them: a prefill
 * chunk larger than the engine's forward (it was capped silently). */
static void test_bad_params(void **state)
{
	sc_engine *e = engine(64);
	sc_batch_params bp = {0, 16, NULL, NULL};
	sc_batch *b = NULL;

	(void)state;
	assert_int_equal(sc_batch_new(e, &bp, &b), QERR_RANGE);
	assert_non_null(strstr(qerr_detail(), "max_live"));
	assert_null(b);
	bp.max_live = 8;
	bp.prefill_tokens = 257; /* the engine's prefill_chunk is 256 */
	assert_int_equal(sc_batch_new(e, &bp, &b), QERR_RANGE);
	assert_non_null(strstr(qerr_detail(), "prefill_tokens 257"));
	assert_null(b);
	bp.prefill_tokens = 256;
	assert_int_equal(sc_batch_new(e, &bp, &b), 0);
	sc_batch_free(&b);
	sc_engine_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merged_identical),
		cmocka_unit_test(test_prefill_interleaved),
		cmocka_unit_test(test_fairness_and_blocks),
		cmocka_unit_test(test_run_many),
		cmocka_unit_test(test_bad_params),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
