/*
 * model — a transformer loaded from a GGUF file: hyper-parameters and
 * weights (pointers into the read-only mapping; nothing is copied except
 * small 1-D tensors converted to f32).
 *
 * Architectures: "qwen2" (Q/K/V biases, NEOX rotary: pairs (i, i+d/2)) and
 * "llama" (GQA, rotary on adjacent pairs (2i, 2i+1) as llama.cpp's GGUF
 * converter stores the Q/K weights; output.weight optional, tied to
 * token_embd.weight when absent). Weight types: F32, F16, BF16, Q8_0.
 *
 * Matrices follow GGUF: ne[0] = K (inputs) is contiguous, ne[1] = N rows
 * (outputs), so y = W x is N dot products of length K.
 */
#ifndef QUORUM_MODEL_H
#define QUORUM_MODEL_H

#include <stdint.h>

#include "gguf.h"

enum model_arch { MODEL_QWEN2 = 0, MODEL_LLAMA = 1 };
enum model_rope { MODEL_ROPE_NORM = 0, MODEL_ROPE_NEOX = 1 };

typedef struct {
	int arch;          /* enum model_arch */
	int dim;           /* embedding length */
	int n_layers;
	int n_heads;
	int n_kv_heads;
	int head_dim;      /* dim / n_heads */
	int kv_dim;        /* n_kv_heads * head_dim */
	int ffn_dim;
	int vocab;
	int ctx_len;       /* trained context length */
	float rope_base;
	float eps;         /* RMSNorm epsilon */
	int rope_mode;     /* enum model_rope */
} model_config;

typedef struct {
	const void *data;  /* into the mapping */
	uint32_t type;     /* GGML_TYPE_* */
	int k;             /* ne[0]: row length (inputs) */
	int n;             /* ne[1]: rows (outputs) */
} model_mat;

typedef struct {
	const float *attn_norm;          /* (dim) */
	model_mat wq, wk, wv, wo;        /* (dim->q_dim) (dim->kv) (dim->kv) (q_dim->dim) */
	const float *bq, *bk, *bv;       /* (q_dim) (kv) (kv); NULL for llama */
	const float *ffn_norm;           /* (dim) */
	model_mat w_gate, w_up, w_down;  /* (dim->ffn) (dim->ffn) (ffn->dim) */
} model_layer;

typedef struct model {
	model_config cfg;
	gguf_file *gguf;
	model_mat tok_embd;              /* (vocab rows of dim) */
	const float *output_norm;        /* (dim) */
	model_mat output;                /* (vocab rows of dim); tied => tok_embd */
	int tied_output;
	model_layer *layers;             /* (n_layers) */
	float **owned;                   /* f32 copies of 1-D tensors */
	int n_owned;
	uint64_t fingerprint;            /* hash of the file's header+metadata+size */
} model;

/* Opens and validates a model file. Errors name the file and the tensor or
 * key at fault (qerr_detail()). */
int model_load(const char *path, model **out);
void model_free(model **m);

/* Validates the hyper-parameters and tensors of an open GGUF; on success
 * takes ownership of g. */
int model_from_gguf(gguf_file *g, model **out);

const char *model_arch_name(int arch);

#endif
