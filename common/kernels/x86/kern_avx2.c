/*
 * kern_avx2 — AVX2 + FMA + F16C forms of the kern.c reference kernels.
 * The 16 canonical lanes live in two ymm registers: lanes 0-7 and 8-15.
 * The two halves are independent accumulators, which the tiled matmul
 * exploits by running them one after the other (16 ymm registers only).
 *
 * Every function performs exactly the operations of its scalar definition;
 * the final partial 16-chunk of a reduction is finished with scalar fmaf()
 * on the stored lanes, then the fixed tree.
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

/* The fixed tree on lanes lo = 0..7, hi = 8..15. */
INLINE float hsum(__m256 lo, __m256 hi)
{
	__m256 s8 = _mm256_add_ps(lo, hi);
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

INLINE float finish(float *acc, const float *x, const void *row, uint32_t wt,
		    int kfull, int K)
{
	for (int l = 0; kfull + l < K; l++)
		acc[l] = fmaf(x[kfull + l], wscalar(row, wt, kfull + l), acc[l]);
	return hsum(_mm256_loadu_ps(acc), _mm256_loadu_ps(acc + 8));
}

INLINE __m256 q8_scale(const ggml_block_q8_0 *b)
{
	return _mm256_set1_ps(_cvtsh_ss(b->d));
}

/* Weights 8q .. 8q+7 of a Q8_0 block. */
INLINE __m256 q8_part(const ggml_block_q8_0 *b, int q, __m256 d)
{
	__m128i v = _mm_loadl_epi64((const __m128i *)(b->qs + 8 * q));
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), d);
}

/* 8 weights of a row at k (k % 8 == 0, all present). */
INLINE __m256 wload(const void *row, uint32_t wt, int k)
{
	switch (wt) {
	case GGML_TYPE_F32:
		return _mm256_loadu_ps((const float *)row + k);
	case GGML_TYPE_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128(
			(const __m128i *)((const uint16_t *)row + k)));
	case GGML_TYPE_BF16:
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128(
				(const __m128i *)((const uint16_t *)row + k))),
			16));
	default: {
		const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;
		return q8_part(b, (k / 8) & 3, q8_scale(b));
	}
	}
}

/* ---- exp -------------------------------------------------------------- */

INLINE __m256 exp8(__m256 x)
{
	__m256 xc = _mm256_max_ps(x, _mm256_set1_ps(MATHF_EXP_LO));
	xc = _mm256_min_ps(xc, _mm256_set1_ps(MATHF_EXP_HI));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(MATHF_LOG2E)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-MATHF_LN2_HI), xc);
	r = _mm256_fmadd_ps(n, _mm256_set1_ps(-MATHF_LN2_LO), r);
	__m256 p = _mm256_set1_ps(MATHF_EXP_C7);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MATHF_EXP_C6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MATHF_EXP_C5));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MATHF_EXP_C4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MATHF_EXP_C3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MATHF_EXP_C2));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	__m256i ni = _mm256_cvtps_epi32(n);
	__m256i n1 = _mm256_srai_epi32(ni, 1); /* floor(ni / 2) */
	__m256i n2 = _mm256_sub_epi32(ni, n1);
	__m256i bias = _mm256_set1_epi32(127);
	__m256 s1 = _mm256_castsi256_ps(
		_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
	__m256 s2 = _mm256_castsi256_ps(
		_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	__m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	return _mm256_blendv_ps(res, _mm256_add_ps(x, x), nan);
}

/* ---- reductions ------------------------------------------------------- */

INLINE float dot_type(const float *a, const void *b, int n, const uint32_t wt)
{
	__m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
	int k = 0;
	for (; k + 16 <= n; k += 16) {
		lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), wload(b, wt, k), lo);
		hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8),
				     wload(b, wt, k + 8), hi);
	}
	if (k == n)
		return hsum(lo, hi);
	float lanes[16];
	_mm256_storeu_ps(lanes, lo);
	_mm256_storeu_ps(lanes + 8, hi);
	return finish(lanes, a, b, wt, k, n);
}

static float v_dot(const float *a, const float *b, int n)
{
	return dot_type(a, b, n, GGML_TYPE_F32);
}

static float v_dot_f16(const float *a, const uint16_t *b, int n)
{
	return dot_type(a, b, n, GGML_TYPE_F16);
}

