/*
 * kern — batch-invariant numeric kernels (SIMD with a portable fallback).
 * Owns the dispatch to the CPU's instruction set and the kernels' bits.
 * Callers: the engine (fwd.c, model.c, mkmodel.c, samp.c), the CLI's
 * run/eval/bench commands, bench_kern and the tests.
 *
 * The contract: every output element is computed by ONE fixed sequence of
 * IEEE-754 single-precision operations that depends on neither the batch
 * size M, the thread count, nor the instruction set. Results are therefore
 * bit-identical across scalar, AVX2 and AVX-512 code paths and across hosts.
 *
 * The canonical reduction (kern_dot and every matmul element):
 *   16 lanes acc[0..15] = +0.0f
 *   for k = 0, 16, 32, ...:  acc[l] = fmaf(a[k+l], b[k+l], acc[l])
 *       (a final partial chunk updates only lanes l < n-k)
 *   then a fixed tree: for h in 8,4,2,1: acc[l] = acc[l] + acc[l+h], l < h
 *   result = acc[0]
 * AVX-512 holds the 16 lanes in one register, AVX2 in two, the fallback in
 * an array with fmaf(); all three perform the same operations.
 * Weights of type F16, BF16 and Q8_0 are converted to f32 exactly before the
 * fma (a Q8_0 weight d*q is exact in f32), so the fused kernels match.
 * Quantized weights with integer activations follow quant.h instead.
 *
 * The exp of softmax and SiLU is mathf_exp (kernels/mathf.h), in scalar
 * and SIMD forms; the f16/bf16 conversions are format/half.h's.
 */
#ifndef QUORUM_KERN_H
#define QUORUM_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/tpool.h"

enum kern_isa {
	KERN_ISA_SCALAR = 0,
	KERN_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
	KERN_ISA_AVX512 = 2, /* AVX-512 F/BW/VL/DQ */
	KERN_ISA_AVX512VNNI = 3, /* the same + VNNI (vpdpbusd) */
	KERN_ISA_LAST = KERN_ISA_AVX512VNNI,
};

/* Best ISA of this CPU. */
int kern_isa_detect(void);
/* ISA in use (defaults to detect, overridden by env QUORUM_ISA=scalar|avx2|
 * avx512|avx512vnni at first use). */
int kern_isa(void);
/* Forces an ISA (tests, benchmarks); QERR_UNSUPPORTED if the CPU lacks it. */
int kern_set_isa(int isa);
const char *kern_isa_name(int isa);

/* Canonical dot product (see above). */
float kern_dot(const float *a, const float *b, int n);
/* Same, with b in IEEE half precision. */
float kern_dot_f16(const float *a, const uint16_t *b, int n);

/*
 * Activations of matmuls with quantized weights:
 *   KERN_ACT_INT (default): each activation row is quantized on its own to
 *     8 bits per unit of the weight type and multiplied in integers; the
 *     one float rounding is quant.h's canonical per-unit combination.
 *   KERN_ACT_F32: the weight row is dequantized to f32 (quant.c, the same
 *     operations on every ISA) and the canonical f32 reduction runs.
 * Default from env QUORUM_ACTIVATIONS=int|f32 at first use.
 */
enum kern_act { KERN_ACT_INT = 0, KERN_ACT_F32 = 1 };
int kern_activations(void);
void kern_set_activations(int mode);

/*
 * y[m*ldy + j] = dot(x[m*ldx ...], W row j) (+ bias[j] when bias != NULL,
 * added after the dot) for j in [0, N), m in [0, M).
 * W: N rows of K elements of wtype (F32/F16/BF16 or a quantized type of
 * quant.h; K a multiple of its block). Work is split over j only; tp may
 * be NULL. Every element is the same bits whatever M, tp and the ISA.
 */
void kern_matmul(tpool *tp, const void *W, uint32_t wtype, int K, int N,
		 const float *bias, const float *x, int ldx, int M, float *y,
		 int ldy);

