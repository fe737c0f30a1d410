/*
 * kern_float — the float forms of the kern.c reference kernels (dot,
 * matmul with f32/f16/bf16/Q8_0 weights, rmsnorm, SiLU, softmax, axpy,
 * row conversions, and kern_att.h's attention), written once against
 * kern_vec.h's mappings and built once per vector width, as
 * kern_int_avx2.c is built once per ISA:
 *   kern_float_avx2.o   -DKERN_VEC_W=8  with the AVX2 flags: kern_avx2_*
 *   kern_float_avx512.o -DKERN_VEC_W=16 with the AVX-512 flags:
 *                       kern_avx512_*
 * The ops tables in kern_avx2.c and kern_avx512.c take these functions
 * (kern_impl.h declares them). The 16 canonical lanes are KV_R registers
 * (two ymm, one zmm); every function performs exactly the operations of
 * its scalar definition, lane for lane, so both widths give its bits. The
 * final partial 16-chunk of a reduction is finished with scalar fmaf() on
 * the stored lanes, then the fixed tree.
 *
 * Per width only what the register file decides: the small-M matmul's
 * blocking and loop order (16 ymm vs 32 zmm registers) and the tiled
 * micro-kernel's rows and which operand it holds in registers.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "format/ggml.h"
#include "format/half.h"
#include "kernels/kern_impl.h"
#include "kernels/mathf.h"
#include "kernels/x86/kern_tr.h"
#include "kernels/x86/kern_vec.h"

#define PF_ROWS 16

/* ---- reductions ------------------------------------------------------- */

float KV_NAME(dot)(const float *a, const float *b, int n)
{
	return dot_type(a, b, n, GGML_TYPE_F32);
}

float KV_NAME(dot_f16)(const float *a, const uint16_t *b, int n)
{
	return dot_type(a, b, n, GGML_TYPE_F16);
}

/* ---- matmul: small M, weights dequantized in registers ----------------- */

#if KERN_VEC_W == 8

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
	/* Software prefetch of the rows PF_ROWS ahead, see the AVX-512 form. */
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
				r = hsum16(acc[m][c]);
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
/* columns of a group */
#define DIRECT_G 4

/* All rows against one group of G columns (G = 4 or 1); see the AVX-512
 * form. A row keeps 4 columns x 2 halves = 8 chains in flight. */
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

#else /* KERN_VEC_W == 16 */

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
				w0[c] = q8_part(b, 0, d);
				w1[c] = q8_part(b, 1, d);
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
				r = hsum16(&acc[m][c]);
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
#define DIRECT_G 8

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

#endif

