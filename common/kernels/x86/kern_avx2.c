/*
 * kern_avx2 — the AVX2 kernels' own code: the attention kernels of query
 * heads that share one KV head (the AVX-512 tables use them too) and the
 * AVX2 ops table, which takes the float kernels from kern_float.c built at
 * 8 lanes (kern_avx2_*) and the integer matmul from kern_int_avx2.c.
 * Built with the AVX2 flags (AVX2 + FMA + F16C); kern.c dispatches to the
 * table when the CPU has them.
 *
 * The 16 canonical lanes live in two ymm registers: lanes 0-7 and 8-15.
 * Every function performs exactly the operations of its scalar definition
 * in kern.c.
 */
#define KERN_VEC_W 8

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "format/ggml.h"
#include "format/half.h"
#include "kernels/kern_impl.h"
#include "kernels/x86/kern_vec.h"

/* ---- attention: query heads that share one KV head --------------------- */

/* Keys per score tile: one query against ATT_KB keys (8 lo and 8 hi lane
 * accumulators, the lo and hi halves run one after the other), whose 8
 * trees run side by side. */
#define ATT_KB 8
/* f16 keys are converted once per tile into a stack buffer of ATT_KB rows
 * of at most this many elements; wider heads take the per-pair dot. */
#define ATT_HD_MAX 512

/* Lanes l of [k, k + 8) with k + l < n, as an AVX2 load/blend mask. */
INLINE __m256i lanes_below(int k, int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - k),
				  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One half (lanes 0-7 at h = 0, 8-15 at h = 8) of the canonical
 * accumulators of q against the ATT_KB rows kr over n elements; a partial
 * last chunk updates only its lanes below n (the others keep their value:
 * blended back, never fused with a zero). */
INLINE void att_half(const float *q, const float *const *kr, int n, int h,
		     __m256 *acc)
{
	int k = 0;

	#pragma GCC unroll 8
	for (int j = 0; j < ATT_KB; j++)
		acc[j] = _mm256_setzero_ps();
	for (; k + 16 <= n; k += 16) {
		__m256 qv = _mm256_loadu_ps(q + k + h);

		#pragma GCC unroll 8
		for (int j = 0; j < ATT_KB; j++)
			acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr[j] + k + h),
						 acc[j]);
	}
	if (k + h < n) {
		__m256i m = lanes_below(k + h, n);
		__m256 qv = _mm256_maskload_ps(q + k + h, m);

		#pragma GCC unroll 8
		for (int j = 0; j < ATT_KB; j++)
			acc[j] = _mm256_blendv_ps(acc[j], _mm256_fmadd_ps(qv,
				_mm256_maskload_ps(kr[j] + k + h, m), acc[j]),
				_mm256_castsi256_ps(m));
	}
}

/* The fixed tree (hsum's operations, lower lane always the first operand)
 * of 8 accumulator pairs at once; returns the 8 sums in order. */
