/*
 * kern_vec — the x86 float kernels' vector mappings, one width per build,
 * in the spirit of ggml's simd-mappings.h: KERN_VEC_W (defined by the
 * including file or the build) selects the register type V and its
 * operations,
 *   KERN_VEC_W = 8:  AVX2 + FMA + F16C, V = __m256 (ymm)
 *   KERN_VEC_W = 16: AVX-512 F/BW/VL/DQ, V = __m512 (zmm)
 * and the helpers below are written once against them. The 16 canonical
 * lanes of kern.h's reduction are KV_R = 16 / KERN_VEC_W registers:
 * lanes 0-7 and 8-15 on AVX2, all 16 in one register on AVX-512. Every
 * lane performs the same operations at either width, so a loop written
 * here gives the bits of its scalar definition at both.
 *
 * Owns nothing but inline code. Included by kern_float.c (the float
 * kernels and kern_att.h's attention, built once per width).
 */
#ifndef QUORUM_KERN_VEC_H
#define QUORUM_KERN_VEC_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "format/ggml.h"
#include "format/half.h"
#include "kernels/mathf.h"

#define INLINE static inline __attribute__((always_inline))

#if KERN_VEC_W == 8

typedef __m256 V;
typedef __m256i VI;
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(a) _mm256_set1_ps(a)
#define V_LOAD(p) _mm256_load_ps(p)
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_store_ps(p, v)
#define V_STOREU(p, v) _mm256_storeu_ps(p, v)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_DIV(a, b) _mm256_div_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_MIN(a, b) _mm256_min_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_RINT(a) \
	_mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_CVT_I(a) _mm256_cvtps_epi32(a)
#define V_CAST_F(a) _mm256_castsi256_ps(a)
#define VI_SET1(a) _mm256_set1_epi32(a)
#define VI_ADD(a, b) _mm256_add_epi32(a, b)
#define VI_SUB(a, b) _mm256_sub_epi32(a, b)
#define VI_SRAI(a, n) _mm256_srai_epi32(a, n)
#define VI_SLLI(a, n) _mm256_slli_epi32(a, n)
/* x + x in the NaN lanes of x, r elsewhere */
#define V_NAN_PASS(r, x) \
	_mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
/* KERN_VEC_W halves, int8 codes and bf16 at p, to f32 */
#define V_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define V_LOAD_BF16(p)                                                    \
	_mm256_castsi256_ps(_mm256_slli_epi32(                            \
		_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), \
		16))
#define V_LOAD_I8(p)                                                      \
	_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(                          \
		_mm_loadl_epi64((const __m128i *)(p))))
/* round to nearest even into KERN_VEC_W halves at p */
#define V_STORE_F16(p, v)                                                 \
	_mm_storeu_si128((__m128i *)(p),                                  \
			 _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT |   \
					     _MM_FROUND_NO_EXC))
/* the exported names of a width's kernels */
#define KV_NAME(n) kern_avx2_##n

/* lanes [k, k + 8) below n (k < n), as a load/blend mask */
typedef __m256i VM;
#define V_MASK_BELOW(k, n)                                                \
	_mm256_cmpgt_epi32(_mm256_set1_epi32((n) - (k)),                  \
			   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
/* the lanes of m loaded (0 elsewhere, nothing read there); fma(a, b, c)
 * in the lanes of m, c elsewhere */
#define V_MASKLOAD(p, m) _mm256_maskload_ps(p, m)
#define V_FMA_MASK(a, b, c, m)                                            \
	_mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), _mm256_castsi256_ps(m))
/* v stored in the lanes of m (nothing written elsewhere); a + b in the
 * lanes of m, a elsewhere */
#define V_MASKSTORE(p, m, v) _mm256_maskstore_ps(p, m, v)
#define V_ADD_MASK(a, b, m)                                               \
	_mm256_blendv_ps(a, _mm256_add_ps(a, b), _mm256_castsi256_ps(m))

/* The first step of the fixed tree, (l, l+8), on lanes acc[0] = 0..7,
 * acc[1] = 8..15. */
INLINE __m256 v_fold16(const V *acc)
{
	return _mm256_add_ps(acc[0], acc[1]);
}

