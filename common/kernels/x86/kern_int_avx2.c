/*
 * kern_int_avx2 — the integer matmul of quantized weights (quant.h's S1,
 * S2 and float combination) on 256-bit vectors, with the activation-row
 * quantizer and the unpacking it uses.
 *
 * Built twice (Makefile): for AVX2, where a step of byte products is
 * maddubs + madd, and for AVX-512 VNNI, where it is one vpdpbusd
 * (KERN_INT_VNNI = 1). Both compute the same exact integer sums, so the
 * two builds give the same bits. Tests build it a third time for AVX2
 * with vpdpbusd emulated by widening products (KERN_INT_VNNI = 2), which
 * checks the VNNI build's code paths on a CPU without VNNI.
 *
 * Its kern_avx2_* / kern_vnni_* functions (kern_impl.h's KERN_INT_FNS)
 * fill the integer entries of the ops tables in kern_avx2.c and
 * kern_avx512.c; f16 scales go through format/half.h.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "format/ggml.h"
#include "format/half.h"
#include "kernels/kern.h"
#include "kernels/kern_impl.h"

#define INLINE static inline __attribute__((always_inline))

#ifndef KERN_INT_VNNI
#define KERN_INT_VNNI 0
#endif
#if KERN_INT_VNNI == 1
#define KI_NAME(f) kern_vnni_##f
#elif KERN_INT_VNNI == 2
#define KI_NAME(f) kern_vnni_emu_##f
#else
#define KI_NAME(f) kern_avx2_##f
#endif

/* acc plus, in each int32 lane, the sum of its 4 byte products u * s (u
 * unsigned, s signed). maddubs would saturate its int16 pairs, vpdpbusd
 * not: the callers' pairs never exceed int16 (see the integer matmul's
 * comment), so both are the exact sum. */
INLINE __m256i dp4(__m256i acc, __m256i u, __m256i s)
{
#if KERN_INT_VNNI == 1
	return _mm256_dpbusd_epi32(acc, u, s);
#elif KERN_INT_VNNI == 2
	/* even and odd bytes widened to int16: every product and pair sum
	 * is exact in madd's int32 */
	__m256i ue = _mm256_and_si256(u, _mm256_set1_epi16(0xff));
	__m256i uo = _mm256_srli_epi16(u, 8);
	__m256i se = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8);
	__m256i so = _mm256_srai_epi16(s, 8);
	return _mm256_add_epi32(acc, _mm256_add_epi32(
		_mm256_madd_epi16(ue, se), _mm256_madd_epi16(uo, so)));
#else
	return _mm256_add_epi32(acc, _mm256_madd_epi16(
		_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* ---- unpacking (quant_wrow) ------------------------------------------ */

/* 32 bytes whose byte e is 0x10 when bit e of bits is set. */
INLINE __m256i bits_x10(uint32_t bits)
{
	const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101ll,
						0x0202020202020202ll,
						0x0303030303030303ll);
	const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 32 nibbles of 16 bytes: low ones first, then the high ones. */
INLINE __m256i nibbles16(const uint8_t *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)p);
	__m128i m = _mm_set1_epi8(0x0f);
	return _mm256_setr_m128i(_mm_and_si128(v, m),
				 _mm_and_si128(_mm_srli_epi16(v, 4), m));
}

static int v_unpack(uint32_t wt, const void *row, quant_wrow *w, int n)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m256i iq4 = _mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
	int nb;

	switch (wt) {
	case GGML_TYPE_Q8_0:
	case GGML_TYPE_Q4_0:
	case GGML_TYPE_Q5_0:
	case GGML_TYPE_IQ4_NL:
		nb = n / 32;
		break;
	case GGML_TYPE_Q4_K:
	case GGML_TYPE_Q5_K:
	case GGML_TYPE_Q6_K:
	case GGML_TYPE_IQ4_XS:
		nb = n / QK_K;
		break;
	default:
		return 0;
	}
	if (nb == n / 32) {
		/* unit 32: sc (and mn) are 1 by definition, unread here */
		size_t bb = (size_t)ggml_block_bytes(wt);
		w->unit = 32;
		w->has_min = 0;
		for (int b = 0; b < nb; b++) {
			uint16_t h;
			memcpy(&h, (const uint8_t *)row + (size_t)b * bb, 2);
			w->d[b] = _cvtsh_ss(h);
		}
	} else {
		quant_unpack_scales(wt, row, w, n);
	}
	for (int b = 0; b < nb; b++) {
		int8_t *q = w->q + (size_t)b * (wt >= GGML_TYPE_Q2_K &&
						 wt != GGML_TYPE_IQ4_NL ? QK_K : 32);
		switch (wt) {
		case GGML_TYPE_Q8_0: {
			const ggml_block_q8_0 *k = (const ggml_block_q8_0 *)row + b;
			_mm256_storeu_si256((__m256i *)q, _mm256_loadu_si256(
							  (const __m256i *)k->qs));
			break;
		}
		case GGML_TYPE_Q4_0: {
			const ggml_block_q4_0 *k = (const ggml_block_q4_0 *)row + b;
			_mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(
				nibbles16(k->qs), _mm256_set1_epi8(8)));
			break;
		}
		case GGML_TYPE_IQ4_NL: {
			const ggml_block_iq4_nl *k = (const ggml_block_iq4_nl *)row + b;
			_mm256_storeu_si256((__m256i *)q, _mm256_shuffle_epi8(
							  iq4, nibbles16(k->qs)));
			break;
		}
		case GGML_TYPE_Q5_0: {
			const ggml_block_q5_0 *k = (const ggml_block_q5_0 *)row + b;
			uint32_t qh;
			memcpy(&qh, k->qh, 4);
			__m256i v = _mm256_or_si256(nibbles16(k->qs), bits_x10(qh));
			_mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(
							  v, _mm256_set1_epi8(16)));
			break;
		}
		case GGML_TYPE_Q4_K:
		case GGML_TYPE_Q5_K: {
			int five = wt == GGML_TYPE_Q5_K;
			const uint8_t *blk = (const uint8_t *)row +
					     (size_t)b * (five ? 176 : 144);
			const uint8_t *qs = blk + (five ? 48 : 16);
			__m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
			for (int c = 0; c < 4; c++) {
				__m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
				__m256i lo = _mm256_and_si256(v, m4);
				__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
				if (five) {
					__m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c)));
					__m256i b1 = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
					__m256i x10 = _mm256_set1_epi8(0x10);
					lo = _mm256_or_si256(lo, _mm256_and_si256(x10,
						_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0)));
					hi = _mm256_or_si256(hi, _mm256_and_si256(x10,
						_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1)));
				}
				_mm256_storeu_si256((__m256i *)(q + 64 * c), lo);
				_mm256_storeu_si256((__m256i *)(q + 64 * c + 32), hi);
			}
			break;
		}
		case GGML_TYPE_Q6_K: {
			const ggml_block_q6_K *k = (const ggml_block_q6_K *)row + b;
			const __m256i m3 = _mm256_set1_epi8(0x03);
			const __m256i m30 = _mm256_set1_epi8(0x30);
			const __m256i off = _mm256_set1_epi8(32);
			for (int h = 0; h < 2; h++) {
				__m256i l0 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h));
				__m256i l1 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h + 32));
				__m256i hb = _mm256_loadu_si256((const __m256i *)(k->qh + 32 * h));
				__m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4);
				__m256i h1 = _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30);
				__m256i h2 = _mm256_and_si256(hb, m30);
				__m256i h3 = _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30);
				int8_t *o = q + 128 * h;
				_mm256_storeu_si256((__m256i *)o, _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(l0, m4), h0), off));
				_mm256_storeu_si256((__m256i *)(o + 32), _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(l1, m4), h1), off));
				_mm256_storeu_si256((__m256i *)(o + 64), _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(
						_mm256_srli_epi16(l0, 4), m4), h2), off));
				_mm256_storeu_si256((__m256i *)(o + 96), _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(
						_mm256_srli_epi16(l1, 4), m4), h3), off));
			}
			break;
		}
		case GGML_TYPE_IQ4_XS: {
			const ggml_block_iq4_xs *k = (const ggml_block_iq4_xs *)row + b;
			for (int ib = 0; ib < 8; ib++)
				_mm256_storeu_si256((__m256i *)(q + 32 * ib),
						    _mm256_shuffle_epi8(iq4, nibbles16(
							    k->qs + 16 * ib)));
			break;
		}
		}
	}
	return 1;
}

/* ---- activation rows (quant_act_row's operations, 8 lanes at a time) -- */

/* The 32 codes of int32 vectors i[0..3] (values in int8 range), in order. */
INLINE __m256i pack32(const __m256i *i)
{
	__m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
				       _mm256_packs_epi32(i[2], i[3]));
	return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2,
								6, 3, 7));
}

INLINE int hsum_i32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
				  _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

