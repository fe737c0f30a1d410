/*
 * Forward pass: agreement with a naive double-precision reference, and
 * batch invariance (bit-identical rows across chunking, batching, threads
 * and instruction sets) — the property the whole system stands on.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "infer/fwd.h"
#include "kernels/kern.h"
#include "infer/kv.h"
#include "infer/model.h"
#include "format/quant.h"
#include "isautil.h"
#include "testutil.h"

/* ---- the reference: obviously correct, slow ------------------------- */

static double ref_f16(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);

	return (h & 0x8000) ? -v : v;
}

/* Weight W[n][k] of a GGUF matrix as double. */
static double ref_w(const model_mat *w, int n, int k)
{
	size_t i = (size_t)n * w->k + k;

	switch (w->type) {
	case GGML_TYPE_F32: return ((const float *)w->data)[i];
	case GGML_TYPE_F16: return ref_f16(((const uint16_t *)w->data)[i]);
	case GGML_TYPE_BF16: {
		uint32_t b = (uint32_t)((const uint16_t *)w->data)[i] << 16;
		float f;
		memcpy(&f, &b, 4);
		return f;
	}
	case GGML_TYPE_Q8_0: {
		const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)w->data +
					   i / 32;
		return ref_f16(b->d) * b->qs[i % 32];
	}
	}
	/* other quantized types: the row dequantized by quant.c (checked
	 * element by element against ggml's definitions in test_quant) */
	float *row = malloc((size_t)w->k * sizeof(float));
	double v;
	quant_dequant_row(w->type, (const char *)w->data +
			  ggml_row_bytes(w->type, (uint64_t)w->k) * (size_t)n,
			  row, w->k);
	v = row[k];
	free(row);
	return v;
}

static void ref_matvec(const model_mat *w, const float *bias,
		       const double *x, double *y)
{
	float *row = malloc((size_t)w->k * sizeof(float));

	for (int n = 0; n < w->n; n++) {
		double s = 0;
		kern_row_f32(w->data, w->type, w->k, n, row);
		for (int k = 0; k < w->k; k++)
			s += (double)row[k] * x[k];
		y[n] = s + (bias ? bias[n] : 0.0);
	}
	free(row);
}

static void ref_rmsnorm(const double *x, const float *w, int n, double eps,
			double *o)
{
	double ss = 0;

	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	ss = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		o[i] = x[i] * ss * w[i];
}

/* The architecture's differences, decided here from the architecture name
 * and the raw hyper-parameters rather than from the loader's flags. */
static int is_arch(const model *m, const char *a)
{
	return !strcmp(model_arch_name(m->cfg.arch), a);
}

static int ref_swa_layer(const model *m, int l)
{
	const model_config *c = &m->cfg;

	return (is_arch(m, "gemma3") || is_arch(m, "gpt-oss")) &&
	       c->swa_window > 0 && (l + 1) % c->swa_pattern != 0;
}

/* YaRN (the YaRN paper's NTK-by-parts, as ggml): pair i keeps its
 * original angle below dimension lo, takes the interpolated one (times
 * scale) above hi, a linear blend between; cos and sin are scaled by
 * 1 + 0.1 ln(factor), the attention factor (1 here) times that. */
static void ref_rope(const model *m, int l, double *v, int pos)
{
	const model_config *c = &m->cfg;
	int hd = c->head_dim, half = hd / 2, local = ref_swa_layer(m, l);
	double base = local ? c->rope_base_swa : c->rope_base;
	/* gemma3's local layers are unscaled; gpt-oss scales both */
	double scale = local && is_arch(m, "gemma3") ? 1.0 : c->rope_scale;
	double lo = 0, hi = 0, ms = 1.0;

	if (c->rope_yarn) {
		double lf = hd * log(c->yarn_orig_ctx / (32 * 2 * M_PI)) /
			    (2 * log(base));
		double hf = hd * log(c->yarn_orig_ctx / (1 * 2 * M_PI)) /
			    (2 * log(base));

		lo = fmax(0, floor(lf));
		hi = fmin(hd - 1, ceil(hf));
		ms = 1 + 0.1 * log(1 / scale);
	}
	for (int i = 0; i < half; i++) {
		double th = pos * pow(base, -2.0 * i / hd);

		if (m->rope_freqs)
			th /= m->rope_freqs[i];
		if (c->rope_yarn) {
			double r = (i - lo) / fmax(0.001, hi - lo);
			double keep = 1 - fmin(1, fmax(0, r));

			th = th * scale * (1 - keep) + th * keep;
		} else if (!local) {
			th *= scale;
		}
		int a = c->rope_mode == MODEL_ROPE_NEOX ? i : 2 * i;
		int b = c->rope_mode == MODEL_ROPE_NEOX ? i + half : 2 * i + 1;
		double x0 = v[a], x1 = v[b];

		v[a] = (x0 * cos(th) - x1 * sin(th)) * ms;
		v[b] = (x0 * sin(th) + x1 * cos(th)) * ms;
	}
}

/* Mixture of experts in double: softmax of the router, the k largest
 * (ties to the lower id), weights renormalised, the experts' SwiGLU FFNs
 * summed. gpt-oss: router and experts with biases, the k largest logits
 * weighted by their own softmax, the clamped SwiGLU. */
static void ref_moe(const model *m, const model_layer *L, const double *x,
		    double *out)
{
	const model_config *c = &m->cfg;
	int E = c->n_expert, k = c->n_expert_used, F = c->expert_ffn;
	int oss = is_arch(m, "gpt-oss");
	double *p = calloc(E, sizeof(double)), mx = -INFINITY, sum = 0;
	double *g = calloc(F, sizeof(double)), *u = calloc(F, sizeof(double));
	double *o = calloc(c->dim, sizeof(double)), wsum = 0;
	int *sel = calloc(k, sizeof(int));

	ref_matvec(&L->router, L->router_b, x, p);
	for (int e = 0; e < E; e++)
		mx = fmax(mx, p[e]);
	/* gpt-oss ranks the logits themselves: the same order */
	for (int e = 0; e < E; e++)
		sum += (p[e] = exp(p[e] - mx));
	for (int j = 0; j < k; j++) {
		int best = -1;

		for (int e = 0; e < E; e++) {
			int taken = 0;

			for (int i = 0; i < j; i++)
				taken |= sel[i] == e;
			if (!taken && (best < 0 || p[e] > p[best]))
				best = e;
		}
		sel[j] = best;
		wsum += p[best] / sum;
	}
	memset(out, 0, (size_t)c->dim * sizeof(double));
	for (int j = 0; j < k; j++) {
		int e = sel[j];
		model_mat gm = model_expert(&L->w_gate, e);
		model_mat um = model_expert(&L->w_up, e);
		model_mat dm = model_expert(&L->w_down, e);
		/* softmax of the chosen k: p[e] / sum over the chosen */
		double w = p[e] / sum / wsum;

		ref_matvec(&gm, oss ? L->b_gate + (size_t)e * F : NULL, x, g);
		ref_matvec(&um, oss ? L->b_up + (size_t)e * F : NULL, x, u);
		for (int i = 0; i < F; i++) {
			if (oss) {
				double a = fmin(g[i], 7.0);
				double b = fmax(-7.0, fmin(u[i], 7.0));

				g[i] = a / (1.0 + exp(-1.702 * a)) * (b + 1);
			} else {
				g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
			}
		}
		ref_matvec(&dm, oss ? L->b_down + (size_t)e * c->dim : NULL, g,
			   o);
		for (int i = 0; i < c->dim; i++)
			out[i] += w * o[i];
	}
	free(p); free(g); free(u); free(o); free(sel);
}