/* The fixed tree on lanes acc[0] = 0..7, acc[1] = 8..15: (l, l+8),
 * (l, l+4), (l, l+2), (0, 1). */
INLINE float hsum16(const V *acc)
{
	__m256 s8 = v_fold16(acc);
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8),
			       _mm256_extractf128_ps(s8, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	__m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
	return _mm_cvtss_f32(s1);
}

#elif KERN_VEC_W == 16

typedef __m512 V;
typedef __m512i VI;
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(a) _mm512_set1_ps(a)
#define V_LOAD(p) _mm512_load_ps(p)
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_store_ps(p, v)
#define V_STOREU(p, v) _mm512_storeu_ps(p, v)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_DIV(a, b) _mm512_div_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_MIN(a, b) _mm512_min_ps(a, b)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_RINT(a) \
	_mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_CVT_I(a) _mm512_cvtps_epi32(a)
#define V_CAST_F(a) _mm512_castsi512_ps(a)
#define VI_SET1(a) _mm512_set1_epi32(a)
#define VI_ADD(a, b) _mm512_add_epi32(a, b)
#define VI_SUB(a, b) _mm512_sub_epi32(a, b)
#define VI_SRAI(a, n) _mm512_srai_epi32(a, n)
#define VI_SLLI(a, n) _mm512_slli_epi32(a, n)
#define V_NAN_PASS(r, x) \
	_mm512_mask_add_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, x)
#define V_LOAD_F16(p) \
	_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define V_LOAD_BF16(p)                                                    \
	_mm512_castsi512_ps(_mm512_slli_epi32(                            \
		_mm512_cvtepu16_epi32(                                    \
			_mm256_loadu_si256((const __m256i *)(p))),        \
		16))
#define V_LOAD_I8(p)                                                      \
	_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(                          \
		_mm_loadu_si128((const __m128i *)(p))))
#define V_STORE_F16(p, v)                                                 \
	_mm256_storeu_si256((__m256i *)(p),                               \
			    _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | \
					       _MM_FROUND_NO_EXC))
#define KV_NAME(n) kern_avx512_##n

typedef __mmask16 VM;
#define V_MASK_BELOW(k, n)                                                \
	((n) - (k) >= 16 ? (__mmask16)0xffff                              \
			 : (__mmask16)((1u << ((n) - (k))) - 1))
#define V_MASKLOAD(p, m) _mm512_maskz_loadu_ps(m, p)
#define V_FMA_MASK(a, b, c, m) _mm512_mask3_fmadd_ps(a, b, c, m)
#define V_MASKSTORE(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define V_ADD_MASK(a, b, m) _mm512_mask_add_ps(a, m, a, b)

/* (l, l+8) on one register */
INLINE __m256 v_fold16(const V *acc)
{
	return _mm256_add_ps(_mm512_castps512_ps256(acc[0]),
			     _mm512_extractf32x8_ps(acc[0], 1));
}

/* The fixed tree on one register: (l, l+8), (l, l+4), (l, l+2), (0, 1). */
INLINE float hsum16(const V *acc)
{
	__m256 s8 = v_fold16(acc);
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8),
			       _mm256_extractf128_ps(s8, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	__m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
	return _mm_cvtss_f32(s1);
}

#else
#error "kern_vec.h: define KERN_VEC_W as 8 (AVX2) or 16 (AVX-512)"
#endif

/* registers per 16 canonical lanes; registers per Q8_0 block */
#define KV_R (16 / KERN_VEC_W)
#define KV_Q8 (GGML_QK8_0 / KERN_VEC_W)

/* ---- width-independent helpers ----------------------------------------- */

INLINE float tree16(float *acc)
{
	for (int h = 8; h >= 1; h >>= 1)
		for (int l = 0; l < h; l++)
			acc[l] = acc[l] + acc[l + h];
	return acc[0];
}

INLINE float wscalar(const void *row, uint32_t wt, int k)
{
	if (wt == GGML_TYPE_F32)
		return ((const float *)row)[k];
	if (wt == GGML_TYPE_F16)
		return half_f16_to_f32(((const uint16_t *)row)[k]);
	if (wt == GGML_TYPE_Q8_0) {
		const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;

		return half_f16_to_f32(b->d) * (float)b->qs[k % 32];
	}
	return half_bf16_to_f32(((const uint16_t *)row)[k]);
}

