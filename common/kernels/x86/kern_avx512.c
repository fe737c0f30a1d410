/*
 * kern_avx512 — AVX-512 (F/BW/VL/DQ) forms of the kern.c reference
 * kernels. The 16 canonical lanes live in one zmm register.
 *
 * Every function performs exactly the operations of its scalar definition;
 * the final partial 16-chunk of a reduction (K % 16 != 0) is finished with
 * scalar fmaf() on the stored lanes, then the fixed tree.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "format/ggml.h"
#include "format/half.h"
#include "kernels/kern.h"
#include "kernels/kern_impl.h"
#include "kernels/mathf.h"

#define INLINE static inline __attribute__((always_inline))
#define PF_ROWS 16

/* ---- helpers ---------------------------------------------------------- */

INLINE float tree16(float *acc)
{
	for (int h = 8; h >= 1; h >>= 1)
		for (int l = 0; l < h; l++)
			acc[l] = acc[l] + acc[l + h];
	return acc[0];
}

/* The fixed tree on a register: (l, l+8), (l, l+4), (l, l+2), (0, 1). */
INLINE float hsum(__m512 v)
{
	__m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v),
				  _mm512_extractf32x8_ps(v, 1));
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8),
			       _mm256_extractf128_ps(s8, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	__m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
	return _mm_cvtss_f32(s1);
}

INLINE float wscalar(const void *row, uint32_t wt, int k)
{
	if (wt == GGML_TYPE_F32)
		return ((const float *)row)[k];
	if (wt == GGML_TYPE_F16)
		return half_f16_to_f32(((const uint16_t *)row)[k]);
	return half_bf16_to_f32(((const uint16_t *)row)[k]);
}

/* Lanes of a partial last chunk [kfull, K), then the tree. */
INLINE float finish(float *acc, const float *x, const void *row, uint32_t wt,
		    int kfull, int K)
{
	for (int l = 0; kfull + l < K; l++)
		acc[l] = fmaf(x[kfull + l], wscalar(row, wt, kfull + l), acc[l]);
	return hsum(_mm512_loadu_ps(acc));
}

INLINE __m512 q8_scale(const ggml_block_q8_0 *b)
{
	return _mm512_set1_ps(_cvtsh_ss(b->d));
}

INLINE __m512 q8_half(const ggml_block_q8_0 *b, int half, __m512 d)
{
	__m128i q = _mm_loadu_si128((const __m128i *)(b->qs + 16 * half));
	return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
}

/* 16 weights of a row at k (k % 16 == 0, chunk full). */
INLINE __m512 wload(const void *row, uint32_t wt, int k)
{
	switch (wt) {
	case GGML_TYPE_F32:
		return _mm512_loadu_ps((const float *)row + k);
	case GGML_TYPE_F16:
		return _mm512_cvtph_ps(_mm256_loadu_si256(
			(const __m256i *)((const uint16_t *)row + k)));
	case GGML_TYPE_BF16:
		return _mm512_castsi512_ps(_mm512_slli_epi32(
			_mm512_cvtepu16_epi32(_mm256_loadu_si256(
				(const __m256i *)((const uint16_t *)row + k))),
			16));
	default: {
		const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;
		return q8_half(b, (k / 16) & 1, q8_scale(b));
	}
	}
}

/* ---- exp -------------------------------------------------------------- */

INLINE __m512 exp16(__m512 x)
{
	__m512 xc = _mm512_max_ps(x, _mm512_set1_ps(MATHF_EXP_LO));
	xc = _mm512_min_ps(xc, _mm512_set1_ps(MATHF_EXP_HI));
	__m512 n = _mm512_roundscale_ps(
		_mm512_mul_ps(xc, _mm512_set1_ps(MATHF_LOG2E)),
		_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-MATHF_LN2_HI), xc);
	r = _mm512_fmadd_ps(n, _mm512_set1_ps(-MATHF_LN2_LO), r);
	__m512 p = _mm512_set1_ps(MATHF_EXP_C7);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MATHF_EXP_C6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MATHF_EXP_C5));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MATHF_EXP_C4));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MATHF_EXP_C3));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MATHF_EXP_C2));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	__m512i ni = _mm512_cvtps_epi32(n);
	__m512i n1 = _mm512_srai_epi32(ni, 1); /* floor(ni / 2) */
	__m512i n2 = _mm512_sub_epi32(ni, n1);
	__m512i bias = _mm512_set1_epi32(127);
	__m512 s1 = _mm512_castsi512_ps(
		_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
	__m512 s2 = _mm512_castsi512_ps(
		_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
	__m512 res = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
	__mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
	return _mm512_mask_add_ps(res, nan, x, x);
}

/* ---- reductions ------------------------------------------------------- */

static float v_dot(const float *a, const float *b, int n)
{
	__m512 acc = _mm512_setzero_ps();
	int k = 0;
	for (; k + 16 <= n; k += 16)
		acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k),
				      _mm512_loadu_ps(b + k), acc);
	if (k == n)
		return hsum(acc);
	float lanes[16];
	_mm512_storeu_ps(lanes, acc);
	return finish(lanes, a, b, GGML_TYPE_F32, k, n);
}