/* Logits (n, vocab) of every position of toks. */
static void ref_forward(const model *m, const int32_t *toks, int n,
			float *logits)
{
	const model_config *c = &m->cfg;
	int D = c->dim, hd = c->head_dim, kvd = c->kv_dim, F = c->ffn_dim;
	int QD = c->n_heads * hd, gemma = is_arch(m, "gemma3");
	int qkn = gemma || is_arch(m, "qwen3") || is_arch(m, "qwen3moe");
	int moe = is_arch(m, "qwen3moe") || is_arch(m, "gpt-oss");
	double *x = calloc((size_t)n * D, sizeof(double));
	double *K = calloc((size_t)c->n_layers * n * kvd, sizeof(double));
	double *V = calloc((size_t)c->n_layers * n * kvd, sizeof(double));
	double *xb = calloc(D, sizeof(double)), *q = calloc(QD, sizeof(double));
	double *att = calloc(QD, sizeof(double)), *o = calloc(D, sizeof(double));
	double *g = calloc(F, sizeof(double)), *u = calloc(F, sizeof(double));
	double *s = calloc(n, sizeof(double));
	double *lg = calloc(c->vocab, sizeof(double));

	for (int p = 0; p < n; p++)
		for (int i = 0; i < D; i++)
			x[(size_t)p * D + i] = ref_w(&m->tok_embd, toks[p], i) *
					       (gemma ? sqrt((double)D) : 1.0);
	/* position-major, exactly causal: position p sees 0..p */
	for (int p = 0; p < n; p++) {
		double *xp = x + (size_t)p * D;
		for (int l = 0; l < c->n_layers; l++) {
			const model_layer *L = &m->layers[l];
			double *Kl = K + (size_t)l * n * kvd;
			double *Vl = V + (size_t)l * n * kvd;

			ref_rmsnorm(xp, L->attn_norm, D, c->eps, xb);
			ref_matvec(&L->wq, L->bq, xb, q);
			ref_matvec(&L->wk, L->bk, xb, Kl + (size_t)p * kvd);
			ref_matvec(&L->wv, L->bv, xb, Vl + (size_t)p * kvd);
			/* first position a row sees: the window on local
			 * gemma3 and gpt-oss layers */
			int t_lo = ref_swa_layer(m, l) && p >= c->swa_window
					   ? p - c->swa_window + 1 : 0;

			for (int h = 0; qkn && h < c->n_heads; h++)
				ref_rmsnorm(q + h * hd, L->q_norm, hd, c->eps,
					    q + h * hd);
			for (int h = 0; qkn && h < c->n_kv_heads; h++)
				ref_rmsnorm(Kl + (size_t)p * kvd + h * hd,
					    L->k_norm, hd, c->eps,
					    Kl + (size_t)p * kvd + h * hd);
			for (int h = 0; h < c->n_heads; h++)
				ref_rope(m, l, q + h * hd, p);
			for (int h = 0; h < c->n_kv_heads; h++)
				ref_rope(m, l, Kl + (size_t)p * kvd + h * hd, p);
			for (int h = 0; h < c->n_heads; h++) {
				int kh = h / (c->n_heads / c->n_kv_heads);
				double mx = -INFINITY, sum = 0;

				for (int t = t_lo; t <= p; t++) {
					double d = 0;
					for (int i = 0; i < hd; i++)
						d += q[h * hd + i] *
						     Kl[(size_t)t * kvd + kh * hd + i];
					s[t] = d / sqrt(hd);
					mx = fmax(mx, s[t]);
				}
				/* gpt-oss: the head's sink joins the
				 * softmax, its share dropped */
				if (L->sinks)
					mx = fmax(mx, L->sinks[h]);
				for (int t = t_lo; t <= p; t++)
					sum += (s[t] = exp(s[t] - mx));
				if (L->sinks)
					sum += exp(L->sinks[h] - mx);
				for (int i = 0; i < hd; i++) {
					double a = 0;
					for (int t = t_lo; t <= p; t++)
						a += s[t] / sum *
						     Vl[(size_t)t * kvd + kh * hd + i];
					att[h * hd + i] = a;
				}
			}
			ref_matvec(&L->wo, L->bo, att, o);
			if (gemma)
				ref_rmsnorm(o, L->post_attn_norm, D, c->eps, o);
			for (int i = 0; i < D; i++)
				xp[i] += o[i];
			ref_rmsnorm(xp, L->ffn_norm, D, c->eps, xb);
			if (moe) {
				ref_moe(m, L, xb, o);
				for (int i = 0; i < D; i++)
					xp[i] += o[i];
				continue;
			}
			ref_matvec(&L->w_gate, NULL, xb, g);
			ref_matvec(&L->w_up, NULL, xb, u);
			for (int i = 0; i < F; i++)
				g[i] = (gemma ? 0.5 * g[i] * (1.0 + tanh(
						sqrt(2.0 / M_PI) * (g[i] +
						0.044715 * g[i] * g[i] * g[i])))
					      : g[i] / (1.0 + exp(-g[i]))) * u[i];
			ref_matvec(&L->w_down, NULL, g, o);
			if (gemma)
				ref_rmsnorm(o, L->post_ffn_norm, D, c->eps, o);
			for (int i = 0; i < D; i++)
				xp[i] += o[i];
		}
		ref_rmsnorm(xp, m->output_norm, D, c->eps, xb);
		ref_matvec(&m->output, NULL, xb, lg);
		for (int v = 0; v < c->vocab; v++)
			logits[(size_t)p * c->vocab + v] = (float)(
				c->logit_softcap > 0
					? c->logit_softcap *
						  tanh(lg[v] / c->logit_softcap)
					: lg[v]);
	}
	free(x); free(K); free(V); free(xb); free(q); free(att); free(o);
	free(g); free(u); free(s); free(lg);
}

/* ---- fixtures -------------------------------------------------------- */

typedef struct {
	const char *arch;
	uint32_t wtype;
	const char *shape;
} model_case;