void KI_NAME(act_row)(const float *x, int n, int unit, quant_arow *a)
{
	const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256i expm = _mm256_set1_epi32(0x7f800000);

	for (int u = 0; u < n / unit; u++) {
		const float *v = x + (size_t)u * unit;
		int8_t *q = a->q + (size_t)u * unit;
		int16_t *bs = a->bsum + (size_t)u * unit / 16;
		__m256 mx8 = _mm256_setzero_ps();
		__m256i bad = _mm256_setzero_si256();
		float amax, f;

		for (int k = 0; k < unit; k += 8) {
			__m256 vk = _mm256_loadu_ps(v + k);
			mx8 = _mm256_max_ps(mx8, _mm256_and_ps(vk, absm));
			bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(
				_mm256_castps_si256(vk), expm), expm));
		}
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx8),
				       _mm256_extractf128_ps(mx8, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
		if (amax == 0.0f || !_mm256_testz_si256(bad, bad)) {
			f = 0.0f;
		} else if (unit == 32) {
			f = 127.0f / amax;
		} else {
			/* the first element of largest magnitude */
			int k = 0, bits;
			__m256 am = _mm256_set1_ps(amax);
			while (!(bits = _mm256_movemask_ps(_mm256_cmp_ps(
					 _mm256_and_ps(_mm256_loadu_ps(v + k), absm),
					 am, _CMP_EQ_OQ))))
				k += 8;
			f = -127.0f / v[k + __builtin_ctz((unsigned)bits)];
		}
		if (f == 0.0f || f > FLT_MAX || f < -FLT_MAX) {
			/* NaN, Inf, all zero, or a factor that overflows (the
			 * codes of an infinite product): the reference, on this
			 * unit */
			quant_arow one = {.q = q, .bsum = bs, .d = a->d + u,
					  .s = a->s + u};
			quant_act_row(v, unit, unit, &one);
			continue;
		}
		__m256 fv = _mm256_set1_ps(f);
		int sum = 0;
		for (int k = 0; k < unit; k += 32) {
			__m256i iv[4];
			for (int i = 0; i < 4; i++) {
				/* v * f: the reference's v * id, or is * v */
				__m256 r = _mm256_round_ps(_mm256_mul_ps(
					_mm256_loadu_ps(v + k + 8 * i), fv),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
				if (unit != 32)
					r = _mm256_min_ps(r, _mm256_set1_ps(127.0f));
				iv[i] = _mm256_cvtps_epi32(r);
			}
			_mm256_storeu_si256((__m256i *)(q + k), pack32(iv));
			int s0 = hsum_i32(_mm256_add_epi32(iv[0], iv[1]));
			int s1 = hsum_i32(_mm256_add_epi32(iv[2], iv[3]));
			bs[k / 16] = (int16_t)s0;
			bs[k / 16 + 1] = (int16_t)s1;
			sum += s0 + s1;
		}
		if (unit == 32) {
			/* quant_act_row's scales, the same operations */
			float d = amax / 127.0f, sd, sh;
			float dh = half_f16_to_f32(half_f32_to_f16(d));
			a->d[u] = dh <= FLT_MAX ? dh : d;
			sd = d * (float)sum;
			sh = half_f16_to_f32(half_f32_to_f16(sd));
			a->s[u] = sh <= FLT_MAX && sh >= -FLT_MAX ? sh : sd;
		} else {
			a->d[u] = 1.0f / f;
			a->s[u] = 0.0f;
		}
	}
}

/* ---- integer matmul (quant.h) ------------------------------------------ */

/*
 * Tiles of R <= QT_R activation rows against one weight row at a time:
 * each chunk of the weight row is decoded once into registers and
 * multiplied (maddubs: unsigned weights times signed activations) with
 * the same chunk of every row of the tile, so decoding and weight bytes
 * are paid once per tile. Weight rows go in blocks: a block stays in
 * cache while every tile of rows passes over it. With many tiles
 * (KG_USE) Q4_K and Q6_K blocks of rows are first rewritten with their
 * units side by side (kg_prep, kg_block), and Q8_0 and MXFP4 always
 * lay their units side by side (q8g_*, mx_*); qprep_run drives the
 * prepared blocks.
 *
 * Integer sums are exact in any order, so every S1 and S2 is the
 * reference's:
 *  - Q4_K: codes 0..15 as stored, sub-blocks 2c and 2c + 1 byte-pair
 *    interleaved (the activations too: kern_avx2_qact) so that their
 *    maddubs sums add in int16 and one madd applies both scales;
 *    S2 = sum mn[g] * bsum[g].
 *  - Q6_K: codes q + 32 (0..63); S1 = sum sc[g] * sum (q + 32) qa
 *    - 32 * sum sc[g] * bsum[g].
 *  - Q5_0: codes q + 16 (0..31); S1 = sum (q + 16) qa - 16 * sum qa.
 *  - Q8_0: units side by side (struct q8g below), signed codes,
 *    maddubs(|q|, qa * sign(q)) (the sign trick).
 *  - MXFP4: units side by side as Q8_0's, its values + 12 (0..24,
 *    unsigned: no sign trick) through its table (pshufb);
 *    S1 = sum (v + 12) qa - 12 sum qa (see mx_load).
 * A step with unit weights (Q8_0, MXFP4, Q5_0, 32-element types: madd with 1)
 * is dp4, one vpdpbusd in the VNNI build; so are Q4_K's steps side by
 * side (kg_group).
 *  - every other type: quant_wrow (unpacked once per block of rows),
 *    signed codes and the sign trick, sc per 16.
 * No maddubs pair saturates int16: |qa| <= 127, unsigned codes are
 * <= 63, |q| <= 128; no int16 sum of two Q4_K pairs overflows (<= 7620).
 * Rows read directly (qrow, qrow_direct) keep each unit's partial
 * vector per row; every 8 units a tree (or pairwise hadds) turns them
 * into the lanes S1[u0..u0+7] and the float combination runs in quant.h's
 * lanes acc[u % 8]. Lanes of missing units (nu % 8) get a zero factor
 * and S1 = 0: fma(+0, +0, acc) = acc exactly, as acc, from +0 by fmas,
 * is never -0.
 */
#define QT_R 8   /* activation rows per tile */
#define QT_JB 32 /* weight rows per block */

enum { QK_Q4_K, QK_Q6_K, QK_Q5_0, QK_GEN };

struct qtile {
	const int8_t *q[QT_R];
	const int16_t *bsum[QT_R];
	const float *d[QT_R], *s[QT_R];
};

/* Keeps v in a register here: without it gcc reassociates the integer
 * sums of a unit, computes every product first and spills them. */
#define IN_REG(v) __asm__("" : "+x"(v))

/* acc[r] += S1 partial of chunk k: unsigned codes w times the signed
 * activations a, each pair's sum times its int16 scale sc, or (one) the
 * plain sums (dp4) */
INLINE __m256i chunk_step(__m256i acc, __m256i w, __m256i a, __m256i sc,
			  const int one)
{
	if (one)
		return dp4(acc, w, a);
	return _mm256_add_epi32(acc, _mm256_madd_epi16(
		_mm256_maddubs_epi16(w, a), sc));
}

INLINE void chunk_u(__m256i *acc, const struct qtile *t, int k, __m256i w,
		    __m256i sc, const int R, const int one)
{
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		acc[r] = chunk_step(acc[r], w, _mm256_loadu_si256(
			(const __m256i *)(t->q[r] + k)), sc, one);
		IN_REG(acc[r]);
	}
}

/* The same for signed codes (the sign trick). */
INLINE void chunk_s(__m256i *acc, const struct qtile *t, int k, __m256i w,
		    __m256i sc, const int R, const int one)
{
	__m256i aw = _mm256_sign_epi8(w, w);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		acc[r] = chunk_step(acc[r], aw, _mm256_sign_epi8(
			_mm256_loadu_si256((const __m256i *)(t->q[r] + k)), w),
			sc, one);
		IN_REG(acc[r]);
	}
}


/* acc[r] += S1 partial of the 64 elements at k, laid out as
 * kern_avx2_qact lays them out: unsigned codes x, y of two chunks of 32
 * byte-pair interleaved, int16 scales sc (the first chunk's in even
 * words, the second's in odd). The two maddubs sums add in int16: four
 * products of codes <= 63 and |qa| <= 127 stay below 32767. */
INLINE void pair_u(__m256i *acc, const struct qtile *t, int k, __m256i x,
		   __m256i y, __m256i sc, const int R)
{
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		const int8_t *a = t->q[r] + k;
		__m256i p = _mm256_add_epi16(
			_mm256_maddubs_epi16(x, _mm256_loadu_si256(
				(const __m256i *)a)),
			_mm256_maddubs_epi16(y, _mm256_loadu_si256(
				(const __m256i *)(a + 32))));
		acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, sc));
		IN_REG(acc[r]);
	}
}

/* Q4_K's scales (both lanes: sc[0..7] as int16), mins (16, one per group
 * of 16), d and -dmin. */
INLINE void q4k_scales(const uint8_t *blk, __m256i *sc16, __m256i *mn16,
		       float *d, float *dm)
{
	uint16_t hd, hm;
	uint32_t w0, w1, w2;

	memcpy(&hd, blk, 2);
	memcpy(&hm, blk + 2, 2);
	memcpy(&w0, blk + 4, 4);
	memcpy(&w1, blk + 8, 4);
	memcpy(&w2, blk + 12, 4);
	*d = _cvtsh_ss(hd);
	*dm = -_cvtsh_ss(hm);
	/* 8 six-bit scales and mins: bytes 0-3 hold scales 0-3 (and the top
	 * bits of scales 4-7), bytes 4-7 mins 0-3 (and the top bits of mins
	 * 4-7), bytes 8-11 the low nibbles of scales and mins 4-7 */
	__m128i scb = _mm_setr_epi32((int)(w0 & 0x3f3f3f3f),
				     (int)((w2 & 0x0f0f0f0f) |
					   ((w0 >> 2) & 0x30303030)), 0, 0);
	__m128i mnb = _mm_setr_epi32((int)(w1 & 0x3f3f3f3f),
				     (int)(((w2 >> 4) & 0x0f0f0f0f) |
					   ((w1 >> 2) & 0x30303030)), 0, 0);
	*sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scb));
	*mn16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mnb, mnb));
}

/* Sub-blocks 2c (low nibbles) and 2c + 1 (high) of a Q4_K block, their
 * byte pairs interleaved as kern_avx2_qact lays out the activations: the
 * two maddubs sums of the pair add up in int16 (at most 2 x 2 x 15 x 127)
 * and one madd with sc (scale 2c in even words, 2c + 1 in odd) applies
 * both scales. */
INLINE void q4k_chunk(const uint8_t *blk, __m256i sc16, int c, __m256i *x,
		      __m256i *y, __m256i *sc)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * c));
	__m256i lo = _mm256_and_si256(v, m4);
	__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);

	*x = _mm256_unpacklo_epi16(lo, hi);
	*y = _mm256_unpackhi_epi16(lo, hi);
	*sc = _mm256_shuffle_epi8(sc16, _mm256_set1_epi32(0x03020100 +
							  0x04040404 * c));
}