static float v_dot_f16(const float *a, const uint16_t *b, int n)
{
	__m512 acc = _mm512_setzero_ps();
	int k = 0;
	for (; k + 16 <= n; k += 16)
		acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + k),
				      wload(b, GGML_TYPE_F16, k), acc);
	if (k == n)
		return hsum(acc);
	float lanes[16];
	_mm512_storeu_ps(lanes, acc);
	return finish(lanes, a, b, GGML_TYPE_F16, k, n);
}

/* ---- matmul: small M, weights dequantized in registers ----------------- */

/* Rows m0..m0+MB-1 of x against columns j..j+NB-1 over the whole K. */
INLINE void direct(const struct kern_mm *mm, int j, int m0, const int MB,
		   const int NB, const uint32_t wt)
{
	__m512 acc[4][8];
	const char *rows[8];
	const float *xs[4];
	#pragma GCC unroll 8
	for (int c = 0; c < NB; c++)
		rows[c] = (const char *)mm->W + (size_t)(j + c) * mm->row_bytes;
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++) {
		xs[m] = mm->x + (size_t)(m0 + m) * mm->ldx;
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			acc[m][c] = _mm512_setzero_ps();
	}
	int K = mm->K, kfull = K & ~15;
	/* Software prefetch of the rows PF_ROWS ahead (the next column
	 * groups, contiguous in W): the hardware prefetcher alone leaves a
	 * single-row decode far from the memory bandwidth. */
	const char *pf = rows[0] + (size_t)PF_ROWS * mm->row_bytes;
	size_t pf_step = (size_t)NB * mm->row_bytes * 32 / (size_t)K;
	if (wt == GGML_TYPE_Q8_0) {
		for (int k = 0; k < K; k += 32) {
			__m512 w0[8], w1[8];
			for (size_t o = 0; o < pf_step; o += 64)
				_mm_prefetch(pf + (size_t)k / 32 * pf_step + o,
					     _MM_HINT_T0);
			#pragma GCC unroll 8
			for (int c = 0; c < NB; c++) {
				const ggml_block_q8_0 *b =
					(const ggml_block_q8_0 *)rows[c] + k / 32;
				__m512 d = q8_scale(b);
				w0[c] = q8_half(b, 0, d);
				w1[c] = q8_half(b, 1, d);
			}
			#pragma GCC unroll 8
			for (int m = 0; m < MB; m++) {
				__m512 x0 = _mm512_loadu_ps(xs[m] + k);
				__m512 x1 = _mm512_loadu_ps(xs[m] + k + 16);
				#pragma GCC unroll 8
				for (int c = 0; c < NB; c++) {
					acc[m][c] = _mm512_fmadd_ps(x0, w0[c],
								    acc[m][c]);
					acc[m][c] = _mm512_fmadd_ps(x1, w1[c],
								    acc[m][c]);
				}
			}
		}
	} else {
		for (int k = 0; k < kfull; k += 16) {
			__m512 w[8];
			for (size_t o = 0; o < pf_step / 2; o += 64)
				_mm_prefetch(pf + (size_t)k / 16 * (pf_step / 2) + o,
					     _MM_HINT_T0);
			#pragma GCC unroll 8
			for (int c = 0; c < NB; c++)
				w[c] = wload(rows[c], wt, k);
			#pragma GCC unroll 8
			for (int m = 0; m < MB; m++) {
				__m512 xv = _mm512_loadu_ps(xs[m] + k);
				#pragma GCC unroll 8
				for (int c = 0; c < NB; c++)
					acc[m][c] = _mm512_fmadd_ps(xv, w[c],
								    acc[m][c]);
			}
		}
	}
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++) {
		float *y = mm->y + (size_t)(m0 + m) * mm->ldy + j;
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++) {
			float r;
			if (kfull == K) {
				r = hsum(acc[m][c]);
			} else {
				float lanes[16];
				_mm512_storeu_ps(lanes, acc[m][c]);
				r = finish(lanes, xs[m], rows[c], wt, kfull, K);
			}
			if (mm->bias)
				r = r + mm->bias[j + c];
			y[c] = r;
		}
	}
}

