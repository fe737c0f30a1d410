/*
 * mkmodel — writes synthesized GGUF models (see mkmodel.h): the shape
 * table, each tensor's seeded pseudo-random values, quantized per
 * llama.cpp's per-tensor recipes, and the tokenizer's keys copied from a
 * tokenizer.json (hfvocab) or another GGUF. Callers: `quorum mkmodel`,
 * tests, benchmarks.
 */
#include "infer/mkmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/hfvocab.h"
#include "kernels/kern.h"
#include "qerr.h"
#include "format/quant.h"

#define SHAPE_UNTIED(nm, d, l, h, kvh, ff, ctx, voc, rope, ep, ar)          \
	.name = nm, .dim = d, .n_layers = l, .n_heads = h, .n_kv_heads = kvh, \
	.ffn_dim = ff, .ctx_len = ctx, .vocab = voc, .rope_base = rope,      \
	.eps = ep, .arch = ar
#define SHAPE(nm, d, l, h, kvh, ff, ctx, voc, rope, ep, ar)                 \
	SHAPE_UNTIED(nm, d, l, h, kvh, ff, ctx, voc, rope, ep, ar), .tied = 1

static const mkmodel_shape shapes[] = {
	{SHAPE("tiny", 128, 2, 4, 2, 256, 4096, 0, 10000.0f, 1e-6f, "qwen2")},
	{SHAPE("small", 256, 4, 8, 2, 640, 8192, 0, 1000000.0f, 1e-6f,
	       "qwen2")},
	{SHAPE("qwen2.5-0.5b", 896, 24, 14, 2, 4864, 32768, 151936,
	       1000000.0f, 1e-6f, "qwen2")},
	{SHAPE("qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 32768, 151936,
	       1000000.0f, 1e-6f, "qwen2")},
	{SHAPE("qwen3-0.6b", 1024, 28, 16, 8, 3072, 40960, 151936,
	       1000000.0f, 1e-6f, "qwen3"), .head_dim = 128},
	{SHAPE("llama-3.2-1b", 2048, 16, 32, 8, 8192, 131072, 128256,
	       500000.0f, 1e-5f, "llama"), .rope_freqs = 1},
	{SHAPE("gemma-3-1b", 1152, 26, 4, 1, 6912, 32768, 262144,
	       1000000.0f, 1e-6f, "gemma3"), .head_dim = 256,
	 .swa_window = 512, .swa_pattern = 6, .rope_base_swa = 10000.0f},
	/* tiny shapes of each architecture for tests: head_dim != dim/heads,
	 * a GQA ratio of 4, a window shorter than test prompts */
	{SHAPE("tiny-qwen3", 128, 2, 4, 2, 256, 4096, 0, 1000000.0f, 1e-6f,
	       "qwen3"), .head_dim = 48},
	{SHAPE("tiny-llama3", 128, 2, 8, 2, 256, 4096, 0, 500000.0f, 1e-5f,
	       "llama"), .rope_freqs = 1},
	{SHAPE("tiny-gemma3", 128, 4, 4, 1, 256, 4096, 0, 1000000.0f, 1e-6f,
	       "gemma3"), .head_dim = 40, .swa_window = 8, .swa_pattern = 3,
	 .rope_base_swa = 10000.0f},
	/* Qwen3-30B-A3B (HF config: 128 experts, 8 per token, expert
	 * intermediate 768, intermediate 6144, untied output) */
	{SHAPE_UNTIED("qwen3-30b-a3b", 2048, 48, 32, 4, 6144, 40960, 151936,
		      1000000.0f, 1e-6f, "qwen3moe"), .head_dim = 128,
	 .n_expert = 128, .n_expert_used = 8, .expert_ffn = 768},
	/* MoE test shapes: tiny (rows fall back from K-quants), small (rows
	 * of 256 for K-quants) */
	{SHAPE("tiny-qwen3moe", 128, 2, 4, 2, 256, 4096, 0, 1000000.0f,
	       1e-6f, "qwen3moe"), .head_dim = 48, .n_expert = 8,
	 .n_expert_used = 2, .expert_ffn = 64},
	{SHAPE("small-qwen3moe", 256, 2, 4, 2, 1024, 4096, 0, 1000000.0f,
	       1e-6f, "qwen3moe"), .head_dim = 64, .n_expert = 16,
	 .n_expert_used = 4, .expert_ffn = 256},
	/* gpt-oss-20b (HF config: 24 layers, hidden 2880, 64 heads of 64,
	 * 8 KV heads, 32 experts, 4 per token, intermediate 2880, window 128
	 * on even layers, rope theta 150000 with YaRN factor 32 over 4096,
	 * vocab 201088, untied output) */
	{SHAPE_UNTIED("gpt-oss-20b", 2880, 24, 64, 8, 2880, 131072, 201088,
		      150000.0f, 1e-5f, "gpt-oss"), .head_dim = 64,
	 .n_expert = 32, .n_expert_used = 4, .expert_ffn = 2880,
	 .swa_window = 128, .swa_pattern = 2, .yarn_factor = 32.0f,
	 .yarn_orig_ctx = 4096},
	/* its test shape: q_dim 256 != dim, GQA 4, 3 layers (local, global,
	 * local), a window shorter than test prompts, YaRN's ramp inside
	 * head_dim (pairs 4..9 of 16 blend) */
	{SHAPE_UNTIED("tiny-gptoss", 128, 3, 8, 2, 64, 4096, 0, 150000.0f,
		      1e-5f, "gpt-oss"), .head_dim = 32, .n_expert = 8,
	 .n_expert_used = 3, .expert_ffn = 64, .swa_window = 8,
	 .swa_pattern = 2, .yarn_factor = 32.0f, .yarn_orig_ctx = 4096},
	{0},
};