/* Lanes of a partial last chunk [kfull, K), then the tree. */
INLINE float finish(float *acc, const float *x, const void *row, uint32_t wt,
		    int kfull, int K)
{
	V v[KV_R];

	for (int l = 0; kfull + l < K; l++)
		acc[l] = fmaf(x[kfull + l], wscalar(row, wt, kfull + l), acc[l]);
	#pragma GCC unroll 2
	for (int r = 0; r < KV_R; r++)
		v[r] = V_LOADU(acc + KERN_VEC_W * r);
	return hsum16(v);
}

INLINE V q8_scale(const ggml_block_q8_0 *b)
{
	return V_SET1(_cvtsh_ss(b->d));
}

/* Weights KERN_VEC_W * q .. of a Q8_0 block (q < KV_Q8), scale d. */
INLINE V q8_part(const ggml_block_q8_0 *b, int q, V d)
{
	return V_MUL(V_LOAD_I8(b->qs + KERN_VEC_W * q), d);
}

/* KERN_VEC_W weights of a row at k (k % KERN_VEC_W == 0, all present). */
INLINE V wload(const void *row, uint32_t wt, int k)
{
	switch (wt) {
	case GGML_TYPE_F32:
		return V_LOADU((const float *)row + k);
	case GGML_TYPE_F16:
		return V_LOAD_F16((const uint16_t *)row + k);
	case GGML_TYPE_BF16:
		return V_LOAD_BF16((const uint16_t *)row + k);
	default: {
		const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;
		return q8_part(b, (k / KERN_VEC_W) & (KV_Q8 - 1), q8_scale(b));
	}
	}
}

/* mathf_exp lane for lane (see mathf.h): the same operations. */
INLINE V vexp(V x)
{
	V xc = V_MAX(x, V_SET1(MATHF_EXP_LO));
	xc = V_MIN(xc, V_SET1(MATHF_EXP_HI));
	V n = V_RINT(V_MUL(xc, V_SET1(MATHF_LOG2E)));
	V r = V_FMA(n, V_SET1(-MATHF_LN2_HI), xc);
	r = V_FMA(n, V_SET1(-MATHF_LN2_LO), r);
	V p = V_SET1(MATHF_EXP_C7);
	p = V_FMA(p, r, V_SET1(MATHF_EXP_C6));
	p = V_FMA(p, r, V_SET1(MATHF_EXP_C5));
	p = V_FMA(p, r, V_SET1(MATHF_EXP_C4));
	p = V_FMA(p, r, V_SET1(MATHF_EXP_C3));
	p = V_FMA(p, r, V_SET1(MATHF_EXP_C2));
	p = V_FMA(p, r, V_SET1(1.0f));
	p = V_FMA(p, r, V_SET1(1.0f));
	VI ni = V_CVT_I(n);
	VI n1 = VI_SRAI(ni, 1); /* floor(ni / 2) */
	VI n2 = VI_SUB(ni, n1);
	VI bias = VI_SET1(127);
	V s1 = V_CAST_F(VI_SLLI(VI_ADD(n1, bias), 23));
	V s2 = V_CAST_F(VI_SLLI(VI_ADD(n2, bias), 23));
	V res = V_MUL(V_MUL(p, s1), s2);
	return V_NAN_PASS(res, x);
}

/* The canonical reduction of a against n weights of type wt at b. */
INLINE float dot_type(const float *a, const void *b, int n, const uint32_t wt)
{
	V acc[KV_R];
	int k = 0;

	#pragma GCC unroll 2
	for (int r = 0; r < KV_R; r++)
		acc[r] = V_ZERO();
	for (; k + 16 <= n; k += 16)
		#pragma GCC unroll 2
		for (int r = 0; r < KV_R; r++)
			acc[r] = V_FMA(V_LOADU(a + k + KERN_VEC_W * r),
				       wload(b, wt, k + KERN_VEC_W * r), acc[r]);
	if (k == n)
		return hsum16(acc);
	float lanes[16];
	#pragma GCC unroll 2
	for (int r = 0; r < KV_R; r++)
		V_STOREU(lanes + KERN_VEC_W * r, acc[r]);
	return finish(lanes, a, b, wt, k, n);
}

#endif