static const model_case cases[] = {
	{"qwen2", GGML_TYPE_F32, "tiny"}, {"llama", GGML_TYPE_F32, "tiny"},
	{"qwen2", GGML_TYPE_F16, "tiny"}, {"llama", GGML_TYPE_BF16, "tiny"},
	{"qwen2", GGML_TYPE_Q8_0, "tiny"}, {"llama", GGML_TYPE_Q8_0, "tiny"},
	{"qwen3", GGML_TYPE_F32, "tiny-qwen3"},
	{"llama", GGML_TYPE_F32, "tiny-llama3"},
	{"gemma3", GGML_TYPE_F32, "tiny-gemma3"},
	{"qwen3", GGML_TYPE_Q8_0, "tiny-qwen3"},
	{"gemma3", GGML_TYPE_BF16, "tiny-gemma3"},
	{"qwen2", GGML_TYPE_Q4_0, "tiny"}, {"llama", GGML_TYPE_Q4_1, "tiny"},
	{"qwen2", GGML_TYPE_Q5_0, "tiny"}, {"llama", GGML_TYPE_Q5_1, "tiny"},
	{"qwen2", GGML_TYPE_IQ4_NL, "tiny"},
	/* K-quants need rows of 256 */
	{"llama", GGML_TYPE_Q2_K, "small"}, {"qwen2", GGML_TYPE_Q3_K, "small"},
	{"qwen2", GGML_TYPE_Q4_K, "small"}, {"llama", GGML_TYPE_Q5_K, "small"},
	{"qwen2", GGML_TYPE_Q6_K, "small"}, {"llama", GGML_TYPE_IQ4_XS, "small"},
	{"qwen3", GGML_TYPE_Q4_K, "tiny-qwen3"},
	/* mixtures of experts: 3-D expert tensors, an f32 router */
	{"qwen3moe", GGML_TYPE_F32, "tiny-qwen3moe"},
	{"qwen3moe", GGML_TYPE_Q8_0, "tiny-qwen3moe"},
	{"qwen3moe", GGML_TYPE_BF16, "tiny-qwen3moe"},
	{"qwen3moe", GGML_TYPE_Q4_K, "small-qwen3moe"},
	{"qwen3moe", GGML_TYPE_Q6_K, "small-qwen3moe"},
	/* gpt-oss: sinks, biases everywhere, YaRN, windows, its gating and
	 * clamped SwiGLU */
	{"gpt-oss", GGML_TYPE_F32, "tiny-gptoss"},
	{"gpt-oss", GGML_TYPE_F16, "tiny-gptoss"},
	{"gpt-oss", GGML_TYPE_Q8_0, "tiny-gptoss"},
	/* MXFP4: llama.cpp's MXFP4_MOE recipe (experts MXFP4, the rest
	 * Q8_0) with experts, every matrix MXFP4 without */
	{"qwen3moe", GGML_TYPE_MXFP4, "tiny-qwen3moe"},
	{"qwen2", GGML_TYPE_MXFP4, "tiny"},
	{"gpt-oss", GGML_TYPE_MXFP4, "tiny-gptoss"},
};
/* the first gpt-oss case */
#define GPTOSS_CASE 28
#define N_CASES (int)(sizeof(cases) / sizeof(cases[0]))

static model *models[N_CASES];
static char paths[N_CASES][512];

static int setup(void **state)
{
	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		/* a small vocabulary: the LM head of GPT-2's 50,257 tokens
		 * would be nearly all of the work (and of the double
		 * reference's), for no code path the 809 rows miss */
		if (tu_model(paths[i], sizeof(paths[i]), cases[i].arch,
			     cases[i].shape, cases[i].wtype,
			     tu_chat_tokenizer(), 7 + i) ||
		    model_load(paths[i], &models[i])) {
			fprintf(stderr, "setup: %s\n", qerr_detail());
			return -1;
		}
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		model_free(&models[i]);
		unlink(paths[i]);
	}
	return 0;
}

/* Token ids of the models' vocabulary (the shipped model's 809-token
 * BPE: the first and last ids and a spread between) */
static const int32_t prompt[] = {
	496, 11, 795, 0, 314, 716, 257, 332, 286, 262, 616, 13, 198,
	808, 7, 42, 635, 25, 48, 6, 33, 17, 2, 807, 100, 200, 3,
	300, 12, 9, 8, 5,
};
#define N_PROMPT (int)(sizeof(prompt) / sizeof(prompt[0]))

/* A q8_0 KV cache needs heads of whole 32-element blocks. */
static int kv_fits(const model *m, int dtype)
{
	return kv_row_bytes(dtype, m->cfg.head_dim) != 0 &&
	       kv_row_bytes(dtype, m->cfg.kv_dim) != 0;
}

/* Logits of every position through fwd with the given chunk size. */
static void run_fwd(const model *m, int chunk, int threads, int dtype,
		    int block, float *logits)
{
	kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, block, 256, dtype, 0, 0};
	tpool *tp = NULL;
	kv_pool *pool = NULL;
	fwd *f = NULL;
	kv_seq s;

	kv_seq_init(&s);
	assert_int_equal(tpool_new(threads, &tp), 0);
	assert_int_equal(kv_pool_new(&kp, &pool), 0);
	assert_int_equal(fwd_new(m, chunk, tp, &f), 0);
	for (int done = 0; done < N_PROMPT;) {
		int c = N_PROMPT - done < chunk ? N_PROMPT - done : chunk;
		kv_seq *sp = &s;

		assert_int_equal(fwd_batch(f, pool, &sp, &c, 1, prompt + done,
					   logits + (size_t)done * m->cfg.vocab,
					   1), 0);
		done += c;
	}
	kv_seq_free(pool, &s);
	assert_int_equal(kv_pool_free_blocks(pool), 256);
	fwd_free(&f);
	kv_pool_free(&pool);
	tpool_free(&tp);
}

static void test_reference(void **state)
{
	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		const model *m = models[i];
		size_t nv = (size_t)N_PROMPT * m->cfg.vocab;
		float *a = malloc(nv * sizeof(float));
		float *r = malloc(nv * sizeof(float));
		double maxd = 0, maxr = 0;
		int top_same = 1, n_far;

		int quant = quant_is_quant(cases[i].wtype);
		ref_forward(m, prompt, N_PROMPT, r);
		for (int act = KERN_ACT_F32; act >= KERN_ACT_INT; act--) {
		if (act == KERN_ACT_INT && !quant)
			continue;
		kern_set_activations(act);
		run_fwd(m, 64, 2, KV_F32, 16, a);
		kern_set_activations(KERN_ACT_INT);
		maxd = maxr = 0;
		top_same = 1;
		for (int p = 0; p < N_PROMPT; p++) {
			const float *rp = r + (size_t)p * m->cfg.vocab;

			for (int v = 0; v < m->cfg.vocab; v++)
				maxr = fmax(maxr, fabs((double)rp[v]));
		}
		n_far = 0;
		for (int p = 0; p < N_PROMPT; p++) {
			const float *ap = a + (size_t)p * m->cfg.vocab;
			const float *rp = r + (size_t)p * m->cfg.vocab;
			int ta = 0, tr = 0;
			double pd = 0;

			for (int v = 0; v < m->cfg.vocab; v++) {
				pd = fmax(pd, fabs((double)ap[v] - rp[v]));
				ta = ap[v] > ap[ta] ? v : ta;
				tr = rp[v] > rp[tr] ? v : tr;
			}
			top_same &= ta == tr;
			n_far += pd / maxr > 5e-2;
			maxd = fmax(maxd, pd);
		}
		printf("  %-6s %-11s %-6s %s activations: max |logit - ref| = "
		       "%.3g, relative to max |ref| %.3g: %.3g\n", cases[i].arch,
		       cases[i].shape, ggml_type_name(cases[i].wtype),
		       act == KERN_ACT_F32 ? "f32" : "int", maxd, maxr,
		       maxd / maxr);
		assert_true(maxr > 0.5);  /* logits are not degenerate */
		/* f32 activations: only f32 rounding; integer activations:
		 * 8-bit activations, the worst of 32 x 50257 logits: a few 1e-2 */
		if (act == KERN_ACT_F32 || !m->cfg.n_expert) {
			assert_true(maxd / maxr <=
				    (act == KERN_ACT_F32 ? 1e-4 : 5e-2));
		} else {
			/* a mixture of experts amplifies the 8-bit error:
			 * the router (f32) sees a residual stream already off
			 * by ~1e-2, its softmax weights move by a few percent
			 * and near-equal experts swap ranks or drop out of
			 * the top k (seen: 3 of 64 (row, layer) expert sets
			 * change on small-qwen3moe Q4_K). Most positions
			 * stay within the dense bound; the f32 run above
			 * checks the MoE arithmetic itself to 1e-4. */
			printf("  %d of %d positions beyond 5e-2\n", n_far,
			       N_PROMPT);
			assert_true(maxd / maxr <= 0.25);
			assert_true(n_far <= N_PROMPT / 4);
		}
		if (act == KERN_ACT_F32)
			assert_true(top_same);
		}
		free(a);
		free(r);
	}
}

