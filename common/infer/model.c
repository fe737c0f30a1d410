/*
 * model — loads a transformer from a GGUF file (see model.h): reads and
 * checks the hyper-parameters of each architecture, binds every tensor by
 * name with its shape and weight type (a missing or misshaped one is an
 * error naming it, and so is one the architecture does not read),
 * converts the small 1-D tensors to f32, optionally copies the weights
 * into huge pages, and computes the model fingerprint workers and the
 * coordinator compare. Callers: sc/, worker/, tools/.
 */
#include "infer/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/shm.h"
#include "kernels/kern.h"
#include "qerr.h"
#include "format/quant.h"

#define MODEL_MAX_DIM 65536
#define MODEL_MAX_LAYERS 1024
#define MODEL_MAX_VOCAB GGUF_MAX_VOCAB
#define MODEL_MAX_CTX GGUF_MAX_CONTEXT
#define MODEL_MAX_EXPERTS 1024

const char *model_arch_name(int arch)
{
	switch (arch) {
	case MODEL_QWEN2: return "qwen2";
	case MODEL_LLAMA: return "llama";
	case MODEL_QWEN3: return "qwen3";
	case MODEL_GEMMA3: return "gemma3";
	case MODEL_QWEN3MOE: return "qwen3moe";
	case MODEL_GPTOSS: return "gpt-oss";
	default: return "unknown";
	}
}

typedef struct {
	model *m;
	const char *path;
	char arch[32];
	/* per tensor of the file: whether the loader read it (find); what
	 * is left over at the end makes the file refused (check_used) */
	unsigned char *used;
} loader;

static int get_hp(loader *L, const char *suffix, int lo, int hi, int *out)
{
	char key[128];
	uint32_t v;
	int rc;

	snprintf(key, sizeof(key), "%s.%s", L->arch, suffix);
	rc = gguf_get_u32(L->m->gguf, key, &v);
	if (rc)
		return rc;
	if ((int64_t)v < lo || (int64_t)v > hi)
		return qerr_fail(QERR_RANGE, "%s: %s = %u is out of range "
				 "[%d, %d]", L->path, key, v, lo, hi);
	*out = (int)v;
	return 0;
}

/* An optional hyper-parameter: *out keeps its default when absent. */
static int opt_hp(loader *L, const char *suffix, int lo, int hi, int *out)
{
	int rc = get_hp(L, suffix, lo, hi, out);

	if (rc == QERR_MISSING) {
		qerr_clear();
		return 0;
	}
	return rc;
}

static int opt_f32(loader *L, const char *suffix, float *out)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", L->arch, suffix);
	rc = gguf_get_f32(L->m->gguf, key, out);
	if (rc == QERR_MISSING) {
		qerr_clear();
		return 0;
	}
	return rc;
}

static int find(loader *L, const char *name, int optional,
		const gguf_tensor **out)
{
	const gguf_tensor *t = gguf_find_tensor(L->m->gguf, name);

	*out = t;
	if (!t)
		return optional ? 0 : qerr_fail(QERR_MISSING, "%s: missing "
						"tensor '%s'", L->path, name);
	L->used[t - gguf_tensor_at(L->m->gguf, 0)] = 1;
	if (!quant_weight_ok(t->type))
		return qerr_fail(QERR_UNSUPPORTED, "%s: %s: weight type %s (%u) "
				 "is not supported (supported: %s)", L->path,
				 name, ggml_type_name(t->type), t->type,
				 quant_supported_list());
	/* the reader leaves a row that is not whole blocks unsized */
	if (!t->data)
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' has rows of "
				 "%llu elements, not whole %s blocks", L->path,
				 name, (unsigned long long)t->ne[0],
				 ggml_type_name(t->type));
	return 0;
}

/* A tensor's dimensions less its trailing ones of size 1 (at least 1):
 * [k, n, 1] is the matrix [k, n], as llama.cpp compares shapes, with the
 * dimensions past n_dims counted as 1. */
static unsigned dims_of(const gguf_tensor *t)
{
	unsigned d = t->n_dims;

	while (d > 1 && t->ne[d - 1] == 1)
		d--;
	return d;
}

static int get_mat(loader *L, const char *name, int k, int n, int optional,
		   model_mat *out)
{
	const gguf_tensor *t;
	int rc = find(L, name, optional, &t);

	if (rc || !t)
		return rc;
	if (t->n_dims < 2 || dims_of(t) > 2 || t->ne[0] != (uint64_t)k ||
	    t->ne[1] != (uint64_t)n)
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' has %u dims "
				 "[%llu, %llu%s], want 2 [%d, %d]", L->path,
				 name, t->n_dims, (unsigned long long)t->ne[0],
				 (unsigned long long)(t->n_dims > 1 ? t->ne[1]
								    : 1),
				 t->n_dims > 2 ? ", ..." : "", k, n);
	int64_t blk, bad = quant_check(t->type, t->data, k, n, &blk);
	if (bad >= 0)
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' row %lld block "
				 "%lld: a %s scale is NaN or infinite", L->path,
				 name, (long long)bad, (long long)blk,
				 ggml_type_name(t->type));
	out->data = t->data;
	out->type = t->type;
	out->k = k;
	out->n = n;
	return 0;
}