/*
 * The same x through several matrices of K columns (q, k and v; gate and
 * up) in one job of the pool: x is quantized once per weight type, the
 * matrices' columns are split over the threads as one sequence. Each
 * y is the same bits as kern_matmul gives it.
 */
#define KERN_MM_MAX 4
typedef struct kern_packed kern_packed;
struct kern_mat {
	const void *W;
	uint32_t wtype;
	int N;
	const float *bias; /* NULL: none */
	float *y;
	int ldy;
	const kern_packed *pk; /* NULL, or W packed by kern_pack */
};
void kern_matmul_n(tpool *tp, const struct kern_mat *mats, int n_mats, int K,
		   const float *x, int ldx, int M);

/*
 * Weights packed once for the integer kernels of this CPU. The AVX-512
 * VNNI register tiles read weight rows in pairs laid out for them; from
 * W as the file has it, every call lays out the pairs it reads again,
 * which costs more than the tiles save at decode's 4-16 rows. kern_pack
 * makes that layout of W (N rows of K of wtype) once, on tp's threads,
 * when the ISA in use has one for wtype that its kernels would take for
 * up to max_rows activation rows; otherwise (or with QUORUM_PACK=0 in
 * the environment, read at first use: no copy, less memory) *out is
 * NULL. W must outlive the copy. A kern_mat whose .pk is the copy reads
 * it while the ISA in use is the one it was packed for (W otherwise,
 * e.g. after kern_set_isa): every result is the same bits either way.
 */
int kern_pack(tpool *tp, const void *W, uint32_t wtype, int K, int N,
	      int max_rows, kern_packed **out);
/*
 * Whether kern_pack, as things stand (QUORUM_PACK, the activations, the
 * ISA in use), packs a matrix of wtype with rows of K even for one
 * activation row: then the kernels read that copy at every row count
 * and W only to pack it, so a loader may leave W where it is (the
 * file's mapping) instead of copying it first.
 */
int kern_pack_covers(uint32_t wtype, int K);
/*
 * Whether the tiles that read a packed copy request its next block of
 * weights while they compute on this one (on by default; QUORUM_PREFETCH=0
 * in the environment, read at first use, turns it off; a value other
 * than 0 or 1 is named on stderr and leaves it on, as for QUORUM_PACK).
 * Only the speed
 * changes: every result is the same bits either way. A switch for
 * benchmarks (bench_kern -a alternates the two call by call).
 */
int kern_prefetching(void);
void kern_set_prefetch(int on);
/* Bytes of the copy (0 for NULL). */
size_t kern_packed_bytes(const kern_packed *pk);
void kern_packed_free(kern_packed **pk);

/* Row r (K elements) of W converted to f32 (embedding lookup). */
void kern_row_f32(const void *W, uint32_t wtype, int K, int64_t r, float *out);

/* out[i] = (x[i] * s) * w[i], s = 1 / sqrtf(sum_sq(x)/n + eps), sum_sq by
 * the canonical reduction of x with itself. out may alias x. */
void kern_rmsnorm(const float *x, const float *w, int n, float eps,
		  float *out);

/* g[i] = silu(g[i]) * u[i], silu(v) = v / (1 + mathf_exp(-v)). */
void kern_silu_mul(float *g, const float *u, int n);
/* Our tanh (from mathf_exp; an odd series for |x| < 1/16), and
 * g[i] = gelu(g[i]) * u[i] with the tanh form of GELU:
 * gelu(v) = 0.5 v (1 + tanh(sqrt(2/pi) v (1 + 0.044715 v^2))).
 * Portable code only: the same operations on every ISA. */
float kern_tanhf(float x);
void kern_gelu_mul(float *g, const float *u, int n);
/* gpt-oss's clamped SwiGLU, as ggml's swiglu_oai: x = min(g[i], limit),
 * y = clamp(u[i], -limit, limit), g[i] = x / (1 + mathf_exp(-(alpha * x)))
 * * (y + 1); a NaN stays NaN (min and clamp as std::min/std::clamp).
 * Portable code only: the same operations on every ISA. */
void kern_swiglu_oai(float *g, const float *u, int n, float alpha,
		     float limit);