/* Measured on Zen 5: direct matches or beats the tiled path up to M = 64
 * (weights of a column group stay in L1 across row blocks); beyond, the
 * tiled path reuses each x tile across 16 columns. */
#define DIRECT_MAX_M 64

/* All rows against one group of G columns (G = 8 or 1), so the group's
 * weights stay in L1 while every row block uses them. One row needs 8
 * columns in flight to hide the fma latency (a column is one dependent
 * chain); blocks of several rows share each dequantized weight. */
INLINE void direct_group(const struct kern_mm *mm, int j, const int G,
			 const uint32_t wt)
{
	const int NB = G == 8 ? 4 : 1;
	int m = 0;
	for (; m + 4 <= mm->M; m += 4)
		for (int c = 0; c < G; c += NB)
			direct(mm, j + c, m, 4, NB, wt);
	switch (mm->M - m) {
	case 3:
		for (int c = 0; c < G; c += NB)
			direct(mm, j + c, m, 3, NB, wt);
		break;
	case 2:
		for (int c = 0; c < G; c += NB)
			direct(mm, j + c, m, 2, NB, wt);
		break;
	case 1:
		direct(mm, j, m, 1, G, wt);
		break;
	}
}

INLINE void direct_type(const struct kern_mm *mm, int j0, int j1,
			const uint32_t wt)
{
	int j = j0;
	for (; j + 8 <= j1; j += 8)
		direct_group(mm, j, 8, wt);
	for (; j < j1; j++)
		direct_group(mm, j, 1, wt);
}

static void mm_direct(const struct kern_mm *mm, int j0, int j1)
{
	switch (mm->wtype) {
	case GGML_TYPE_F32:
		direct_type(mm, j0, j1, GGML_TYPE_F32);
		break;
	case GGML_TYPE_F16:
		direct_type(mm, j0, j1, GGML_TYPE_F16);
		break;
	case GGML_TYPE_BF16:
		direct_type(mm, j0, j1, GGML_TYPE_BF16);
		break;
	default:
		direct_type(mm, j0, j1, GGML_TYPE_Q8_0);
		break;
	}
}

/* ---- matmul: large M, tiles of W dequantized once into L1 -------------- */

/* Panel of TP columns x TK weights in f32, reused by every row of x; the
 * accumulators of a TM-row tile wait in acc_buf between K tiles. */
#define TP 16
#define TK 256
#define TM 64
#define UM 4 /* micro-kernel rows */
#define UN 4 /* micro-kernel columns */

static _Thread_local _Alignas(64) float w_buf[TP * TK];
static _Thread_local _Alignas(64) float acc_buf[TM * TP * 16];

/* acc (rows m.., cols c..) += x[m][k] * w[c][k] over k in [0, kc), chunks
 * of 16; w[c] = wp[c * wstride]. */
INLINE void micro(const float *const *xs, int kx, const float *wp,
		  size_t wstride, int kc, float *acc, int first, const int MB,
		  const int NB)
{
	__m512 a[UM][UN];
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++)
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			a[m][c] = first ? _mm512_setzero_ps() :
					  _mm512_load_ps(acc + (m * TP + c) * 16);
	for (int k = 0; k < kc; k += 16) {
		__m512 w[UN];
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			w[c] = _mm512_loadu_ps(wp + c * wstride + k);
		#pragma GCC unroll 8
		for (int m = 0; m < MB; m++) {
			__m512 xv = _mm512_loadu_ps(xs[m] + kx + k);
			#pragma GCC unroll 8
			for (int c = 0; c < NB; c++)
				a[m][c] = _mm512_fmadd_ps(xv, w[c], a[m][c]);
		}
	}
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++)
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			_mm512_store_ps(acc + (m * TP + c) * 16, a[m][c]);
}

INLINE void micro_rows(const float *const *xs, int kx, const float *wp,
		       size_t wstride, int kc, float *acc, int first, int np,
		       const int MB)
{
	int c = 0;
	for (; c + UN <= np; c += UN)
		micro(xs, kx, wp + c * wstride, wstride, kc, acc + c * 16, first,
		      MB, UN);
	for (; c < np; c++)
		micro(xs, kx, wp + c * wstride, wstride, kc, acc + c * 16, first,
		      MB, 1);
}