/* 3-D expert tensor: n_exp matrices of n rows of k, expert-major. */
static int get_exps(loader *L, const char *name, int k, int n, int n_exp,
		    model_mat *out)
{
	const gguf_tensor *t;
	int rc = find(L, name, 0, &t);

	if (rc)
		return rc;
	if (t->n_dims < 3 || dims_of(t) > 3 || t->ne[0] != (uint64_t)k ||
	    t->ne[1] != (uint64_t)n || t->ne[2] != (uint64_t)n_exp)
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' has %u dims "
				 "[%llu, %llu, %llu], want 3 [%d, %d, %d]",
				 L->path, name, t->n_dims,
				 (unsigned long long)t->ne[0],
				 (unsigned long long)t->ne[1],
				 (unsigned long long)(t->n_dims > 2 ? t->ne[2]
								    : 1),
				 k, n, n_exp);
	int64_t blk, bad = quant_check(t->type, t->data, k,
				       (int64_t)n * n_exp, &blk);
	if (bad >= 0)
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' expert %lld row "
				 "%lld block %lld: a %s scale is NaN or "
				 "infinite", L->path, name,
				 (long long)(bad / n), (long long)(bad % n),
				 (long long)blk, ggml_type_name(t->type));
	out->data = t->data;
	out->type = t->type;
	out->k = k;
	out->n = n;
	out->stride = (size_t)ggml_row_bytes(t->type, (uint64_t)k) * n;
	return 0;
}

/* The router of a MoE layer: every weight finite, so that a bad file is
 * refused at load rather than routing on NaN. */
static int get_router(loader *L, const char *name, model_mat *out)
{
	model_config *c = &L->m->cfg;
	float *row;
	int rc = get_mat(L, name, c->dim, c->n_expert, 0, out);

	if (rc)
		return rc;
	row = malloc((size_t)c->dim * sizeof(float));
	if (!row)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", L->path);
	for (int e = 0; e < c->n_expert && !rc; e++) {
		kern_row_f32(out->data, out->type, c->dim, e, row);
		for (int i = 0; i < c->dim; i++)
			if (!isfinite(row[i])) {
				rc = qerr_fail(QERR_FORMAT, "%s: tensor '%s' "
					       "(router) row %d element %d is "
					       "%g", L->path, name, e, i,
					       row[i]);
				break;
			}
	}
	free(row);
	return rc;
}

static int get_vecs(loader *L, const char *name, int n, int rows,
		    int optional, const float **out);
static int get_finite_vec(loader *L, const char *name, int n,
			  const float **out);

/* The feed-forward part of layer i: a gated MLP, or a mixture of
 * experts (gpt-oss: with biases on the router and every expert). */
static int load_ffn(loader *L, int i, model_layer *l)
{
	model_config *c = &L->m->cfg;
	char nm[96];
	int rc;

#define T(field) (snprintf(nm, sizeof(nm), "blk.%d.%s", i, field), nm)
	if (!c->n_expert) {
		if ((rc = get_mat(L, T("ffn_gate.weight"), c->dim, c->ffn_dim,
				  0, &l->w_gate)) ||
		    (rc = get_mat(L, T("ffn_up.weight"), c->dim, c->ffn_dim, 0,
				  &l->w_up)) ||
		    (rc = get_mat(L, T("ffn_down.weight"), c->ffn_dim, c->dim,
				  0, &l->w_down)))
			return rc;
		return 0;
	}
	if ((rc = get_router(L, T("ffn_gate_inp.weight"), &l->router)) ||
	    (rc = get_exps(L, T("ffn_gate_exps.weight"), c->dim,
			   c->expert_ffn, c->n_expert, &l->w_gate)) ||
	    (rc = get_exps(L, T("ffn_up_exps.weight"), c->dim, c->expert_ffn,
			   c->n_expert, &l->w_up)) ||
	    (rc = get_exps(L, T("ffn_down_exps.weight"), c->expert_ffn,
			   c->dim, c->n_expert, &l->w_down)))
		return rc;
	if (c->arch == MODEL_GPTOSS &&
	    ((rc = get_finite_vec(L, T("ffn_gate_inp.bias"), c->n_expert,
				  &l->router_b)) ||
	     (rc = get_vecs(L, T("ffn_gate_exps.bias"), c->expert_ffn,
			    c->n_expert, 0, &l->b_gate)) ||
	     (rc = get_vecs(L, T("ffn_up_exps.bias"), c->expert_ffn,
			    c->n_expert, 0, &l->b_up)) ||
	     (rc = get_vecs(L, T("ffn_down_exps.bias"), c->dim, c->n_expert,
			    0, &l->b_down))))
		return rc;
#undef T
	return 0;
}