/* Q4_K / Q6_K blocks read directly stream from memory, in order (the
 * next rows follow): each unit prefetches the lines of the block QK_PF
 * bytes ahead, so that loads overlap the arithmetic (measured on Zen 3:
 * one core streams 8 -> 12 GB/s; 1 KiB ahead is too close, 4 the same). */
#define QK_PF 2048
/* The lines of the block of bb bytes QK_PF bytes after blk. */
INLINE void qk_prefetch(const void *blk, const size_t bb)
{
	const char *p = (const char *)blk + QK_PF;
	for (size_t o = 0; o < bb - 1; o += 64)
		_mm_prefetch(p + o, _MM_HINT_T0);
	_mm_prefetch(p + bb - 1, _MM_HINT_T0);
}

/* src: the block (read directly). */
INLINE void unit_q4_K(const void *src, const struct qtile *t, int k,
		      __m256i *s1, __m256i *s2, float *dw, float *dmw,
		      const int R)
{
	__m256i acc[QT_R], sc16, mn16;

	qk_prefetch(src, sizeof(ggml_block_q4_K));
	q4k_scales(src, &sc16, &mn16, dw, dmw);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_si256();
	#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m256i x, y, sc;
		q4k_chunk(src, sc16, c, &x, &y, &sc);
		pair_u(acc, t, k + 64 * c, x, y, sc, R);
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		s1[8 * r] = acc[r];
		s2[8 * r] = _mm256_madd_epi16(mn16, _mm256_loadu_si256(
			(const __m256i *)(t->bsum[r] + k / 16)));
	}
}

/* Q6_K's scales (int16, in order), -32 sc[g], d. */
INLINE void q6k_scales(const ggml_block_q6_K *b, __m256i *sc16, __m256i *off,
		       float *d)
{
	*sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
	/* the codes' offset, taken off with the group sums */
	*off = _mm256_sub_epi16(_mm256_setzero_si256(),
				_mm256_slli_epi16(*sc16, 5));
	*d = _cvtsh_ss(b->d);
}

/* Codes + 32 of the 4 chunks of 32 of half h of a Q6_K block, in order:
 * elements 128 h + 32 k .. + 31 in w[k]. */
INLINE void q6k_codes(const ggml_block_q6_K *b, int h, __m256i *w)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m256i m3 = _mm256_set1_epi8(0x03);
	const __m256i m30 = _mm256_set1_epi8(0x30);
	__m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
	__m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
	__m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));

	w[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
			       _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
	w[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
			       _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
	w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
			       _mm256_and_si256(hb, m30));
	w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
			       _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
}

/* The codes of half h of a Q6_K block as two pairs p (chunks 2p, 2p + 1,
 * byte pairs interleaved as kern_avx2_qact lays out the activations:
 * x[p], y[p]) and their scale vectors for pair_u (lane 0: groups 4p,
 * 4p + 2 of the half; lane 1: 4p + 1, 4p + 3). */
INLINE void q6k_half(const ggml_block_q6_K *b, __m256i sc16, int h,
		     __m256i *x, __m256i *y, __m256i *sc)
{
	/* scales 8h..8h+7 in both lanes (an immediate each: clang wants a
	 * constant, even unrolled) */
	__m256i sh = h ? _mm256_permute4x64_epi64(sc16, 0xee)
		       : _mm256_permute4x64_epi64(sc16, 0x44);
	__m256i w[4];

	q6k_codes(b, h, w);
	#pragma GCC unroll 2
	for (int p = 0; p < 2; p++) {
		x[p] = _mm256_unpacklo_epi16(w[2 * p], w[2 * p + 1]);
		y[p] = _mm256_unpackhi_epi16(w[2 * p], w[2 * p + 1]);
		/* lane 0: words 4p, 4p + 2; lane 1: 4p + 1, 4p + 3 */
		sc[p] = _mm256_shuffle_epi8(sh, _mm256_setr_m128i(
			_mm_set1_epi32(0x05040100 + 0x08080808 * p),
			_mm_set1_epi32(0x07060302 + 0x08080808 * p)));
	}
}

INLINE void unit_q6_K(const void *src, const struct qtile *t, int k,
		      __m256i *s1, float *dw, const int R)
{
	__m256i acc[QT_R], sc16, off;

	qk_prefetch(src, sizeof(ggml_block_q6_K));
	q6k_scales(src, &sc16, &off, dw);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_madd_epi16(off, _mm256_loadu_si256(
			(const __m256i *)(t->bsum[r] + k / 16)));
	#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		__m256i x[2], y[2], sc[2];
		q6k_half(src, sc16, h, x, y, sc);
		#pragma GCC unroll 2
		for (int p = 0; p < 2; p++)
			pair_u(acc, t, k + 128 * h + 64 * p, x[p], y[p], sc[p], R);
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		s1[8 * r] = acc[r];
}

INLINE void unit_q5_0(const uint8_t *blk, const struct qtile *t, int k,
		      __m256i *s1, float *dw, const int R)
{
	const ggml_block_q5_0 *b = (const ggml_block_q5_0 *)blk;
	__m256i acc[QT_R];
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	*dw = _cvtsh_ss(b->d);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_si256();
	chunk_u(acc, t, k, _mm256_or_si256(nibbles16(b->qs), bits_x10(qh)),
		_mm256_setzero_si256(), R, 1);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		s1[8 * r] = acc[r];
}

INLINE void unit_gen(const quant_wrow *w, const struct qtile *t, int u,
		     __m256i *s1, __m256i *s2, float *dw, float *dmw,
		     const int R)
{
	int unit = w->unit, k = u * unit;
	__m256i acc[QT_R];

	*dw = w->d[u];
	*dmw = w->has_min ? w->dm[u] : 0.0f;
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_si256();
	if (unit == 32) /* sc is 1 (and may be unwritten) */
		chunk_s(acc, t, k, _mm256_loadu_si256((const __m256i *)(w->q + k)),
			_mm256_setzero_si256(), R, 1);
	else
		for (int e = k; e < k + unit; e += 32)
			chunk_s(acc, t, e, _mm256_loadu_si256(
					(const __m256i *)(w->q + e)),
				_mm256_setr_m128i(_mm_set1_epi16(w->sc[e / 16]),
						  _mm_set1_epi16(w->sc[e / 16 + 1])),
				R, 0);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		s1[8 * r] = acc[r];
		s2[8 * r] = w->has_min && unit != 32 ? _mm256_madd_epi16(
			_mm256_loadu_si256((const __m256i *)(w->mn + k / 16)),
			_mm256_loadu_si256((const __m256i *)(t->bsum[r] + k / 16))) :
			_mm256_setzero_si256();
	}
}

static void q8_act(int8_t *q, int K, int pad);
/* Q8_0 with at most this many rows (one tile) reads the blocks directly,
 * side by side in registers on the way; with more, each row is laid out
 * once (prepared) for all the tiles. Measured on Zen 3 at K = 896..4864:
 * Q8_0's direct tile of 3..8 rows is 1.5-2x the prepared one; about even
 * at 37 rows; prepared 1.2x ahead at 200. MXFP4 always reads directly:
 * decoding its 17-byte blocks again for each tile costs no more than
 * laying out and reading back 32-byte prepared rows (K = 2880: 1.1-1.8x
 * the prepared rows at 9..16 rows, about even at 37 and 200). */
#define Q8_DIRECT_R QT_R
static void kg_act(quant_arow *a, int K, int kind);
/* Q4_K's and Q6_K's units side by side (kg_prep, kg_block) for M rows of K:
 * from 4 tiles on; Q6_K's rows longer than one pass of 8 units (2048)
 * from 5 (measured on Zen 3: the packed rows' direct path is faster
 * below) */
#define KG_USE(wt, M, K) (((wt) == GGML_TYPE_Q4_K && (M) > 3 * QT_R) || \
			  ((wt) == GGML_TYPE_Q6_K && \
			   (M) > ((K) <= 8 * QK_K ? 3 : 4) * QT_R))

/* The activation rows' layout for the kernel of M rows of wtype (the
 * values are unchanged). Q4_K and Q6_K: with KG_USE, units side by
 * side (kg_act, codes and bsum); else per 64 the byte pairs of elements
 * 0..31 and 32..63 interleaved as unpack{lo,hi}_epi16 interleave them
 * (see pair_u). Q8_0 and MXFP4: units side by side (struct q8g,
 * q8_act). Other types keep quant_act_row's order. */
void KI_NAME(qact)(uint32_t wtype, quant_arow *a, int K, int M)
{
	if (wtype == GGML_TYPE_Q8_0 || wtype == GGML_TYPE_MXFP4)
		q8_act(a->q, K, M <= Q8_DIRECT_R || wtype == GGML_TYPE_MXFP4);
	if (KG_USE(wtype, M, K)) {
		kg_act(a, K, wtype == GGML_TYPE_Q4_K ? QK_Q4_K : QK_Q6_K);
		return;
	}
	if (wtype != GGML_TYPE_Q4_K && wtype != GGML_TYPE_Q6_K)
		return;
	for (int k = 0; k < K; k += 64) {
		__m256i lo = _mm256_loadu_si256((const __m256i *)(a->q + k));
		__m256i hi = _mm256_loadu_si256((const __m256i *)(a->q + k + 32));
		_mm256_storeu_si256((__m256i *)(a->q + k),
				    _mm256_unpacklo_epi16(lo, hi));
		_mm256_storeu_si256((__m256i *)(a->q + k + 32),
				    _mm256_unpackhi_epi16(lo, hi));
	}
}

/* Lane i = the sum of the 8 lanes of v[i]. */
INLINE __m256i tree8(const __m256i *v)
{
	__m256i s01 = _mm256_hadd_epi32(v[0], v[1]);
	__m256i s23 = _mm256_hadd_epi32(v[2], v[3]);
	__m256i s45 = _mm256_hadd_epi32(v[4], v[5]);
	__m256i s67 = _mm256_hadd_epi32(v[6], v[7]);
	__m256i s03 = _mm256_hadd_epi32(s01, s23);
	__m256i s47 = _mm256_hadd_epi32(s45, s67);
	return _mm256_add_epi32(_mm256_permute2x128_si256(s03, s47, 0x20),
				_mm256_permute2x128_si256(s03, s47, 0x31));
}

