/*
 * model — a transformer loaded from a GGUF file: hyper-parameters and
 * weights (pointers into the read-only mapping; nothing is copied except
 * small 1-D tensors converted to f32).
 *
 * Architectures, as llama.cpp runs them (GGUF keys and tensor names as its
 * converter writes them). Common to all: pre-norm RMSNorm blocks, GQA with
 * any ratio of query to KV heads, head_dim from attention.key_length (else
 * dim / heads), output.weight optional (tied to token_embd.weight).
 *   qwen2   Q/K/V biases; NEOX rotary (pairs (i, i + d/2)).
 *   qwen3   no biases; per-head RMSNorm of Q and K (attn_q_norm,
 *           attn_k_norm, head_dim long) before the rotary; NEOX rotary.
 *   llama   rotary on adjacent pairs (2i, 2i+1), as the converter permutes
 *           Q/K; optional rope_freqs.weight (Llama 3.x): each pair's
 *           frequency divided by its factor. Mistral runs as llama.
 *   gemma3  embeddings scaled by sqrt(dim); RMSNorm before and after both
 *           attention and FFN; per-head Q/K norms; GELU (tanh) gated FFN;
 *           NEOX rotary; sliding-window attention (attention.sliding_window
 *           tokens) on every layer but each sliding_window_pattern-th
 *           (default 6), those local layers rotating with rope.freq_base_swa
 *           (default 10000); optional final logit soft-capping.
 *   qwen3moe  qwen3's attention; the FFN is a mixture of experts: a router
 *           ffn_gate_inp (dim -> expert_count), softmax, the
 *           expert_used_count most probable experts (ties: the lower
 *           expert id first; a NaN probability ranks below every number),
 *           their probabilities renormalised to sum 1 (the sum clamped
 *           below at 2^-14, as llama.cpp), and each chosen expert's SwiGLU
 *           FFN (ffn_gate_exps, ffn_up_exps: expert_count x
 *           expert_feed_forward_length x dim; ffn_down_exps: expert_count
 *           x dim x expert_feed_forward_length) scaled by its weight and
 *           summed in rank order. The router must be finite (checked at
 *           load: a NaN or infinite router weight is an error naming it).
 *   gpt-oss  (llama.cpp's LLM_ARCH_OPENAI_MOE) biases on Q/K/V and the
 *           attention output; per-head learned sinks (attn_sinks.weight,
 *           n_heads): a logit that joins each head's softmax and is then
 *           dropped; sliding-window attention (attention.sliding_window)
 *           on every layer but each sliding_window_pattern-th (default 2:
 *           even layers local), both kinds rotating with rope.freq_base
 *           (or freq_base_swa) and the same scaling; the FFN input norm is
 *           post_attention_norm.weight; NEOX rotary. Mixture of experts:
 *           the router (ffn_gate_inp, + bias) picks the expert_used_count
 *           largest logits and their weights are the softmax of those k
 *           logits (no renormalisation); experts have biases
 *           (ffn_{gate,up}_exps.bias: expert_count x expert_ffn,
 *           ffn_down_exps.bias: expert_count x dim) and the clamped SwiGLU
 *           min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1).
 * Rope scaling (rope.scaling.type): linear (rope.scaling.factor) divides
 * the global layers' frequencies; yarn (factor, original_context_length,
 * attn_factor) blends interpolated and original frequencies per pair as
 * ggml's rope does (beta_fast 32, beta_slow 1) and scales cos/sin by its
 * magnitude factor. Other types are refused.
 * Weight types: F32, F16, BF16 and the quantized types of quant.h, mixed
 * freely per tensor.
 *
 * Matrices follow GGUF: ne[0] = K (inputs) is contiguous, ne[1] = N rows
 * (outputs), so y = W x is N dot products of length K.
 */
#ifndef QUORUM_MODEL_H
#define QUORUM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

enum model_arch {
	MODEL_QWEN2 = 0,
	MODEL_LLAMA = 1,
	MODEL_QWEN3 = 2,
	MODEL_GEMMA3 = 3,
	MODEL_QWEN3MOE = 4,
	MODEL_GPTOSS = 5,
	MODEL_N_ARCH
};
enum model_rope { MODEL_ROPE_NORM = 0, MODEL_ROPE_NEOX = 1 };
enum model_act {
	MODEL_ACT_SILU = 0,
	MODEL_ACT_GELU_TANH = 1,
	MODEL_ACT_SWIGLU_OAI = 2, /* gpt-oss experts: kern_swiglu_oai */
};
/* How router logits become expert weights. */
enum model_gating {
	MODEL_GATE_SOFTMAX = 0,        /* softmax over all experts, top k */
	MODEL_GATE_SOFTMAX_WEIGHT = 1, /* top k logits, softmax over those */
};
/* gpt-oss's clamped SwiGLU (llama.cpp's constants) */
#define MODEL_SWIGLU_OAI_ALPHA 1.702f
#define MODEL_SWIGLU_OAI_LIMIT 7.0f

/* The architecture names model_load accepts, for messages. */
#define MODEL_ARCH_LIST "qwen2, qwen3, llama, gemma3, qwen3moe, gpt-oss"