/* A small tensor converted to an owned f32 array: 1-D of n elements
 * (rows 0), or 2-D of rows rows of n (per-expert biases). */
static int get_vecs(loader *L, const char *name, int n, int rows,
		    int optional, const float **out)
{
	const gguf_tensor *t;
	model *m = L->m;
	float *v, **no;
	int rc = find(L, name, optional, &t);

	*out = NULL;
	if (rc || !t)
		return rc;
	if (!rows && (dims_of(t) != 1 || t->ne[0] != (uint64_t)n))
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' has %llu "
				 "elements in %u dims, want %d", L->path, name,
				 (unsigned long long)t->ne[0], t->n_dims, n);
	if (rows && (t->n_dims < 2 || dims_of(t) > 2 ||
		     t->ne[0] != (uint64_t)n || t->ne[1] != (uint64_t)rows))
		return qerr_fail(QERR_FORMAT, "%s: tensor '%s' has %u dims "
				 "[%llu, %llu], want 2 [%d, %d]", L->path,
				 name, t->n_dims, (unsigned long long)t->ne[0],
				 (unsigned long long)(t->n_dims > 1 ? t->ne[1]
								    : 1),
				 n, rows);
	v = malloc((size_t)n * (rows ? rows : 1) * sizeof(float));
	no = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof(*no));
	if (!v || !no) {
		free(v);
		if (no)
			m->owned = no;
		return qerr_fail(QERR_NOMEM, "%s: out of memory", L->path);
	}
	m->owned = no;
	m->owned[m->n_owned++] = v;
	for (int r = 0; r < (rows ? rows : 1); r++)
		kern_row_f32(t->data, t->type, n, r, v + (size_t)r * n);
	*out = v;
	return 0;
}

static int get_vec(loader *L, const char *name, int n, int optional,
		   const float **out)
{
	return get_vecs(L, name, n, 0, optional, out);
}

/* A vector the routing or the softmax takes as it is (router bias,
 * sinks): every element finite, else an error naming it. */
static int get_finite_vec(loader *L, const char *name, int n,
			  const float **out)
{
	int rc = get_vec(L, name, n, 0, out);

	for (int i = 0; !rc && i < n; i++)
		if (!isfinite((*out)[i]))
			return qerr_fail(QERR_FORMAT, "%s: tensor '%s' element "
					 "%d is %g", L->path, name, i,
					 (*out)[i]);
	return rc;
}

static int load_layers(loader *L)
{
	model *m = L->m;
	model_config *c = &m->cfg;
	int q_dim = c->q_dim, rc = 0;
	char nm[96];

	m->layers = calloc((size_t)c->n_layers, sizeof(model_layer));
	if (!m->layers)
		return qerr_fail(QERR_NOMEM, "%s: out of memory", L->path);
	for (int i = 0; i < c->n_layers && !rc; i++) {
		model_layer *l = &m->layers[i];
		int bias = c->arch == MODEL_QWEN2, qkn = c->qk_norm;
		int post = c->post_norms, oss = c->arch == MODEL_GPTOSS;

		l->swa = c->swa_window > 0 &&
			 i % c->swa_pattern != c->swa_pattern - 1;
#define T(field) (snprintf(nm, sizeof(nm), "blk.%d.%s", i, field), nm)
		if ((rc = get_vec(L, T("attn_norm.weight"), c->dim, 0,
				  &l->attn_norm)) ||
		    (rc = get_mat(L, T("attn_q.weight"), c->dim, q_dim, 0,
				  &l->wq)) ||
		    (rc = get_mat(L, T("attn_k.weight"), c->dim, c->kv_dim, 0,
				  &l->wk)) ||
		    (rc = get_mat(L, T("attn_v.weight"), c->dim, c->kv_dim, 0,
				  &l->wv)) ||
		    (rc = get_mat(L, T("attn_output.weight"), q_dim, c->dim, 0,
				  &l->wo)) ||
		    /* gpt-oss: Q/K/V biases optional as in llama.cpp */
		    (rc = get_vec(L, T("attn_q.bias"), q_dim, !bias, &l->bq)) ||
		    (rc = get_vec(L, T("attn_k.bias"), c->kv_dim, !bias,
				  &l->bk)) ||
		    (rc = get_vec(L, T("attn_v.bias"), c->kv_dim, !bias,
				  &l->bv)) ||
		    (qkn && (rc = get_vec(L, T("attn_q_norm.weight"),
					  c->head_dim, 0, &l->q_norm))) ||
		    (qkn && (rc = get_vec(L, T("attn_k_norm.weight"),
					  c->head_dim, 0, &l->k_norm))) ||
		    /* llama.cpp: required by gpt-oss, optional in llama */
		    ((oss || c->arch == MODEL_LLAMA) &&
		     (rc = get_vec(L, T("attn_output.bias"), c->dim, !oss,
				   &l->bo))) ||
		    (c->attn_sinks &&
		     (rc = get_finite_vec(L, T("attn_sinks.weight"),
					  c->n_heads, &l->sinks))) ||
		    (post && (rc = get_vec(L, T("post_attention_norm.weight"),
					   c->dim, 0, &l->post_attn_norm))) ||
		    /* gpt-oss names its FFN input norm post_attention */
		    (rc = get_vec(L, T(oss ? "post_attention_norm.weight"
					   : "ffn_norm.weight"),
				  c->dim, 0, &l->ffn_norm)) ||
		    (rc = load_ffn(L, i, l)) ||
		    (post && (rc = get_vec(L, T("post_ffw_norm.weight"),
					   c->dim, 0, &l->post_ffn_norm))))
			break;
#undef T
	}
	return rc;
}