const mkmodel_shape *mkmodel_shapes(void)
{
	return shapes;
}

const mkmodel_shape *mkmodel_find_shape(const char *name)
{
	for (const mkmodel_shape *s = shapes; s->name; s++)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

/* ---- deterministic weights ------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* A tensor to synthesize: values uniform in [center - a, center + a). */
typedef struct {
	char name[64];
	uint32_t type;
	uint32_t n_dims;
	uint64_t ne[3];         /* ne[2]: experts of a 3-D tensor, else 1 */
	float center, half_width;
	int64_t boost_row;      /* this row is scaled by boost (-1: none) */
	float boost;
} spec;

typedef struct {
	spec *t;
	int n, cap;
	uint64_t seed;
	uint64_t bytes;
} plan;

static int add(plan *p, const char *name, uint32_t type, uint32_t n_dims,
	       uint64_t ne0, uint64_t ne1, float center, float std)
{
	spec *s;

	if (p->n == p->cap) {
		int nc = p->cap ? p->cap * 2 : 64;
		spec *nt = realloc(p->t, (size_t)nc * sizeof(*nt));

		if (!nt)
			return qerr_fail(QERR_NOMEM, "mkmodel: out of memory");
		p->t = nt;
		p->cap = nc;
	}
	s = &p->t[p->n++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->type = n_dims == 1 ? GGML_TYPE_F32 : type;
	s->n_dims = n_dims;
	s->ne[0] = ne0;
	s->ne[1] = ne1;
	s->ne[2] = 1;
	s->center = center;
	s->half_width = std * 1.7320508f; /* uniform: std = a / sqrt(3) */
	s->boost_row = -1;
	return 0;
}

/* A 3-D expert tensor: E matrices of ne1 rows of ne0, centered. */
static int add3(plan *p, const char *name, uint32_t type, uint64_t ne0,
		uint64_t ne1, uint64_t E, float std)
{
	int rc = add(p, name, type, 3, ne0, ne1, 0.0f, std);

	if (!rc)
		p->t[p->n - 1].ne[2] = E;
	return rc;
}

static void gen_row(uint64_t *st, const spec *s, float *row, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		/* 24 random bits -> [-1, 1), exact in float */
		float u = (float)(splitmix64(st) >> 40) * (1.0f / 8388608.0f) -
			  1.0f;
		row[i] = s->center + s->half_width * u;
	}
}

static int fill(void *ctx, int idx, void *dst, uint64_t nbytes)
{
	plan *p = ctx;
	const spec *s = &p->t[idx];
	uint64_t st = p->seed ^ name_hash(s->name), rows = s->ne[1] * s->ne[2];
	uint64_t k = s->ne[0];
	float *row = malloc(k * sizeof(float));
	uint8_t *d = dst;
	uint64_t rb = ggml_row_bytes(s->type, k);

	if (!row)
		return qerr_fail(QERR_NOMEM, "mkmodel: out of memory");
	splitmix64(&st);
	if (s->n_dims == 1)
		rows = 1;
	for (uint64_t r = 0; r < rows; r++, d += rb) {
		gen_row(&st, s, row, k);
		if ((int64_t)r == s->boost_row)
			for (uint64_t i = 0; i < k; i++)
				row[i] *= s->boost;
		quant_quantize_row(s->type, row, d, (int)k);
	}
	free(row);
	(void)nbytes;
	return 0;
}

/* Embedding rows: small (as in trained models), so the residual stream
 * is dominated by the layers rather than by the input token; the output
 * norm's gain brings the logits back to a spread of ~3. The row of the
 * end-of-sequence token is boosted so that samples end at varied lengths
 * (a few percent per step) instead of always running to the limit. */
#define MK_EMBD_STD 0.02f
#define MK_LOGIT_STD 3.0f
#define MK_EOS_BOOST 2.5f

static int shape_head_dim(const mkmodel_shape *sh)
{
	return sh->head_dim ? sh->head_dim : sh->dim / sh->n_heads;
}

static int plan_tensors(plan *p, const mkmodel_shape *sh, const char *arch,
			uint32_t wt, int vocab, int eos)
{
	int hd = shape_head_dim(sh), q = sh->n_heads * hd;
	int kv = sh->n_kv_heads * hd;
	int qwen2 = !strcmp(arch, "qwen2"), gemma3 = !strcmp(arch, "gemma3");
	int oss = !strcmp(arch, "gpt-oss");
	int moe = !strcmp(arch, "qwen3moe") || oss;
	int qk_norm = gemma3 || !strcmp(arch, "qwen3moe") ||
		      !strcmp(arch, "qwen3");
	float s_in = 1.0f / sqrtf((float)sh->dim);
	float s_ffn = 1.0f / sqrtf((float)sh->ffn_dim);
	float s_res = 1.0f / sqrtf(2.0f * (float)sh->n_layers);
	float gain = MK_LOGIT_STD / (sqrtf((float)sh->dim) * MK_EMBD_STD);
	char nm[64];
	int rc = 0;

	rc |= add(p, "token_embd.weight", wt, 2, sh->dim, vocab, 0.0f,
		  MK_EMBD_STD);
	if (!rc && eos >= 0 && eos < vocab) {
		p->t[p->n - 1].boost_row = eos;
		p->t[p->n - 1].boost = MK_EOS_BOOST;
	}
	rc |= add(p, "output_norm.weight", wt, 1, sh->dim, 1, gain,
		  0.05f * gain);
	if (!sh->tied) {
		rc |= add(p, "output.weight", wt, 2, sh->dim, vocab, 0.0f,
			  MK_EMBD_STD);
		if (!rc && eos >= 0 && eos < vocab) {
			p->t[p->n - 1].boost_row = eos;
			p->t[p->n - 1].boost = MK_EOS_BOOST;
		}
	}
	/* Llama 3 style divisors of the rotary frequencies, in [1, 8) */
	if (sh->rope_freqs && !strcmp(arch, "llama"))
		rc |= add(p, "rope_freqs.weight", wt, 1, hd / 2, 1, 4.5f,
			  3.5f / 1.7320508f);
	for (int l = 0; l < sh->n_layers && !rc; l++) {
#define N(x) (snprintf(nm, sizeof(nm), "blk.%d.%s", l, x), nm)
		rc |= add(p, N("attn_norm.weight"), wt, 1, sh->dim, 1, 1.0f,
			  0.05f);
		rc |= add(p, N("attn_q.weight"), wt, 2, sh->dim, q, 0.0f, s_in);
		rc |= add(p, N("attn_k.weight"), wt, 2, sh->dim, kv, 0.0f, s_in);
		rc |= add(p, N("attn_v.weight"), wt, 2, sh->dim, kv, 0.0f, s_in);
		if (qwen2 || oss) {
			rc |= add(p, N("attn_q.bias"), wt, 1, q, 1, 0.0f, 0.1f);
			rc |= add(p, N("attn_k.bias"), wt, 1, kv, 1, 0.0f, 0.1f);
			rc |= add(p, N("attn_v.bias"), wt, 1, kv, 1, 0.0f, 0.1f);
		}
		if (oss) {
			rc |= add(p, N("attn_output.bias"), wt, 1, sh->dim, 1,
				  0.0f, 0.1f * s_res);
			/* sinks of the order of the scores */
			rc |= add(p, N("attn_sinks.weight"), wt, 1,
				  sh->n_heads, 1, 0.0f, 1.0f);
		}
		if (qk_norm) {
			rc |= add(p, N("attn_q_norm.weight"), wt, 1, hd, 1,
				  1.0f, 0.05f);
			rc |= add(p, N("attn_k_norm.weight"), wt, 1, hd, 1,
				  1.0f, 0.05f);
		}
		rc |= add(p, N("attn_output.weight"), wt, 2, q, sh->dim, 0.0f,
			  s_in * s_res);
		if (gemma3)
			rc |= add(p, N("post_attention_norm.weight"), wt, 1,
				  sh->dim, 1, s_res, 0.05f * s_res);
		/* gpt-oss's FFN input norm is named post_attention */
		rc |= add(p, N(oss ? "post_attention_norm.weight"
				   : "ffn_norm.weight"), wt, 1, sh->dim, 1,
			  1.0f, 0.05f);
		if (moe) {
			int E = sh->n_expert, F = sh->expert_ffn;
			/* gpt-oss: gate and up spread ~3, so that the
			 * SwiGLU's clamps at +-7 are reached (a few percent
			 * of elements); the down projection shrinks as much
			 * as its inputs grow */
			float sp = oss ? 3.0f : 1.0f;

			/* router logits with a spread of ~1 */
			rc |= add(p, N("ffn_gate_inp.weight"), wt, 2, sh->dim,
				  E, 0.0f, s_in);
			rc |= add3(p, N("ffn_gate_exps.weight"), wt, sh->dim,
				   F, E, sp * s_in);
			rc |= add3(p, N("ffn_up_exps.weight"), wt, sh->dim, F,
				   E, sp * s_in);
			rc |= add3(p, N("ffn_down_exps.weight"), wt, F,
				   sh->dim, E,
				   s_res / sqrtf((float)F) / (sp * sp));
			if (oss) {
				rc |= add(p, N("ffn_gate_inp.bias"), wt, 1, E,
					  1, 0.0f, 0.5f);
				rc |= add(p, N("ffn_gate_exps.bias"), wt, 2, F,
					  E, 0.0f, 0.5f);
				rc |= add(p, N("ffn_up_exps.bias"), wt, 2, F, E,
					  0.0f, 0.5f);
				rc |= add(p, N("ffn_down_exps.bias"), wt, 2,
					  sh->dim, E, 0.0f, 0.1f * s_res);
			}
		} else {
		rc |= add(p, N("ffn_gate.weight"), wt, 2, sh->dim, sh->ffn_dim,
			  0.0f, s_in);
		rc |= add(p, N("ffn_up.weight"), wt, 2, sh->dim, sh->ffn_dim,
			  0.0f, s_in);
		rc |= add(p, N("ffn_down.weight"), wt, 2, sh->ffn_dim, sh->dim,
			  0.0f, s_ffn * s_res);
		}
		if (gemma3)
			rc |= add(p, N("post_ffw_norm.weight"), wt, 1, sh->dim,
				  1, s_res, 0.05f * s_res);
#undef N
	}
	return rc ? QERR_NOMEM : 0;
}

static int write_hparams(gguf_writer *w, const mkmodel_shape *sh,
			 const char *arch, const quant_ftype *ft, uint64_t seed)
{
	char key[96], name[96];
	uint32_t ftype = ft->llama_ftype;

	snprintf(name, sizeof(name), "quorum-synthetic-%s-seed%llu", sh->name,
		 (unsigned long long)seed);
	gguf_w_str(w, "general.architecture", arch);
	gguf_w_str(w, "general.name", name);
	gguf_w_u32(w, "general.file_type", ftype);
	gguf_w_u32(w, "general.quantization_version", 2);
#define K(x) (snprintf(key, sizeof(key), "%s.%s", arch, x), key)
	gguf_w_u32(w, K("context_length"), (uint32_t)sh->ctx_len);
	gguf_w_u32(w, K("embedding_length"), (uint32_t)sh->dim);
	gguf_w_u32(w, K("block_count"), (uint32_t)sh->n_layers);
	gguf_w_u32(w, K("feed_forward_length"), (uint32_t)sh->ffn_dim);
	gguf_w_u32(w, K("attention.head_count"), (uint32_t)sh->n_heads);
	gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)sh->n_kv_heads);
	gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)shape_head_dim(sh));
	if (sh->head_dim) {
		gguf_w_u32(w, K("attention.key_length"), (uint32_t)sh->head_dim);
		gguf_w_u32(w, K("attention.value_length"),
			   (uint32_t)sh->head_dim);
	}
	if (sh->n_expert) {
		gguf_w_u32(w, K("expert_count"), (uint32_t)sh->n_expert);
		gguf_w_u32(w, K("expert_used_count"),
			   (uint32_t)sh->n_expert_used);
		gguf_w_u32(w, K("expert_feed_forward_length"),
			   (uint32_t)sh->expert_ffn);
	}
	gguf_w_f32(w, K("rope.freq_base"), sh->rope_base);
	if (!strcmp(arch, "gemma3") && sh->swa_window) {
		gguf_w_u32(w, K("attention.sliding_window"),
			   (uint32_t)sh->swa_window);
		gguf_w_u32(w, K("attention.sliding_window_pattern"),
			   (uint32_t)sh->swa_pattern);
		gguf_w_f32(w, K("rope.freq_base_swa"), sh->rope_base_swa);
	}
	/* gpt-oss as llama.cpp's converter writes it: the window, not the
	 * pattern (2 is the architecture's) */
	if (!strcmp(arch, "gpt-oss"))
		gguf_w_u32(w, K("attention.sliding_window"),
			   (uint32_t)sh->swa_window);
	if (sh->yarn_factor > 0.0f) {
		gguf_w_str(w, K("rope.scaling.type"), "yarn");
		gguf_w_f32(w, K("rope.scaling.factor"), sh->yarn_factor);
		gguf_w_u32(w, K("rope.scaling.original_context_length"),
			   (uint32_t)sh->yarn_orig_ctx);
	}
	return gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), sh->eps);
