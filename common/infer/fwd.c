/*
 * fwd — the forward pass (see fwd.h for the batching contract): one call
 * runs every layer over the M rows of all sequences it advances — norms,
 * fused q/k/v and gate/up matmuls through kern_matmul_n, rotary, the
 * paged attention (attend: one row and one KV head at a time, the query
 * heads of that KV head sharing each key and value row, block by block in
 * position order — the definition; att_shared: the same per row, with a
 * block that decode rows share read once for all of them), the output
 * head. Owns the run-time scratch (fwd_new);
 * callers: sc/ (engine, batch), tools/cmd_eval.c, tests.
 */
#include "infer/fwd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/prof.h"
#include "qerr.h"

/* Attention tasks per thread: (row, KV head) items are split into this
 * many chunks per thread for load balance; each chunk owns a score buffer
 * for the query heads of one KV head. */
#define FWD_ATT_TASKS_PER_THREAD 4

struct fwd {
	const model *m;
	tpool *tp;
	int R;              /* max rows per call */
	float *x;           /* (R, dim) residual stream */
	float *xb;          /* (R, dim) normed input / gathered last rows */
	float *q;           /* (R, q_dim) */
	float *k, *v;       /* (R, kv_dim) */
	float *att;         /* (R, q_dim) attention output */
	float *hb, *hb2;    /* (R, ffn_dim) */
	float *rcos, *rsin; /* (n_rope, R, head_dim/2) rotary of each row's
			     * position, per rotary kind */
	double *inv_freq;   /* (n_rope, head_dim/2) scale * base^(-2i/hd) /
			     * factor[i] (YaRN: a per-pair scale) */
	float mscale[2];    /* per rotary kind: cos and sin times this */
	int n_rope;         /* 1, or 2 with sliding-window layers: kind 0
			     * global, kind 1 local (rope_base_swa) */
	kv_pool *pool;      /* this call's pool and sequences (batch) */
	kv_seq *const *seqs;
	int *row_seq;       /* (R) sequence index of each row */
	int *row_pos;       /* (R) position of each row */
	int n_att_tasks;
	float *scores;      /* (n_att_tasks, heads per KV head, scores_cap) */
	size_t scores_cap;
	/* q8_0 keys: a task's query heads quantized once per row and KV
	 * head (kern_att_q8_prep; n_att_tasks x heads per KV head x qz_bytes;
	 * NULL when head_dim is no multiple of 32, where q8_0 KV is refused) */
	char *att_qz;
	size_t qz_bytes;
	float att_scale;
	/* mixture of experts (n_expert > 0), for R rows of n_used slots */
	float *rl;          /* (R, n_expert) router logits, then probs */
	int *sel;           /* (R, n_used) chosen experts, rank order */
	float *selw;        /* (R, n_used) their weights */
	int *exp_off;       /* (n_expert + 1) first gathered slot of each */
	int *slot_pos;      /* (R * n_used) gathered position of each slot */
	float *xg, *yg;     /* (R * n_used, dim) gathered inputs, outputs */
	float *hg, *hg2;    /* (R * n_used, expert_ffn) */
	/* shared-prefix attention (att_shared): rows in block-table order */
	int shared_on;      /* 0: every row walks its own blocks (attend) */
	int *ord;           /* (R) rows sorted by their page tables */
	float *sh_q, *sh_o; /* (n_kv_heads, R, heads per KV head, head_dim)
			     * queries gathered / outputs, in ord order */
	float *sh_s;        /* (n_kv_heads, R, heads per KV head, sh_cap)
			     * scores by absolute position */
	char *sh_qz;        /* q8_0 keys: sh_q quantized (qz_bytes each) */
	size_t sh_qz_rows;  /* rows sh_qz holds */
	size_t sh_cap;      /* positions per sh_s row */
	size_t sh_rows;     /* floats sh_s holds */
	int sh_active;      /* this call takes the shared path */
	long sh_calls;      /* calls that took it */
	/* the matrices packed for the integer kernels (kern_pack):
	 * MODEL_PK_N per layer (model_packed_mat's slots), then the output
	 * head's; NULL entries: W as it is */
	kern_packed **pk;
	size_t pk_bytes;
};

/* Layer L's matrix slot packed, or NULL. */
static const kern_packed *lpk(const fwd *f, const model_layer *L, int slot)
{
	return f->pk[(size_t)(L - f->m->layers) * MODEL_PK_N + (size_t)slot];
}

/* The dense matrices of m packed for up to R rows (those kern_pack has a
 * layout for): a second copy of them in memory, so that decode's few
 * rows need not lay out the weights at every call. */
static int pack_model(fwd *f)
{
	const model *m = f->m;
	int L = m->cfg.n_layers, rc = 0;

	f->pk = calloc((size_t)L * MODEL_PK_N + 1, sizeof(*f->pk));
	if (!f->pk)
		return qerr_fail(QERR_NOMEM, "fwd: out of memory");
	for (int l = 0; l <= L && !rc; l++) {
		for (int i = 0; i < MODEL_PK_N && !rc; i++) {
			const model_mat *w = model_packed_mat(m, l, i);
			kern_packed **out;

			if (!w || !w->data || w->stride)
				continue;
			out = &f->pk[(size_t)l * MODEL_PK_N + i];
			rc = kern_pack(f->tp, w->data, w->type, w->k, w->n,
				       f->R, out);
			f->pk_bytes += kern_packed_bytes(*out);
			/* a matrix the loader left in the file's mapping
			 * (model_load) is read from the packed copy from now
			 * on, so its pages leave this process; not the
			 * embeddings a tied head shares, whose rows every
			 * step still looks up (faulting them back in cost
			 * the 0.5b's N = 8 decode 3-4%, Intel Xeon) */
			if (*out && kern_pack_covers(w->type, w->k) &&
			    w->data != m->tok_embd.data)
				gguf_drop_mapped(m->gguf, w->data,
						 ggml_row_bytes(w->type,
								(uint64_t)w->k) *
						 (size_t)w->n);
		}
	}
	return rc;
}

static void *xcalloc(size_t n, size_t sz, int *bad)
{
	void *p = calloc(n ? n : 1, sz);

	if (!p)
		*bad = 1;
	return p;
}