static const struct {
	const char *name;
	int arch, rope_mode, qk_norm, post_norms, act;
} arch_table[] = {
	{"qwen2", MODEL_QWEN2, MODEL_ROPE_NEOX, 0, 0, MODEL_ACT_SILU},
	{"qwen3", MODEL_QWEN3, MODEL_ROPE_NEOX, 1, 0, MODEL_ACT_SILU},
	{"llama", MODEL_LLAMA, MODEL_ROPE_NORM, 0, 0, MODEL_ACT_SILU},
	{"gemma3", MODEL_GEMMA3, MODEL_ROPE_NEOX, 1, 1, MODEL_ACT_GELU_TANH},
	{"qwen3moe", MODEL_QWEN3MOE, MODEL_ROPE_NEOX, 1, 0, MODEL_ACT_SILU},
	{"gpt-oss", MODEL_GPTOSS, MODEL_ROPE_NEOX, 0, 0, MODEL_ACT_SILU},
};

/* Mixture of experts (qwen3moe, gpt-oss): expert_count,
 * expert_used_count (at most expert_count), expert_feed_forward_length
 * (else, as llama.cpp, feed_forward_length / expert_used_count).
 * feed_forward_length is optional here. The gating and the experts'
 * activation are the architecture's. */
static int load_moe(loader *L)
{
	model_config *c = &L->m->cfg;
	int rc;

	if (c->arch != MODEL_QWEN3MOE && c->arch != MODEL_GPTOSS)
		return 0;
	if ((rc = get_hp(L, "expert_count", 1, MODEL_MAX_EXPERTS,
			 &c->n_expert)) ||
	    (rc = get_hp(L, "expert_used_count", 1, MODEL_MAX_EXPERTS,
			 &c->n_expert_used)))
		return rc;
	if (c->n_expert_used > c->n_expert)
		return qerr_fail(QERR_RANGE, "%s: %s.expert_used_count = %d "
				 "exceeds %s.expert_count = %d", L->path,
				 L->arch, c->n_expert_used, L->arch,
				 c->n_expert);
	c->expert_ffn = c->ffn_dim / c->n_expert_used;
	if ((rc = opt_hp(L, "expert_feed_forward_length", 1, 1 << 20,
			 &c->expert_ffn)))
		return rc;
	if (c->expert_ffn < 1)
		return qerr_fail(QERR_MISSING, "%s: missing key "
				 "%s.expert_feed_forward_length", L->path,
				 L->arch);
	if (!c->ffn_dim)
		c->ffn_dim = c->expert_ffn;
	if (c->arch == MODEL_GPTOSS) {
		c->expert_gating = MODEL_GATE_SOFTMAX_WEIGHT;
		c->expert_act = MODEL_ACT_SWIGLU_OAI;
	} else {
		c->expert_norm_w = 1;
	}
	return 0;
}

/* YaRN's magnitude factor for a frequency scale (llama.cpp's
 * get_mscale with mscale 1). */
static double yarn_mscale(double factor)
{
	return factor <= 1.0 ? 1.0 : 0.1 * log(factor) + 1.0;
}

/* Rotary scaling: none, linear (a frequency scale) or yarn (that scale
 * blended per pair, and a magnitude factor); the rest (longrope, ...)
 * would silently change the logits, so they are refused. As llama.cpp:
 * the factor is rope.scaling.factor (else rope.scale_linear), yarn's
 * attention factor is get_mscale(factor) divided by the 1 + 0.1 ln(factor)
 * that the rope multiplies back in, times rope.scaling.attn_factor. */
