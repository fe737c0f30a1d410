/*
 * quant — ggml's quantized weight formats: block layouts (exactly as
 * ggml-common.h defines them), dequantization, quantizers, and the
 * integer form the dot-product kernels consume.
 *
 * Weight types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 (blocks of
 * 32) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (super-blocks of 256);
 * their blocks, names and sizes are ggml.h's table, their f16 scales are
 * converted by half.h. MXFP4's scale is an E8M0 byte instead (see
 * quant_e8m0_half). Users: the model loader and mkmodel (infer/),
 * the kernels (integer form), the quantize tool and the tests.
 *
 * The integer dot product (see kern.h for where it is used). Every type is
 * written, per "unit" of U elements (U = 32 for the 32-element types, 256
 * for the K-quants), as
 *     w[k] = d[u] * sc[g] * q[k]  +  dm[u] * mn[g]        (g = k / 16)
 * with small integers q (int8), sc and mn (per group of 16) and float
 * scales d, dm (dm = 0 and mn = 0 for types without a minimum). An
 * activation row is quantized per unit to a[k] = da[u] * qa[k] (qa int8,
 * as llama.cpp does: quant_act_row), with bsum[g] = sum of qa over g.
 * Then, exactly in integers,
 *     S1[u] = sum_g sc[g] * sum_{k in g} q[k] * qa[k]
 *     S2[u] = sum_g mn[g] * bsum[g]
 * and the ONLY float rounding is the canonical combination:
 *     acc[0..7] = +0.0f
 *     for u in order:  l = u % 8
 *         acc[l] = fmaf(d[u] * da[u], (float)S1[u], acc[l])
 *         if the type has a minimum and U = 256 (Q2_K, Q4_K, Q5_K):
 *             acc[l] = fmaf(dm[u] * da[u], (float)S2[u], acc[l])
 *         if the type has a minimum and U = 32 (Q4_1, Q5_1):
 *             acc[l] = fmaf(dm[u], sa[u], acc[l])
 * where sa[u] is the activation block's sum as ggml's Q8_1 block carries
 * it: f16(da * S2) (see quant_act_row), so these types track llama.cpp.
 *     for h in 4, 2, 1: acc[l] = acc[l] + acc[l + h], l < h
 *     result = acc[0]
 * Integer sums are exact whatever order a kernel uses, so scalar and SIMD
 * code give the same bits by construction; a row's activations are
 * quantized on their own, so a result never depends on the batch.
 */
#ifndef QUORUM_QUANT_H
#define QUORUM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "format/ggml.h" /* types and blocks */

/* IQ4_NL / IQ4_XS code book. */
extern const int8_t quant_iq4nl_values[16];
/* MXFP4's 16 E2M1 codes as integers: each value doubled (0, 0.5, 1, 1.5,
 * 2, 3, 4, 6 and their negatives become 0..12), as ggml holds them. */
extern const int8_t quant_mxfp4_values[16];
/* Half an E8M0 scale, 2^(e - 128), exactly (2^-128 and 2^-127 are f32
 * subnormals); MXFP4 weight k of a block is quant_e8m0_half(e) *
 * quant_mxfp4_values[code k]. e = 0xFF, which the OCP spec calls NaN,
 * is 2^127 as ggml reads it. */
float quant_e8m0_half(uint8_t e);

/* 1 when type is a quantized weight type we can load. */
int quant_is_quant(uint32_t type);
/* 1 for every weight type a model may use (F32/F16/BF16 and the above). */
int quant_weight_ok(uint32_t type);
/* "F32, F16, BF16, Q4_0, ..." */
const char *quant_supported_list(void);
/* Unit of the integer dot product: 32 or QK_K (0 for float types). */
int quant_unit(uint32_t type);
/* Type from a name such as "q4_k" / "Q4_K" (case-insensitive); -1 if none
 * of the weight types. */
int quant_type_from_name(const char *name);

/* Row of n elements (n % block == 0) to f32. Float types too. */
void quant_dequant_row(uint32_t type, const void *row, float *out, int n);

/* Quantizes n floats (n % block == 0) into blocks of type (any weight
 * type, float ones included). Deterministic. */
void quant_quantize_row(uint32_t type, const float *x, void *out, int n);

/* Q8_0 blocks of n floats (n % 32 == 0) with the bits of ggml's
 * quantize_row_q8_0_ref: d = amax / 127 (f32), q = roundf(x * (1 / d))
 * (ties away from zero) with that unrounded d, then d stored as f16. The
 * 8-bit KV cache's rows (kv_row_put). quant_quantize_row's Q8_0 differs
 * (q from the f16-rounded d, ties to even: the pinned bits of our weight
 * files); a non-finite x gives code 0 (127 / -128 when infinite) here,
 * where ggml's cast is undefined. */
void quant_q8_0_ref_row(const float *x, void *out, int n);

/* Checks the float scales of nrows rows of n elements: returns -1 when all
 * are finite, else the index of the first bad row (and *block its block). */
int64_t quant_check(uint32_t type, const void *data, int n, int64_t nrows,
		    int64_t *block);

/* ---- file types ------------------------------------------------------ */