/* quant.h's tree on the 8 lanes. */
INLINE float tree4(__m256 acc)
{
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc),
			       _mm256_extractf128_ps(acc, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* One weight row (Q5_0 blocks, or a quant_wrow for QK_GEN), units
 * [u_lo, u_hi), against the R rows of t: facc[r]. (Packed Q4_K and Q6_K
 * rows: qrow_direct.) */
INLINE void qrow(const void *wrow, int u_lo, int u_hi, const struct qtile *t,
		 __m256 *facc, const int R, const int kind)
{
	const quant_wrow *gw = wrow;
	const int unit = kind == QK_GEN ? gw->unit : 32;
	const int min_k = kind == QK_GEN && gw->has_min && unit != 32;
	const int min_32 = kind == QK_GEN && gw->has_min && unit == 32;
	int nu = u_hi;

	for (int u0 = u_lo; u0 < nu; u0 += 8) {
		int cnt = nu - u0 < 8 ? nu - u0 : 8;
		/* unit u0 + i of row r: s1v[r][i] */
		__m256i s1v[QT_R][8], s2v[QT_R][8];
		_Alignas(32) float dw[8], dmw[8];

		for (int i = 0; i < cnt; i++) {
			int u = u0 + i;
			if (kind == QK_Q5_0)
				unit_q5_0((const uint8_t *)wrow + (size_t)u *
						  sizeof(ggml_block_q5_0),
					  t, u * 32, &s1v[0][i], &dw[i], R);
			else
				unit_gen(gw, t, u, &s1v[0][i], &s2v[0][i], &dw[i],
					 &dmw[i], R);
		}
		/* missing units: zero (stores one by one, not a memset call) */
		#pragma GCC unroll 8
		for (int i = 1; i < 8; i++)
			if (i >= cnt) {
				dw[i] = dmw[i] = 0.0f;
				#pragma GCC unroll 8
				for (int r = 0; r < R; r++) {
					s1v[r][i] = _mm256_setzero_si256();
					if (min_k)
						s2v[r][i] = _mm256_setzero_si256();
				}
			}
		__m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt),
			_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		__m256 dwv = _mm256_load_ps(dw), dmv = _mm256_load_ps(dmw);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256i s1 = tree8(s1v[r]);
			if (kind == QK_Q5_0) /* 16 * (bsum[2u] + bsum[2u + 1]) */
				s1 = _mm256_sub_epi32(s1, _mm256_madd_epi16(
					_mm256_maskload_epi32((const int *)(t->bsum[r] +
									    2 * u0), mask),
					_mm256_set1_epi16(16)));
			__m256 da = _mm256_maskload_ps(t->d[r] + u0, mask);
			facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dwv, da),
						  _mm256_cvtepi32_ps(s1), facc[r]);
			if (min_k)
				facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dmv, da),
					_mm256_cvtepi32_ps(tree8(s2v[r])), facc[r]);
			else if (min_32)
				facc[r] = _mm256_fmadd_ps(dmv, _mm256_maskload_ps(
					t->s[r] + u0, mask), facc[r]);
		}
	}
}

/* Unit u0 + i of a packed Q4_K / Q6_K row (when i < cnt, else zeros)
 * into a1[8 r], a2[8 r] (S1 and S2 partial vectors of row r). */
INLINE void qunit_direct(const uint8_t *wrow, int u0, int i, int cnt,
			 const struct qtile *t, __m256i *a1, __m256i *a2,
			 float *dw, float *dmw, const int R, const int kind)
{
	int u = u0 + i;

	if (i < cnt) {
		if (kind == QK_Q4_K)
			unit_q4_K(wrow + (size_t)u * sizeof(ggml_block_q4_K), t,
				  u * QK_K, a1, a2, &dw[i], &dmw[i], R);
		else
			unit_q6_K(wrow + (size_t)u * sizeof(ggml_block_q6_K), t,
				  u * QK_K, a1, &dw[i], R);
		return;
	}
	dw[i] = dmw[i] = 0.0f;
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		a1[8 * r] = a2[8 * r] = _mm256_setzero_si256();
}

/* qrow for packed Q4_K / Q6_K rows (read directly: small tiles). The
 * same lanes S1[u0 + i] as tree8 (exact integers, whatever the order),
 * but each pair of units is reduced (hadd) as soon as it is done, then
 * each four: a unit's vectors do not outlive the next unit's, and a
 * missing unit of the last group is a zero vector, not a conditional
 * store into an array of 8 R vectors (gcc turned those into copies of
 * the whole array: measured on Zen 3, 10-35% faster for R = 2..8). The
 * loop over the two halves stays rolled: unrolled, R = 8 was slower. */
INLINE void qrow_direct(const void *wrow, int nu, const struct qtile *t,
			__m256 *facc, const int R, const int kind)
{
	const int min_k = kind == QK_Q4_K;

	for (int u0 = 0; u0 < nu; u0 += 8) {
		int cnt = nu - u0 < 8 ? nu - u0 : 8;
		__m256i f1[2][QT_R], f2[2][QT_R]; /* units 4h .. 4h + 3 */
		_Alignas(32) float dw[8], dmw[8];

		#pragma GCC unroll 1
		for (int h = 0; h < 2; h++) {
			__m256i p1[2][QT_R], p2[2][QT_R]; /* pairs */
			#pragma GCC unroll 2
			for (int p = 0; p < 2; p++) {
				__m256i a1[2][8 * QT_R], a2[2][8 * QT_R];
				#pragma GCC unroll 2
				for (int e = 0; e < 2; e++)
					qunit_direct(wrow, u0, 4 * h + 2 * p + e, cnt, t,
						     a1[e], a2[e], dw, dmw, R, kind);
				#pragma GCC unroll 8
				for (int r = 0; r < R; r++) {
					p1[p][r] = _mm256_hadd_epi32(a1[0][8 * r],
								     a1[1][8 * r]);
					if (min_k)
						p2[p][r] = _mm256_hadd_epi32(
							a2[0][8 * r], a2[1][8 * r]);
				}
			}
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++) {
				f1[h][r] = _mm256_hadd_epi32(p1[0][r], p1[1][r]);
				if (min_k)
					f2[h][r] = _mm256_hadd_epi32(p2[0][r], p2[1][r]);
			}
		}
		__m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt),
			_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		__m256 dwv = _mm256_load_ps(dw), dmv = _mm256_load_ps(dmw);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256i s1 = _mm256_add_epi32(
				_mm256_permute2x128_si256(f1[0][r], f1[1][r], 0x20),
				_mm256_permute2x128_si256(f1[0][r], f1[1][r], 0x31));
			__m256 da = _mm256_maskload_ps(t->d[r] + u0, mask);
			facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dwv, da),
						  _mm256_cvtepi32_ps(s1), facc[r]);
			if (min_k) {
				__m256i s2 = _mm256_add_epi32(
					_mm256_permute2x128_si256(f2[0][r], f2[1][r],
								  0x20),
					_mm256_permute2x128_si256(f2[0][r], f2[1][r],
								  0x31));
				facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dmv, da),
					_mm256_cvtepi32_ps(s2), facc[r]);
			}
		}
	}
}

/* Units per pass of a tile over a weight row: 2048 elements, so that
 * the tile's activations (8 rows) stay in L1 with long rows (ffn_down),
 * where the weight rows are in cache (unpacked).
 * A multiple of 8: the passes split no step of the float combination,
 * whose lanes simply carry on from one pass to the next. */
#define QT_PASS_ELEMS 2048

/* The results of weight rows [j, j + jn) for the R rows from m0: quant.h's
 * tree on each one's float lanes, then the bias. */
INLINE void qstore(const struct kern_mm *mm, int m0, int j, int jn,
		   __m256 (*facc)[QT_R], const int R)
{
	for (int c = 0; c < jn; c++)
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			float res = tree4(facc[c][r]);
			mm->y[(size_t)(m0 + r) * mm->ldy + j + c] =
				mm->bias ? res + mm->bias[j + c] : res;
		}
}

/* Weight rows [j, j + jn) against the R rows from m0; row j + c is at
 * w + c * ws (its blocks, or a quant_wrow). */
INLINE void qblock(const struct kern_mm *mm, const struct qtile *t, int m0,
		   int j, int jn, const char *w, size_t ws, const int R,
		   const int kind)
{
	int unit = quant_unit(mm->wtype), nu = mm->K / unit;
	/* only over rows already in cache (unpacked): packed rows stream
	 * from memory, in order */
	int pass = kind == QK_GEN ? QT_PASS_ELEMS / unit : nu;
	__m256 facc[QT_JB][QT_R];

	for (int u_lo = 0; u_lo < nu; u_lo += pass) {
		int u_hi = nu - u_lo < pass ? nu : u_lo + pass;
		for (int c = 0; c < jn; c++) {
			__m256 f[QT_R];
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				f[r] = u_lo ? facc[c][r] : _mm256_setzero_ps();
			if (kind == QK_Q4_K || kind == QK_Q6_K)
				qrow_direct(w + (size_t)c * ws, nu, t, f, R, kind);
			else
				qrow(w + (size_t)c * ws, u_lo, u_hi, t, f, R, kind);
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				facc[c][r] = f[r];
		}
	}
	qstore(mm, m0, j, jn, facc, R);
}

/* A block of weight rows against a tile of R rows, as name(mm, t, R, m0,
 * j, jn, w, ws): fn(mm, t, m0, j, jn, w, ws, R, kind) with R a constant
 * in each case. */
typedef void (*qblock_fn)(const struct kern_mm *mm, const struct qtile *t,
			  int R, int m0, int j, int jn, const char *w,
			  size_t ws);