static void assert_same_bits(const float *a, const float *b, size_t n,
			     const char *what)
{
	if (memcmp(a, b, n * sizeof(float))) {
		for (size_t i = 0; i < n; i++)
			if (memcmp(&a[i], &b[i], sizeof(float))) {
				fail_msg("%s: differs at %zu: %.9g vs %.9g",
					 what, i, a[i], b[i]);
			}
	}
}

/* Chunking, threads and KV block size never change a row's bits. */
static void test_invariance_chunks_threads(void **state)
{
	static const struct { int chunk, threads, block; } v[] = {
		{1, 1, 1}, {5, 2, 16}, {32, 3, 16}, {7, 2, 4}, {64, 1, 16},
	};
	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		const model *m = models[i];
		size_t nv = (size_t)N_PROMPT * m->cfg.vocab;
		float *base = malloc(nv * sizeof(float));
		float *o = malloc(nv * sizeof(float));

		/* f32 KV, and the 8-bit KV cache where the heads allow */
		for (int dt = KV_F32; dt <= KV_Q8_0; dt += KV_Q8_0 - KV_F32) {
			if (!kv_fits(m, dt))
				continue;
			run_fwd(m, 64, 2, dt, 16, base);
			for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++) {
				char what[128];

				/* the quantized types share one code path:
				 * two variants each keep the test quick */
				if ((tu_quick() || dt == KV_Q8_0 ||
				     (quant_is_quant(cases[i].wtype) &&
				      cases[i].wtype != GGML_TYPE_Q8_0)) &&
				    j != 0 && j != 3)
					continue;
				run_fwd(m, v[j].chunk, v[j].threads, dt,
					v[j].block, o);
				snprintf(what, sizeof(what), "%s %s KV %s chunk "
					 "%d threads %d block %d", cases[i].arch,
					 ggml_type_name(cases[i].wtype),
					 kv_dtype_name(dt), v[j].chunk,
					 v[j].threads, v[j].block);
				assert_same_bits(base, o, nv, what);
			}
		}
		free(base);
		free(o);
	}
}

/* Every instruction set computes the same bits (f16 KV too). */
static void test_invariance_isa(void **state)
{
	int best = kern_isa_detect(), compared = 0, compared_q8 = 0;

	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		const model *m = models[i];
		size_t nv = (size_t)N_PROMPT * m->cfg.vocab;
		float *base = malloc(nv * sizeof(float));
		float *o = malloc(nv * sizeof(float));

		for (int kvt = KV_F32; kvt <= KV_Q8_0; kvt++) {
			/* quick: one KV type per model, in turn (q8_0 where
			 * the heads allow it) */
			int pick = i % 3 == 2 && kv_fits(m, KV_Q8_0)
					   ? KV_Q8_0 : i % 2 ? KV_F16 : KV_F32;

			if ((tu_quick() && kvt != pick) || !kv_fits(m, kvt))
				continue;
			assert_int_equal(kern_set_isa(best), 0);
			run_fwd(m, 16, 2, kvt, 16, base);
			for (int isa = 0; isa <= iu_last_isa(); isa++) {
				if (isa == best || !iu_use_isa(isa))
					continue;
				run_fwd(m, 16, 2, kvt, 16, o);
				assert_same_bits(base, o, nv, iu_isa_label(isa));
				compared++;
				compared_q8 += kvt == KV_Q8_0;
			}
		}
		free(base);
		free(o);
	}
	kern_set_isa(best);
	printf("  compared %s against %d runs of the other ISAs (%d with "
	       "q8_0 KV)\n", kern_isa_name(best), compared, compared_q8);
	assert_true(compared_q8 > 0);
	/* at least scalar vs best, per KV type run */
	assert_true(compared >= N_CASES * (tu_quick() ? 1 : 2));
}

/* A row computed inside a batch of unrelated sequences equals the row
 * computed alone. */
static void test_invariance_batch(void **state)
{
	(void)state;
	for (int i = 0; i < N_CASES; i++)
	for (int dt = KV_F32; dt <= KV_Q8_0; dt += KV_Q8_0 - KV_F32) {
		const model *m = models[i];
		int V = m->cfg.vocab;
		kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, 16, 256, dt, 0, 0};
		kv_pool *pool;
		fwd *f;
		tpool *tp;
		kv_seq s[3];
		kv_seq *sp[3] = {&s[0], &s[1], &s[2]};
		float *alone = malloc((size_t)N_PROMPT * V * sizeof(float));
		float *lg = malloc(3 * (size_t)V * sizeof(float));

		if (!kv_fits(m, dt)) {
			free(alone);
			free(lg);
			continue;
		}
		run_fwd(m, 64, 1, dt, 16, alone);
		assert_int_equal(tpool_new(2, &tp), 0);
		assert_int_equal(kv_pool_new(&kp, &pool), 0);
		assert_int_equal(fwd_new(m, 64, tp, &f), 0);
		for (int j = 0; j < 3; j++)
			kv_seq_init(&s[j]);
		/* seq 0: the prompt, prefilled with 10 rows; seqs 1 and 2:
		 * unrelated tokens sharing the batch */
		{
			int nn[3] = {10, 3, 7};
			int32_t toks[20];

			memcpy(toks, prompt, 10 * sizeof(int32_t));
			for (int t = 10; t < 20; t++)
				toks[t] = 100 + 37 * t;
			assert_int_equal(fwd_batch(f, pool, sp, nn, 3, toks, lg,
						   0), 0);
			assert_same_bits(alone + 9 * (size_t)V, lg, V,
					 "prefill row in a mixed batch");
		}
		/* then decode the rest of the prompt one row at a time among
		 * the others */
		for (int p = 10; p < N_PROMPT; p++) {
			int nn[3] = {1, 1, 1};
			int32_t toks[3] = {prompt[p], 5 + p, 700 + p};

			assert_int_equal(fwd_batch(f, pool, sp, nn, 3, toks, lg,
						   0), 0);
			assert_same_bits(alone + (size_t)p * V, lg, V,
					 "decode row in a batch of 3");
		}
		for (int j = 0; j < 3; j++)
			kv_seq_free(pool, &s[j]);
		fwd_free(&f);
		kv_pool_free(&pool);
		tpool_free(&tp);
		free(alone);
		free(lg);
	}
}

