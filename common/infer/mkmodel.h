/*
 * mkmodel — synthesizes GGUF models: real layout and tokenizer, seeded
 * pseudo-random weights. Used to test and benchmark without downloading
 * real weights; the files load in llama.cpp too (standard keys and names).
 *
 * Weights are a pure function of (shape, type, tokenizer, seed): the same
 * inputs give the same bytes. Each tensor draws from its own stream seeded
 * by (seed, tensor name), uniform with a standard deviation chosen so that
 * activations stay O(1) through any depth (matrices 1/sqrt(K), output-side
 * projections further scaled by 1/sqrt(2 n_layers), norms near 1) and the
 * logits have a spread of a few units, so sampling is not degenerate.
 */
#ifndef QUORUM_MKMODEL_H
#define QUORUM_MKMODEL_H

#include <stdint.h>

#include "format/quant.h"

typedef struct {
	const char *name;     /* "tiny", "qwen2.5-0.5b", ... */
	int dim, n_layers, n_heads, n_kv_heads, ffn_dim, ctx_len;
	int vocab;            /* pad the tokenizer to this many tokens (0: as is) */
	float rope_base, eps;
	int tied;             /* no output.weight */
	const char *arch;     /* default architecture for the shape */
	int head_dim;         /* attention.key_length; 0: dim / n_heads */
	int rope_freqs;       /* llama: write rope_freqs.weight (Llama 3.x) */
	int swa_window;       /* gemma3, gpt-oss: attention.sliding_window
			       * (0: none) */
	int swa_pattern;      /* gemma3: sliding_window_pattern */
	float rope_base_swa;  /* gemma3: rope.freq_base_swa */
	int n_expert;         /* qwen3moe, gpt-oss: expert_count (0: dense) */
	int n_expert_used;    /* expert_used_count */
	int expert_ffn;       /* expert_feed_forward_length */
	float yarn_factor;    /* rope.scaling.type yarn, this factor (0: no
			       * scaling) */
	int yarn_orig_ctx;    /* rope.scaling.original_context_length */
} mkmodel_shape;

typedef struct {
	const char *arch;       /* "qwen2" | "qwen3" | "llama" | "gemma3" |
				 * "qwen3moe" | "gpt-oss" (the last two:
				 * shapes with experts only); NULL: the
				 * shape's */
	int n_layers;           /* > 0: overrides the shape's layer count */
	const char *shape;      /* see mkmodel_shapes() */
	uint32_t wtype;         /* type of every matrix (quant.h weight types;
				 * rows its block does not divide fall back) */
	const quant_ftype *ftype; /* or a llama.cpp file type (Q4_K_M, ...):
				 * its per-tensor recipe; overrides wtype */
	const char *tokenizer;  /* tokenizer.json or a GGUF holding a vocab */
	const char *pre;        /* pre-tokenizer override, or NULL */
	uint64_t seed;
	int vocab_only;         /* write only the tokenizer metadata */
	const char *out;        /* output path */
} mkmodel_opts;

typedef struct {
	int n_tokens;           /* vocabulary size written */
	int eos;                /* end-of-sequence id, -1 when none */
	char pre[64];           /* pre-tokenizer name written */
	uint64_t bytes;         /* tensor bytes written */
} mkmodel_info;

/* The shape table, terminated by a zeroed entry. */
const mkmodel_shape *mkmodel_shapes(void);
const mkmodel_shape *mkmodel_find_shape(const char *name);

int mkmodel_write(const mkmodel_opts *o, mkmodel_info *info);

#endif
