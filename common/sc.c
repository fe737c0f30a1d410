#include "sc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fwd.h"
#include "qerr.h"
#include "tpool.h"

struct sc_engine {
	const model *m;
	const tok *t;
	sc_engine_params p;
	tpool *tp;
	fwd *f;
	samp *sampler;
	kv_pool *pool;       /* grown on demand */
	float *masked;       /* (vocab) logits with end-of-generation masked */
	uint32_t peak_in_use;/* blocks, this run */
};

/* One sample being decoded. */
typedef struct {
	int index;
	kv_seq seq;
	samp_rng rng;
	const float *logits; /* row to sample next */
	int32_t next;        /* token to feed */
	int done;
	sc_sample *out;
	size_t text_cap;
} fork_state;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

const char *sc_mode_name(int mode)
{
	switch (mode) {
	case SC_RESET: return "reset";
	case SC_PAGED: return "paged";
	case SC_BATCHED: return "batched";
	default: return "unknown";
	}
}

int sc_mode_parse(const char *s)
{
	for (int m = SC_RESET; m <= SC_BATCHED; m++)
		if (!strcmp(s, sc_mode_name(m)))
			return m;
	return -1;
}

const char *sc_finish_name(int finish)
{
	return finish == SC_FINISH_STOP ? "stop" : "length";
}

int sc_engine_new(const model *m, const tok *t, const sc_engine_params *p,
		  sc_engine **out)
{
	sc_engine *e;
	int rc, rows;

	*out = NULL;
	if (p->n_threads < 1 || p->block_tokens < 1 || p->max_batch < 1 ||
	    p->prefill_chunk < 1 || kv_elem_size(p->kv_dtype) == 0)
		return qerr_fail(QERR_RANGE, "engine: bad parameters");
	if ((int)tok_vocab_size(t) != m->cfg.vocab)
		return qerr_fail(QERR_ARG, "engine: tokenizer has %u tokens, "
				 "the model %d", tok_vocab_size(t),
				 m->cfg.vocab);
	e = calloc(1, sizeof(*e));
	if (!e)
		return qerr_fail(QERR_NOMEM, "engine: out of memory");
	e->m = m;
	e->t = t;
	e->p = *p;
	rows = p->max_batch > p->prefill_chunk ? p->max_batch
					       : p->prefill_chunk;
	e->masked = malloc((size_t)m->cfg.vocab * sizeof(float));
	if (!e->masked) {
		rc = qerr_fail(QERR_NOMEM, "engine: out of memory");
		goto fail;
	}
	if ((rc = tpool_new(p->n_threads, &e->tp)) ||
	    (rc = fwd_new(m, rows, e->tp, &e->f)) ||
	    (rc = samp_new(m->cfg.vocab, &e->sampler)))
		goto fail;
	*out = e;
	return 0;
fail:
	sc_engine_free(&e);
	return rc;
}

void sc_engine_free(sc_engine **ep)
{
	sc_engine *e;

	if (!ep || !*ep)
		return;
	e = *ep;
	kv_pool_free(&e->pool);
	samp_free(&e->sampler);
	fwd_free(&e->f);
	tpool_free(&e->tp);
	free(e->masked);
	free(e);
	*ep = NULL;
}

int sc_params_check(const sc_params *p)
{
	int rc = samp_params_check(&p->sp);

	if (rc)
		return rc;
	if (p->n < 1 || p->n > 65536)
		return qerr_fail(QERR_RANGE, "n = %d must be in 1..65536", p->n);
	if (p->max_new < 1 || p->max_new > 1 << 20)
		return qerr_fail(QERR_RANGE, "max_new_tokens = %d must be in "
				 "1..1048576", p->max_new);
	if (p->mode < SC_RESET || p->mode > SC_BATCHED)
		return qerr_fail(QERR_RANGE, "unknown mode %d", p->mode);
	return 0;
}

/* Blocks for n tokens. */
static uint32_t blocks_for(const sc_engine *e, uint64_t n)
{
	return (uint32_t)((n + e->p.block_tokens - 1) / e->p.block_tokens);
}

/* A pool large enough for one prefix plus `forks` private tails. */
static int ensure_pool(sc_engine *e, size_t n_prompt, int forks, int max_new)
{
	uint64_t need = blocks_for(e, n_prompt + 1) +
			(uint64_t)forks * (blocks_for(e, (uint64_t)max_new) + 1);
	kv_params kp = {e->m->cfg.n_layers, e->m->cfg.kv_dim,
			e->p.block_tokens, 0, e->p.kv_dtype};

	if (need > 0x7fffffffu)
		return qerr_fail(QERR_FULL, "KV pool of %llu blocks is too large",
				 (unsigned long long)need);
	if (e->pool && kv_pool_params(e->pool)->n_blocks >= need)
		return 0;
	kv_pool_free(&e->pool);
	kp.n_blocks = (uint32_t)need;
	return kv_pool_new(&kp, &e->pool);
}

static void track_peak(sc_engine *e)
{
	kv_stats st;

	kv_pool_stats(e->pool, &st);
	if (st.in_use > e->peak_in_use)
		e->peak_in_use = st.in_use;
}