/* Router: softmax, rank order, ties to the lower id, NaN defined. */
static void test_moe_route(void **state)
{
	float eq[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
	float mid[5] = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f};
	float nan1[4] = {0.0f, NAN, 1.0f, 2.0f};
	float inf1[4] = {0.0f, INFINITY, 1.0f, -INFINITY};
	float ord[6] = {0.1f, 2.0f, -1.0f, 1.5f, 3.0f, 0.2f};
	int sel[4];
	float w[4];

	(void)state;
	fwd_moe_route(eq, 8, 3, MODEL_GATE_SOFTMAX, 1, sel, w);
	assert_int_equal(sel[0], 0);
	assert_int_equal(sel[1], 1);
	assert_int_equal(sel[2], 2);
	assert_true(w[0] == w[1] && w[1] == w[2]);
	assert_true(fabsf(w[0] - 1.0f / 3) < 1e-6f);
	fwd_moe_route(mid, 5, 2, MODEL_GATE_SOFTMAX, 1, sel, w);
	assert_int_equal(sel[0], 1);
	assert_int_equal(sel[1], 2);
	/* one NaN logit makes every probability NaN: the first k ids, NaN
	 * weights (a defined result; the forward pass gives NaN logits) */
	fwd_moe_route(nan1, 4, 2, MODEL_GATE_SOFTMAX, 1, sel, w);
	assert_int_equal(sel[0], 0);
	assert_int_equal(sel[1], 1);
	assert_true(isnan(w[0]) && isnan(w[1]));
	fwd_moe_route(inf1, 4, 2, MODEL_GATE_SOFTMAX, 1, sel, w);
	assert_int_equal(sel[0], 0); /* +inf - +inf: NaN everywhere */
	fwd_moe_route(ord, 6, 4, MODEL_GATE_SOFTMAX, 0, sel, w);
	assert_int_equal(sel[0], 4);
	assert_int_equal(sel[1], 1);
	assert_int_equal(sel[2], 3);
	assert_int_equal(sel[3], 5);
	assert_true(w[0] > w[1] && w[1] > w[2] && w[2] > w[3]);
	assert_true(w[0] + w[1] + w[2] + w[3] < 1.0f);
	/* probs: softmax again */
	fwd_moe_route(ord + 0, 6, 4, MODEL_GATE_SOFTMAX, 1, sel, w);
	assert_true(fabsf(w[0] + w[1] + w[2] + w[3] - 1.0f) < 1e-6f);
	/* gpt-oss: the top logits, weighted by their own softmax; the
	 * logits stay as they are */
	{
		float lg[6] = {0.1f, 2.0f, -1.0f, 1.5f, 3.0f, 0.2f};
		float tie[4] = {1.0f, 2.0f, 2.0f, NAN};

		fwd_moe_route(lg, 6, 2, MODEL_GATE_SOFTMAX_WEIGHT, 0, sel, w);
		assert_int_equal(sel[0], 4);
		assert_int_equal(sel[1], 1);
		assert_true(lg[4] == 3.0f && lg[1] == 2.0f);
		/* e^3 / (e^3 + e^2) = 1 / (1 + e^-1) */
		assert_true(fabs(w[0] - 1 / (1 + exp(-1.0))) < 1e-7);
		assert_true(fabs(w[1] - 1 / (1 + exp(1.0))) < 1e-7);
		fwd_moe_route(lg, 6, 1, MODEL_GATE_SOFTMAX_WEIGHT, 0, sel, w);
		assert_int_equal(sel[0], 4);
		assert_true(w[0] == 1.0f);
		/* ties to the lower id; NaN last */
		fwd_moe_route(tie, 4, 4, MODEL_GATE_SOFTMAX_WEIGHT, 0, sel, w);
		assert_int_equal(sel[0], 1);
		assert_int_equal(sel[1], 2);
		assert_int_equal(sel[2], 0);
		assert_int_equal(sel[3], 3);
	}
}

/* gpt-oss's pieces on hand-checked values: the attention softmax with a
 * sink, the clamped SwiGLU, YaRN's frequencies. */
static void test_gptoss_pieces(void **state)
{
	const model *m = models[GPTOSS_CASE];
	const model_config *c = &m->cfg;
	int half = c->head_dim / 2;

	(void)state;
	/* sink softmax: e^(s - 3) / (e^-2 + e^-1 + e^0 + e^(0.5 - 3)) */
	{
		float s[4] = {1.0f, 2.0f, 3.0f, -99.0f}, sink = 0.5f;
		double den = exp(-2.0) + exp(-1.0) + 1 + exp(-2.5);
		float plain[4] = {1.0f, 2.0f, 3.0f, 0.5f};
		float big[3] = {0.0f, 0.0f, 0.0f}, bsink = 10.0f;
		float none[4] = {1.0f, 2.0f, 3.0f}, ninf = -INFINITY;
		float ref3[3] = {1.0f, 2.0f, 3.0f};

		fwd_att_softmax(s, 3, &sink);
		for (int i = 0; i < 3; i++)
			assert_true(fabs(s[i] - exp(i - 2.0) / den) < 1e-7);
		/* the sink's share (5%) is dropped */
		assert_true(fabs(s[0] + s[1] + s[2] - (1 - exp(-2.5) / den)) <
			    1e-6);
		/* the same bits as kern_softmax over scores and sink */
		kern_softmax(plain, 4);
		assert_memory_equal(s, plain, 3 * sizeof(float));
		/* a dominant sink: attention to nothing */
		fwd_att_softmax(big, 2, &bsink);
		assert_true(fabs(big[0] - 1 / (2 + exp(10.0))) < 1e-9);
		/* a -inf sink is no sink; no sink is kern_softmax */
		fwd_att_softmax(none, 3, &ninf);
		kern_softmax(ref3, 3);
		assert_memory_equal(none, ref3, 3 * sizeof(float));
		none[0] = 1.0f;
		none[1] = 2.0f;
		none[2] = 3.0f;
		fwd_att_softmax(none, 3, NULL);
		assert_memory_equal(none, ref3, 3 * sizeof(float));
		assert_true(fabs(none[2] - 1 / (1 + exp(-1.0) + exp(-2.0))) <
			    1e-7);
	}
	/* clamped SwiGLU: gate min(g, 7), up clamped to +-7, plus 1 */
	{
		float g[6] = {-1.0f, 0.0f, 2.0f, 10.0f, NAN, -30.0f};
		float u[6] = {0.5f, -9.0f, 8.0f, -3.0f, 1.0f, 1.0f};
		double want[5] = {
			-1 / (1 + exp(1.702)) * 1.5,
			0,
			2 / (1 + exp(-3.404)) * 8,     /* up 8 -> 7 */
			7 / (1 + exp(-11.914)) * -2,   /* gate 10 -> 7 */
		};

		kern_swiglu_oai(g, u, 6, MODEL_SWIGLU_OAI_ALPHA,
				MODEL_SWIGLU_OAI_LIMIT);
		for (int i = 0; i < 4; i++)
			assert_true(fabs(g[i] - want[i]) <=
				    1e-6 * fmax(1, fabs(want[i])));
		assert_true(isnan(g[4]));
		/* no clamp below: -30 sigmoid(-51) (up 1 + 1) */
		assert_true(g[5] < 0 && g[5] > -1e-20f);
	}
	/* YaRN, tiny-gptoss: head_dim 32, base 150000, factor 32 over 4096:
	 * the blend runs from pair 4 (4.05 floored) to 9 (8.70 ceiled) */
	{
		double f[64];
		float ms;

		assert_true(c->rope_yarn && c->yarn_orig_ctx == 4096);
		assert_true(half == 16 && c->rope_base == 150000.0f);
		for (int kind = 0; kind < 2; kind++) {
			fwd_rope_freqs(m, kind, f, &ms);
			/* 1 + 0.1 ln 32 */
			assert_true(fabsf(ms - 1.34657359f) < 1e-6f);
			for (int i = 0; i < half; i++) {
				double orig = pow(150000.0, -i / 16.0);
				double mix = i <= 4 ? 1 : i >= 9 ? 0 :
					     1 - (i - 4) / 5.0;
				double want = orig * (mix + (1 - mix) / 32);

				assert_true(fabs(f[i] - want) <= 1e-15 * orig);
			}
			assert_true(f[0] == 1.0);
			assert_true(fabs(f[15] - pow(150000.0, -15 / 16.0) /
						 32) < 1e-18);
		}
		/* without scaling: plain frequencies, mscale 1 */
		fwd_rope_freqs(models[0], 0, f, &ms);
		assert_true(ms == 1.0f);
		assert_true(f[1] == pow(models[0]->cfg.rope_base,
					-2.0 / models[0]->cfg.head_dim));
	}
}