/* llama.cpp's per-tensor mixes. */
enum { QUANT_MIX_NONE, QUANT_MIX_Q2_K, QUANT_MIX_Q3_K_M, QUANT_MIX_Q4_K_M,
       QUANT_MIX_Q5_K_M, QUANT_MIX_IQ4, QUANT_MIX_MXFP4 };

typedef struct {
	const char *name;   /* "Q4_K_M", "Q8_0", ... */
	uint32_t base;      /* the type of most matrices */
	int mix;            /* QUANT_MIX_* */
	uint32_t llama_ftype; /* general.file_type */
} quant_ftype;

/* By name (case-insensitive), NULL if unknown; the list of names. */
const quant_ftype *quant_ftype_find(const char *name);
const char *quant_ftype_list(void);

/*
 * Type of one tensor of a file of type ft. 1-D tensors, non-weights and a
 * mixture of experts' router (ffn_gate_inp) stay F32; 3-D expert tensors
 * are typed like the dense ones (ffn_down_exps as ffn_down; llama.cpp's
 * extra rules for exactly 8 experts are not applied). With recipe = 0
 * every matrix gets the base type; with recipe = 1 llama.cpp's choices
 * apply: output (and a tied token_embd) as
 * Q6_K (Q8_0 when the row is not whole 256-blocks), and the mix's
 * attn_v / ffn_down / attn_output upgrades by layer. Either way a type
 * whose block does not divide the row falls back as llama.cpp does
 * (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0,
 * IQ4_XS -> IQ4_NL; MXFP4 -> F16).
 * MXFP4 / MXFP4_MOE with recipe = 1 is llama.cpp's MXFP4_MOE: 3-D
 * expert tensors MXFP4, every other matrix (output and token_embd too)
 * Q8_0; with recipe = 0 every matrix is MXFP4.
 */
uint32_t quant_tensor_type(const quant_ftype *ft, int recipe,
			   const char *name, int n_dims, uint64_t ne0,
			   int n_layers, int n_gqa, int tied);

/* The recipe flag to pass quant_tensor_type for file type ft in a model
 * with (has_experts = 1) or without expert tensors: MXFP4 takes llama.cpp's
 * MXFP4_MOE recipe where there are experts and is pure (every matrix
 * MXFP4) where there are none; other types keep recipe. */
int quant_ftype_recipe(const quant_ftype *ft, int recipe, int has_experts);

/* ---- integer form --------------------------------------------------- */

/* One weight row in integer form (see above); buffers sized for n. For
 * unit 32, sc and mn are 1 by definition: SIMD kernels may leave them
 * unwritten and unread. */
typedef struct {
	int8_t *q;     /* n */
	int16_t *sc;   /* n / 16 */
	int16_t *mn;   /* n / 16 (only when has_min) */
	float *d;      /* n / unit */
	float *dm;     /* n / unit (only when has_min) */
	int unit, has_min;
} quant_wrow;

/* One activation row quantized per unit. */
typedef struct {
	int8_t *q;     /* n */
	int16_t *bsum; /* n / 16 */
	float *d;      /* n / unit */
	float *s;      /* n / unit: unit 32, Q8_1's f16 block sum (sa) */
} quant_arow;

/* Bytes for a quant_wrow / quant_arow of n elements (64-byte aligned
 * parts), and binding one onto such a buffer. The activation row's are
 * inline: the integer kernels bind each tile's rows once per tile. */
size_t quant_wrow_bytes(int n);
void quant_wrow_bind(quant_wrow *w, void *buf, int n);

static inline size_t quant_al64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

static inline size_t quant_arow_bytes(int n, int unit)
{
	return quant_al64((size_t)n) + quant_al64((size_t)n / 16 * 2) +
	       2 * quant_al64((size_t)(n / unit) * 4);
}

static inline void quant_arow_bind(quant_arow *a, void *buf, int n, int unit)
{
	char *p = buf;

	a->q = (int8_t *)p;
	p += quant_al64((size_t)n);
	a->bsum = (int16_t *)p;
	p += quant_al64((size_t)n / 16 * 2);
	a->d = (float *)p;
	p += quant_al64((size_t)(n / unit) * 4);
	a->s = (float *)p;
}

/* Row of type to integer form (the reference; kernels may unpack faster
 * but must produce the same integers). */
void quant_unpack_row(uint32_t type, const void *row, quant_wrow *w, int n);

/* Only sc, mn, d, dm (and unit, has_min) of quant_unpack_row: for kernels
 * that unpack q themselves. */
void quant_unpack_scales(uint32_t type, const void *row, quant_wrow *w,
			 int n);

/* Activation row to its quantized form (per unit of the weight type). */
void quant_act_row(const float *x, int n, int unit, quant_arow *a);

/* S1 per unit of the reference (scalar) kernel. */
void quant_s1_ref(const int8_t *q, const int16_t *sc, const int8_t *qa,
		  int n, int unit, int32_t *s1);

/* The reference dot product: S1, S2 and the canonical combination; its
 * bits define every kernel's. */
float quant_dot_ref(const quant_wrow *w, const quant_arow *a, int n);

#endif