static int load_rope_scaling(loader *L)
{
	model_config *c = &L->m->cfg;
	float factor = 0.0f, attn = 1.0f;
	gguf_str type;
	char key[128];
	int rc;

	c->rope_attn_factor = 1.0f;
	c->yarn_orig_ctx = c->ctx_len;
	snprintf(key, sizeof(key), "%s.rope.scaling.type", L->arch);
	rc = gguf_get_str(L->m->gguf, key, &type);
	if (rc == QERR_MISSING) {
		qerr_clear();
	} else if (rc) {
		return rc;
	} else if (!gguf_str_eq(type, "none") && !gguf_str_eq(type, "linear") &&
		   !gguf_str_eq(type, "yarn")) {
		return qerr_fail(QERR_UNSUPPORTED, "%s: %s = '%.*s' is not "
				 "supported (none, linear, yarn)", L->path,
				 key, (int)(type.len > 32 ? 32 : type.len),
				 type.ptr);
	} else if (gguf_str_eq(type, "none")) {
		return 0;
	} else {
		c->rope_yarn = gguf_str_eq(type, "yarn");
	}
	if ((rc = opt_f32(L, "rope.scaling.factor", &factor)))
		return rc;
	if (factor == 0.0f && (rc = opt_f32(L, "rope.scale_linear", &factor)))
		return rc;
	if (factor != 0.0f && !(factor >= 1e-3f && factor <= 1e6f))
		return qerr_fail(QERR_RANGE, "%s: rope scaling factor %g out "
				 "of range", L->path, factor);
	c->rope_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
	if ((rc = opt_f32(L, "rope.scaling.attn_factor", &attn)) ||
	    (rc = opt_hp(L, "rope.scaling.original_context_length", 1,
			 MODEL_MAX_CTX, &c->yarn_orig_ctx)))
		return rc;
	if (!(attn > 0.0f && attn < 1e3f))
		return qerr_fail(QERR_RANGE, "%s: rope.scaling.attn_factor %g "
				 "out of range", L->path, attn);
	if (c->rope_yarn) {
		double f = 1.0 / (double)c->rope_scale;

		c->rope_attn_factor = (float)(yarn_mscale(f) /
					      (1.0 + 0.1 * log(f)));
	}
	c->rope_attn_factor *= attn;
	return 0;
}

/* Sliding-window attention: window, pattern, local rope base. gemma3:
 * window optional, pattern 6, local base 10000 unscaled; gpt-oss: window
 * required, pattern 2, local layers rotate as the global ones (base
 * freq_base_swa if given). */
static int load_swa(loader *L)
{
	model_config *c = &L->m->cfg;
	int rc, oss = c->arch == MODEL_GPTOSS;

	c->rope_base_swa = oss ? c->rope_base : 10000.0f;
	c->rope_scale_swa = oss ? c->rope_scale : 1.0f;
	c->swa_pattern = oss ? 2 : 6;
	if (c->arch != MODEL_GEMMA3 && !oss)
		return 0;
	if ((rc = (oss ? get_hp : opt_hp)(L, "attention.sliding_window", oss,
					  MODEL_MAX_CTX, &c->swa_window)) ||
	    (rc = opt_hp(L, "attention.sliding_window_pattern", 1,
			 MODEL_MAX_LAYERS, &c->swa_pattern)) ||
	    (rc = opt_f32(L, "rope.freq_base_swa", &c->rope_base_swa)) ||
	    (rc = opt_f32(L, "final_logit_softcapping", &c->logit_softcap)))
		return rc;
	if (!(c->rope_base_swa > 1.0f && c->rope_base_swa < 1e12f) ||
	    !(c->logit_softcap >= 0.0f && c->logit_softcap < 1e6f))
		return qerr_fail(QERR_RANGE, "%s: rope.freq_base_swa %g or "
				 "final_logit_softcapping %g out of range",
				 L->path, c->rope_base_swa, c->logit_softcap);
	return 0;
}