/* The batched MoE FFN equals, bit for bit, each row on its own through
 * its top-k experts' FFNs in rank order (M = 1 matmuls, products summed
 * one rounding at a time), whatever the batch, threads and ISA. */
static void test_moe_reference(void **state)
{
	int best = kern_isa_detect(), n_moe = 0;

	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		const model *m = models[i];
		const model_config *c = &m->cfg;
		int D = c->dim, E = c->n_expert, k = c->n_expert_used;
		int F = c->expert_ffn, M = 37;
		float *x, *y, *y2, *ref, *lg, *g, *u, *o, *w;
		int *sel, *hit;

		if (!c->n_expert)
			continue;
		n_moe++;
		x = malloc((size_t)M * D * sizeof(float));
		y = malloc((size_t)M * D * sizeof(float));
		y2 = malloc((size_t)M * D * sizeof(float));
		ref = malloc((size_t)M * D * sizeof(float));
		lg = malloc((size_t)E * sizeof(float));
		g = malloc((size_t)F * sizeof(float));
		u = malloc((size_t)F * sizeof(float));
		o = malloc((size_t)D * sizeof(float));
		w = malloc((size_t)k * sizeof(float));
		sel = malloc((size_t)k * sizeof(int));
		hit = calloc((size_t)E, sizeof(int));
		for (size_t j = 0; j < (size_t)M * D; j++)
			x[j] = (float)sin(0.37 * j + i) * 1.3f;
		for (int l = 0; l < c->n_layers; l++) {
			const model_layer *L = &m->layers[l];

			for (int r = 0; r < M; r++) {
				float *rr = ref + (size_t)r * D;

				kern_matmul(NULL, L->router.data,
					    L->router.type, D, E, L->router_b,
					    x + (size_t)r * D, D, 1,
					    lg, E);
				fwd_moe_route(lg, E, k, c->expert_gating,
					      c->expert_norm_w, sel, w);
				for (int j = 0; j < k; j++) {
					model_mat gm = model_expert(&L->w_gate,
								    sel[j]);
					model_mat um = model_expert(&L->w_up,
								    sel[j]);
					model_mat dm = model_expert(&L->w_down,
								    sel[j]);

					int e = sel[j];
					const float *bg = L->b_gate ?
						L->b_gate + (size_t)e * F : NULL;
					const float *bu = L->b_up ?
						L->b_up + (size_t)e * F : NULL;
					const float *bd = L->b_down ?
						L->b_down + (size_t)e * D : NULL;

					hit[e]++;
					kern_matmul(NULL, gm.data, gm.type, D,
						    F, bg, x + (size_t)r * D,
						    D, 1, g, F);
					kern_matmul(NULL, um.data, um.type, D,
						    F, bu, x + (size_t)r * D,
						    D, 1, u, F);
					if (c->expert_act ==
					    MODEL_ACT_SWIGLU_OAI)
						kern_swiglu_oai(
							g, u, F,
							MODEL_SWIGLU_OAI_ALPHA,
							MODEL_SWIGLU_OAI_LIMIT);
					else
						kern_silu_mul(g, u, F);
					kern_matmul(NULL, dm.data, dm.type, F,
						    D, bd, g, F, 1, o, D);
					for (int e = 0; e < D; e++) {
						float t = o[e] * w[j];

						rr[e] = j ? rr[e] + t : t;
					}
				}
			}
			for (int isa = 0; isa <= iu_last_isa(); isa++) {
				tpool *tp = NULL;
				fwd *f = NULL;
				char what[128];

				if (isa == best)
					assert_int_equal(kern_set_isa(best), 0);
				else if (!iu_use_isa(isa))
					continue;
				assert_int_equal(tpool_new(1 + isa % 3, &tp),
						 0);
				assert_int_equal(fwd_new(m, 64, tp, &f), 0);
				assert_int_equal(fwd_moe_ffn(f, l, x, M, y), 0);
				snprintf(what, sizeof(what), "%s %s layer %d "
					 "%s: batch of %d vs rows alone",
					 cases[i].shape,
					 ggml_type_name(cases[i].wtype), l,
					 kern_isa_name(isa), M);
				assert_same_bits(ref, y, (size_t)M * D, what);
				/* another composition: rows 5..16 only */
				assert_int_equal(fwd_moe_ffn(f, l, x + 5 * D,
							     12, y2), 0);
				assert_same_bits(ref + 5 * D, y2, 12 * D, what);
				fwd_free(&f);
				tpool_free(&tp);
			}
			kern_set_isa(best);
		}
		/* the batch routed rows to more than one expert */
		{
			int used = 0;

			for (int e = 0; e < E; e++)
				used += hit[e] > 0;
			assert_true(used >= 2);
		}
		free(x); free(y); free(y2); free(ref); free(lg); free(g);
		free(u); free(o); free(w); free(sel); free(hit);
	}
	assert_true(n_moe >= 6); /* 5 qwen3moe, 3 gpt-oss */
	/* a dense layer has no experts */
	{
		fwd *f = NULL;
		float x[128] = {0}, y[128];

		assert_int_equal(fwd_new(models[0], 4, NULL, &f), 0);
		assert_int_equal(fwd_moe_ffn(f, 0, x, 1, y), QERR_ARG);
		fwd_free(&f);
	}
}

/* Shared-prefix attention: decode rounds of forks of two roots sharing a
 * cached prefix (B forked from A's first 9 tokens) plus an unrelated
 * sequence, forks joining on staggered steps so rows sharing blocks sit at
 * different positions (and, on gemma3's 8-token windows, start their
 * windows at different rows). Returns every step's logits of every
 * sequence; *shared counts the calls that took the shared path. */
#define SP_STEPS 12
/* 1: the pool is split by windows and every decoding sequence releases
 * the windowed rows no later row reads after each step (the roots keep
 * theirs), as the engine's samples do */
static int sp_win;