/* ---- matmul: small M, weights dequantized in registers ----------------- */

INLINE void direct(const struct kern_mm *mm, int j, int m0, const int MB,
		   const int NB, const uint32_t wt)
{
	__m256 acc[2][4][2];
	const char *rows[4];
	const float *xs[2];
	#pragma GCC unroll 8
	for (int c = 0; c < NB; c++)
		rows[c] = (const char *)mm->W + (size_t)(j + c) * mm->row_bytes;
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++) {
		xs[m] = mm->x + (size_t)(m0 + m) * mm->ldx;
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			acc[m][c][0] = acc[m][c][1] = _mm256_setzero_ps();
	}
	int K = mm->K, kfull = K & ~15;
	/* Software prefetch of the rows PF_ROWS ahead, see kern_avx512.c. */
	const char *pf = rows[0] + (size_t)PF_ROWS * mm->row_bytes;
	size_t pf_step = (size_t)NB * mm->row_bytes * 32 / (size_t)K;
	if (wt == GGML_TYPE_Q8_0) {
		for (int k = 0; k < K; k += 32) {
			__m256 d[4];
			for (size_t o = 0; o < pf_step; o += 64)
				_mm_prefetch(pf + (size_t)k / 32 * pf_step + o,
					     _MM_HINT_T0);
			#pragma GCC unroll 8
			for (int c = 0; c < NB; c++)
				d[c] = q8_scale((const ggml_block_q8_0 *)rows[c] +
						k / 32);
			#pragma GCC unroll 8
			for (int q = 0; q < 4; q++) {
				#pragma GCC unroll 8
				for (int c = 0; c < NB; c++) {
					__m256 w = q8_part((const ggml_block_q8_0 *)rows[c] +
								   k / 32,
							   q, d[c]);
					#pragma GCC unroll 8
					for (int m = 0; m < MB; m++)
						acc[m][c][q & 1] = _mm256_fmadd_ps(
							_mm256_loadu_ps(xs[m] + k + 8 * q),
							w, acc[m][c][q & 1]);
				}
			}
		}
	} else {
		for (int k = 0; k < kfull; k += 16) {
			for (size_t o = 0; o < pf_step / 2; o += 64)
				_mm_prefetch(pf + (size_t)k / 16 * (pf_step / 2) + o,
					     _MM_HINT_T0);
			#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				#pragma GCC unroll 8
				for (int c = 0; c < NB; c++) {
					__m256 w = wload(rows[c], wt, k + 8 * h);
					#pragma GCC unroll 8
					for (int m = 0; m < MB; m++)
						acc[m][c][h] = _mm256_fmadd_ps(
							_mm256_loadu_ps(xs[m] + k + 8 * h),
							w, acc[m][c][h]);
				}
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
				r = hsum(acc[m][c][0], acc[m][c][1]);
			} else {
				float lanes[16];
				_mm256_storeu_ps(lanes, acc[m][c][0]);
				_mm256_storeu_ps(lanes + 8, acc[m][c][1]);
				r = finish(lanes, xs[m], rows[c], wt, kfull, K);
			}
			if (mm->bias)
				r = r + mm->bias[j + c];
			y[c] = r;
		}
	}
}

/* Measured on Zen 5: with 16 ymm registers the direct kernel only wins
 * for one or two rows. */
#define DIRECT_MAX_M 2

/* All rows against one group of G columns (G = 4 or 1); see kern_avx512.c.
 * A row keeps 4 columns x 2 halves = 8 chains in flight. */
INLINE void direct_group(const struct kern_mm *mm, int j, const int G,
			 const uint32_t wt)
{
	const int NB = G == 4 ? 2 : 1;
	int m = 0;
	for (; m + 2 <= mm->M; m += 2)
		for (int c = 0; c < G; c += NB)
			direct(mm, j + c, m, 2, NB, wt);
	if (m < mm->M)
		direct(mm, j, m, 1, G, wt);
}