#define QBLOCK_FN(name, fn, kind)                                            \
	static void name(const struct kern_mm *mm, const struct qtile *t,    \
			 int R, int m0, int j, int jn, const char *w,        \
			 size_t ws)                                          \
	{                                                                    \
		switch (R) {                                                 \
		case 1: fn(mm, t, m0, j, jn, w, ws, 1, kind); break;         \
		case 2: fn(mm, t, m0, j, jn, w, ws, 2, kind); break;         \
		case 3: fn(mm, t, m0, j, jn, w, ws, 3, kind); break;         \
		case 4: fn(mm, t, m0, j, jn, w, ws, 4, kind); break;         \
		case 5: fn(mm, t, m0, j, jn, w, ws, 5, kind); break;         \
		case 6: fn(mm, t, m0, j, jn, w, ws, 6, kind); break;         \
		case 7: fn(mm, t, m0, j, jn, w, ws, 7, kind); break;         \
		default: fn(mm, t, m0, j, jn, w, ws, QT_R, kind);            \
		}                                                            \
	}
QBLOCK_FN(qblock_q4_K, qblock, QK_Q4_K)
QBLOCK_FN(qblock_q6_K, qblock, QK_Q6_K)
QBLOCK_FN(qblock_q5_0, qblock, QK_Q5_0)
QBLOCK_FN(qblock_gen, qblock, QK_GEN)

_Static_assert(QT_R == 8, "qblock's cases");

/*
 * Q8_0, units side by side. Its unit is 32 elements: one horizontal sum
 * per 32 products (and per activation row) would cost as much as the
 * products. So the units are laid out side by side, in the weight rows
 * (struct q8g, prepared once per block of rows, or built in registers)
 * and in the activation rows (kern_avx2_qact), in groups of g = 8 units
 * while 8 remain, then 4, 2, 1 (kg_size: the binary digits of the
 * rest, so no lane is padding). Unit u0 + i of a group of g lies in the
 * int32 lanes L = i (mod g), each holding one part of its 32 elements
 * (part L / g: 4 g elements); step s (0..g-1) holds elements 4s..4s+3 of
 * every lane's part. g steps of maddubs + madd then leave lane L with
 * its part's sum; with g < 8 the lanes of a unit are summed (kg_fold,
 * exact int32), so every lane of unit i holds S1[u0 + i], including the
 * lane of quant.h's float combination ((u0 + i) % 8: u0 is a multiple
 * of g). The float step runs in lanes [u0 % 8, u0 % 8 + g), with d = da
 * = 0 in the others (fma(+0, x, acc) = acc): no reduction per unit at
 * all for whole groups.
 */
struct q8g {
	__m256i w[8]; /* step s (s < g) */
	float d[8];   /* at the units' float lanes, 0 in the others */
};

/* The 8 x 8 int32 transpose: lane l of r[s] becomes lane s of r[l]. */
INLINE void tr8x8(__m256i *r)
{
	__m256i t[8], u[8];

	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	#pragma GCC unroll 4
	for (int i = 0; i < 2; i++) {
		u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
		r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
	}
}

/* Units in the group that starts with rem units left (Q8_0 here, Q4_K
 * and Q6_K below). */
INLINE int kg_size(int rem)
{
	return rem >= 8 ? 8 : rem >= 4 ? 4 : rem >= 2 ? 2 : 1;
}

/* Lanes L, L + g, ... summed into each of them (g = 8, 4, 2, 1). */
INLINE __m256i kg_fold(__m256i x, int g)
{
	if (g <= 1)
		x = _mm256_add_epi32(x, _mm256_shuffle_epi32(x, 0xb1));
	if (g <= 2)
		x = _mm256_add_epi32(x, _mm256_shuffle_epi32(x, 0x4e));
	if (g <= 4)
		x = _mm256_add_epi32(x, _mm256_permute2x128_si256(x, x, 1));
	return x;
}

/* Lanes [u0 % 8, u0 % 8 + g). */
INLINE __m256i kg_mask(int u0, int g)
{
	__m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	int f0 = u0 % 8;
	return _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(f0 - 1)),
				_mm256_cmpgt_epi32(_mm256_set1_epi32(f0 + g), lane));
}

/* d of the units of a Q8_0 row in the float lanes of mask, from block
 * b + l for lane l (0 in the others): the low half of the int32 at the
 * block (its d and its first two codes). */
INLINE __m256 q8_d(const ggml_block_q8_0 *b, __m256i mask)
{
	__m256i dd = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
		(const int *)b, _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3,
			4, 5, 6, 7), _mm256_set1_epi32(sizeof(*b))), mask, 1);
	dd = _mm256_and_si256(dd, _mm256_set1_epi32(0xffff));
	return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(dd),
						_mm256_extracti128_si256(dd, 1)));
}

/* Units u0..u0+cnt-1 (cnt <= 8) of a Q8_0 row side by side: group or
 * padded tail (unit u0 + l in lane l, zero codes and d for l >= cnt). */
INLINE void q8g_load(const uint8_t *row, int u0, int cnt, __m256i *w,
		     __m256 *dw)
{
	const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + u0;

	*dw = q8_d(b, _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt),
		_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
	#pragma GCC unroll 8
	for (int l = 0; l < 8; l++)
		w[l] = l < cnt ? _mm256_loadu_si256((const __m256i *)b[l].qs)
			       : _mm256_setzero_si256();
	tr8x8(w);
}

/* A group of g < 8 units from u0 (see struct q8g): its g steps in w,
 * the units' d at their float lanes in dw. */
static void q8g_load_part(const uint8_t *row, int u0, int g, __m256i *w,
			  __m256 *dw)
{
	const ggml_block_q8_0 *b = (const ggml_block_q8_0 *)row + u0;

	*dw = q8_d(b - u0 % 8, kg_mask(u0, g));
	/* lane L: the 4 g bytes of its part (loads within the block) */
	for (int L = 0; L < 8; L++) {
		const int8_t *p = b[L % g].qs + 4 * g * (L / g);
		__m128i x;
		if (g == 4) {
			x = _mm_loadu_si128((const __m128i *)p);
		} else if (g == 2) {
			x = _mm_loadl_epi64((const __m128i *)p);
		} else {
			int32_t v;
			memcpy(&v, p, 4);
			x = _mm_cvtsi32_si128(v);
		}
		w[L] = _mm256_castsi128_si256(x);
	}
	tr8x8(w);
}

/*
 * MXFP4 goes the same way, its blocks decoded in registers: int32 j of
 * the 16 code bytes of 8 blocks, transposed (lane l: block l), holds the
 * codes of step j (low nibbles: elements 4j..4j+3) and of step j + 4
 * (high nibbles: elements 16 + 4j..), and one pshufb of
 * quant_mxfp4_values turns each code into its value + MX_OFF (0..24).
 * Unsigned codes need no sign trick (Q8_0's): with the activations' sums
 * (bsum),
 *     S1 = sum (v + 12) qa - 12 (bsum[2u] + bsum[2u + 1]),
 * the same exact integer. The E8M0 scale's bits are built in the lanes:
 * quant_e8m0_half without a call per block.
 */
#define MX_OFF 12

/* The values + MX_OFF by code, in both lanes. */
INLINE __m256i mx_table(void)
{
	return _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(
		(const __m128i *)quant_mxfp4_values)), _mm256_set1_epi8(MX_OFF));
}

/* quant_e8m0_half of blocks b[0..cnt) in lanes 0..cnt-1, +0 in the
 * others. */
INLINE __m256 mx_d(const ggml_block_mxfp4 *b, int cnt)
{
	const __m256i one = _mm256_set1_epi32(1);
	uint64_t e8 = 0;

	/* the scale bytes gathered in a general register */
	for (int l = 0; l < cnt; l++)
		e8 |= (uint64_t)b[l].e << (8 * l);
	__m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)e8));
	/* 2^(e - 128): f32 exponent e - 1 from e = 2 on, else the
	 * subnormal's bit 21 + e */
	__m256i nrm = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
	__m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(1 << 21), e);
	__m256i d = _mm256_blendv_epi8(sub, nrm, _mm256_cmpgt_epi32(e, one));
	return _mm256_castsi256_ps(_mm256_and_si256(d, kg_mask(0, cnt)));
}

/* Units b[0..cnt) (cnt <= 8) of an MXFP4 row side by side, as q8g_load
 * lays out Q8_0's: w[s] lane l holds the codes (values + MX_OFF) of
 * elements 4s..4s+3 of unit l (l >= cnt: codes of zero blocks, against
 * zero activations); dw the scales in lanes 0..cnt-1. */
INLINE void mx_load(const ggml_block_mxfp4 *b, int cnt, __m256i tbl,
		    __m256i *w, __m256 *dw)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m128i q[8];
	__m256i v[4], t[4], s[4];

	#pragma GCC unroll 8
	for (int l = 0; l < 8; l++)
		q[l] = l < cnt ? _mm_loadu_si128((const __m128i *)b[l].qs)
			       : _mm_setzero_si128();
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		v[i] = _mm256_setr_m128i(q[i], q[i + 4]);
	/* the 4 x 4 int32 transpose in each half (blocks 0-3, 4-7) */
	t[0] = _mm256_unpacklo_epi32(v[0], v[1]);
	t[1] = _mm256_unpackhi_epi32(v[0], v[1]);
	t[2] = _mm256_unpacklo_epi32(v[2], v[3]);
	t[3] = _mm256_unpackhi_epi32(v[2], v[3]);
	s[0] = _mm256_unpacklo_epi64(t[0], t[2]);
	s[1] = _mm256_unpackhi_epi64(t[0], t[2]);
	s[2] = _mm256_unpacklo_epi64(t[1], t[3]);
	s[3] = _mm256_unpackhi_epi64(t[1], t[3]);
	#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		w[j] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(s[j], m4));
		w[j + 4] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(
			_mm256_srli_epi16(s[j], 4), m4));
	}
	*dw = mx_d(b, cnt);
}

/* MXFP4's S1 correction for row r of t, lanes of mask (lane l: unit
 * ub + l): -MX_OFF (bsum[2u] + bsum[2u + 1]). */