int fwd_new(const model *m, int max_rows, tpool *tp, fwd **out)
{
	const model_config *c = &m->cfg;
	size_t R = (size_t)max_rows, q_dim = (size_t)c->q_dim;
	int bad = 0, half = c->head_dim / 2, n_rope = c->swa_window ? 2 : 1;
	int rc;
	fwd *f;

	*out = NULL;
	if (max_rows < 1 || max_rows > 65536)
		return qerr_fail(QERR_RANGE, "fwd: max_rows %d out of range",
				 max_rows);
	f = calloc(1, sizeof(*f));
	if (!f)
		return qerr_fail(QERR_NOMEM, "fwd: out of memory");
	f->m = m;
	f->tp = tp;
	f->R = max_rows;
	f->x = xcalloc(R * c->dim, sizeof(float), &bad);
	f->xb = xcalloc(R * c->dim, sizeof(float), &bad);
	f->q = xcalloc(R * q_dim, sizeof(float), &bad);
	f->k = xcalloc(R * c->kv_dim, sizeof(float), &bad);
	f->v = xcalloc(R * c->kv_dim, sizeof(float), &bad);
	f->att = xcalloc(R * q_dim, sizeof(float), &bad);
	f->hb = xcalloc(R * c->ffn_dim, sizeof(float), &bad);
	f->hb2 = xcalloc(R * c->ffn_dim, sizeof(float), &bad);
	f->n_rope = n_rope;
	f->rcos = xcalloc(n_rope * R * half, sizeof(float), &bad);
	f->rsin = xcalloc(n_rope * R * half, sizeof(float), &bad);
	f->inv_freq = xcalloc((size_t)n_rope * half, sizeof(double), &bad);
	f->row_seq = xcalloc(R, sizeof(int), &bad);
	f->row_pos = xcalloc(R, sizeof(int), &bad);
	f->ord = xcalloc(R, sizeof(int), &bad);
	f->sh_q = xcalloc(R * q_dim, sizeof(float), &bad);
	f->sh_o = xcalloc(R * q_dim, sizeof(float), &bad);
	f->n_att_tasks = (tp ? tpool_size(tp) : 1) * FWD_ATT_TASKS_PER_THREAD;
	if (c->head_dim % 32 == 0) {
		f->qz_bytes = kern_att_q8_bytes(c->head_dim);
		f->att_qz = aligned_alloc(64, (size_t)f->n_att_tasks *
					  (c->n_heads / c->n_kv_heads) *
					  f->qz_bytes);
		bad |= !f->att_qz;
	}
	if (c->n_expert) {
		size_t S = R * c->n_expert_used;

		f->rl = xcalloc(R * c->n_expert, sizeof(float), &bad);
		f->sel = xcalloc(S, sizeof(int), &bad);
		f->selw = xcalloc(S, sizeof(float), &bad);
		f->exp_off = xcalloc(c->n_expert + 1, sizeof(int), &bad);
		f->slot_pos = xcalloc(S, sizeof(int), &bad);
		f->xg = xcalloc(S * c->dim, sizeof(float), &bad);
		f->yg = xcalloc(S * c->dim, sizeof(float), &bad);
		f->hg = xcalloc(S * c->expert_ffn, sizeof(float), &bad);
		f->hg2 = xcalloc(S * c->expert_ffn, sizeof(float), &bad);
	}
	if (bad) {
		fwd_free(&f);
		return qerr_fail(QERR_NOMEM, "fwd: out of memory for %d rows",
				 max_rows);
	}
	for (int k = 0; k < n_rope; k++)
		fwd_rope_freqs(m, k, f->inv_freq + (size_t)k * half,
			       &f->mscale[k]);
	f->att_scale = c->att_scale;
	f->shared_on = getenv("QUORUM_SHARED_ATTN") &&
		       !strcmp(getenv("QUORUM_SHARED_ATTN"), "1");
	if ((rc = pack_model(f))) {
		fwd_free(&f);
		return rc;
	}
	*out = f;
	return 0;
}

/* YaRN's correction dimension: the pair index whose wavelength fits
 * n_rot turns in the original context (ggml's rope_yarn_corr_dim). */