INLINE void direct_type(const struct kern_mm *mm, int j0, int j1,
			const uint32_t wt)
{
	int j = j0;
	for (; j + 4 <= j1; j += 4)
		direct_group(mm, j, 4, wt);
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

#define TP 16
#define TK 256
#define TM 64
#define UM 3 /* micro-kernel rows */
#define UN 4 /* micro-kernel columns */

static _Thread_local _Alignas(64) float w_buf[TP * TK];
static _Thread_local _Alignas(64) float acc_buf[TM * TP * 16];

/* One half h of the 16 lanes: acc lanes 8h..8h+7 += x[k+8h..] * w[k+8h..]
 * for the chunks of [0, kc). */
INLINE void micro(const float *const *xs, int kx, const float *wp,
		  size_t wstride, int kc, float *acc, int first, int h,
		  const int MB, const int NB)
{
	__m256 a[UM][UN];
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++)
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			a[m][c] = first ? _mm256_setzero_ps() :
					  _mm256_load_ps(acc + (m * TP + c) * 16 + 8 * h);
	for (int k = 8 * h; k < kc; k += 16) {
		__m256 xv[UM];
		#pragma GCC unroll 8
		for (int m = 0; m < MB; m++)
			xv[m] = _mm256_loadu_ps(xs[m] + kx + k);
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++) {
			__m256 w = _mm256_loadu_ps(wp + c * wstride + k);
			#pragma GCC unroll 8
			for (int m = 0; m < MB; m++)
				a[m][c] = _mm256_fmadd_ps(xv[m], w, a[m][c]);
		}
	}
	#pragma GCC unroll 8
	for (int m = 0; m < MB; m++)
		#pragma GCC unroll 8
		for (int c = 0; c < NB; c++)
			_mm256_store_ps(acc + (m * TP + c) * 16 + 8 * h, a[m][c]);
}

INLINE void micro_rows(const float *const *xs, int kx, const float *wp,
		       size_t wstride, int kc, float *acc, int first, int np,
		       const int MB)
{
	for (int h = 0; h < 2; h++) {
		int c = 0;
		for (; c + UN <= np; c += UN)
			micro(xs, kx, wp + c * wstride, wstride, kc, acc + c * 16,
			      first, h, MB, UN);
		for (; c < np; c++)
			micro(xs, kx, wp + c * wstride, wstride, kc, acc + c * 16,
			      first, h, MB, 1);
	}
}

static void dequant_tile(const struct kern_mm *mm, int j, int np, int k0,
			 int kc)
{
	for (int c = 0; c < np; c++) {
		const char *row = (const char *)mm->W + (size_t)(j + c) * mm->row_bytes;
		float *dst = w_buf + c * TK;
		switch (mm->wtype) {
		case GGML_TYPE_F16:
			for (int k = 0; k < kc; k += 8)
				_mm256_store_ps(dst + k,
						wload(row, GGML_TYPE_F16, k0 + k));
			break;
		case GGML_TYPE_BF16:
			for (int k = 0; k < kc; k += 8)
				_mm256_store_ps(dst + k,
						wload(row, GGML_TYPE_BF16, k0 + k));
			break;
		default:
			for (int k = 0; k < kc; k += 32) {
				const ggml_block_q8_0 *b =
					(const ggml_block_q8_0 *)row + (k0 + k) / 32;
				__m256 d = q8_scale(b);
				#pragma GCC unroll 8
				for (int q = 0; q < 4; q++)
					_mm256_store_ps(dst + k + 8 * q, q8_part(b, q, d));
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
			if (kfull == 0)
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
	__m256 sv = _mm256_set1_ps(s);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i,
				 _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv),
					       _mm256_loadu_ps(w + i)));
	for (; i < n; i++)
		out[i] = (x[i] * s) * w[i];
}

static void v_silu_mul(float *g, const float *u, int n)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(g + i);
		__m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
		__m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
		_mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
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
	if (n >= 8) {
		__m256 m = _mm256_set1_ps(x[0]);
		for (; i + 8 <= n; i += 8)
			m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
		float lanes[8];
		_mm256_storeu_ps(lanes, m);
		for (int l = 0; l < 8; l++)
			mx = lanes[l] > mx ? lanes[l] : mx;
	}
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;

	__m256 mv = _mm256_set1_ps(mx);
	__m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
	for (i = 0; i + 16 <= n; i += 16) {
		__m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
		__m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
		_mm256_storeu_ps(x + i, e0);
		_mm256_storeu_ps(x + i + 8, e1);
		lo = _mm256_add_ps(lo, e0);
		hi = _mm256_add_ps(hi, e1);
	}
	float acc[16];
	_mm256_storeu_ps(acc, lo);
	_mm256_storeu_ps(acc + 8, hi);
	for (int l = 0; i + l < n; l++) {
		x[i + l] = mathf_exp(x[i + l] - mx);
		acc[l] = acc[l] + x[i + l];
	}
	float s = tree16(acc);
	__m256 sv = _mm256_set1_ps(s);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), sv));
	for (; i < n; i++)
		x[i] = x[i] / s;
}