INLINE __m256 hsum8(const __m256 *lo, const __m256 *hi)
{
	__m256 a[8], b[4], c[2];

	#pragma GCC unroll 8
	for (int j = 0; j < 8; j++) /* l + (l + 8) */
		a[j] = _mm256_add_ps(lo[j], hi[j]);
	#pragma GCC unroll 8
	for (int j = 0; j < 4; j++) /* (l + 4): [j0 l<4 | j1 l<4] */
		b[j] = _mm256_add_ps(
			_mm256_permute2f128_ps(a[2 * j], a[2 * j + 1], 0x20),
			_mm256_permute2f128_ps(a[2 * j], a[2 * j + 1], 0x31));
	#pragma GCC unroll 8
	for (int j = 0; j < 2; j++) /* (l + 2): [j0 j2 | j1 j3] x 2 lanes */
		c[j] = _mm256_add_ps(
			_mm256_shuffle_ps(b[2 * j], b[2 * j + 1],
					  _MM_SHUFFLE(1, 0, 1, 0)),
			_mm256_shuffle_ps(b[2 * j], b[2 * j + 1],
					  _MM_SHUFFLE(3, 2, 3, 2)));
	/* (0 + 1): [j0 j2 j4 j6 | j1 j3 j5 j7] */
	__m256 d = _mm256_add_ps(
		_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
		_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm256_permutevar8x32_ps(d, _mm256_setr_epi32(0, 4, 1, 5, 2,
							     6, 3, 7));
}

/* Row t of a run of rows at element offset t * ld (kern.c's kv_run_row:
 * a Q8_0 row starts on a block). */
INLINE const char *run_row(const void *base, size_t ld, uint32_t kt, int t)
{
	size_t e = (size_t)t * ld;

	if (kt == GGML_TYPE_Q8_0)
		return (const char *)((const ggml_block_q8_0 *)base +
				      e / GGML_QK8_0);
	return (const char *)base + e * (kt == GGML_TYPE_F16 ? 2 : 4);
}

/* Row t of the keys converted to f32 (f16, q8_0: exactly, into buf; a
 * q8_0 row has whole blocks, so n % 8 == 0). */
INLINE const float *att_row(const void *k, size_t ldk, uint32_t kt, int t,
			    int n, float *buf)
{
	const char *row = run_row(k, ldk, kt, t);
	int e = 0;

	if (kt == GGML_TYPE_F32)
		return (const float *)row;
	/* the type constant in each loop: wload's switch folds away */
	if (kt == GGML_TYPE_Q8_0) {
		for (; e + 8 <= n; e += 8)
			_mm256_storeu_ps(buf + e, wload(row, GGML_TYPE_Q8_0, e));
		return buf;
	}
	for (; e + 8 <= n; e += 8)
		_mm256_storeu_ps(buf + e, wload(row, GGML_TYPE_F16, e));
	for (; e < n; e++)
		buf[e] = half_f16_to_f32(((const uint16_t *)row)[e]);
	return buf;
}

void kern_avx2_att_scores(const float *q, int ldq, int nq, const void *k,
			  size_t ldk, uint32_t kt, int nt, int n, float scale,
			  float *s, int lds)
{
	float buf[ATT_KB * ATT_HD_MAX];
	__m256 sc = _mm256_set1_ps(scale);
	int ld = (n + 7) & ~7; /* converted rows packed, 32-byte steps */

	if (n > ATT_HD_MAX) {
		for (int i = 0; i < nq; i++)
			for (int t = 0; t < nt; t++)
				s[(size_t)i * lds + t] = dot_type(
					q + (size_t)i * ldq,
					run_row(k, ldk, kt, t), n, kt) * scale;
		return;
	}
	for (int t0 = 0; t0 < nt; t0 += ATT_KB) {
		int kb = nt - t0 < ATT_KB ? nt - t0 : ATT_KB;
		const float *kr[ATT_KB];

		/* a short tile repeats its first row; those sums are dropped */
		for (int j = 0; j < ATT_KB; j++)
			kr[j] = j < kb ? att_row(k, ldk, kt, t0 + j, n,
						 buf + j * ld)
				       : kr[0];
		for (int i = 0; i < nq; i++) {
			const float *qi = q + (size_t)i * ldq;
			float *si = s + (size_t)i * lds + t0;
			__m256 lo[ATT_KB], hi[ATT_KB];
			float r[ATT_KB];

			att_half(qi, kr, n, 0, lo);
			att_half(qi, kr, n, 8, hi);
			__m256 v = _mm256_mul_ps(hsum8(lo, hi), sc);
			if (kb == ATT_KB) {
				_mm256_storeu_ps(si, v);
			} else {
				_mm256_storeu_ps(r, v);
				memcpy(si, r, (size_t)kb * sizeof(float));
			}
		}
	}
}

/* 8 (W = 1) or 16 (W = 2) elements at e of Q outputs: the chains over the
 * nt rows stay in registers, each row converted once for the Q. */
INLINE void att_vtile(float *out, int ldo, const float *s, int lds,
		      const void *v, size_t ldv, const uint32_t kt, int nt, int e,
		      const int Q, const int W)
{
	__m256 acc[4][2];

	#pragma GCC unroll 8
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 8
		for (int w = 0; w < W; w++)
			acc[i][w] = _mm256_loadu_ps(out + (size_t)i * ldo + e +
						    8 * w);
	for (int t = 0; t < nt; t++) {
		const char *row = run_row(v, ldv, kt, t);
		__m256 x[2];

		#pragma GCC unroll 8
		for (int w = 0; w < W; w++)
			x[w] = wload(row, kt, e + 8 * w);
		#pragma GCC unroll 8
		for (int i = 0; i < Q; i++) {
			__m256 a = _mm256_set1_ps(s[(size_t)i * lds + t]);

			#pragma GCC unroll 8
			for (int w = 0; w < W; w++)
				acc[i][w] = _mm256_fmadd_ps(a, x[w], acc[i][w]);
		}
	}
	#pragma GCC unroll 8
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 8
		for (int w = 0; w < W; w++)
			_mm256_storeu_ps(out + (size_t)i * ldo + e + 8 * w,
					 acc[i][w]);
}

INLINE void att_vgroup(float *out, int ldo, const float *s, int lds,
		       const void *v, size_t ldv, const uint32_t kt, int nt, int n,
		       const int Q)
{
	int e = 0;

	for (; e + 16 <= n; e += 16)
		att_vtile(out, ldo, s, lds, v, ldv, kt, nt, e, Q, 2);
	for (; e + 8 <= n; e += 8)
		att_vtile(out, ldo, s, lds, v, ldv, kt, nt, e, Q, 1);
	for (; e < n; e++)
		for (int i = 0; i < Q; i++) {
			float y = out[(size_t)i * ldo + e];

			for (int t = 0; t < nt; t++)
				y = fmaf(s[(size_t)i * lds + t],
					 wscalar(run_row(v, ldv, kt, t), kt,
						 e), y);
			out[(size_t)i * ldo + e] = y;
		}
}

INLINE void att_values_type(float *out, int ldo, int nq, const float *s,
			    int lds, const void *v, size_t ldv, int nt, int n,
			    const uint32_t kt)
{
	/* up to 4 outputs per pass: 8 accumulators, 2 rows, 1 weight */
	for (int i = 0; i < nq; i += 4) {
		float *o = out + (size_t)i * ldo;
		const float *si = s + (size_t)i * lds;

		switch (nq - i < 4 ? nq - i : 4) {
		case 1:
			att_vgroup(o, ldo, si, lds, v, ldv, kt, nt, n, 1);
			break;
		case 2:
			att_vgroup(o, ldo, si, lds, v, ldv, kt, nt, n, 2);
			break;
		case 3:
			att_vgroup(o, ldo, si, lds, v, ldv, kt, nt, n, 3);
			break;
		default:
			att_vgroup(o, ldo, si, lds, v, ldv, kt, nt, n, 4);
		}
	}
}

void kern_avx2_att_values(float *out, int ldo, int nq, const float *s,
			  int lds, const void *v, size_t ldv, uint32_t kt,
			  int nt, int n)
{
	if (kt == GGML_TYPE_F16)
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_F16);
	else if (kt == GGML_TYPE_Q8_0)
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_Q8_0);
	else
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_F32);
}

const struct kern_ops kern_ops_avx2 = {
	.qmatmul = kern_avx2_qmatmul,
	.qact = kern_avx2_qact,
	.qact_bytes = kern_avx2_qact_bytes,
	.peak_int8 = kern_avx2_peak_int8,
	.act_row = kern_avx2_act_row,
	KERN_FLOAT_OPS(kern_avx2_)
	.att_scores = kern_avx2_att_scores,
	.att_values = kern_avx2_att_values,
};