static double yarn_corr_dim(int hd, int orig_ctx, double n_rot, double base)
{
	return hd * log(orig_ctx / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

/* In double (libm's double pow/log round correctly in practice, so the
 * floats derived from them agree across hosts). Llama 3's rope_freqs
 * divide each pair's frequency; linear scaling multiplies it by the
 * kind's scale; YaRN mixes the scaled and the original frequency, the
 * original's share ramping from 1 below pair lo to 0 above pair hi (as
 * ggml's rope_yarn_ramp with beta_fast 32, beta_slow 1 and ext_factor
 * 1), and scales cos and sin by attn_factor (1 + 0.1 ln(1 / scale)). */
void fwd_rope_freqs(const model *m, int kind, double *inv_freq,
		    float *mscale)
{
	const model_config *c = &m->cfg;
	int hd = c->head_dim, half = hd / 2;
	double base = kind ? c->rope_base_swa : c->rope_base;
	double fs = kind ? c->rope_scale_swa : c->rope_scale, lo = 0, hi = 0;

	if (c->rope_yarn) {
		lo = floor(yarn_corr_dim(hd, c->yarn_orig_ctx, 32.0, base));
		hi = ceil(yarn_corr_dim(hd, c->yarn_orig_ctx, 1.0, base));
		lo = lo > 0 ? lo : 0;
		hi = hi < hd - 1 ? hi : hd - 1;
	}
	for (int i = 0; i < half; i++) {
		double v = pow(base, -2.0 * i / (double)hd);

		if (m->rope_freqs)
			v /= (double)m->rope_freqs[i];
		if (c->rope_yarn) {
			double y = (i - lo) / (hi - lo > 0.001 ? hi - lo
							       : 0.001);
			double mix = 1.0 - (y < 0 ? 0 : y > 1 ? 1 : y);

			v *= fs * (1.0 - mix) + mix;
		} else if (fs != 1.0) {
			v *= fs;
		}
		inv_freq[i] = v;
	}
	*mscale = c->rope_yarn ? (float)((double)c->rope_attn_factor *
					 (1.0 + 0.1 * log(1.0 / fs)))
			       : c->rope_attn_factor;
}

void fwd_free(fwd **fp)
{
	fwd *f;

	if (!fp || !*fp)
		return;
	f = *fp;
	free(f->x);
	free(f->xb);
	free(f->q);
	free(f->k);
	free(f->v);
	free(f->att);
	free(f->hb);
	free(f->hb2);
	free(f->rcos);
	free(f->rsin);
	free(f->inv_freq);
	free(f->row_seq);
	free(f->row_pos);
	free(f->scores);
	free(f->rl);
	free(f->sel);
	free(f->selw);
	free(f->exp_off);
	free(f->slot_pos);
	free(f->xg);
	free(f->yg);
	free(f->hg);
	free(f->hg2);
	free(f->ord);
	free(f->sh_q);
	free(f->sh_o);
	free(f->sh_s);
	free(f->att_qz);
	free(f->sh_qz);
	if (f->pk)
		for (int i = 0; i <= f->m->cfg.n_layers * MODEL_PK_N; i++)
			kern_packed_free(&f->pk[i]);
	free(f->pk);
	free(f);
	*fp = NULL;
}

int fwd_max_rows(const fwd *f)
{
	return f->R;
}

void fwd_set_shared_attn(fwd *f, int on)
{
	f->shared_on = on != 0;
}

long fwd_shared_calls(const fwd *f)
{
	return f->sh_calls;
}

int fwd_kv_win_pattern(const model *m)
{
	const model_config *c = &m->cfg;

	for (int l = 0; l < c->n_layers; l++)
		if (m->layers[l].swa)
			return c->swa_pattern;
	return 0;
}

int fwd_check_pool(const model *m, const kv_pool *pool)
{
	const kv_params *p = kv_pool_params(pool);

	if (p->n_layers != m->cfg.n_layers || p->kv_dim != m->cfg.kv_dim)
		return qerr_fail(QERR_ARG, "KV pool is for %d layers x %d, the "
				 "model has %d x %d", p->n_layers, p->kv_dim,
				 m->cfg.n_layers, m->cfg.kv_dim);
	/* a split pool must split the model's windowed layers off */
	if (p->win_pattern && p->win_pattern != fwd_kv_win_pattern(m))
		return qerr_fail(QERR_ARG, "KV pool splits off the layers of "
				 "window pattern %d, the model's is %d",
				 p->win_pattern, fwd_kv_win_pattern(m));
	/* a q8_0 head must be whole blocks: attention reads head slices */
	if (!kv_row_bytes(p->dtype, m->cfg.head_dim))
		return qerr_fail(QERR_ARG, "KV dtype %s needs a head size that "
				 "is a multiple of %d; the model's head_dim is "
				 "%d", kv_dtype_name(p->dtype), KV_Q8_BLOCK,
				 m->cfg.head_dim);
	return 0;
}

/* ---- pieces ---------------------------------------------------------- */

/* x (M rows of w[0]->k) through the n matrices w[i] (same k; pk[i]
 * their packed copies or NULL, pk NULL for none) into y[i], in one job
 * of the pool. */
static void matmul_n(fwd *f, const model_mat *const *w,
		     const kern_packed *const *pk, const float *const *bias,
		     float *const *y, int n, const float *x, int M)
{
	struct kern_mat km[KERN_MM_MAX];

	for (int i = 0; i < n; i++)
		km[i] = (struct kern_mat){.W = w[i]->data, .wtype = w[i]->type,
					  .N = w[i]->n, .bias = bias[i],
					  .y = y[i], .ldy = w[i]->n,
					  .pk = pk ? pk[i] : NULL};
	kern_matmul_n(f->tp, km, n, w[0]->k, x, w[0]->k, M);
}

static void matmul(fwd *f, const model_mat *w, const kern_packed *pk,
		   const float *bias, const float *x, int M, float *y)
{
	matmul_n(f, &w, &pk, &bias, &y, 1, x, M);
}

static void rope_tables(fwd *f, int M)
{
	size_t half = (size_t)f->m->cfg.head_dim / 2;

	for (int k = 0; k < f->n_rope; k++)
		for (int r = 0; r < M; r++)
			for (size_t i = 0; i < half; i++) {
				size_t o = ((size_t)k * f->R + r) * half + i;
				double th = (double)f->row_pos[r] *
					    f->inv_freq[k * half + i];

				/* times 1.0f without YaRN or an attention
				 * factor: the plain bits */
				f->rcos[o] = (float)cos(th) * f->mscale[k];
				f->rsin[o] = (float)sin(th) * f->mscale[k];
			}
}

/* Rotates n_heads heads of head_dim in vec (one row) with the rotary of
 * kind (0 global, 1 sliding-window layers). */
static void rope_row(const fwd *f, float *vec, int n_heads, int r, int kind)
{
	const model_config *c = &f->m->cfg;
	int hd = c->head_dim, half = hd / 2;
	size_t o = ((size_t)kind * f->R + r) * half;
	const float *cs = f->rcos + o;
	const float *sn = f->rsin + o;

	for (int h = 0; h < n_heads; h++) {
		float *v = vec + (size_t)h * hd;

		for (int i = 0; i < half; i++) {
			int a = c->rope_mode == MODEL_ROPE_NEOX ? i : 2 * i;
			int b = c->rope_mode == MODEL_ROPE_NEOX ? i + half
								: 2 * i + 1;
			float x0 = v[a], x1 = v[b];

			v[a] = x0 * cs[i] - x1 * sn[i];
			v[b] = x0 * sn[i] + x1 * cs[i];
		}
	}
}

/* Rows r0..r1-1's k and v into their sequences' KV rows of layer (each
 * row its own bytes: the threads' rows never share one). */
static void store_kv(const fwd *f, int layer, int r0, int r1)
{
	kv_pool *pool = f->pool;
	const kv_params *p = kv_pool_params(pool);
	int kvd = f->m->cfg.kv_dim, B = p->block_tokens;
	size_t rb = kv_row_bytes(p->dtype, kvd);

	for (int r = r0; r < r1; r++) {
		const kv_seq *s = f->seqs[f->row_seq[r]];
		uint32_t pos = (uint32_t)f->row_pos[r];
		uint32_t blk = s->blocks[pos / B];
		size_t off = (size_t)(pos % B) * rb;

		kv_row_put(p->dtype, f->k + (size_t)r * kvd,
			   (char *)kv_k(pool, blk, layer) + off, kvd);
		kv_row_put(p->dtype, f->v + (size_t)r * kvd,
			   (char *)kv_v(pool, blk, layer) + off, kvd);
	}
}

typedef struct {
	fwd *f; /* its pool and sequences: f->pool, f->seqs */
	int layer, M;
	int n_split; /* slices of each KV head's query heads */
} att_job;

void fwd_att_softmax(float *s, int n, const float *sink)
{
	if (sink)
		s[n++] = *sink;
	kern_softmax(s, n);
}

/* The first n rows of a KV block's keys or values for one KV head (hb
 * bytes at p, the rows `row` bytes apart) requested ahead of the
 * kernels: a layer's KV was last read a whole round ago (from DRAM, or
 * L3 at best) and the kernels' loads would wait for each tile's lines
 * in turn. */
static void kv_prefetch(const char *p, size_t row, size_t hb, int n)
{
	for (int t = 0; t < n; t++)
		for (size_t o = 0; o < hb; o += 64)
			__builtin_prefetch(p + (size_t)t * row + o, 0, 3);
}

/* One row's query heads h0..h0+nh-1, all of KV head kvh: for each, scores
 * over positions lo..pos in order (lo = 0, or pos - window + 1 on a
 * sliding-window layer), softmax (with the head's sink, gpt-oss), then
 * the weighted sum of V in position order. The heads share every key and
 * value row, so the kernels convert each row once for all of them. A
 * window may start inside a shared prefix block: it is read like any
 * other. */
static void attend(const att_job *j, int r, int kvh, int h0, int nh,
		   float *s, char *qz)
{
	const fwd *f = j->f;
	const model_config *c = &f->m->cfg;
	const kv_params *p = kv_pool_params(f->pool);
	const kv_seq *seq = f->seqs[f->row_seq[r]];
	const float *sinks = f->m->layers[j->layer].sinks;
	int hd = c->head_dim, B = p->block_tokens, n = f->row_pos[r] + 1;
	int lo = f->m->layers[j->layer].swa && n > c->swa_window
			 ? n - c->swa_window : 0;
	uint32_t kt = kv_ggml_type(p->dtype);
	size_t q_dim = (size_t)c->q_dim;
	/* a head is whole rows of hd elements (q8_0: whole blocks) */
	size_t head_off = kvh * kv_row_bytes(p->dtype, hd);
	size_t row = kv_row_bytes(p->dtype, c->kv_dim);
	size_t hb = kv_row_bytes(p->dtype, hd);
	int lds = (int)f->scores_cap;
	const float *q = f->q + r * q_dim + (size_t)h0 * hd;
	float *out = f->att + r * q_dim + (size_t)h0 * hd;

	/* q8_0 keys: the heads' queries quantized once for every block */
	if (kt == GGML_TYPE_Q8_0)
		kern_att_q8_prep(q, hd, nh, hd, qz);
	/* s[i * lds + t - lo] holds head h0 + i's score of position t */
	/* walk the page table block by block: one lookup per block */
	for (int t0 = lo - lo % B; t0 < n; t0 += B) {
		uint32_t blk = seq->blocks[t0 / B];
		const char *kb = (const char *)kv_k(f->pool, blk, j->layer) +
				 head_off;
		int rows = n - t0 < B ? n - t0 : B;
		int r0 = t0 < lo ? lo - t0 : 0;

		if (t0 + B < n)
			kv_prefetch((const char *)kv_k(f->pool,
					seq->blocks[t0 / B + 1], j->layer) +
				    head_off, row, hb,
				    n - t0 - B < B ? n - t0 - B : B);
		else
			kv_prefetch((const char *)kv_v(f->pool,
					seq->blocks[(lo - lo % B) / B],
					j->layer) + head_off, row, hb, B);
		if (kt == GGML_TYPE_Q8_0)
			kern_att_scores_q8(qz, nh, kb + (size_t)r0 * row,
					   (size_t)c->kv_dim, rows - r0, hd,
					   f->att_scale, s + t0 + r0 - lo, lds);
		else
			kern_att_scores(q, hd, nh, kb + (size_t)r0 * row,
					(size_t)c->kv_dim, kt, rows - r0, hd,
					f->att_scale, s + t0 + r0 - lo, lds);
	}
	for (int i = 0; i < nh; i++)
		fwd_att_softmax(s + (size_t)i * lds, n - lo,
				sinks ? sinks + h0 + i : NULL);
	memset(out, 0, (size_t)nh * hd * sizeof(float));
	for (int t0 = lo - lo % B; t0 < n; t0 += B) {
		uint32_t blk = seq->blocks[t0 / B];
		const char *vb = (const char *)kv_v(f->pool, blk, j->layer) +
				 head_off;
		int rows = n - t0 < B ? n - t0 : B;
		int r0 = t0 < lo ? lo - t0 : 0;

		if (t0 + B < n)
			kv_prefetch((const char *)kv_v(f->pool,
					seq->blocks[t0 / B + 1], j->layer) +
				    head_off, row, hb,
				    n - t0 - B < B ? n - t0 - B : B);

		kern_att_values(out, hd, nh, s + t0 + r0 - lo, lds,
				vb + (size_t)r0 * row, (size_t)c->kv_dim, kt,
				rows - r0, hd);
	}
}

/* Work items: (row, KV head, slice of its query heads), so that a small
 * batch still has an item per task; the bits do not depend on the slices
 * (every score and output element has its own fixed sequence). */
static void att_task(void *ctx, int task, int n_tasks)
{
	const att_job *j = ctx;
	const model_config *c = &j->f->m->cfg;
	int group = c->n_heads / c->n_kv_heads, ns = j->n_split;
	int per = (group + ns - 1) / ns;
	int total = j->M * c->n_kv_heads * ns;
	int lo = (int)((long)total * task / n_tasks);
	int hi = (int)((long)total * (task + 1) / n_tasks);
	float *s = j->f->scores + (size_t)task * group * j->f->scores_cap;
	char *qz = j->f->att_qz ? j->f->att_qz + (size_t)task * group *
						     j->f->qz_bytes : NULL;

	for (int i = lo; i < hi; i++) {
		int r = i / (c->n_kv_heads * ns), kvh = i / ns % c->n_kv_heads;
		int h0 = kvh * group + i % ns * per;
		int nh = group - i % ns * per < per ? group - i % ns * per : per;

		if (nh > 0)
			attend(j, r, kvh, h0, nh, s, qz);
	}
}

static int ensure_scores(fwd *f, int M)
{
	const model_config *c = &f->m->cfg;
	size_t need = 0, group = (size_t)(c->n_heads / c->n_kv_heads);
	float *ns;

	/* positions, and a sink's slot */
	for (int r = 0; r < M; r++)
		if ((size_t)f->row_pos[r] + 2 > need)
			need = (size_t)f->row_pos[r] + 2;
	if (need <= f->scores_cap)
		return 0;
	need = need < 256 ? 256 : need * 2;
	ns = realloc(f->scores, need * group * f->n_att_tasks * sizeof(float));
	if (!ns)
		return qerr_fail(QERR_NOMEM, "fwd: out of memory for attention "
				 "scores");
	f->scores = ns;
	f->scores_cap = need;
	return 0;
}

/* ---- shared-prefix attention ----------------------------------------
 * Forks of one root (and roots sharing a cached prefix) hold the same
 * blocks at the same indices. With the rows sorted by page table, rows
 * sharing a block are neighbours in f->ord: for each block index and each
 * run of neighbours holding the same block over the same rows of it, one
 * kern_att_scores / kern_att_values call serves all their query heads, so
 * the block's keys and values are read (and converted) once for the run.
 * Each row keeps attend's arithmetic: scores are per (query, key) dots,
 * the softmax is one kern_softmax over the row's positions lo..pos, and
 * each output element accumulates over the row's positions in order
 * (blocks in index order, rows of a block in order); the kernels'
 * per-element results do not depend on how many queries share a call. */

/* Page tables in order: by block id, index by index, shorter first. */
static int table_cmp(const kv_seq *a, const kv_seq *b)
{
	uint32_t n = a->n_blocks < b->n_blocks ? a->n_blocks : b->n_blocks;

	for (uint32_t i = 0; i < n; i++)
		if (a->blocks[i] != b->blocks[i])
			return a->blocks[i] < b->blocks[i] ? -1 : 1;
	return (a->n_blocks > b->n_blocks) - (a->n_blocks < b->n_blocks);
}

/* Sorts the rows by page table into f->ord (after kv_seq_reserve, so a
 * block two rows share is one neither writes) and sizes the scratch.
 * Returns 1 when the shared path applies: a decode batch (one new row per
 * sequence) where two rows share their first block. */
static int plan_shared(fwd *f, kv_seq *const *seqs, const int *n_new,
		       int n_seq, int M, int *rc)
{
	const model_config *c = &f->m->cfg;
	size_t cap = 0, need;
	int share = 0;

	*rc = 0;
	if (!f->shared_on || M < 2)
		return 0;
	for (int i = 0; i < n_seq; i++)
		if (n_new[i] != 1)
			return 0;
	for (int r = 0; r < M; r++) {
		int p = r;

		while (p > 0 && table_cmp(seqs[f->row_seq[f->ord[p - 1]]],
					  seqs[f->row_seq[r]]) > 0) {
			f->ord[p] = f->ord[p - 1];
			p--;
		}
		f->ord[p] = r;
	}
	for (int p = 1; p < M && !share; p++) {
		const kv_seq *a = seqs[f->row_seq[f->ord[p - 1]]];
		const kv_seq *b = seqs[f->row_seq[f->ord[p]]];

		share = a->n_blocks && b->n_blocks &&
			a->blocks[0] == b->blocks[0];
	}
	if (!share)
		return 0;
	/* positions, and a sink's slot */
	for (int r = 0; r < M; r++)
		if ((size_t)f->row_pos[r] + 2 > cap)
			cap = (size_t)f->row_pos[r] + 2;
	cap = (cap + 15) & ~(size_t)15;
	need = (size_t)M * c->n_heads * cap;
	if (need > f->sh_rows) {
		float *ns;

		need += need / 2;
		ns = realloc(f->sh_s, need * sizeof(float));
		if (!ns) {
			*rc = qerr_fail(QERR_NOMEM, "fwd: out of memory for "
					"shared attention scores");
			return 0;
		}
		f->sh_s = ns;
		f->sh_rows = need;
	}
	if (kv_ggml_type(kv_pool_params(f->pool)->dtype) == GGML_TYPE_Q8_0 &&
	    (size_t)M > f->sh_qz_rows) {
		/* every row's query heads, quantized (att_shared) */
		free(f->sh_qz);
		f->sh_qz_rows = 0;
		if (!(f->sh_qz = aligned_alloc(64, (size_t)M * c->n_heads *
						   f->qz_bytes))) {
			*rc = qerr_fail(QERR_NOMEM, "fwd: out of memory for "
					"shared attention queries");
			return 0;
		}
		f->sh_qz_rows = (size_t)M;
	}
	f->sh_cap = cap;
	return 1;
}

/* Sorted row p's span of block b: the block and its rows r0..r0+nt-1 that
 * lie in the row's positions lo..pos (attend's walk); 0 when none do. */
static int sh_span(const att_job *j, int p, int b, uint32_t *blk, int *r0,
		   int *nt)
{
	const fwd *f = j->f;
	const model_config *c = &f->m->cfg;
	int r = f->ord[p], B = kv_pool_params(f->pool)->block_tokens;
	int n = f->row_pos[r] + 1, t0 = b * B;
	int lo = f->m->layers[j->layer].swa && n > c->swa_window
			 ? n - c->swa_window : 0;

	if (t0 >= n || t0 + B <= lo)
		return 0;
	*blk = f->seqs[f->row_seq[r]]->blocks[b];
	*r0 = t0 < lo ? lo - t0 : 0;
	*nt = (n - t0 < B ? n - t0 : B) - *r0;
	return 1;
}

/* Sorted rows p0..p1-1, KV head kvh: attend's three steps, each block
 * read once per run of rows sharing it. */
static void att_shared(const att_job *j, int kvh, int p0, int p1)
{
	const fwd *f = j->f;
	const model_config *c = &f->m->cfg;
	const kv_params *pp = kv_pool_params(f->pool);
	int G = c->n_heads / c->n_kv_heads, hd = c->head_dim, M = j->M;
	int B = pp->block_tokens, nb = 0;
	uint32_t kt = kv_ggml_type(pp->dtype);
	size_t q_dim = (size_t)c->q_dim;
	size_t head_off = kvh * kv_row_bytes(pp->dtype, hd);
	size_t rowb = kv_row_bytes(pp->dtype, c->kv_dim);
	size_t gq = (size_t)G * hd, cap = f->sh_cap;
	float *Q = f->sh_q + (size_t)kvh * M * gq;
	float *O = f->sh_o + (size_t)kvh * M * gq;
	float *S = f->sh_s + (size_t)kvh * M * G * cap;
	/* q8_0 keys: Q's heads quantized once for every block */
	char *QZ = kt == GGML_TYPE_Q8_0 ? f->sh_qz + (size_t)kvh * M * G *
							 f->qz_bytes : NULL;
	const float *sinks = f->m->layers[j->layer].sinks;

	/* S[(p * G + i) * cap + t]: head i of sorted row p, position t */
	for (int p = p0; p < p1; p++) {
		int r = f->ord[p], n = f->row_pos[r] + 1;

		memcpy(Q + p * gq, f->q + r * q_dim + kvh * gq,
		       gq * sizeof(float));
		memset(O + p * gq, 0, gq * sizeof(float));
		if ((n + B - 1) / B > nb)
			nb = (n + B - 1) / B;
	}
	if (QZ)
		kern_att_q8_prep(Q + p0 * gq, hd, (p1 - p0) * G, hd,
				 QZ + (size_t)p0 * G * f->qz_bytes);
	for (int pass = 0; pass < 2; pass++) {
		for (int b = 0; b < nb; b++)
			for (int p = p0; p < p1;) {
				uint32_t blk, blk2;
				int r0, nt, r02, nt2, q = p + 1;
				const char *base;

				if (!sh_span(j, p, b, &blk, &r0, &nt)) {
					p++;
					continue;
				}
				while (q < p1 && sh_span(j, q, b, &blk2, &r02,
							 &nt2) &&
				       blk2 == blk && r02 == r0 && nt2 == nt)
					q++;
				base = (const char *)(pass ? kv_v(f->pool, blk,
								  j->layer)
							   : kv_k(f->pool, blk,
								  j->layer)) +
				       head_off + (size_t)r0 * rowb;
				if (!pass && QZ)
					kern_att_scores_q8(
						QZ + (size_t)p * G *
							     f->qz_bytes,
						(q - p) * G, base,
						(size_t)c->kv_dim, nt, hd,
						f->att_scale,
						S + p * G * cap + b * B + r0,
						(int)cap);
				else if (!pass)
					kern_att_scores(Q + p * gq, hd,
							(q - p) * G, base,
							(size_t)c->kv_dim, kt,
							nt, hd, f->att_scale,
							S + p * G * cap +
								b * B + r0,
							(int)cap);
				else
					kern_att_values(O + p * gq, hd,
							(q - p) * G,
							S + p * G * cap +
								b * B + r0,
							(int)cap, base,
							(size_t)c->kv_dim, kt,
							nt, hd);
				p = q;
			}
		if (pass)
			break;
		for (int p = p0; p < p1; p++) {
			int n = f->row_pos[f->ord[p]] + 1;
			int lo = f->m->layers[j->layer].swa &&
					 n > c->swa_window
					 ? n - c->swa_window : 0;

			for (int i = 0; i < G; i++)
				fwd_att_softmax(S + ((size_t)p * G + i) * cap +
							lo, n - lo,
						sinks ? sinks + kvh * G + i
						      : NULL);
		}
	}
	for (int p = p0; p < p1; p++)
		memcpy(f->att + f->ord[p] * q_dim + kvh * gq, O + p * gq,
		       gq * sizeof(float));
}

/* Task = (chunk of sorted rows, KV head); j->n_split is the chunk count. */
static void att_shared_task(void *ctx, int task, int n_tasks)
{
	const att_job *j = ctx;
	int nkv = j->f->m->cfg.n_kv_heads, C = j->n_split;

	(void)n_tasks;
	att_shared(j, task % nkv, (int)((long)j->M * (task / nkv) / C),
		   (int)((long)j->M * (task / nkv + 1) / C));
}

/* x[r] += RMSNorm(y[r]) * w for rows r0..r1-1 (post_norms), else
 * x[r] += y[r]: fma(1, y, x), the sum's bits, in the ISA's vectors
 * (gcc 12 at -O2 left the loop scalar: x and y may alias). */
static void residual_rows(fwd *f, const float *w, float *y, int r0, int r1)
{
	const model_config *c = &f->m->cfg;

	if (w)
		for (int r = r0; r < r1; r++)
			kern_rmsnorm(y + (size_t)r * c->dim, w, c->dim, c->eps,
				     y + (size_t)r * c->dim);
	kern_axpy(f->x + (size_t)r0 * c->dim, 1.0f, y + (size_t)r0 * c->dim,
		  (r1 - r0) * c->dim);
}

/* ---- row-parallel steps ----------------------------------------------
 * The per-row work of a layer between its matmuls (norms, rotary,
 * residuals, the MLP's activation) split over the pool's threads by
 * rows: every row's arithmetic is the same on any split, so the bits do
 * not depend on the thread count. Below FWD_ROWS_PAR rows the caller
 * runs them alone (a hand-off costs more than the work). */
#define FWD_ROWS_PAR 4

typedef void (*rows_fn)(fwd *f, const model_layer *L, int r0, int r1);

typedef struct {
	fwd *f;
	const model_layer *L;
	rows_fn fn;
	int M;
} rows_job;

static void rows_task(void *ctx, int task, int n_tasks)
{
	const rows_job *j = ctx;
	int r0 = (int)((long)j->M * task / n_tasks);
	int r1 = (int)((long)j->M * (task + 1) / n_tasks);

	if (r0 < r1)
		j->fn(j->f, j->L, r0, r1);
}

static void rows_run(fwd *f, const model_layer *L, rows_fn fn, int M)
{
	rows_job j = {f, L, fn, M};
	int64_t t0 = prof_active ? prof_now() : 0;
	int64_t busy0 = t0 ? tpool_busy_ns(f->tp) : 0;
	int par = f->tp && M >= FWD_ROWS_PAR;

	if (par)
		tpool_run(f->tp, rows_task, &j, tpool_size(f->tp));
	else
		fn(f, L, 0, M);
	if (t0) {
		int64_t wall = prof_now() - t0;

		prof_add(PROF_ROWS, wall);
		/* alone, the caller's pool waits for the whole step */
		prof_add(PROF_ROWS_IDLE, f->tp ? tpool_size(f->tp) * wall -
				 (par ? tpool_busy_ns(f->tp) - busy0 : wall)
					       : 0);
	}
}

/* The attention's input: x normed into xb. */
static void rows_attn_in(fwd *f, const model_layer *L, int r0, int r1)
{
	const model_config *c = &f->m->cfg;

	for (int r = r0; r < r1; r++)
		kern_rmsnorm(f->x + (size_t)r * c->dim, L->attn_norm, c->dim,
			     c->eps, f->xb + (size_t)r * c->dim);
}

/* q and k: their per-head norms (qwen3, gemma3) and the rotary; then
 * k and v into the KV cache, in the rows' step (stored after it on one
 * thread, the other waiting: the 0.5b's 32-row decode on an AMD EPYC
 * Zen 5, roofline, that serial rest 3.5% and these steps 2.4% of the
 * time; 0.5% and 3.5% so). */
static void rows_qk(fwd *f, const model_layer *L, int r0, int r1)
{
	const model_config *c = &f->m->cfg;
	int hd = c->head_dim, kind = L->swa ? 1 : 0;

	for (int r = r0; r < r1; r++) {
		float *q = f->q + (size_t)r * c->q_dim;
		float *k = f->k + (size_t)r * c->kv_dim;

		if (L->q_norm) {
			for (int h = 0; h < c->n_heads; h++)
				kern_rmsnorm(q + (size_t)h * hd, L->q_norm, hd,
					     c->eps, q + (size_t)h * hd);
			for (int h = 0; h < c->n_kv_heads; h++)
				kern_rmsnorm(k + (size_t)h * hd, L->k_norm, hd,
					     c->eps, k + (size_t)h * hd);
		}
		rope_row(f, q, c->n_heads, r, kind);
		rope_row(f, k, c->n_kv_heads, r, kind);
	}
	store_kv(f, (int)(L - f->m->layers), r0, r1);
}

/* The attention's output (in xb) into x, then x normed into xb for the
 * MLP. */
static void rows_ffn_in(fwd *f, const model_layer *L, int r0, int r1)
{
	const model_config *c = &f->m->cfg;

	residual_rows(f, L->post_attn_norm, f->xb, r0, r1);
	for (int r = r0; r < r1; r++)
		kern_rmsnorm(f->x + (size_t)r * c->dim, L->ffn_norm, c->dim,
			     c->eps, f->xb + (size_t)r * c->dim);
}

/* The gated MLP's activation: act(gate) x up, in hb. */
static void rows_act(fwd *f, const model_layer *L, int r0, int r1)
{
	const model_config *c = &f->m->cfg;
	size_t o = (size_t)r0 * c->ffn_dim;
	int n = (r1 - r0) * c->ffn_dim;

	(void)L;
	if (c->act == MODEL_ACT_GELU_TANH)
		kern_gelu_mul(f->hb + o, f->hb2 + o, n);
	else
		kern_silu_mul(f->hb + o, f->hb2 + o, n);
}

/* The MLP's output (in xb) into x. */
static void rows_ffn_out(fwd *f, const model_layer *L, int r0, int r1)
{
	residual_rows(f, L->post_ffn_norm, f->xb, r0, r1);
}

/* The gated MLP of the M normed rows in xb, result into xb. */
static void dense_ffn(fwd *f, const model_layer *L, int M)
{
	prof_label("ffn gate,up");
	matmul_n(f, (const model_mat *const[]){&L->w_gate, &L->w_up},
		 (const kern_packed *const[]){lpk(f, L, MODEL_PK_GATE),
					      lpk(f, L, MODEL_PK_UP)},
		 (const float *const[]){NULL, NULL},
		 (float *const[]){f->hb, f->hb2}, 2, f->xb, M);
	prof_label("ffn down");
	rows_run(f, L, rows_act, M);
	matmul(f, &L->w_down, lpk(f, L, MODEL_PK_DOWN), NULL, f->hb, M, f->xb);
}

/* a ranks above b: a number above NaN, else the larger */
static int prob_above(float a, float b)
{
	return !isnan(a) && (isnan(b) || a > b);
}

void fwd_moe_route(float *logits, int n, int k, int gating, int norm,
		   int *sel, float *w)
{
	if (gating == MODEL_GATE_SOFTMAX)
		kern_softmax(logits, n);
	for (int j = 0; j < k; j++) {
		int best = -1;

		/* ascending ids, replaced only by a strictly higher rank:
		 * ties go to the lower id */
		for (int e = 0; e < n; e++) {
			int taken = 0;

			for (int i = 0; i < j; i++)
				taken |= sel[i] == e;
			if (!taken && (best < 0 ||
				       prob_above(logits[e], logits[best])))
				best = e;
		}
		sel[j] = best;
		w[j] = logits[best];
	}
	if (gating == MODEL_GATE_SOFTMAX_WEIGHT)
		kern_softmax(w, k);
	if (norm) {
		double sum = 0;
		float s;

		for (int j = 0; j < k; j++)
			sum += (double)w[j];
		s = (float)sum;
		if (s < 6.103515625e-5f)
			s = 6.103515625e-5f;
		for (int j = 0; j < k; j++)
			w[j] = w[j] / s;
	}
}

/* Mixture of experts over the M normed rows in xb, result into xb. Each
 * row is routed to n_used experts; the slots (row, rank) are gathered
 * expert by expert (rows in order), so each expert's matrices are read
 * once per call, and every matmul row is the bits it has alone (biases,
 * gpt-oss: added after each dot, as ggml_add_id). A row's output is then
 * sum_j (expert_j(x) * w_j) in rank order, one rounding per product and
 * per addition. */
static void moe_ffn(fwd *f, const model_layer *L, int M)
{
	const model_config *c = &f->m->cfg;
	int E = c->n_expert, k = c->n_expert_used, D = c->dim;
	int F = c->expert_ffn;

	prof_label("moe router");
	matmul(f, &L->router, NULL, L->router_b, f->xb, M, f->rl);
	prof_label("moe experts");
	memset(f->exp_off, 0, (size_t)(E + 1) * sizeof(int));
	for (int r = 0; r < M; r++) {
		fwd_moe_route(f->rl + (size_t)r * E, E, k, c->expert_gating,
			      c->expert_norm_w, f->sel + (size_t)r * k,
			      f->selw + (size_t)r * k);
		for (int j = 0; j < k; j++)
			f->exp_off[f->sel[(size_t)r * k + j] + 1]++;
	}
	for (int e = 0; e < E; e++)
		f->exp_off[e + 1] += f->exp_off[e];
	/* exp_off[e] runs ahead while placing, then is restored */
	for (int r = 0; r < M; r++)
		for (int j = 0; j < k; j++) {
			int e = f->sel[(size_t)r * k + j], p = f->exp_off[e]++;

			f->slot_pos[(size_t)r * k + j] = p;
			memcpy(f->xg + (size_t)p * D, f->xb + (size_t)r * D,
			       (size_t)D * sizeof(float));
		}
	for (int e = E; e > 0; e--)
		f->exp_off[e] = f->exp_off[e - 1];
	f->exp_off[0] = 0;
	for (int e = 0; e < E; e++) {
		int p = f->exp_off[e], n = f->exp_off[e + 1] - p;
		model_mat g, u, d;

		if (!n)
			continue;
		g = model_expert(&L->w_gate, e);
		u = model_expert(&L->w_up, e);
		d = model_expert(&L->w_down, e);
		matmul_n(f, (const model_mat *const[]){&g, &u}, NULL,
			 (const float *const[]){
				 L->b_gate ? L->b_gate + (size_t)e * F : NULL,
				 L->b_up ? L->b_up + (size_t)e * F : NULL},
			 (float *const[]){f->hg + (size_t)p * F,
					  f->hg2 + (size_t)p * F},
			 2, f->xg + (size_t)p * D, n);
		if (c->expert_act == MODEL_ACT_SWIGLU_OAI)
			kern_swiglu_oai(f->hg + (size_t)p * F,
					f->hg2 + (size_t)p * F, n * F,
					MODEL_SWIGLU_OAI_ALPHA,
					MODEL_SWIGLU_OAI_LIMIT);
		else
			kern_silu_mul(f->hg + (size_t)p * F,
				      f->hg2 + (size_t)p * F, n * F);
		matmul(f, &d, NULL,
		       L->b_down ? L->b_down + (size_t)e * D : NULL,
		       f->hg + (size_t)p * F, n, f->yg + (size_t)p * D);
	}
	for (int r = 0; r < M; r++) {
		float *out = f->xb + (size_t)r * D;

		for (int j = 0; j < k; j++) {
			const float *y = f->yg +
				(size_t)f->slot_pos[(size_t)r * k + j] * D;
			float w = f->selw[(size_t)r * k + j];

			for (int i = 0; i < D; i++) {
				float t = y[i] * w;

				out[i] = j ? out[i] + t : t;
			}
		}
	}
}

int fwd_moe_ffn(fwd *f, int l, const float *x, int M, float *y)
{
	const model_config *c = &f->m->cfg;

	if (l < 0 || l >= c->n_layers || !f->m->layers[l].router.data ||
	    M < 1 || M > f->R)
		return qerr_fail(QERR_ARG, "fwd: no MoE layer %d for %d rows",
				 l, M);
	memcpy(f->xb, x, (size_t)M * c->dim * sizeof(float));
	moe_ffn(f, &f->m->layers[l], M);
	memcpy(y, f->xb, (size_t)M * c->dim * sizeof(float));
	return 0;
}

static void layer(fwd *f, int l, int M)
{
	const model_config *c = &f->m->cfg;
	const model_layer *L = &f->m->layers[l];
	att_job aj = {f, l, M, 1};
	int64_t att_t0, busy0;

	rows_run(f, L, rows_attn_in, M);
	prof_label("attn q,k,v");
	matmul_n(f, (const model_mat *const[]){&L->wq, &L->wk, &L->wv},
		 (const kern_packed *const[]){lpk(f, L, MODEL_PK_Q),
					      lpk(f, L, MODEL_PK_K),
					      lpk(f, L, MODEL_PK_V)},
		 (const float *const[]){L->bq, L->bk, L->bv},
		 (float *const[]){f->q, f->k, f->v}, 3, f->xb, M);
	rows_run(f, L, rows_qk, M);
	att_t0 = prof_active ? prof_now() : 0;
	busy0 = att_t0 ? tpool_busy_ns(f->tp) : 0;
	if (f->sh_active) {
		/* chunks of sorted rows: (chunk, KV head) tasks enough to
		 * balance the threads as attend's do, each chunk reading a
		 * shared block once */
		int C = (f->n_att_tasks + c->n_kv_heads - 1) / c->n_kv_heads;

		aj.n_split = C < M ? C : M;
		tpool_run(f->tp, att_shared_task, &aj,
			  aj.n_split * c->n_kv_heads);
	} else {
		/* split the query heads of a KV head only while there are
		 * fewer items than threads (decode of a few sequences on
		 * many threads) */
		while (M * c->n_kv_heads * aj.n_split <
			       f->n_att_tasks / FWD_ATT_TASKS_PER_THREAD &&
		       aj.n_split < c->n_heads / c->n_kv_heads)
			aj.n_split++;
		tpool_run(f->tp, att_task, &aj, f->n_att_tasks);
	}
	if (att_t0) {
		int64_t wall = prof_now() - att_t0;

		prof_add(PROF_ATTENTION, wall);
		if (f->tp)
			prof_add(PROF_ATT_IDLE, tpool_size(f->tp) * wall -
				 (tpool_busy_ns(f->tp) - busy0));
	}
	prof_label("attn out");
	matmul(f, &L->wo, lpk(f, L, MODEL_PK_O), L->bo, f->att, M, f->xb);
	rows_run(f, L, rows_ffn_in, M);
	if (L->router.data)
		moe_ffn(f, L, M);
	else
		dense_ffn(f, L, M);
	rows_run(f, L, rows_ffn_out, M);
}

/* ---- entry points ---------------------------------------------------- */

static int batch(fwd *f, kv_pool *pool, kv_seq *const *seqs,
		 const int *n_new, int n_seq, const int32_t *tokens,
		 float *logits, int all_rows)
{
	const model_config *c = &f->m->cfg;
	int M = 0, rc, n_out = 0;

	if (n_seq < 1)
		return qerr_fail(QERR_ARG, "fwd: no sequences");
	if ((rc = fwd_check_pool(f->m, pool)))
		return rc;
	for (int i = 0; i < n_seq; i++) {
		if (n_new[i] < 1 || n_new[i] > f->R - M)
			return qerr_fail(QERR_RANGE, "fwd: %d new tokens for "
					 "sequence %d exceed the batch of %d "
					 "rows", n_new[i], i, f->R);
		if ((int64_t)seqs[i]->n_tokens + n_new[i] > c->ctx_len)
			return qerr_fail(QERR_TOOLONG, "fwd: %u + %d tokens "
					 "exceed the context of %d",
					 seqs[i]->n_tokens, n_new[i],
					 c->ctx_len);
		for (int t = 0; t < n_new[i]; t++) {
			f->row_seq[M] = i;
			f->row_pos[M] = (int)seqs[i]->n_tokens + t;
			M++;
		}
	}
	for (int r = 0; r < M; r++)
		if (tokens[r] < 0 || tokens[r] >= c->vocab)
			return qerr_fail(QERR_RANGE, "fwd: token id %d is "
					 "outside the vocabulary (0..%d)",
					 tokens[r], c->vocab - 1);
	if ((rc = ensure_scores(f, M)))
		return rc;
	for (int i = 0; i < n_seq; i++)
		if ((rc = kv_seq_reserve(pool, seqs[i], (uint32_t)n_new[i])))
			return rc;
	f->pool = pool;
	f->seqs = seqs;
	f->sh_active = plan_shared(f, seqs, n_new, n_seq, M, &rc);
	if (rc)
		return rc;
	f->sh_calls += f->sh_active;
	for (int r = 0; r < M; r++)
		kern_row_f32(f->m->tok_embd.data, f->m->tok_embd.type, c->dim,
			     tokens[r], f->x + (size_t)r * c->dim);
	if (c->embd_scale != 1.0f)
		for (size_t i = 0; i < (size_t)M * c->dim; i++)
			f->x[i] *= c->embd_scale;
	rope_tables(f, M);
	for (int l = 0; l < c->n_layers; l++)
		layer(f, l, M);
	for (int i = 0; i < n_seq; i++)
		kv_seq_commit(seqs[i], (uint32_t)n_new[i]);
	if (!logits)
		return 0;
	/* gather the rows that need logits into xb, normed */
	for (int r = 0; r < M; r++) {
		int last = r + 1 == M || f->row_seq[r + 1] != f->row_seq[r];

		if (!all_rows && !last)
			continue;
		kern_rmsnorm(f->x + (size_t)r * c->dim, f->m->output_norm,
			     c->dim, c->eps, f->xb + (size_t)n_out * c->dim);
		n_out++;
	}
	prof_label("output");
	matmul(f, &f->m->output, f->pk[(size_t)c->n_layers * MODEL_PK_N], NULL,
	       f->xb, n_out, logits);
	if (c->logit_softcap > 0.0f)
		for (size_t i = 0; i < (size_t)n_out * c->vocab; i++)
			logits[i] = c->logit_softcap *
				    kern_tanhf(logits[i] / c->logit_softcap);
	return 0;
}

int fwd_batch(fwd *f, kv_pool *pool, kv_seq *const *seqs, const int *n_new,
	      int n_seq, const int32_t *tokens, float *logits, int all_rows)
{
	int64_t t0 = prof_active ? prof_now() : 0;
	int rc = batch(f, pool, seqs, n_new, n_seq, tokens, logits, all_rows);

	if (t0)
		prof_add(PROF_FWD, prof_now() - t0);
	return rc;
}

int fwd_prefill(fwd *f, kv_pool *pool, kv_seq *seq, const int32_t *tokens,
		int n, float *logits)
{
	int rc;

	if (n < 1)
		return qerr_fail(QERR_ARG, "fwd: empty prompt");
	for (int done = 0; done < n;) {
		int chunk = n - done < f->R ? n - done : f->R;
		int last = done + chunk == n;

		rc = fwd_batch(f, pool, &seq, &chunk, 1, tokens + done,
			       last ? logits : NULL, 0);
		if (rc)
			return rc;
		done += chunk;
	}
	return 0;
}