#undef K
}

static int write_vocab(gguf_writer *w, const mkmodel_opts *o, int pad_to,
		       mkmodel_info *info)
{
	size_t n = strlen(o->tokenizer);
	hfvocab_info hi;
	int rc;

	memset(&hi, 0, sizeof(hi));
	if (n >= 5 && !strcmp(o->tokenizer + n - 5, ".gguf")) {
		gguf_file *g;

		/* a GGUF vocabulary is copied as it is: its own pre too */
		if (o->pre && *o->pre)
			return qerr_fail(QERR_ARG, "--pre %.40s: the vocabulary "
					 "%s is a GGUF file, copied with its own "
					 "tokenizer.ggml.pre (--pre names a "
					 "tokenizer.json's)", o->pre,
					 o->tokenizer);
		if ((rc = gguf_open(o->tokenizer, &g)))
			return rc;
		rc = hfvocab_from_gguf(w, g, &hi);
		gguf_close(&g);
	} else {
		rc = hfvocab_from_json(w, o->tokenizer, o->pre, (uint32_t)pad_to,
				       &hi);
	}
	if (rc)
		return rc;
	info->n_tokens = (int)hi.n_tokens;
	info->eos = hi.eos;
	snprintf(info->pre, sizeof(info->pre), "%s", hi.pre);
	return 0;
}