/* In place: x[i] = mathf_exp(x[i] - max) / sum, sum of the exps by the
 * canonical 16-lane reduction with + instead of fma (acc[i % 16] += e[i]
 * in index order, then the fixed tree). Returns nothing; n >= 1. */
void kern_softmax(float *x, int n);
/* y[i] = fmaf(a, x[i], y[i]). */
void kern_axpy(float *y, float a, const float *x, int n);
void kern_axpy_f16(float *y, float a, const uint16_t *x, int n);

/*
 * Attention of nq query vectors that share one run of keys and values (the
 * query heads of one KV head under grouped-query attention): each key or
 * value row is converted once and used for all nq. Rows have n elements of
 * type kt (GGML_TYPE_F16, GGML_TYPE_F32 or GGML_TYPE_Q8_0, the KV cache's),
 * row t at element offset t * ldk (ldv) of k (v). For Q8_0, n and ld are
 * multiples of 32 and a row is its blocks.
 *   kern_att_scores: s[i*lds + t] = dot(q + i*ldq, row t, n) * scale for
 *     i < nq, t < nt; for F16 and F32 keys the dot is kern_dot_f16's
 *     (kern_dot's) bits. For Q8_0 keys it is an integer dot, as llama.cpp
 *     takes q8_0 keys (its flash attention quantizes the query to the
 *     keys' vec_dot_type): the query is quantized per block of 32 as the
 *     integer matmuls quantize an activation row (quant_act_row, unit 32:
 *     codes qa and scale da), then, over the blocks b in order from
 *     acc = +0, acc = fmaf(da[b] * dk[b], (float)S[b], acc), S[b] the
 *     exact int32 sum of the codes' products, dk[b] the key block's d;
 *     s = acc * scale (kern_att_scores_q8, the query quantized here).
 *   kern_att_values: for e < n, i < nq and t = 0, 1, .., nt-1 in order,
 *     out[i*ldo + e] = fmaf(s[i*lds + t], row t [e], out[i*ldo + e]):
 *     the bits of nt kern_axpy_f16 (kern_axpy) calls in position order; a
 *     Q8_0 element is its exact f32 value d * q.
 */
void kern_att_scores(const float *q, int ldq, int nq, const void *k,
		     size_t ldk, uint32_t kt, int nt, int n, float scale,
		     float *s, int lds);
void kern_att_values(float *out, int ldo, int nq, const float *s, int lds,
		     const void *v, size_t ldv, uint32_t kt, int nt, int n);

/*
 * Q8_0 keys' scores from queries quantized once (a row's query heads are
 * scored against every KV block of its sequence, one kernel call a
 * block): kern_att_q8_prep quantizes nq queries of n (ldq apart; n a
 * multiple of 32) into qz, kern_att_q8_bytes(n) bytes each;
 * kern_att_scores_q8 scores them against nt Q8_0 rows as kern_att_scores
 * does (the same bits).
 */
size_t kern_att_q8_bytes(int n);
void kern_att_q8_prep(const float *q, int ldq, int nq, int n, void *qz);
void kern_att_scores_q8(const void *qz, int nq, const void *k, size_t ldk,
			int nt, int n, float scale, float *s, int lds);

/* out[i] = half_f32_to_f16(x[i]) (format/half.h), vectorized. */
void kern_f32_to_f16_row(const float *x, uint16_t *out, int n);

/*
 * The machine's limits on tp's threads, measured (`quorum bench
 * --roofline`): int8 multiply-adds per second with the integer matmul's
 * step (one 512-bit vpdpbusd on AVX-512 VNNI), f32 multiply-adds per
 * second (fma), each from independent chains in registers per
 * thread (sixteen for vpdpbusd, whose latency ten do not cover; ten
 * otherwise); and read bandwidth in bytes per second (a streaming sum of
 * 256 MiB). Each the best of three runs; 0 where the ISA in use has no
 * such kernel (scalar).
 */
typedef struct kern_limits {
	double int8_macs, f32_fmas, read_bytes;
} kern_limits;
int kern_measure_limits(tpool *tp, kern_limits *out);

#endif