static void v_axpy(float *y, float a, const float *x, int n)
{
	__m256 av = _mm256_set1_ps(a);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i),
							_mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(a, x[i], y[i]);
}

static void v_axpy_f16(float *y, float a, const uint16_t *x, int n)
{
	__m256 av = _mm256_set1_ps(a);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, wload(x, GGML_TYPE_F16, i),
							_mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(a, half_f16_to_f32(x[i]), y[i]);
}

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

/* Row t of the keys converted to f32 (f16: exactly, into buf). */
INLINE const float *att_row(const void *k, size_t ldk, uint32_t kt, int t,
			    int n, float *buf)
{
	if (kt == GGML_TYPE_F32)
		return (const float *)k + (size_t)t * ldk;
	const uint16_t *h = (const uint16_t *)k + (size_t)t * ldk;
	int e = 0;

	for (; e + 8 <= n; e += 8)
		_mm256_storeu_ps(buf + e, wload(h, GGML_TYPE_F16, e));
	for (; e < n; e++)
		buf[e] = half_f16_to_f32(h[e]);
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
					q + (size_t)i * ldq, (const char *)k +
					(size_t)t * ldk * (kt == GGML_TYPE_F16
							   ? 2 : 4), n, kt) *
					scale;
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
	size_t es = kt == GGML_TYPE_F16 ? 2 : 4;

	#pragma GCC unroll 8
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 8
		for (int w = 0; w < W; w++)
			acc[i][w] = _mm256_loadu_ps(out + (size_t)i * ldo + e +
						    8 * w);
	for (int t = 0; t < nt; t++) {
		const char *row = (const char *)v + (size_t)t * ldv * es;
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
					 wscalar((const char *)v + (size_t)t *
						 ldv * (kt == GGML_TYPE_F16 ? 2 : 4),
						 kt, e), y);
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
	else
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_F32);
}

static void v_row_f32(const void *row, uint32_t wt, int K, float *out)
{
	int k = 0;
	switch (wt) {
	case GGML_TYPE_F32:
		memcpy(out, row, (size_t)K * sizeof(float));
		return;
	case GGML_TYPE_F16:
		for (; k + 8 <= K; k += 8)
			_mm256_storeu_ps(out + k, wload(row, GGML_TYPE_F16, k));
		break;
	case GGML_TYPE_BF16:
		for (; k + 8 <= K; k += 8)
			_mm256_storeu_ps(out + k, wload(row, GGML_TYPE_BF16, k));
		break;
	default:
		for (; k < K; k += 32) {
			const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;
			__m256 d = q8_scale(b);
			#pragma GCC unroll 8
			for (int q = 0; q < 4; q++)
				_mm256_storeu_ps(out + k + 8 * q, q8_part(b, q, d));
		}
		return;
	}
	for (; k < K; k++)
		out[k] = wscalar(row, wt, k);
}

static void v_f32_to_f16_row(const float *x, uint16_t *out, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(out + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
						 _MM_FROUND_TO_NEAREST_INT |
							 _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		out[i] = half_f32_to_f16(x[i]);
}

const struct kern_ops kern_ops_avx2 = {
	.qmatmul = kern_avx2_qmatmul,
	.qact = kern_avx2_qact,
	.act_row = kern_avx2_act_row,
	.dot = v_dot,
	.dot_f16 = v_dot_f16,
	.matmul = v_matmul,
	.rmsnorm = v_rmsnorm,
	.silu_mul = v_silu_mul,
	.softmax = v_softmax,
	.axpy = v_axpy,
	.axpy_f16 = v_axpy_f16,
	.att_scores = kern_avx2_att_scores,
	.att_values = kern_avx2_att_values,
	.row_f32 = v_row_f32,
	.f32_to_f16_row = v_f32_to_f16_row,
};