INLINE __m256i mx_off(const struct qtile *t, int r, int ub, __m256i mask,
		      const int masked)
{
	const int16_t *b = t->bsum[r] + 2 * (size_t)ub;
	__m256i s = masked ? _mm256_maskload_epi32((const int *)b, mask)
			   : _mm256_loadu_si256((const __m256i *)b);
	return _mm256_madd_epi16(s, _mm256_set1_epi16(-MX_OFF));
}

/* The groups of one Q8_0 row of nu units. */
static void q8g_prep(const uint8_t *row, int nu, struct q8g *g)
{
	for (int u0 = 0; u0 < nu; g++) {
		int n = kg_size(nu - u0);
		__m256i w[8];
		__m256 dw;
		if (n == 8)
			q8g_load(row, u0, 8, w, &dw);
		else
			q8g_load_part(row, u0, n, w, &dw);
		_mm256_store_ps(g->d, dw);
		for (int s = 0; s < n; s++)
			_mm256_store_si256(&g->w[s], w[s]);
		u0 += n;
	}
}

/* Groups of a row of nu units. */
static int q8g_count(int nu)
{
	int n = 0;
	for (int u0 = 0; u0 < nu; u0 += kg_size(nu - u0))
		n++;
	return n;
}

/* An activation row's codes side by side (see struct q8g), in place;
 * pad: its last units (fewer than 8) as a padded tail, packed with a
 * step of 4 cnt bytes. */
static void q8_act(int8_t *q, int K, int pad)
{
	int nu = K / 32;

	for (int u0 = 0; u0 < nu;) {
		int8_t *p = q + 32 * u0;
		int g = kg_size(nu - u0), cnt = nu - u0;
		int8_t tmp[7 * 32];
		if (g == 8) {
			__m256i r[8];
			for (int l = 0; l < 8; l++)
				r[l] = _mm256_loadu_si256((const __m256i *)(p + 32 * l));
			tr8x8(r);
			for (int s = 0; s < 8; s++)
				_mm256_storeu_si256((__m256i *)(p + 32 * s), r[s]);
		} else if (pad) {
			memcpy(tmp, p, (size_t)32 * cnt);
			for (int s = 0; s < 8; s++)
				for (int l = 0; l < cnt; l++)
					memcpy(p + 4 * (cnt * s + l),
					       tmp + 32 * l + 4 * s, 4);
			return;
		} else {
			memcpy(tmp, p, (size_t)32 * g);
			for (int s = 0; s < g; s++)
				for (int L = 0; L < 8; L++)
					memcpy(p + 32 * s + 4 * L,
					       tmp + 32 * (L % g) + 4 * g * (L / g) +
						       4 * s, 4);
		}
		u0 += g;
	}
}

#define Q8_PF 8

/* n steps from u0 of the R rows of t: acc[r] += each lane's sum. Step
 * s's activations are at 32 u0 + st s, read whole (st = 32: a group)
 * or masked (the padded tail: st = 4 cnt). Codes w signed (the sign
 * trick), or (uns) unsigned. */
INLINE void q8g_steps(const struct qtile *t, const __m256i *w, int u0,
		      const int n, int st, __m256i mask, __m256i *acc,
		      const int R, const int masked, const int uns)
{

	#pragma GCC unroll 8
	for (int s = 0; s < n; s++) {
		__m256i aw = uns ? w[s] : _mm256_sign_epi8(w[s], w[s]);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			const int8_t *q = t->q[r] + 32 * u0 + st * s;
			__m256i a = masked ? _mm256_maskload_epi32((const int *)q, mask)
					   : _mm256_loadu_si256((const __m256i *)q);
			acc[r] = dp4(acc[r], aw, uns ? a : _mm256_sign_epi8(a, w[s]));
			IN_REG(acc[r]);
		}
	}
}

/* facc[r] += quant.h's float step in the lanes of mask (da of lane l:
 * t->d[r][ub + l]). */
INLINE void q8g_float(const struct qtile *t, int ub, __m256i mask, __m256 dw,
		      const __m256i *acc, __m256 *facc, const int R)
{
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		__m256 da = _mm256_maskload_ps(t->d[r] + ub, mask);
		facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da),
					  _mm256_cvtepi32_ps(acc[r]), facc[r]);
	}
}

/* q8g_row's rows: Q8_0 read directly or prepared (Q8G_PREP), or MXFP4
 * (Q8G_MX), read directly. */
enum { Q8G_PREP = 1, Q8G_MX = 2 };

/* Weight row j (its groups wg when prepared, else its blocks, side by
 * side in registers on the way: for one tile of rows) against the R
 * rows of t: res[r]. The last units (fewer than 8) are groups of 4, 2, 1
 * when prepared, else one padded tail (as q8_act lays out the activations
 * for each case). */
INLINE void q8g_row(const struct kern_mm *mm, const struct q8g *wg, int j,
		    const struct qtile *t, float *res, const int R,
		    const int how)
{
	const int prep = how & Q8G_PREP, mx = how & Q8G_MX;
	const uint8_t *row = (const uint8_t *)mm->W + (size_t)j * mm->row_bytes;
	const ggml_block_mxfp4 *mb = (const ggml_block_mxfp4 *)row;
	const size_t bb = mx ? sizeof(ggml_block_mxfp4) : sizeof(ggml_block_q8_0);
	const __m256i all = _mm256_set1_epi32(-1);
	const __m256i tbl = mx_table();
	int nu = mm->K / 32, u0 = 0;
	__m256 facc[QT_R];
	__m256i acc[QT_R];

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		facc[r] = _mm256_setzero_ps();
	for (; u0 + 8 <= nu; u0 += 8, wg++) {
		__m256i wr[8];
		__m256 dw;
		if (prep) {
			dw = _mm256_load_ps(wg->d);
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++)
				wr[s] = _mm256_load_si256(&wg->w[s]);
		} else {
			/* the group Q8_PF groups ahead (the next rows' at the
			 * end of this one): its lines */
			const char *pf = (const char *)row + bb * (size_t)(u0 + 8 * Q8_PF);
			#pragma GCC unroll 5
			for (int o = 0; o < 5 * 64; o += 64)
				if (o < (int)(8 * bb))
					_mm_prefetch(pf + o, _MM_HINT_T0);
			if (mx)
				mx_load(mb + u0, 8, tbl, wr, &dw);
			else
				q8g_load(row, u0, 8, wr, &dw);
		}
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r] = mx ? mx_off(t, r, u0, all, 0) : _mm256_setzero_si256();
		q8g_steps(t, wr, u0, 8, 32, all, acc, R, 0, mx);
		q8g_float(t, u0, all, dw, acc, facc, R);
	}
	if (u0 < nu && !prep) {
		int cnt = nu - u0;
		__m256i wr[8];
		__m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt),
			_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		__m256 dw;
		if (mx)
			mx_load(mb + u0, cnt, tbl, wr, &dw);
		else
			q8g_load(row, u0, cnt, wr, &dw);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r] = mx ? mx_off(t, r, u0, mask, 1) : _mm256_setzero_si256();
		q8g_steps(t, wr, u0, 8, 4 * cnt, mask, acc, R, 1, mx);
		q8g_float(t, u0, mask, dw, acc, facc, R);
	}
	for (; u0 < nu && prep; wg++) {
		int n = kg_size(nu - u0);
		__m256i mask = kg_mask(u0, n);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r] = _mm256_setzero_si256();
		for (int s = 0; s < n; s++) {
			__m256i w1[1] = {_mm256_load_si256(&wg->w[s])};
			q8g_steps(t, w1, u0 + s, 1, 32, all, acc, R, 0, 0);
		}
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r] = kg_fold(acc[r], n);
		q8g_float(t, u0 - u0 % 8, mask, _mm256_load_ps(wg->d), acc,
			  facc, R);
		u0 += n;
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		res[r] = tree4(facc[r]);
}

INLINE void q8g_block(const struct kern_mm *mm, const struct qtile *t, int m0,
		      int j, int jn, const char *w, size_t ws, const int R,
		      const int how)
{
	for (int c = 0; c < jn; c++) {
		float res[QT_R];
		q8g_row(mm, (const struct q8g *)(w + (size_t)c * ws), j + c, t,
			res, R, how);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			mm->y[(size_t)(m0 + r) * mm->ldy + j + c] =
				mm->bias ? res[r] + mm->bias[j + c] : res[r];
	}
}


/* Blocks of prepared Q8_0 rows against a tile, and Q8_0's and MXFP4's
 * blocks read directly by a tile. */
QBLOCK_FN(q8g_block_prep, q8g_block, Q8G_PREP)
QBLOCK_FN(mx_block_direct, q8g_block, Q8G_MX)

QBLOCK_FN(q8g_block_direct, q8g_block, 0)

/* Bytes of prepared rows per block: the block stays in L2 while the
 * tiles pass over it. */
#define QT_PREP_BYTES (160 * 1024)

/* The tile of R rows from m0 of the activations. */
INLINE void qtile_bind(const struct kern_mm *mm, int m0, int R, int unit,
		       struct qtile *t)
{
	for (int r = 0; r < R; r++) {
		quant_arow a;
		quant_arow_bind(&a, (void *)(mm->xq + (size_t)(m0 + r) *
					     mm->xq_bytes), mm->K, unit);
		t->q[r] = a.q;
		t->bsum[r] = a.bsum;
		t->d[r] = a.d;
		t->s[r] = a.s;
	}
}