static float *shared_run(const model *m, int on, int threads, int dtype,
			 int block, int na, int nb, long *shared)
{
	int V = m->cfg.vocab, ns = na + nb + 1;
	kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, block, 1024, dtype,
			sp_win ? fwd_kv_win_pattern(m) : 0, 0};
	kv_pool *pool;
	fwd *f;
	tpool *tp;
	kv_seq a, b, *s = calloc((size_t)ns, sizeof(kv_seq));
	kv_seq **sp = calloc((size_t)ns, sizeof(kv_seq *));
	int *nn = calloc((size_t)ns, sizeof(int));
	int32_t *toks = calloc((size_t)ns, sizeof(int32_t));
	float *lg = malloc((size_t)ns * V * sizeof(float));
	float *all = calloc((size_t)SP_STEPS * ns * V, sizeof(float));

	assert_int_equal(tpool_new(threads, &tp), 0);
	assert_int_equal(kv_pool_new(&kp, &pool), 0);
	assert_int_equal(fwd_new(m, 64, tp, &f), 0);
	fwd_set_shared_attn(f, on);
	kv_seq_init(&a);
	kv_seq_init(&b);
	assert_int_equal(fwd_prefill(f, pool, &a, prompt, 21, NULL), 0);
	assert_int_equal(kv_seq_fork_prefix(pool, &a, 9, &b), 0);
	assert_int_equal(fwd_prefill(f, pool, &b, prompt + 22, 8, NULL), 0);
	for (int j = 0; j < ns; j++) {
		kv_seq_init(&s[j]);
		if (j < na)
			assert_int_equal(kv_seq_fork(pool, &a, &s[j]), 0);
		else if (j < na + nb)
			assert_int_equal(kv_seq_fork(pool, &b, &s[j]), 0);
		else
			assert_int_equal(fwd_prefill(f, pool, &s[j], prompt + 3,
						     5, NULL), 0);
	}
	for (int st = 0; st < SP_STEPS; st++) {
		int n = 0;

		/* fork j joins at step j % 3 */
		for (int j = 0; j < ns; j++)
			if (st >= j % 3) {
				sp[n] = &s[j];
				nn[n] = 1;
				toks[n] = (int32_t)((37 * j + 11 * st + 5) %
						    V);
				n++;
			}
		assert_int_equal(fwd_batch(f, pool, sp, nn, n, toks, lg, 0),
				 0);
		for (int i = 0; sp_win && i < n; i++)
			(void)kv_seq_drop_window(pool, sp[i],
						 m->cfg.swa_window);
		for (int i = 0, j = 0; j < ns; j++)
			if (st >= j % 3)
				memcpy(all + ((size_t)st * ns + j) * V,
				       lg + (size_t)i++ * V,
				       (size_t)V * sizeof(float));
	}
	*shared = fwd_shared_calls(f);
	/* A's first fork (33 tokens, window 8) released some of the prefix */
	if (sp_win && na)
		assert_true(s[0].w_lo > 0);
	for (int j = 0; j < ns; j++)
		kv_seq_free(pool, &s[j]);
	kv_seq_free(pool, &a);
	kv_seq_free(pool, &b);
	assert_int_equal(kv_pool_free_blocks(pool), 1024);
	fwd_free(&f);
	kv_pool_free(&pool);
	tpool_free(&tp);
	free(s);
	free(sp);
	free(nn);
	free(toks);
	free(lg);
	return all;
}

/* Shared-prefix attention computes the per-row path's bits: across N,
 * batch composition, threads, block sizes, KV types and every ISA. */
static void test_shared_prefix(void **state)
{
	/* qwen2 f32, qwen2 q8_0, llama3 (4 query heads per KV head),
	 * gemma3 (sliding windows, head_dim 40), gpt-oss (sinks, windows) */
	static const int pick[] = {0, 4, 7, 8, GPTOSS_CASE};
	static const struct { int na, nb; } mix[] = {
		{1, 0}, {2, 0}, {7, 3}, {32, 2},
	};
	int best = kern_isa_detect(), compared = 0, win_compared = 0;

	(void)state;
	for (size_t pi = 0; pi < sizeof(pick) / sizeof(pick[0]); pi++) {
		const model *m = models[pick[pi]];
		size_t V = (size_t)m->cfg.vocab;

		for (size_t x = 0; x < sizeof(mix) / sizeof(mix[0]); x++)
			for (int dt = KV_F32; dt <= KV_Q8_0; dt++)
				for (int isa = 0; isa <= iu_last_isa(); isa++) {
					int bl = (x + dt) % 2 ? 4 : 16;
					int ns = mix[x].na + mix[x].nb + 1;
					size_t n = (size_t)SP_STEPS * ns * V;
					long c0, c1, c2;
					float *off, *on1, *on2;

					if (!kv_fits(m, dt) || !iu_use_isa(isa))
						continue;
					/* quick (sanitizer builds): a
					 * diagonal, every model, mix, dtype
					 * and ISA still taken */
					if (tu_quick() &&
					    (int)((pi + x + (size_t)dt) %
						  (size_t)(iu_last_isa() + 1)) !=
						    isa)
						continue;
					off = shared_run(m, 0, 2, dt, bl,
							 mix[x].na, mix[x].nb,
							 &c0);
					on1 = shared_run(m, 1, 1, dt, bl,
							 mix[x].na, mix[x].nb,
							 &c1);
					on2 = shared_run(m, 1, 2, dt, bl,
							 mix[x].na, mix[x].nb,
							 &c2);
					assert_int_equal(c0, 0);
					/* a lone fork of A still shares
					 * blocks with B's forks, except
					 * {1, 0}: A's fork and the unrelated
					 * row share nothing */
					if (ns > 2)
						assert_true(c1 > 0 && c2 == c1);
					assert_same_bits(off, on1, n,
							 iu_isa_label(isa));
					assert_same_bits(off, on2, n,
							 iu_isa_label(isa));
					/* windows released: the same bits on
					 * both paths */
					if (m->cfg.swa_window) {
						float *w0, *w1;
						long c3, c4;

						sp_win = 1;
						w0 = shared_run(m, 0, 2, dt, bl,
								mix[x].na,
								mix[x].nb, &c3);
						w1 = shared_run(m, 1, 2, dt, bl,
								mix[x].na,
								mix[x].nb, &c4);
						sp_win = 0;
						assert_same_bits(off, w0, n,
								 "windows released");
						assert_same_bits(off, w1, n,
								 "windows released, shared");
						free(w0);
						free(w1);
						win_compared++;
					}
					compared++;
					free(off);
					free(on1);
					free(on2);
				}
	}
	kern_set_isa(best);
	assert_true(compared > 0);
	assert_true(win_compared > 0);
	printf("  shared-prefix attention: %d configurations bit-identical "
	       "to the per-row path (%d with windows released)\n", compared,
	       win_compared);
}

/* The 8-bit KV cache: logits stay near the f32 cache's (max |delta| over
 * max |logit| of all 32 positions), and a model whose heads are not whole
 * 32-element blocks is refused naming its head size (tiny-qwen3: head_dim
 * 48, kv_dim 96). On the dense models with float weights (f32
 * activations: the cache is the only change) the measured ratio is
 * 1.4-2.0e-2: these random-weight models amplify any perturbation (f16
 * KV alone moves the random 0.5b shape's logits by 2.5e-2; a trained
 * model's move far less, see docs/performance.md); bound 5e-2, as for
 * 8-bit activations. Quantized weights add their 8-bit activations'
 * own amplified noise, and a mixture of experts flips routes: no bound
 * there says anything about the cache. */