static int append_text(fork_state *f, const char *piece, size_t n)
{
	sc_sample *s = f->out;

	if (s->len + n + 1 > f->text_cap) {
		size_t nc = (s->len + n + 1) * 2;
		char *nt = realloc(s->text, nc);

		if (!nt)
			return qerr_fail(QERR_NOMEM, "out of memory for text");
		s->text = nt;
		f->text_cap = nc;
	}
	memcpy(s->text + s->len, piece, n);
	s->len += n;
	s->text[s->len] = '\0';
	return 0;
}

/* Draws the next token of f and records it; marks f done on a stop. */
static int step_sample(sc_engine *e, const sc_params *p, fork_state *f)
{
	const float *lg = f->logits;
	const char *piece;
	size_t plen;
	int tokid, rc;

	if (p->ignore_eos) {
		memcpy(e->masked, lg, (size_t)e->m->cfg.vocab * sizeof(float));
		for (int v = 0; v < e->m->cfg.vocab; v++)
			if (tok_is_eog(e->t, v))
				e->masked[v] = -INFINITY;
		lg = e->masked;
	}
	if ((rc = samp_sample(e->sampler, &p->sp, lg, &f->rng, &tokid)))
		return rc;
	if (tok_is_eog(e->t, tokid)) {
		f->out->finish = SC_FINISH_STOP;
		f->done = 1;
		return 0;
	}
	piece = tok_piece(e->t, tokid, 0, &plen);
	if ((rc = append_text(f, piece ? piece : "", plen)))
		return rc;
	f->out->n_tokens++;
	if (f->out->n_tokens >= p->max_new) {
		f->out->finish = SC_FINISH_LENGTH;
		f->done = 1;
	}
	f->next = tokid;
	return 0;
}

/*
 * Decodes the samples `idx` (n of them) from a prefilled root, advancing
 * all of them together (batched) — the paged and reset modes call it with
 * one sample at a time. root_logits: the root's last-row logits.
 */
static int decode_group(sc_engine *e, const sc_params *p, const kv_seq *root,
			const float *root_logits, const int *idx, int n,
			sc_result *res)
{
	const int V = e->m->cfg.vocab, B = e->p.max_batch;
	fork_state *fs = calloc((size_t)n, sizeof(*fs));
	fork_state **act = calloc((size_t)n, sizeof(*act));
	kv_seq **seqs = calloc((size_t)B, sizeof(*seqs));
	int32_t *toks = calloc((size_t)B, sizeof(*toks));
	int *ones = calloc((size_t)B, sizeof(*ones));
	float *lg = malloc((size_t)n * V * sizeof(float));
	int rc = 0, n_act = 0;

	if (!fs || !act || !seqs || !toks || !ones || !lg) {
		rc = qerr_fail(QERR_NOMEM, "out of memory for %d samples", n);
		goto out;
	}
	for (int i = 0; i < B; i++)
		ones[i] = 1;
	for (int i = 0; i < n; i++) {
		kv_seq_init(&fs[i].seq);
		fs[i].index = idx[i];
		fs[i].out = &res->samples[idx[i]];
		fs[i].out->index = idx[i];
		fs[i].logits = root_logits;
		samp_rng_seed(&fs[i].rng, p->seed, (uint64_t)idx[i]);
	}
	for (int i = 0; i < n && !rc; i++)
		rc = kv_seq_fork(e->pool, root, &fs[i].seq);
	for (int i = 0; i < n; i++)
		act[i] = &fs[i];
	n_act = n;
	while (!rc && n_act) {
		int live = 0;

		/* sample every active fork, in sample order, then compact */
		for (int i = 0; i < n_act && !rc; i++) {
			rc = step_sample(e, p, act[i]);
			res->stats.gen_tokens++;
			if (!act[i]->done)
				act[live++] = act[i];
		}
		n_act = live;
		/* one forward per chunk of up to max_batch live forks */
		for (int c0 = 0; c0 < n_act && !rc; c0 += B) {
			int m = n_act - c0 < B ? n_act - c0 : B;

			for (int j = 0; j < m; j++) {
				seqs[j] = &act[c0 + j]->seq;
				toks[j] = act[c0 + j]->next;
				act[c0 + j]->logits = lg + (size_t)(c0 + j) * V;
			}
			rc = fwd_batch(e->f, e->pool, seqs, ones, m, toks,
				       lg + (size_t)c0 * V, 0);
			track_peak(e);
		}
	}
	for (int i = 0; i < n; i++)
		kv_seq_free(e->pool, &fs[i].seq);
out:
	free(fs);
	free(act);
	free(seqs);
	free(toks);
	free(ones);
	free(lg);
	return rc;
}

static int prefill(sc_engine *e, const int32_t *prompt, size_t n_prompt,
		   kv_seq *root, float *logits, sc_result *res)
{
	double t0 = now_ms();
	int rc = fwd_prefill(e->f, e->pool, root, prompt, (int)n_prompt, logits);

	track_peak(e);
	res->stats.prefill_ms += now_ms() - t0;
	res->stats.n_prefills++;
	return rc;
}