static int load_config(loader *L)
{
	model *m = L->m;
	model_config *c = &m->cfg;
	const gguf_kv *toks;
	gguf_str arch;
	char key[128];
	int rc, n_rot, v_len, found = 0;

	if ((rc = gguf_get_str(m->gguf, "general.architecture", &arch)))
		return rc;
	for (size_t i = 0; i < sizeof(arch_table) / sizeof(arch_table[0]);
	     i++)
		if (gguf_str_eq(arch, arch_table[i].name)) {
			c->arch = arch_table[i].arch;
			c->rope_mode = arch_table[i].rope_mode;
			c->qk_norm = arch_table[i].qk_norm;
			c->post_norms = arch_table[i].post_norms;
			c->act = arch_table[i].act;
			found = 1;
		}
	if (!found) {
		/* its control bytes shown (a NUL had made 'qwen2\0' print as
		 * a supported name) */
		char shown[64 * 4 + 1];
		size_t o = 0;

		for (size_t i = 0; i < arch.len && i < 64; i++) {
			unsigned char b = (unsigned char)arch.ptr[i];

			o += (size_t)snprintf(shown + o, sizeof(shown) - o,
					      b < 0x20 || b == 0x7f ? "\\x%02x"
								 : "%c", b);
		}
		return qerr_fail(QERR_UNSUPPORTED, "%s: unsupported "
				 "architecture '%s' (supported: "
				 MODEL_ARCH_LIST ")", L->path, shown);
	}
	snprintf(L->arch, sizeof(L->arch), "%s", model_arch_name(c->arch));
	if ((rc = get_hp(L, "embedding_length", 1, MODEL_MAX_DIM, &c->dim)) ||
	    (rc = get_hp(L, "block_count", 1, MODEL_MAX_LAYERS,
			 &c->n_layers)) ||
	    (rc = get_hp(L, "attention.head_count", 1, MODEL_MAX_DIM,
			 &c->n_heads)) ||
	    (rc = (c->arch == MODEL_QWEN3MOE || c->arch == MODEL_GPTOSS
			   ? opt_hp : get_hp)(
			 L, "feed_forward_length", 1, 1 << 20, &c->ffn_dim)) ||
	    (rc = get_hp(L, "context_length", 1, MODEL_MAX_CTX, &c->ctx_len)) ||
	    (rc = load_moe(L)))
		return rc;
	c->n_kv_heads = c->n_heads;
	if ((rc = opt_hp(L, "attention.head_count_kv", 1, MODEL_MAX_DIM,
			 &c->n_kv_heads)))
		return rc;
	if (c->n_heads % c->n_kv_heads)
		return qerr_fail(QERR_FORMAT, "%s: head_count_kv %d does not "
				 "divide head_count %d", L->path,
				 c->n_kv_heads, c->n_heads);
	c->head_dim = c->dim % c->n_heads ? 0 : c->dim / c->n_heads;
	if ((rc = opt_hp(L, "attention.key_length", 1, MODEL_MAX_DIM,
			 &c->head_dim)))
		return rc;
	if (!c->head_dim)
		return qerr_fail(QERR_FORMAT, "%s: head_count %d does not "
				 "divide embedding_length %d and there is no "
				 "attention.key_length", L->path, c->n_heads,
				 c->dim);
	v_len = c->head_dim;
	n_rot = c->head_dim;
	if ((rc = opt_hp(L, "attention.value_length", 1, MODEL_MAX_DIM,
			 &v_len)) ||
	    (rc = opt_hp(L, "rope.dimension_count", 1, MODEL_MAX_DIM, &n_rot)))
		return rc;
	if (v_len != c->head_dim || n_rot != c->head_dim)
		return qerr_fail(QERR_UNSUPPORTED, "%s: key length %d, value "
				 "length %d and rotary dimensions %d differ "
				 "(not supported)", L->path, c->head_dim, v_len,
				 n_rot);
	if (c->head_dim % 2)
		return qerr_fail(QERR_FORMAT, "%s: head dimension %d is odd",
				 L->path, c->head_dim);
	if ((int64_t)c->n_heads * c->head_dim > MODEL_MAX_DIM)
		return qerr_fail(QERR_RANGE, "%s: %d heads of %d are too wide",
				 L->path, c->n_heads, c->head_dim);
	c->q_dim = c->n_heads * c->head_dim;
	c->kv_dim = c->n_kv_heads * c->head_dim;
	snprintf(key, sizeof(key), "%s.rope.freq_base", L->arch);
	rc = gguf_get_f32(m->gguf, key, &c->rope_base);
	if (rc == QERR_MISSING) {
		qerr_clear();
		c->rope_base = 10000.0f;
	} else if (rc) {
		return rc;
	}
	snprintf(key, sizeof(key), "%s.attention.layer_norm_rms_epsilon",
		 L->arch);
	if ((rc = gguf_get_f32(m->gguf, key, &c->eps)))
		return rc;
	if (!(c->eps > 0.0f && c->eps < 1.0f) ||
	    !(c->rope_base > 1.0f && c->rope_base < 1e12f))
		return qerr_fail(QERR_RANGE, "%s: rms epsilon %g or rope base "
				 "%g out of range", L->path, c->eps,
				 c->rope_base);
	c->rope_scale = 1.0f;
	if ((rc = load_rope_scaling(L)) || (rc = load_swa(L)))
		return rc;
	c->attn_sinks = c->arch == MODEL_GPTOSS;
	c->embd_scale = c->arch == MODEL_GEMMA3 ? sqrtf((float)c->dim) : 1.0f;
	/* llama.cpp: Gemma 3 27B (62 layers) scales by dim / heads */
	c->att_scale = (float)(1.0 / sqrt((double)(
		c->arch == MODEL_GEMMA3 && c->n_layers == 62
			? c->dim / c->n_heads : c->head_dim)));
	if ((rc = gguf_get_arr(m->gguf, "tokenizer.ggml.tokens", GGUF_STRING,
			       &toks)))
		return rc;
	if (toks->arr_n < 1 || toks->arr_n > MODEL_MAX_VOCAB)
		return qerr_fail(QERR_RANGE, "%s: vocabulary of %llu tokens",
				 L->path, (unsigned long long)toks->arr_n);
	c->vocab = (int)toks->arr_n;
	return 0;
}