INLINE void direct_type(const struct kern_mm *mm, int j0, int j1,
			const uint32_t wt)
{
	int j = j0;
	for (; j + DIRECT_G <= j1; j += DIRECT_G)
		direct_group(mm, j, DIRECT_G, wt);
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
#define UN 4 /* micro-kernel columns */

static _Thread_local _Alignas(64) float w_buf[TP * TK];
static _Thread_local _Alignas(64) float acc_buf[TM * TP * 16];

#if KERN_VEC_W == 8

#define UM 3 /* micro-kernel rows: 12 accumulators, 3 x, 1 w in 16 ymm */

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

#else /* KERN_VEC_W == 16 */

#define UM 4 /* micro-kernel rows: 16 accumulators, 4 w, 1 x in 32 zmm */

/* acc (rows m.., cols c..) += x[m][k] * w[c][k] over k in [0, kc), chunks
 * of 16; w[c] = wp[c * wstride]. h is 0: one register holds the 16. */
INLINE void micro(const float *const *xs, int kx, const float *wp,
		  size_t wstride, int kc, float *acc, int first, int h,
		  const int MB, const int NB)
{
	__m512 a[UM][UN];
	(void)h;
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

#endif

/* Every column of the panel for the rows xs, one register of the 16 lanes
 * (h) after the other. */
INLINE void micro_rows(const float *const *xs, int kx, const float *wp,
		       size_t wstride, int kc, float *acc, int first, int np,
		       const int MB)
{
	for (int h = 0; h < KV_R; h++) {
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
			for (int k = 0; k < kc; k += KERN_VEC_W)
				V_STORE(dst + k, wload(row, GGML_TYPE_F16, k0 + k));
			break;
		case GGML_TYPE_BF16:
			for (int k = 0; k < kc; k += KERN_VEC_W)
				V_STORE(dst + k, wload(row, GGML_TYPE_BF16, k0 + k));
			break;
		default:
			for (int k = 0; k < kc; k += 32) {
				const ggml_block_q8_0 *b =
					(const ggml_block_q8_0 *)row + (k0 + k) / 32;
				V d = q8_scale(b);
				#pragma GCC unroll 8
				for (int q = 0; q < KV_Q8; q++)
					V_STORE(dst + k + KERN_VEC_W * q,
						q8_part(b, q, d));
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
#if UM >= 4
					case 4:
						micro_rows(xs, k0, wp, ws, kc, acc, k0 == 0, np, 4);
						break;
#endif
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

void KV_NAME(matmul)(const struct kern_mm *mm, int j0, int j1)
{
	if (mm->M <= DIRECT_MAX_M)
		mm_direct(mm, j0, j1);
	else
		mm_tiled(mm, j0, j1);
}

/* ---- element-wise ----------------------------------------------------- */

void KV_NAME(rmsnorm)(const float *x, const float *w, int n, float eps,
		      float *out)
{
	float s = 1.0f / sqrtf(KV_NAME(dot)(x, x, n) / (float)n + eps);
	V sv = V_SET1(s);
	int i = 0;
	for (; i + KERN_VEC_W <= n; i += KERN_VEC_W)
		V_STOREU(out + i, V_MUL(V_MUL(V_LOADU(x + i), sv),
					V_LOADU(w + i)));
	for (; i < n; i++)
		out[i] = (x[i] * s) * w[i];
}

void KV_NAME(silu_mul)(float *g, const float *u, int n)
{
	const V one = V_SET1(1.0f);
	int i = 0;
	for (; i + KERN_VEC_W <= n; i += KERN_VEC_W) {
		V v = V_LOADU(g + i);
		V e = vexp(V_SUB(V_ZERO(), v));
		V s = V_DIV(v, V_ADD(one, e));
		V_STOREU(g + i, V_MUL(s, V_LOADU(u + i)));
	}
	for (; i < n; i++) {
		float v = g[i];
		g[i] = (v / (1.0f + mathf_exp(-v))) * u[i];
	}
}

void KV_NAME(softmax)(float *x, int n)
{
	float mx = x[0];
	int i = 0;
	if (n >= KERN_VEC_W) {
		/* per lane: m = x > m ? x : m, exactly the scalar order */
		V m = V_SET1(x[0]);
		for (; i + KERN_VEC_W <= n; i += KERN_VEC_W)
			m = V_MAX(V_LOADU(x + i), m);
		float lanes[KERN_VEC_W];
		V_STOREU(lanes, m);
		for (int l = 0; l < KERN_VEC_W; l++)
			mx = lanes[l] > mx ? lanes[l] : mx;
	}
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;

	V mv = V_SET1(mx), sum[KV_R];
	#pragma GCC unroll 2
	for (int r = 0; r < KV_R; r++)
		sum[r] = V_ZERO();
	for (i = 0; i + 16 <= n; i += 16) {
		V e[KV_R];
		#pragma GCC unroll 2
		for (int r = 0; r < KV_R; r++)
			e[r] = vexp(V_SUB(V_LOADU(x + i + KERN_VEC_W * r), mv));
		#pragma GCC unroll 2
		for (int r = 0; r < KV_R; r++)
			V_STOREU(x + i + KERN_VEC_W * r, e[r]);
		#pragma GCC unroll 2
		for (int r = 0; r < KV_R; r++)
			sum[r] = V_ADD(sum[r], e[r]);
	}
	/* the last partial 16: the same operations in the lanes below n */
	for (int r = 0; r < KV_R && i + KERN_VEC_W * r < n; r++) {
		VM m = V_MASK_BELOW(i + KERN_VEC_W * r, n);
		V e = vexp(V_SUB(V_MASKLOAD(x + i + KERN_VEC_W * r, m), mv));

		V_MASKSTORE(x + i + KERN_VEC_W * r, m, e);
		sum[r] = V_ADD_MASK(sum[r], e, m);
	}
	float acc[16];
	#pragma GCC unroll 2
	for (int r = 0; r < KV_R; r++)
		V_STOREU(acc + KERN_VEC_W * r, sum[r]);
	float s = tree16(acc);
	V sv = V_SET1(s);
	for (i = 0; i + KERN_VEC_W <= n; i += KERN_VEC_W)
		V_STOREU(x + i, V_DIV(V_LOADU(x + i), sv));
	for (; i < n; i++)
		x[i] = x[i] / s;
}

void KV_NAME(axpy)(float *y, float a, const float *x, int n)
{
	V av = V_SET1(a);
	int i = 0;
	for (; i + KERN_VEC_W <= n; i += KERN_VEC_W)
		V_STOREU(y + i, V_FMA(av, V_LOADU(x + i), V_LOADU(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(a, x[i], y[i]);
}

void KV_NAME(axpy_f16)(float *y, float a, const uint16_t *x, int n)
{
	V av = V_SET1(a);
	int i = 0;
	for (; i + KERN_VEC_W <= n; i += KERN_VEC_W)
		V_STOREU(y + i, V_FMA(av, wload(x, GGML_TYPE_F16, i),
				      V_LOADU(y + i)));
	for (; i < n; i++)
		y[i] = fmaf(a, half_f16_to_f32(x[i]), y[i]);
}

/* ---- conversions ------------------------------------------------------ */

void KV_NAME(row_f32)(const void *row, uint32_t wt, int K, float *out)
{
	int k = 0;
	switch (wt) {
	case GGML_TYPE_F32:
		memcpy(out, row, (size_t)K * sizeof(float));
		return;
	case GGML_TYPE_F16:
		for (; k + KERN_VEC_W <= K; k += KERN_VEC_W)
			V_STOREU(out + k, wload(row, GGML_TYPE_F16, k));
		break;
	case GGML_TYPE_BF16:
		for (; k + KERN_VEC_W <= K; k += KERN_VEC_W)
			V_STOREU(out + k, wload(row, GGML_TYPE_BF16, k));
		break;
	default:
		for (; k < K; k += 32) {
			const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + k / 32;
			V d = q8_scale(b);
			#pragma GCC unroll 8
			for (int q = 0; q < KV_Q8; q++)
				V_STOREU(out + k + KERN_VEC_W * q, q8_part(b, q, d));
		}
		return;
	}
	for (; k < K; k++)
		out[k] = wscalar(row, wt, k);
}

void KV_NAME(f32_to_f16_row)(const float *x, uint16_t *out, int n)
{
	int i = 0;
	for (; i + KERN_VEC_W <= n; i += KERN_VEC_W)
		V_STORE_F16(out + i, V_LOADU(x + i));
	for (; i < n; i++)
		out[i] = half_f32_to_f16(x[i]);
}

/* ---- the machine's limits (kern_measure_limits) ------------------------ */

/* FMAs of n rounds of ten independent chains, register only. */
uint64_t KV_NAME(peak_f32)(int64_t n)
{
	const V m = V_SET1(1.0f), c = V_SET1(1e-9f);
	float sink = 0.0f;
	_Alignas(64) float t[KERN_VEC_W];

	/* ten named chains (KERN_TEN: never an array) */
#define PF_DECL(k) V a##k = V_SET1((float)k);
#define PF_STEP(k) a##k = V_FMA(a##k, m, c); __asm__("" : "+x"(a##k));
#define PF_SUM(k) V_STORE(t, a##k); sink += t[0];
	KERN_TEN(PF_DECL)
	for (int64_t i = 0; i < n; i++) {
		KERN_TEN(PF_STEP)
	}
	KERN_TEN(PF_SUM)
#undef PF_DECL
#undef PF_STEP
#undef PF_SUM
	__asm__ volatile("" : : "x"(sink));
	return (uint64_t)n * 10 * KERN_VEC_W;
}

/* The sum of x[0..n) in four independent accumulators (n a multiple of
 * 4 KERN_VEC_W): a streaming read. */
float KV_NAME(read_sum)(const float *x, size_t n)
{
	V a[4] = {V_ZERO(), V_ZERO(), V_ZERO(), V_ZERO()};
	_Alignas(64) float t[KERN_VEC_W];
	float s = 0.0f;

	for (size_t i = 0; i + 4 * KERN_VEC_W <= n; i += 4 * KERN_VEC_W)
		#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			a[k] = V_ADD(a[k], V_LOADU(x + i + (size_t)k * KERN_VEC_W));
	V_STORE(t, V_ADD(V_ADD(a[0], a[1]), V_ADD(a[2], a[3])));
	for (int l = 0; l < KERN_VEC_W; l++)
		s += t[l];
	return s;
}

/* ---- attention: query heads that share one KV head --------------------- */

#include "kernels/x86/kern_att.h"