#define Q8_KV_REL_TOL 0.05
static void test_kv_q8(void **state)
{
	int checked = 0;

	(void)state;
	for (int i = 0; i < N_CASES; i++) {
		const model *m = models[i];
		size_t nv = (size_t)N_PROMPT * m->cfg.vocab;
		float *a, *b;
		double maxd = 0, maxl = 0;

		if (!kv_fits(m, KV_Q8_0) || quant_is_quant(cases[i].wtype) ||
		    m->cfg.n_expert)
			continue;
		a = malloc(nv * sizeof(float));
		b = malloc(nv * sizeof(float));
		assert_non_null(a);
		assert_non_null(b);
		run_fwd(m, 64, 2, KV_F32, 16, a);
		run_fwd(m, 64, 2, KV_Q8_0, 16, b);
		for (size_t e = 0; e < nv; e++) {
			double d = fabs((double)a[e] - b[e]);

			maxd = d > maxd ? d : maxd;
			maxl = fabs(a[e]) > maxl ? fabs(a[e]) : maxl;
		}
		printf("  %s %s %s: q8_0 KV vs f32 KV max|d| %.3g, "
		       "max|logit| %.3g, ratio %.2e\n", cases[i].arch,
		       cases[i].shape, ggml_type_name(cases[i].wtype), maxd,
		       maxl, maxd / maxl);
		assert_true(maxd > 0); /* the cache is really 8-bit */
		assert_true(maxd / maxl < Q8_KV_REL_TOL);
		checked++;
		free(a);
		free(b);
	}
	assert_true(checked > 0);
	for (int i = 0; i < N_CASES; i++) {
		const model *m = models[i];
		kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, 16, 4, KV_Q8_0, 0, 0};
		kv_pool *pool;
		fwd *f;
		kv_seq s;
		char want[96];

		if (m->cfg.head_dim != 48 || m->cfg.kv_dim % 32)
			continue;
		assert_int_equal(kv_pool_new(&kp, &pool), 0);
		assert_int_equal(fwd_new(m, 16, NULL, &f), 0);
		kv_seq_init(&s);
		assert_int_equal(fwd_prefill(f, pool, &s, prompt, 3, NULL),
				 QERR_ARG);
		snprintf(want, sizeof(want), "model's head_dim is 48");
		assert_non_null(strstr(qerr_detail(), want));
		assert_int_equal(s.n_tokens, 0);
		kv_seq_free(pool, &s);
		fwd_free(&f);
		kv_pool_free(&pool);
		checked = -1;
	}
	assert_int_equal(checked, -1);
}

static void test_bad_tokens(void **state)
{
	const model *m = models[0];
	kv_params kp = {m->cfg.n_layers, m->cfg.kv_dim, 16, 4, KV_F32, 0, 0};
	kv_pool *pool;
	fwd *f;
	kv_seq s;
	int32_t bad[2] = {1, m->cfg.vocab};
	int32_t many[80];

	(void)state;
	assert_int_equal(kv_pool_new(&kp, &pool), 0);
	assert_int_equal(fwd_new(m, 128, NULL, &f), 0);
	kv_seq_init(&s);
	assert_int_equal(fwd_prefill(f, pool, &s, bad, 2, NULL), QERR_RANGE);
	assert_int_equal(s.n_tokens, 0);
	for (int i = 0; i < 80; i++)
		many[i] = i;
	/* 80 tokens need 5 blocks of 16; the pool has 4 */
	assert_int_equal(fwd_prefill(f, pool, &s, many, 80, NULL), QERR_FULL);
	assert_int_equal(s.n_tokens, 0);
	kv_seq_free(pool, &s);
	assert_int_equal(kv_pool_free_blocks(pool), 4);
	fwd_free(&f);
	kv_pool_free(&pool);
}

/* mkmodel's gpt-oss shapes: gpt-oss-20b's hyper-parameters as its
 * converted GGUF has them (a vocabulary-only file: 21 B parameters are
 * not for a test), and a --layers override of the tiny shape, whose
 * layers alternate local and global and run. */
static void test_gptoss_shapes(void **state)
{
	static const struct { const char *key; uint32_t v; } u32s[] = {
		{"gpt-oss.block_count", 24},
		{"gpt-oss.embedding_length", 2880},
		{"gpt-oss.attention.head_count", 64},
		{"gpt-oss.attention.head_count_kv", 8},
		{"gpt-oss.attention.key_length", 64},
		{"gpt-oss.expert_count", 32},
		{"gpt-oss.expert_used_count", 4},
		{"gpt-oss.expert_feed_forward_length", 2880},
		{"gpt-oss.attention.sliding_window", 128},
		{"gpt-oss.rope.scaling.original_context_length", 4096},
		{"gpt-oss.context_length", 131072},
	};
	mkmodel_opts o = {0};
	mkmodel_info info;
	char p[512];
	gguf_file *g;
	gguf_str type;
	float fv;
	model *m;

	(void)state;
	snprintf(p, sizeof(p), "%s/t-oss-shapes-%d.gguf", tu_tmpdir(),
		 (int)getpid());
	o.shape = "gpt-oss-20b";
	o.wtype = GGML_TYPE_F32;
	o.tokenizer = tu_chat_tokenizer();
	o.seed = 1;
	o.vocab_only = 1;
	o.out = p;
	assert_int_equal(mkmodel_write(&o, &info), 0);
	assert_int_equal(gguf_open(p, &g), 0);
	for (size_t i = 0; i < sizeof(u32s) / sizeof(u32s[0]); i++) {
		uint32_t v = 0;

		assert_int_equal(gguf_get_u32(g, u32s[i].key, &v), 0);
		if (v != u32s[i].v)
			fail_msg("%s = %u, want %u", u32s[i].key, v,
				 u32s[i].v);
	}
	assert_int_equal(gguf_get_f32(g, "gpt-oss.rope.freq_base", &fv), 0);
	assert_true(fv == 150000.0f);
	assert_int_equal(gguf_get_f32(g, "gpt-oss.rope.scaling.factor", &fv),
			 0);
	assert_true(fv == 32.0f);
	assert_int_equal(gguf_get_str(g, "gpt-oss.rope.scaling.type", &type),
			 0);
	assert_true(gguf_str_eq(type, "yarn"));
	assert_int_equal(gguf_get_str(g, "general.architecture", &type), 0);
	assert_true(gguf_str_eq(type, "gpt-oss"));
	gguf_close(&g);
	/* --layers 5: local, global, local, global, local */
	o.shape = "tiny-gptoss";
	o.vocab_only = 0;
	o.n_layers = 5;
	assert_int_equal(mkmodel_write(&o, &info), 0);
	assert_int_equal(model_load(p, &m), 0);
	assert_int_equal(m->cfg.n_layers, 5);
	for (int l = 0; l < 5; l++)
		assert_int_equal(m->layers[l].swa, l % 2 == 0);
	{
		kv_params kp = {5, m->cfg.kv_dim, 16, 8, KV_F32, 0, 0};
		float *lg = malloc((size_t)m->cfg.vocab * sizeof(float));
		kv_pool *pool;
		fwd *f;
		kv_seq sq;

		assert_int_equal(kv_pool_new(&kp, &pool), 0);
		assert_int_equal(fwd_new(m, 32, NULL, &f), 0);
		kv_seq_init(&sq);
		assert_int_equal(fwd_prefill(f, pool, &sq, prompt, N_PROMPT,
					     lg), 0);
		for (int v = 0; v < m->cfg.vocab; v++)
			assert_true(isfinite(lg[v]));
		kv_seq_free(pool, &sq);
		fwd_free(&f);
		kv_pool_free(&pool);
		free(lg);
	}
	model_free(&m);
	unlink(p);
	/* the gpt-oss architecture needs the shape's experts and window */
	o.shape = "tiny-qwen3moe";
	o.arch = "gpt-oss";
	o.n_layers = 0;
	assert_int_equal(mkmodel_write(&o, &info), QERR_ARG);
	assert_non_null(strstr(qerr_detail(), "experts, no window"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference),
		cmocka_unit_test(test_invariance_chunks_threads),
		cmocka_unit_test(test_invariance_batch),
		cmocka_unit_test(test_invariance_isa),
		cmocka_unit_test(test_shared_prefix),
		cmocka_unit_test(test_bad_tokens),
		cmocka_unit_test(test_kv_q8),
		cmocka_unit_test(test_moe_route),
		cmocka_unit_test(test_moe_reference),
		cmocka_unit_test(test_gptoss_pieces),
		cmocka_unit_test(test_gptoss_shapes),
	};

	return cmocka_run_group_tests_name("fwd", tests, setup, teardown);
}