/*
 * Q4_K and Q6_K with many tiles (KG_USE): units side by side, as Q8_0's.
 * qrow's hadd trees, which turn per-unit partial vectors into S1[u],
 * cost as much as a third of its time; here each unit's exact S1 (and
 * S2) end in the int32 lane of quant.h's float combination, with no tree
 * at all.
 *
 * A row's units go in groups of g = 8 while 8 remain, then 4, 2, 1 (the
 * binary digits of the rest), so no lane is padding: unit u0 + i of a
 * group of g lies in the lanes L = i (mod g), each holding one part of
 * its 256 elements (part L / g: 32 g elements, g sub-blocks of 32). A
 * group's first unit u0 is a multiple of g, so the lanes of unit u0 + i
 * include its float lane (u0 + i) % 8. Per group, in 32-byte vectors:
 *  - g rounds c of 8 steps s and a scale vector. Step s holds 4 codes of
 *    sub-block (L / g) g + c of lane L's unit in int32 lane L, and the
 *    activations are laid out alike (kg_act):
 *    Q4_K: bytes 4s..4s+3 of the sub-block. The 8 steps' maddubs sums
 *      add up in int16 (at most 8 x 2 x 15 x 127 = 30480) and one madd
 *      applies the round's scales (lane L: its sub-block's, in both
 *      words): 9 multiplies per 256 products per row.
 *    Q6_K (codes + 32): bytes 2s, 2s + 1 of each half (group of 16) of
 *      the sub-block, so that a lane's two words are its two groups; two
 *      steps' maddubs sums add up in int16 (at most 4 x 63 x 127 =
 *      32004) and one madd applies both groups' scales (lane L: one per
 *      word).
 *  - the steps of the activations' sums (kg_min_steps; laid out by
 *    kg_act) against, in lane L's words:
 *    Q4_K (S2): the mins of sub-blocks 2s, 2s + 1 of lane L's part
 *      (g / 2 steps), against the sums of those sub-blocks (each the sum
 *      of two bsum); with g = 1, one step of its sub-block's min and sum
 *      (and 0 in the other word);
 *    Q6_K (added to S1): -32 sc of groups of 16 2s, 2s + 1 of the part
 *      (g steps), against their bsum.
 *  - d and dm (Q4_K: -dmin; Q6_K: 0) at the units' float lanes, 0 in the
 *    others.
 * With g < 8 the lanes L, L + g, ... of a unit are summed (exact int32),
 * so that every lane of unit i holds its S1 and S2; the float step of
 * quant.h then runs in lanes [u0 % 8, u0 % 8 + g), with d = dm = da = 0
 * in the others: fma(+0, x, acc) = acc.
 */
#define KG_VECS(g) (10 * (g) + 2)

/* Prepared bytes of a row of nu units. */
static size_t kg_row_bytes(int nu)
{
	size_t v = 0;
	for (int u0 = 0; u0 < nu; u0 += kg_size(nu - u0))
		v += KG_VECS(kg_size(nu - u0));
	return v * sizeof(__m256i);
}

/* Q6_K's order within a sub-block of 32 (x: elements in order): for
 * step s, elements 2s, 2s + 1, 16 + 2s, 17 + 2s. */
INLINE __m256i q6g_order(__m256i x)
{
	__m128i a = _mm256_castsi256_si128(x), b = _mm256_extracti128_si256(x, 1);
	return _mm256_setr_m128i(_mm_unpacklo_epi16(a, b),
				 _mm_unpackhi_epi16(a, b));
}

/* x[L] (8 int32 of lane L's unit) into the vectors of a group of g:
 * vector c, lane L = x[L]'s entry (L / g) per + c. */
INLINE void kg_lanes(__m256i *x, int g, int per)
{
	for (int L = 0; L < 8; L++)
		x[L] = _mm256_permutevar8x32_epi32(x[L], _mm256_add_epi32(
			_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
			_mm256_set1_epi32(L / g * per)));
	tr8x8(x);
}

/* Steps of the mins (Q4_K: a pair of sub-blocks per lane, one sub-block
 * when g = 1) or of the offsets (Q6_K: a sub-block per lane). */
INLINE int kg_min_steps(int g, int kind)
{
	return kind == QK_Q6_K ? g : g > 1 ? g / 2 : 1;
}

/* Sub-block sb (32 codes, in the groups' order) of unit u of a Q4_K or
 * Q6_K row (Q6_K: codes + 32). */
INLINE __m256i kg_chunk(const uint8_t *row, int u, int sb, const int kind)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);

	if (kind == QK_Q4_K) {
		const ggml_block_q4_K *b = (const ggml_block_q4_K *)row + u;
		__m256i q = _mm256_loadu_si256((const __m256i *)(b->qs +
								 32 * (sb / 2)));
		return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(
			4 * (sb & 1))), m4);
	}
	/* Q6_K: half h = sb / 4, chunk k = sb % 4 of q6k_codes */
	const ggml_block_q6_K *b = (const ggml_block_q6_K *)row + u;
	int h = sb / 4, k = sb % 4;
	__m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h +
							 32 * (k & 1)));
	__m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
	__m256i lo = _mm256_and_si256(_mm256_srl_epi16(l, _mm_cvtsi32_si128(
		4 * (k >> 1))), m4);
	__m256i hi = _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(
		2 * k)), _mm256_set1_epi8(0x03));
	return q6g_order(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
}

/* The group of g units from u0 of a Q4_K or Q6_K row (kind) into v. */
static void kg_prep_group(const uint8_t *row, int u0, int g, const int kind,
			  __m256i *v)
{
	int f0 = u0 % 8;
	/* unit i, int32 per sub-block: Q4_K its scale twice; Q6_K its two
	 * groups' scales. mn: Q4_K its mins in pairs (with g = 1: each
	 * alone, the other word 0); Q6_K -32 times its scales */
	__m256i sc[8], mn[8];
	_Alignas(32) float d[8] = {0}, dm[8] = {0};

	for (int i = 0; i < g; i++) {
		if (kind == QK_Q4_K) {
			const uint8_t *b = row + (u0 + i) * sizeof(ggml_block_q4_K);
			__m256i sc16;
			__m256i mn16;
			q4k_scales(b, &sc16, &mn16, &d[f0 + i], &dm[f0 + i]);
			sc16 = _mm256_permute4x64_epi64(sc16, 0x54);
			sc[i] = _mm256_unpacklo_epi16(sc16, sc16);
			/* mn16: each min twice; its first words */
			mn16 = _mm256_and_si256(mn16, _mm256_set1_epi32(0xffff));
			mn[i] = g == 1 ? mn16 : _mm256_permute4x64_epi64(
				_mm256_packus_epi32(mn16, mn16), 0x08);
		} else {
			const ggml_block_q6_K *b = (const ggml_block_q6_K *)row +
						   u0 + i;
			q6k_scales(b, &sc[i], &mn[i], &d[f0 + i]);
		}
	}
	for (int c = 0; c < g; c++) {
		__m256i r[8];
		#pragma GCC unroll 8
		for (int L = 0; L < 8; L++)
			r[L] = kg_chunk(row, u0 + L % g, L / g * g + c, kind);
		tr8x8(r);
		for (int s = 0; s < 8; s++)
			_mm256_store_si256(v + 9 * c + s, r[s]);
	}
	__m256i x[8], y[8];
	for (int L = 0; L < 8; L++) {
		x[L] = sc[L % g];
		y[L] = mn[L % g];
	}
	kg_lanes(x, g, g);
	kg_lanes(y, g, kind == QK_Q4_K && g > 1 ? g / 2 : g);
	for (int c = 0; c < g; c++)
		_mm256_store_si256(v + 9 * c + 8, x[c]);
	for (int c = 0; c < kg_min_steps(g, kind); c++)
		_mm256_store_si256(v + 9 * g + c, y[c]);
	_mm256_store_ps((float *)(v + 10 * g), _mm256_load_ps(d));
	_mm256_store_ps((float *)(v + 10 * g + 1), _mm256_load_ps(dm));
}

static void kg_prep(const uint8_t *row, int nu, const int kind, __m256i *v)
{
	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0);
		kg_prep_group(row, u0, g, kind, v);
		v += KG_VECS(g);
		u0 += g;
	}
}

/* An activation row's codes and bsum in the groups' layout for kind, in
 * place. */
static void kg_act(quant_arow *a, int K, int kind)
{
	int nu = K / QK_K;
	int8_t tq[8 * QK_K], seg[32];
	int16_t tb[8 * 16];

	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0);
		int8_t *q = a->q + (size_t)QK_K * u0;
		int16_t *bs = a->bsum + (size_t)16 * u0;

		memcpy(tq, q, (size_t)QK_K * g);
		memcpy(tb, bs, sizeof(int16_t) * 16 * (size_t)g);
		for (int c = 0; c < g; c++)
			for (int L = 0; L < 8; L++) {
				const int8_t *x = tq + 256 * (L % g) +
						  32 * g * (L / g) + 32 * c;
				if (kind == QK_Q6_K) {
					for (int s = 0; s < 8; s++) {
						memcpy(seg + 4 * s, x + 2 * s, 2);
						memcpy(seg + 4 * s + 2, x + 16 + 2 * s, 2);
					}
					x = seg;
				}
				for (int s = 0; s < 8; s++)
					memcpy(q + 256 * c + 32 * s + 4 * L,
					       x + 4 * s, 4);
			}
		for (int s = 0; s < kg_min_steps(g, kind); s++)
			for (int L = 0; L < 8; L++) {
				const int16_t *x = tb + 16 * (L % g);
				int16_t *y = bs + 16 * s + 2 * L;
				if (kind == QK_Q6_K) {
					/* groups of 16 2s, 2s + 1 of the part */
					memcpy(y, x + 2 * g * (L / g) + 2 * s, 4);
				} else if (g > 1) {
					/* sub-blocks 2s, 2s + 1 of the part */
					int b = g * (L / g) + 2 * s;
					y[0] = (int16_t)(x[2 * b] + x[2 * b + 1]);
					y[1] = (int16_t)(x[2 * b + 2] + x[2 * b + 3]);
				} else {
					y[0] = (int16_t)(x[2 * L] + x[2 * L + 1]);
					y[1] = 0;
				}
			}
		u0 += g;
	}
}

/* The group of g units from u0 (prepared at v) against the R rows of t. */
/* Q4_K's steps side by side: p plus the step's byte products w * a;
 * AVX2 adds the maddubs sums in int16, the VNNI build in int32 (dp4). */
INLINE __m256i q4g_step(__m256i p, __m256i w, __m256i a)
{
#if KERN_INT_VNNI
	return dp4(p, w, a);
#else
	return _mm256_add_epi16(p, _mm256_maddubs_epi16(w, a));
#endif
}

/* ... then acc plus p times the round's scales sc (in both words): one
 * madd, or in the VNNI build one int32 multiply */