static int run_samples(sc_engine *e, const int32_t *prompt, size_t n_prompt,
		       const sc_params *p, sc_result *res, float *root_logits)
{
	kv_seq root;
	int rc = 0;
	double t0;

	kv_seq_init(&root);
	if (p->mode == SC_RESET) {
		for (int s = 0; s < p->n && !rc; s++) {
			rc = prefill(e, prompt, n_prompt, &root, root_logits, res);
			t0 = now_ms();
			if (!rc)
				rc = decode_group(e, p, &root, root_logits, &s, 1,
						  res);
			res->stats.decode_ms += now_ms() - t0;
			kv_seq_free(e->pool, &root);
		}
		return rc;
	}
	rc = prefill(e, prompt, n_prompt, &root, root_logits, res);
	t0 = now_ms();
	if (!rc && p->mode == SC_PAGED) {
		for (int s = 0; s < p->n && !rc; s++)
			rc = decode_group(e, p, &root, root_logits, &s, 1, res);
	} else if (!rc) {
		int *idx = malloc((size_t)p->n * sizeof(int));

		if (!idx)
			rc = qerr_fail(QERR_NOMEM, "out of memory");
		for (int s = 0; idx && s < p->n; s++)
			idx[s] = s;
		if (idx)
			rc = decode_group(e, p, &root, root_logits, idx, p->n,
					  res);
		free(idx);
	}
	res->stats.decode_ms += now_ms() - t0;
	kv_seq_free(e->pool, &root);
	return rc;
}

int sc_run(sc_engine *e, const int32_t *prompt, size_t n_prompt,
	   const sc_params *p, sc_result *out)
{
	const char **answers = NULL;
	float *root_logits = NULL;
	kv_stats st0, st1;
	int rc;

	memset(out, 0, sizeof(*out));
	out->vote.winner = VOTE_NONE;
	if ((rc = sc_params_check(p)))
		return rc;
	if (n_prompt < 1)
		return qerr_fail(QERR_ARG, "empty prompt");
	if (n_prompt + (size_t)p->max_new > (size_t)e->m->cfg.ctx_len)
		return qerr_fail(QERR_TOOLONG, "prompt of %zu tokens + %d new "
				 "tokens exceeds the context of %d tokens",
				 n_prompt, p->max_new, e->m->cfg.ctx_len);
	if ((rc = ensure_pool(e, n_prompt, p->mode == SC_BATCHED ? p->n : 1,
			      p->max_new)))
		return rc;
	out->samples = calloc((size_t)p->n, sizeof(sc_sample));
	root_logits = malloc((size_t)e->m->cfg.vocab * sizeof(float));
	answers = calloc((size_t)p->n, sizeof(*answers));
	if (!out->samples || !root_logits || !answers) {
		rc = qerr_fail(QERR_NOMEM, "out of memory");
		goto out;
	}
	out->n = p->n;
	out->stats.n_prompt = (int)n_prompt;
	e->peak_in_use = 0;
	kv_pool_stats(e->pool, &st0);
	rc = run_samples(e, prompt, n_prompt, p, out, root_logits);
	kv_pool_stats(e->pool, &st1);
	if (rc)
		goto out;
	for (int s = 0; s < p->n; s++) {
		sc_sample *smp = &out->samples[s];

		if (!smp->text && (smp->text = calloc(1, 1)) == NULL) {
			rc = qerr_fail(QERR_NOMEM, "out of memory");
			goto out;
		}
		smp->has_answer = vote_extract(smp->text, smp->len,
					       smp->answer, sizeof(smp->answer));
		answers[s] = smp->has_answer ? smp->answer : NULL;
	}
	if ((rc = vote_tally(answers, (size_t)p->n, &out->vote)))
		goto out;
	{
		const kv_params *kp = kv_pool_params(e->pool);
		uint64_t per_token = 2ull * kp->n_layers * kp->kv_dim *
				     kv_elem_size(kp->dtype);
		uint64_t per_block = per_token * kp->block_tokens;

		out->stats.kv_peak_bytes = (uint64_t)e->peak_in_use * per_block;
		out->stats.kv_unshared_bytes =
			(uint64_t)p->n * blocks_for(e, n_prompt + p->max_new) *
			per_block;
	}
	out->stats.cow_blocks = st1.cow - st0.cow;
out:
	free(answers);
	free(root_logits);
	if (rc)
		sc_result_fini(out);
	return rc;
}

void sc_result_fini(sc_result *r)
{
	if (!r)
		return;
	for (int i = 0; r->samples && i < r->n; i++)
		free(r->samples[i].text);
	free(r->samples);
	vote_result_fini(&r->vote);
	memset(r, 0, sizeof(*r));
	r->vote.winner = VOTE_NONE;
}

uint32_t sc_engine_kv_in_use(const sc_engine *e)
{
	kv_stats st;

	if (!e->pool)
		return 0;
	kv_pool_stats(e->pool, &st);
	return st.in_use;
}