int mkmodel_write(const mkmodel_opts *o, mkmodel_info *info)
{
	const mkmodel_shape *sh = mkmodel_find_shape(o->shape ? o->shape : "");
	mkmodel_shape shl;
	const char *arch;
	gguf_writer *w = NULL;
	plan p = {0};
	int rc;

	memset(info, 0, sizeof(*info));
	if (!sh)
		return qerr_fail(QERR_ARG, "mkmodel: unknown shape '%s'",
				 o->shape ? o->shape : "");
	arch = o->arch ? o->arch : sh->arch;
	if (strcmp(arch, "qwen2") && strcmp(arch, "qwen3") &&
	    strcmp(arch, "llama") && strcmp(arch, "gemma3") &&
	    strcmp(arch, "qwen3moe") && strcmp(arch, "gpt-oss"))
		return qerr_fail(QERR_ARG, "mkmodel: unknown architecture '%s' "
				 "(qwen2, qwen3, llama, gemma3, qwen3moe, "
				 "gpt-oss)", arch);
	if ((!strcmp(arch, "qwen3moe") || !strcmp(arch, "gpt-oss")) !=
		    (sh->n_expert > 0) ||
	    (!strcmp(arch, "gpt-oss") && !sh->swa_window))
		return qerr_fail(QERR_ARG, "mkmodel: architecture %s does not "
				 "fit shape %s (%s)", arch, sh->name,
				 !sh->n_expert ? "no experts" :
				 sh->swa_window ? "experts: qwen3moe or "
						  "gpt-oss"
						: "experts, no window: "
						  "qwen3moe");
	if (o->n_layers < 0 || o->n_layers > 1024)
		return qerr_fail(QERR_ARG, "mkmodel: %d layers", o->n_layers);
	if (o->n_layers > 0) {
		shl = *sh;
		shl.n_layers = o->n_layers;
		sh = &shl;
	}
	const quant_ftype *ft = o->ftype ? o->ftype :
				quant_weight_ok(o->wtype) ?
				quant_ftype_find(ggml_type_name(o->wtype)) : NULL;
	if (!ft)
		return qerr_fail(QERR_ARG, "mkmodel: unsupported weight type %s",
				 ggml_type_name(o->wtype));
	if ((rc = gguf_writer_new(&w)))
		return rc;
	/* hyper-parameters even for a vocab-only file, as llama.cpp's own
	 * vocab files have them */
	if ((rc = write_hparams(w, sh, arch, ft, o->seed)))
		goto out;
	if ((rc = write_vocab(w, o, o->vocab_only ? 0 : sh->vocab, info)))
		goto out;
	if (!o->vocab_only) {
		p.seed = o->seed;
		if ((rc = plan_tensors(&p, sh, arch, o->wtype,
				       info->n_tokens, info->eos)))
			goto out;
		int recipe = quant_ftype_recipe(ft, o->ftype != NULL,
						sh->n_expert > 0);
		for (int i = 0; i < p.n; i++)
			p.t[i].type = quant_tensor_type(
				ft, recipe, p.t[i].name,
				(int)p.t[i].n_dims, p.t[i].ne[0], sh->n_layers,
				sh->n_heads / sh->n_kv_heads, sh->tied);
		for (int i = 0; i < p.n && !rc; i++) {
			rc = gguf_w_tensor(w, p.t[i].name, p.t[i].type,
					   p.t[i].n_dims, p.t[i].ne);
			info->bytes += ggml_row_bytes(p.t[i].type, p.t[i].ne[0]) *
				       (p.t[i].n_dims >= 2 ? p.t[i].ne[1] *
							     p.t[i].ne[2] : 1);
		}
		if (rc)
			goto out;
	}
	rc = gguf_writer_save(w, o->out, fill, &p);
out:
	free(p.t);
	gguf_writer_free(&w);
	return rc;
}