INLINE __m256i q4g_scale(__m256i acc, __m256i p, __m256i sc)
{
#if KERN_INT_VNNI
	return _mm256_add_epi32(acc, _mm256_mullo_epi32(
		p, _mm256_srli_epi32(sc, 16)));
#else
	return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}

INLINE void kg_group(const __m256i *v, int g, int u0, const struct qtile *t,
		     __m256 *facc, const int R, const int kind)
{
	__m256i acc[QT_R], s2[QT_R];
	int f0 = u0 % 8;

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_si256();
	for (int c = 0; c < g; c++) {
		const __m256i *w = v + 9 * c;
		size_t o = (size_t)QK_K * (u0 + c);
		__m256i sc = _mm256_load_si256(w + 8);
		if (kind == QK_Q4_K) {
			__m256i p[QT_R];
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++) {
				__m256i ws = _mm256_load_si256(w + s);
				#pragma GCC unroll 8
				for (int r = 0; r < R; r++) {
					p[r] = q4g_step(s ? p[r] : _mm256_setzero_si256(),
						ws, _mm256_loadu_si256((const __m256i *)
							(t->q[r] + o + 32 * s)));
					IN_REG(p[r]);
				}
			}
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++) {
				acc[r] = q4g_scale(acc[r], p[r], sc);
				IN_REG(acc[r]);
			}
		} else {
			#pragma GCC unroll 4
			for (int s = 0; s < 8; s += 2) {
				__m256i w0 = _mm256_load_si256(w + s);
				__m256i w1 = _mm256_load_si256(w + s + 1);
				#pragma GCC unroll 8
				for (int r = 0; r < R; r++) {
					const int8_t *a = t->q[r] + o + 32 * s;
					__m256i p = _mm256_add_epi16(
						_mm256_maddubs_epi16(w0, _mm256_loadu_si256(
							(const __m256i *)a)),
						_mm256_maddubs_epi16(w1, _mm256_loadu_si256(
							(const __m256i *)(a + 32))));
					acc[r] = _mm256_add_epi32(acc[r],
						_mm256_madd_epi16(p, sc));
					IN_REG(acc[r]);
				}
			}
		}
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		const int16_t *b = t->bsum[r] + (size_t)16 * u0;
		__m256i m = _mm256_madd_epi16(_mm256_load_si256(v + 9 * g),
					      _mm256_loadu_si256((const __m256i *)b));
		for (int s = 1; s < kg_min_steps(g, kind); s++)
			m = _mm256_add_epi32(m, _mm256_madd_epi16(
				_mm256_load_si256(v + 9 * g + s),
				_mm256_loadu_si256((const __m256i *)(b + 16 * s))));
		if (kind == QK_Q4_K)
			s2[r] = m;
		else
			acc[r] = _mm256_add_epi32(acc[r], m);
	}
	__m256i mask = kg_mask(u0, g);
	__m256 dwv = _mm256_load_ps((const float *)(v + 10 * g));
	__m256 dmv = _mm256_load_ps((const float *)(v + 10 * g + 1));
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		__m256 da = _mm256_maskload_ps(t->d[r] + u0 - f0, mask);
		facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dwv, da),
			_mm256_cvtepi32_ps(kg_fold(acc[r], g)), facc[r]);
		if (kind == QK_Q4_K)
			facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dmv, da),
				_mm256_cvtepi32_ps(kg_fold(s2[r], g)), facc[r]);
	}
}

/* Weight rows [j, j + jn) (prepared, ws bytes apart) against the R rows
 * of t from m0; passes of one group of 8 (the tail's groups in one), so
 * that the tile's activations stay in L1. */
INLINE void kg_block(const struct kern_mm *mm, const struct qtile *t, int m0,
		     int j, int jn, const char *w, size_t ws, const int R,
		     const int kind)
{
	int nu = mm->K / QK_K;
	__m256 facc[QT_JB][QT_R];
	size_t vo = 0; /* vectors before the pass */

	for (int u_lo = 0; u_lo < nu; u_lo += 8) {
		size_t vn = 0;
		for (int c = 0; c < jn; c++) {
			const __m256i *v = (const __m256i *)(w + (size_t)c * ws) + vo;
			__m256 f[QT_R];
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				f[r] = u_lo ? facc[c][r] : _mm256_setzero_ps();
			vn = 0;
			for (int u0 = u_lo; u0 < nu && u0 < u_lo + 8;) {
				int g = kg_size(nu - u0);
				kg_group(v + vn, g, u0, t, f, R, kind);
				vn += KG_VECS(g);
				u0 += g;
			}
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				facc[c][r] = f[r];
		}
		vo += vn;
	}
	qstore(mm, m0, j, jn, facc, R);
}


QBLOCK_FN(kg_block_q4_K, kg_block, QK_Q4_K)
QBLOCK_FN(kg_block_q6_K, kg_block, QK_Q6_K)

/* Every tile of rows against the jn weight rows from j (w, ws bytes
 * apart). */
static void qtiles(const struct kern_mm *mm, int j, int jn, const char *w,
		   size_t ws, qblock_fn blockf)
{
	int unit = quant_unit(mm->wtype);

	for (int m0 = 0; m0 < mm->M; m0 += QT_R) {
		int R = mm->M - m0 < QT_R ? mm->M - m0 : QT_R;
		struct qtile t;
		qtile_bind(mm, m0, R, unit, &t);
		blockf(mm, &t, R, m0, j, jn, w, ws);
	}
}

/* Columns [j0, j1) in blocks of prepared weight rows of ws bytes (as
 * many as fit QT_PREP_BYTES, at most QT_JB): prep writes each row of a
 * block once, then every tile of rows passes over the block (blockf). */
static void qprep_run(const struct kern_mm *mm, int j0, int j1, size_t ws,
		      void (*prep)(const struct kern_mm *mm, const uint8_t *row,
				   char *dst),
		      qblock_fn blockf)
{
	int jb = (int)(QT_PREP_BYTES / ws);
	char *buf;

	jb = jb < 1 ? 1 : jb > QT_JB ? QT_JB : jb;
	buf = aligned_alloc(64, (ws * (size_t)jb + 63) & ~(size_t)63);
	if (!buf)
		abort(); /* a block of prepared rows per task */
	for (int j = j0; j < j1; j += jb) {
		int jn = j1 - j < jb ? j1 - j : jb;
		for (int c = 0; c < jn; c++)
			prep(mm, (const uint8_t *)mm->W + (size_t)(j + c) *
				 mm->row_bytes, buf + (size_t)c * ws);
		qtiles(mm, j, jn, buf, ws, blockf);
	}
	free(buf);
}

static void kg_prep_row(const struct kern_mm *mm, const uint8_t *row,
			char *dst)
{
	kg_prep(row, mm->K / QK_K, mm->wtype == GGML_TYPE_Q4_K ? QK_Q4_K :
		QK_Q6_K, (__m256i *)dst);
}

static void q8g_prep_row(const struct kern_mm *mm, const uint8_t *row,
			 char *dst)
{
	q8g_prep(row, mm->K / 32, (struct q8g *)dst);
}

/* Q8_0 and MXFP4 (units side by side). */
static void q8_qmatmul(const struct kern_mm *mm, int j0, int j1)
{
	int mx = mm->wtype == GGML_TYPE_MXFP4;

	if (mm->M <= Q8_DIRECT_R || mx) {
		/* a block of rows stays in cache while the tiles pass */
		for (int j = j0; j < j1; j += QT_JB)
			qtiles(mm, j, j1 - j < QT_JB ? j1 - j : QT_JB, NULL, 0,
			       mx ? mx_block_direct : q8g_block_direct);
		return;
	}
	qprep_run(mm, j0, j1, (size_t)q8g_count(mm->K / 32) * sizeof(struct q8g),
		  q8g_prep_row, q8g_block_prep);
}

void KI_NAME(qmatmul)(const struct kern_mm *mm, int j0, int j1)
{
	int K = mm->K;
	qblock_fn blockf;
	quant_wrow wr[QT_JB];
	char *buf = NULL;
	size_t ws = 0; /* bytes per unpacked row (0: the packed rows) */

	if (mm->wtype == GGML_TYPE_Q8_0 || mm->wtype == GGML_TYPE_MXFP4) {
		q8_qmatmul(mm, j0, j1);
		return;
	}
	if (KG_USE(mm->wtype, mm->M, mm->K)) {
		qprep_run(mm, j0, j1, kg_row_bytes(K / QK_K), kg_prep_row,
			  mm->wtype == GGML_TYPE_Q4_K ? kg_block_q4_K :
							kg_block_q6_K);
		return;
	}
	switch (mm->wtype) {
	case GGML_TYPE_Q4_K: blockf = qblock_q4_K; break;
	case GGML_TYPE_Q6_K: blockf = qblock_q6_K; break;
	case GGML_TYPE_Q5_0: blockf = qblock_q5_0; break;
	default:
		blockf = qblock_gen;
		ws = quant_wrow_bytes(K);
		buf = aligned_alloc(64, (ws * QT_JB + 63) & ~(size_t)63);
		if (!buf)
			abort(); /* QT_JB unpacked rows per task */
		for (int c = 0; c < QT_JB; c++)
			quant_wrow_bind(&wr[c], buf + (size_t)c * ws, K);
	}
	for (int j = j0; j < j1; j += QT_JB) {
		int jn = j1 - j < QT_JB ? j1 - j : QT_JB;
		const char *w = (const char *)mm->W + (size_t)j * mm->row_bytes;
		size_t wstride = mm->row_bytes;
		if (buf) {
			for (int c = 0; c < jn; c++) {
				const uint8_t *row = (const uint8_t *)w +
						     (size_t)c * mm->row_bytes;
				if (!v_unpack(mm->wtype, row, &wr[c], K))
					quant_unpack_row(mm->wtype, row, &wr[c], K);
			}
			w = (const char *)wr;
			wstride = sizeof(quant_wrow);
		}
		qtiles(mm, j, jn, w, wstride, blockf);
	}
	free(buf);
}