typedef struct {
	int arch;          /* enum model_arch */
	int dim;           /* embedding length */
	int n_layers;
	int n_heads;
	int n_kv_heads;
	int head_dim;      /* attention.key_length, else dim / n_heads */
	int q_dim;         /* n_heads * head_dim */
	int kv_dim;        /* n_kv_heads * head_dim */
	int ffn_dim;
	int vocab;
	int ctx_len;       /* trained context length */
	float rope_base;
	float eps;         /* RMSNorm epsilon */
	int rope_mode;     /* enum model_rope */
	float rope_scale;  /* rope scaling of global layers: 1/factor */
	float rope_scale_swa; /* of sliding-window layers (gemma3: 1) */
	float rope_base_swa; /* rotary base of sliding-window layers */
	int rope_yarn;     /* rope_scale is YaRN's (else linear) */
	int yarn_orig_ctx; /* rope.scaling.original_context_length */
	float rope_attn_factor; /* cos/sin scale before YaRN's own
				 * 1 + 0.1 ln(1/scale) (llama.cpp's
				 * yarn_attn_factor) */
	int swa_window;    /* 0: none; else a row at p sees p-W+1 .. p on the
			    * sliding-window layers */
	int swa_pattern;   /* layer l is global iff l % pattern == pattern-1 */
	int qk_norm;       /* per-head RMSNorm of Q and K before the rotary */
	int post_norms;    /* RMSNorm after attention and after the FFN */
	int act;           /* enum model_act, of the gated FFN */
	float embd_scale;  /* token embeddings multiplied by this (1: none) */
	float att_scale;   /* scores = q.k * att_scale */
	float logit_softcap; /* 0: none; else c * tanh(logit / c) */
	int n_expert;      /* 0: dense FFN; else experts per MoE layer */
	int n_expert_used; /* experts each row is routed to */
	int expert_ffn;    /* expert_feed_forward_length */
	int expert_norm_w; /* renormalise the chosen experts' weights */
	int expert_gating; /* enum model_gating */
	int expert_act;    /* enum model_act of the experts' gated FFN */
	int attn_sinks;    /* per-head attention sinks */
} model_config;

typedef struct {
	const void *data;  /* into the mapping */
	uint32_t type;     /* GGML_TYPE_* */
	int k;             /* ne[0]: row length (inputs) */
	int n;             /* ne[1]: rows (outputs) */
	size_t stride;     /* 3-D expert tensors: bytes from one expert's
			    * matrix to the next (0: a 2-D matrix) */
} model_mat;

/* Expert e's matrix of a 3-D expert tensor. */
static inline model_mat model_expert(const model_mat *w, int e)
{
	model_mat m = *w;

	m.data = (const char *)w->data + (size_t)e * w->stride;
	m.stride = 0;
	return m;
}

typedef struct {
	const float *attn_norm;          /* (dim) */
	model_mat wq, wk, wv, wo;        /* (dim->q_dim) (dim->kv) (dim->kv) (q_dim->dim) */
	const float *bq, *bk, *bv;       /* (q_dim) (kv) (kv); NULL for llama */
	const float *bo;                 /* (dim) gpt-oss; else NULL */
	const float *sinks;              /* (n_heads) gpt-oss; else NULL */
	const float *ffn_norm;           /* (dim) gpt-oss: the file's
					  * post_attention_norm */
	model_mat w_gate, w_up, w_down;  /* (dim->ffn) (dim->ffn) (ffn->dim);
					  * MoE: expert 0's (dim->expert_ffn)
					  * (expert_ffn->dim), see
					  * model_expert() */
	model_mat router;                /* MoE: (dim->n_expert); data NULL
					  * for a dense FFN */
	const float *router_b;           /* (n_expert) gpt-oss; else NULL */
	const float *b_gate, *b_up;      /* (n_expert, expert_ffn) gpt-oss */
	const float *b_down;             /* (n_expert, dim) gpt-oss */
	const float *q_norm, *k_norm;    /* (head_dim); NULL without qk_norm */
	const float *post_attn_norm;     /* (dim); NULL without post_norms */
	const float *post_ffn_norm;      /* (dim); NULL without post_norms */
	int swa;                         /* sliding-window layer */
} model_layer;

typedef struct model {
	model_config cfg;
	gguf_file *gguf;
	model_mat tok_embd;              /* (vocab rows of dim) */
	const float *output_norm;        /* (dim) */
	model_mat output;                /* (vocab rows of dim); tied => tok_embd */
	int tied_output;
	const float *rope_freqs;         /* (head_dim/2) divisors, or NULL */
	model_layer *layers;             /* (n_layers) */
	float **owned;                   /* f32 copies of 1-D tensors */
	int n_owned;
	uint64_t fingerprint;            /* hash of the file's header+metadata+size */
} model;

/* Opens and validates a model file. Errors name the file and the tensor or
 * key at fault (qerr_detail()). */
int model_load(const char *path, model **out);
void model_free(model **m);

/* Validates the hyper-parameters and tensors of an open GGUF (every tensor
 * of the file must be one the architecture reads); on success takes
 * ownership of g. */
int model_from_gguf(gguf_file *g, model **out);

const char *model_arch_name(int arch);

/* The matrices the forward pass packs for the integer kernels (fwd.c's
 * pack_model), slot by slot: a layer's attention, then its dense FFN. */
enum { MODEL_PK_Q, MODEL_PK_K, MODEL_PK_V, MODEL_PK_O, MODEL_PK_GATE,
       MODEL_PK_UP, MODEL_PK_DOWN, MODEL_PK_N };
/* Layer l's matrix of a slot, NULL where the model has none to pack (a
 * mixture of experts' FFN); at l = n_layers, slot 0 is the output head
 * (the embeddings when tied) and the others NULL. model_load leaves such
 * a matrix in the file's mapping where its packed copy serves every row
 * count (kern_pack_covers). */
const model_mat *model_packed_mat(const model *m, int l, int slot);

#endif