/* Every tensor of the file was read. One the architecture's loader
 * never looks up (a layer past block_count, qk-norms in a qwen2 file;
 * a second tensor of one name gguf_open refuses) would otherwise be
 * silently ignored and a different model run: the file is corrupt or
 * mislabelled, and llama.cpp refuses it too ("wrong number of
 * tensors"). The tensors that are optional (output.weight when tied,
 * rope_freqs.weight, the biases) count as read when present, so they
 * pass. */
static int check_used(loader *L)
{
	const gguf_file *g = L->m->gguf;
	const model_config *c = &L->m->cfg;

	for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
		const gguf_tensor *t = gguf_tensor_at(g, i);
		const char *nm = t->name.ptr;
		int nl = t->name.len > 96 ? 96 : (int)t->name.len;
		unsigned long layer;
		char *end;

		if (L->used[i])
			continue;
		/* blk.<n>.: a layer the header does not count */
		if (t->name.len > 4 && !memcmp(nm, "blk.", 4) &&
		    nm[4] >= '0' && nm[4] <= '9') {
			char num[12] = {0};

			memcpy(num, nm + 4, t->name.len - 4 < sizeof(num) - 1
					    ? t->name.len - 4
					    : sizeof(num) - 1);
			layer = strtoul(num, &end, 10);
			if (*end == '.' && layer >= (unsigned long)c->n_layers)
				return qerr_fail(QERR_FORMAT, "%s: tensor "
						 "'%.*s' is not a tensor of a "
						 "%d-layer %s model "
						 "(block_count %d)", L->path,
						 nl, nm, c->n_layers, L->arch,
						 c->n_layers);
		}
		return qerr_fail(QERR_FORMAT, "%s: tensor '%.*s' is not a "
				 "tensor of a %s model (running without it "
				 "would be a different model: a mislabelled "
				 "or corrupt file?)", L->path, nl, nm, L->arch);
	}
	return 0;
}

int model_from_gguf(gguf_file *g, model **out)
{
	loader L = {0};
	model *m;
	int rc;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	L.used = calloc(gguf_n_tensors(g) ? gguf_n_tensors(g) : 1, 1);
	if (!m || !L.used) {
		free(m);
		free(L.used);
		return qerr_fail(QERR_NOMEM, "out of memory");
	}
	m->gguf = g;
	L.m = m;
	L.path = gguf_path(g);
	if ((rc = load_config(&L)))
		goto fail;
	rc = get_mat(&L, "token_embd.weight", m->cfg.dim, m->cfg.vocab, 0,
		     &m->tok_embd);
	if (rc) {
		const gguf_tensor *t = gguf_find_tensor(g, "token_embd.weight");
		if (t && t->n_dims >= 2 && dims_of(t) <= 2 &&
		    t->ne[0] == (uint64_t)m->cfg.dim &&
		    t->ne[1] != (uint64_t)m->cfg.vocab)
			rc = qerr_fail(QERR_FORMAT, "%s: the tokenizer has %d "
				       "tokens but token_embd.weight has %llu "
				       "rows", L.path, m->cfg.vocab,
				       (unsigned long long)t->ne[1]);
		goto fail;
	}
	if ((rc = get_vec(&L, "output_norm.weight", m->cfg.dim, 0,
			  &m->output_norm)) ||
	    (rc = get_mat(&L, "output.weight", m->cfg.dim, m->cfg.vocab, 1,
			  &m->output)))
		goto fail;
	if (!m->output.data) {
		m->output = m->tok_embd;
		m->tied_output = 1;
	}
	if (m->cfg.arch == MODEL_LLAMA &&
	    (rc = get_vec(&L, "rope_freqs.weight", m->cfg.head_dim / 2, 1,
			  &m->rope_freqs)))
		goto fail;
	for (int i = 0; m->rope_freqs && i < m->cfg.head_dim / 2; i++)
		if (!(m->rope_freqs[i] >= 1e-6f && m->rope_freqs[i] <= 1e6f)) {
			rc = qerr_fail(QERR_RANGE, "%s: rope_freqs.weight[%d] "
				       "= %g out of range", L.path, i,
				       m->rope_freqs[i]);
			goto fail;
		}
	if ((rc = load_layers(&L)) || (rc = check_used(&L)))
		goto fail;
	free(L.used);
	m->fingerprint = gguf_fingerprint(g);
	*out = m;
	return 0;
fail:
	free(L.used);
	m->gguf = NULL; /* caller keeps g on failure */
	model_free(&m);
	return rc;
}