static void dequant_tile(const struct kern_mm *mm, int j, int np, int k0,
			 int kc)
{
	for (int c = 0; c < np; c++) {
		const char *row = (const char *)mm->W + (size_t)(j + c) * mm->row_bytes;
		float *dst = w_buf + c * TK;
		switch (mm->wtype) {
		case GGML_TYPE_F16:
			for (int k = 0; k < kc; k += 16)
				_mm512_store_ps(dst + k,
						wload(row, GGML_TYPE_F16, k0 + k));
			break;
		case GGML_TYPE_BF16:
			for (int k = 0; k < kc; k += 16)
				_mm512_store_ps(dst + k,
						wload(row, GGML_TYPE_BF16, k0 + k));
			break;
		default:
			for (int k = 0; k < kc; k += 32) {
				const ggml_block_q8_0 *b =
					(const ggml_block_q8_0 *)row + (k0 + k) / 32;
				__m512 d = q8_scale(b);
				_mm512_store_ps(dst + k, q8_half(b, 0, d));
				_mm512_store_ps(dst + k + 16, q8_half(b, 1, d));
			}
			break;
		}
	}
}

static void mm_tiled(const struct kern_mm *mm, int j0, int j1)
{
	int K = mm->K, kfull = K & ~15;
	int f32 = mm->wtype == GGML_TYPE_F32;
	for (int j = j0; j < j1; j += TP) {
		int np = j1 - j < TP ? j1 - j : TP;
		for (int mt = 0; mt < mm->M; mt += TM) {
			int mtn = mm->M - mt < TM ? mm->M - mt : TM;
			for (int k0 = 0; k0 < kfull; k0 += TK) {
				int kc = kfull - k0 < TK ? kfull - k0 : TK;
				const float *wp;
				size_t ws;
				if (f32) {
					wp = (const float *)((const char *)mm->W +
							     (size_t)j * mm->row_bytes) + k0;
					ws = mm->row_bytes / sizeof(float);
				} else {
					dequant_tile(mm, j, np, k0, kc);
					wp = w_buf;
					ws = TK;
				}
				for (int m = 0; m < mtn; m += UM) {
					const float *xs[UM];
					int mb = mtn - m < UM ? mtn - m : UM;
					for (int i = 0; i < mb; i++)
						xs[i] = mm->x + (size_t)(mt + m + i) * mm->ldx;
					float *acc = acc_buf + m * TP * 16;
					switch (mb) {
					case 4:
						micro_rows(xs, k0, wp, ws, kc, acc, k0 == 0, np, 4);
						break;
					case 3:
						micro_rows(xs, k0, wp, ws, kc, acc, k0 == 0, np, 3);
						break;
					case 2:
						micro_rows(xs, k0, wp, ws, kc, acc, k0 == 0, np, 2);
						break;
					default:
						micro_rows(xs, k0, wp, ws, kc, acc, k0 == 0, np, 1);
						break;
					}
				}
			}
			if (kfull == 0) /* K < 16: only the partial chunk */
				memset(acc_buf, 0, sizeof(float) * 16 * TP * (size_t)mtn);
			for (int m = 0; m < mtn; m++) {
				const float *x = mm->x + (size_t)(mt + m) * mm->ldx;
				float *y = mm->y + (size_t)(mt + m) * mm->ldy;
				for (int c = 0; c < np; c++) {
					float *lanes = acc_buf + (m * TP + c) * 16;
					const char *row = (const char *)mm->W +
							  (size_t)(j + c) * mm->row_bytes;
					float r = finish(lanes, x, row, mm->wtype, kfull, K);
					if (mm->bias)
						r = r + mm->bias[j + c];
					y[j + c] = r;
				}
			}
		}
	}
}

static void v_matmul(const struct kern_mm *mm, int j0, int j1)
{
	if (mm->M <= DIRECT_MAX_M)
		mm_direct(mm, j0, j1);
	else
		mm_tiled(mm, j0, j1);
}

/* ---- element-wise ----------------------------------------------------- */

static void v_rmsnorm(const float *x, const float *w, int n, float eps,
		      float *out)
{
	float s = 1.0f / sqrtf(v_dot(x, x, n) / (float)n + eps);
	__m512 sv = _mm512_set1_ps(s);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(out + i,
				 _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), sv),
					       _mm512_loadu_ps(w + i)));
	for (; i < n; i++)
		out[i] = (x[i] * s) * w[i];
}

static void v_silu_mul(float *g, const float *u, int n)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(g + i);
		__m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
		__m512 s = _mm512_div_ps(v, _mm512_add_ps(one, e));
		_mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
	}
	for (; i < n; i++) {
		float v = g[i];
		g[i] = (v / (1.0f + mathf_exp(-v))) * u[i];
	}
}