/* Weights of at least this many bytes are copied (auto). */
#define MODEL_COPY_MIN ((uint64_t)64 << 20)

/* Each packing slot's matrix: its name in a layer of the file, its field
 * in model_layer, and whether a mixture of experts has none (the FFN). */
static const struct {
	const char *name;
	size_t off;
	int dense;
} pk_slots[MODEL_PK_N] = {
	[MODEL_PK_Q] = {"attn_q.weight", offsetof(model_layer, wq), 0},
	[MODEL_PK_K] = {"attn_k.weight", offsetof(model_layer, wk), 0},
	[MODEL_PK_V] = {"attn_v.weight", offsetof(model_layer, wv), 0},
	[MODEL_PK_O] = {"attn_output.weight", offsetof(model_layer, wo), 0},
	[MODEL_PK_GATE] = {"ffn_gate.weight", offsetof(model_layer, w_gate), 1},
	[MODEL_PK_UP] = {"ffn_up.weight", offsetof(model_layer, w_up), 1},
	[MODEL_PK_DOWN] = {"ffn_down.weight", offsetof(model_layer, w_down), 1},
};

const model_mat *model_packed_mat(const model *m, int l, int slot)
{
	if (slot < 0 || slot >= MODEL_PK_N || l < 0 || l > m->cfg.n_layers)
		return NULL;
	if (l == m->cfg.n_layers)
		return slot ? NULL : &m->output;
	if (pk_slots[slot].dense && m->cfg.n_expert)
		return NULL;
	return (const model_mat *)((const char *)&m->layers[l] +
				   pk_slots[slot].off);
}

/* Whether t is one of the matrices model_packed_mat names: a slot's
 * name in a layer ("blk.<n>.<name>"), or the output head (the
 * embeddings when the file has none, as model_from_gguf ties them). A
 * mixture of experts' file has no dense FFN names to match. */
static int packed_name(const gguf_tensor *t, int tied)
{
	const char *nm = t->name.ptr, *r;
	size_t len = t->name.len;

	if (gguf_str_eq(t->name, "output.weight") ||
	    (tied && gguf_str_eq(t->name, "token_embd.weight")))
		return 1;
	if (len < 5 || memcmp(nm, "blk.", 4))
		return 0;
	for (r = nm + 4; r < nm + len && *r >= '0' && *r <= '9'; r++)
		;
	if (r == nm + 4 || r >= nm + len || *r != '.')
		return 0;
	r++;
	for (int i = 0; i < MODEL_PK_N; i++)
		if ((size_t)(nm + len - r) == strlen(pk_slots[i].name) &&
		    !memcmp(r, pk_slots[i].name, (size_t)(nm + len - r)))
			return 1;
	return 0;
}

/* Copied, unless the forward pass packs it and its kernels then read only
 * the packed copy (kern_pack_covers): those bytes are read once, to pack
 * them, from the file's mapping. ctx: whether the head is tied. */
static int copy_keep(const gguf_tensor *t, void *ctx)
{
	return !(t->ne[2] <= 1 && t->ne[3] <= 1 && t->ne[0] <= INT32_MAX &&
		 packed_name(t, *(const int *)ctx) &&
		 kern_pack_covers(t->type, (int)t->ne[0]));
}

int model_load(const char *path, model **out)
{
	gguf_file *g;
	int rc = gguf_open(path, &g);
	const char *w = getenv("QUORUM_WEIGHTS");
	uint64_t size;

	*out = NULL;
	if (rc)
		return rc;
	/* QUORUM_WEIGHTS=copy | map | auto (default): copy when the file
	 * is big enough to gain and half the available memory holds it
	 * (processes loading one file share its mapping, not copies) */
	size = gguf_file_size(g);
	if (w && !strcmp(w, "copy") ? 1 : w && !strcmp(w, "map") ? 0 :
	    size >= MODEL_COPY_MIN && shm_mem_available() / 2 >= size) {
		int tied = !gguf_find_tensor(g, "output.weight");

		(void)gguf_copy_tensors_if(g, copy_keep, &tied);
	} /* else the mapping serves */
	rc = model_from_gguf(g, out);
	if (rc)
		gguf_close(&g);
	return rc;
}

void model_free(model **mp)
{
	model *m;

	if (!mp || !*mp)
		return;
	m = *mp;
	for (int i = 0; i < m->n_owned; i++)
		free(m->owned[i]);
	free(m->owned);
	free(m->layers);
	gguf_close(&m->gguf);
	free(m);
	*mp = NULL;
}