static void v_softmax(float *x, int n)
{
	float mx = x[0];
	int i = 0;
	if (n >= 16) {
		/* per lane: m = x > m ? x : m, exactly the scalar order */
		__m512 m = _mm512_set1_ps(x[0]);
		for (; i + 16 <= n; i += 16)
			m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
		float lanes[16];
		_mm512_storeu_ps(lanes, m);
		for (int l = 0; l < 16; l++)
			mx = lanes[l] > mx ? lanes[l] : mx;
	}
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;

	__m512 mv = _mm512_set1_ps(mx), sum = _mm512_setzero_ps();
	i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
		_mm512_storeu_ps(x + i, e);
		sum = _mm512_add_ps(sum, e);
	}
	float acc[16];
	_mm512_storeu_ps(acc, sum);
	for (int l = 0; i + l < n; l++) {
		x[i + l] = mathf_exp(x[i + l] - mx);
		acc[l] = acc[l] + x[i + l];
	}
	float s = tree16(acc);
	__m512 sv = _mm512_set1_ps(s);
	for (i = 0; i + 16 <= n; i += 16)
		_mm512_storeu_ps(x + i, _mm512_div_ps(_mm512_loadu_ps(x + i), sv));
	for (; i < n; i++)
		x[i] = x[i] / s;
}

static void v_axpy(float *y, float a, const float *x, int n)
{
	__m512 av = _mm512_set1_ps(a);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i),
							_mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(a, x[i], y[i]);
}

static void v_axpy_f16(float *y, float a, const uint16_t *x, int n)
{
	__m512 av = _mm512_set1_ps(a);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, wload(x, GGML_TYPE_F16, i),
							_mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(a, half_f16_to_f32(x[i]), y[i]);
}

static void v_row_f32(const void *row, uint32_t wt, int K, float *out)
{
	int k = 0;
	switch (wt) {
	case GGML_TYPE_F32:
		memcpy(out, row, (size_t)K * sizeof(float));
		return;
	case GGML_TYPE_F16:
		for (; k + 16 <= K; k += 16)
			_mm512_storeu_ps(out + k, wload(row, GGML_TYPE_F16, k));
		break;
	case GGML_TYPE_BF16:
		for (; k + 16 <= K; k += 16)
			_mm512_storeu_ps(out + k, wload(row, GGML_TYPE_BF16, k));
		break;
	default:
		for (; k < K; k += 32) {
			const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;
			__m512 d = q8_scale(b);
			_mm512_storeu_ps(out + k, q8_half(b, 0, d));
			_mm512_storeu_ps(out + k + 16, q8_half(b, 1, d));
		}
		return;
	}
	for (; k < K; k++)
		out[k] = wscalar(row, wt, k);
}

static void v_f32_to_f16_row(const float *x, uint16_t *out, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(out + i),
				    _mm512_cvtps_ph(_mm512_loadu_ps(x + i),
						    _MM_FROUND_TO_NEAREST_INT |
							    _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		out[i] = half_f32_to_f16(x[i]);
}

/* the float kernels of both AVX-512 tables */
#define KERN_AVX512_FLOAT                                                   \
	.dot = v_dot,                                                       \
	.dot_f16 = v_dot_f16,                                               \
	.matmul = v_matmul,                                                 \
	.rmsnorm = v_rmsnorm,                                               \
	.silu_mul = v_silu_mul,                                             \
	.softmax = v_softmax,                                               \
	.axpy = v_axpy,                                                     \
	.axpy_f16 = v_axpy_f16,                                             \
	/* the AVX2 attention kernels (no zmm form yet: the machines that  \
	 * test these bits have no AVX-512) */                               \
	.att_scores = kern_avx2_att_scores,                                 \
	.att_values = kern_avx2_att_values,                                 \
	.row_f32 = v_row_f32,                                               \
	.f32_to_f16_row = v_f32_to_f16_row,

const struct kern_ops kern_ops_avx512 = {
	/* the AVX2 integer matmul (an AVX-512 CPU has AVX2) */
	.qmatmul = kern_avx2_qmatmul,
	.qact = kern_avx2_qact,
	.act_row = kern_avx2_act_row,
	KERN_AVX512_FLOAT
};

/* The same with vpdpbusd in the integer matmul. */
const struct kern_ops kern_ops_avx512vnni = {
	.qmatmul = kern_vnni_qmatmul,
	.qact = kern_vnni_qact,
	.act_row = kern_vnni_act_row,
	KERN_AVX512_FLOAT
};
