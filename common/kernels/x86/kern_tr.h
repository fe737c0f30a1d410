/*
 * kern_tr — 512-bit pairing trees that finish many canonical sums at once,
 * and the index that orders their results: shared by the integer builds
 * (zt_finish; v16_tr4 also act_max16 and act_codes64) and the float
 * build's attention scores (att_trees).
 *
 * Owns nothing but inline functions; AVX-512 translation units only.
 */
#ifndef QUORUM_KERN_TR_H
#define QUORUM_KERN_TR_H

#include <immintrin.h>

#ifdef __AVX512F__
/* The index of a 4 x 4 transpose of 32-bit elements in 128-bit quarters:
 * element 4c + k goes to 4k + c (permutexvar). Where results sit at
 * element e of quarter c after a pairing tree (act_max16, zt_finish,
 * att_trees) or the packs (act_codes64), it puts them in order. */
static inline __attribute__((always_inline)) __m512i v16_tr4(void)
{
	return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7,
				 11, 15);
}

/*
 * The fixed tree's last three levels, (l, l + 4), (l, l + 2), (0, 1), on
 * the 8-lane halves of v[0 .. n) at once (n <= 16; result 2i in v[i]'s
 * low half, 2i + 1 in its high): each level pairs two vectors so that
 * one addition does that level's step for several results, the last odd
 * vector with itself; (l, l + 4) across the 128-bit quarters of a pair,
 * then (l, l + 2) and (0, 1) within the quarters. Result 16 o + 4 e + c
 * ends at element e of quarter c of vector o, and v16_tr4 puts out[o] in
 * order: results 16 o .. 16 o + 15 ((n + 3) / 4 vectors; the last one's
 * upper results repeat others when n is not a multiple of 8). Every sum
 * is tree4's on its half, the lower lanes first.
 */
static inline __attribute__((always_inline)) void
v16_tree8(const __m512 *v, const int n, __m512 *out)
{
	const int n2 = (n + 1) / 2, n3 = (n2 + 1) / 2;
	const __m512i tr = v16_tr4();
	__m512 q[8], r[4];

	#pragma GCC unroll 8
	for (int m = 0; m < n2; m++) {
		__m512 x = v[2 * m], y = 2 * m + 1 < n ? v[2 * m + 1] : x;

		q[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88),
				     _mm512_shuffle_f32x4(x, y, 0xdd));
	}
	#pragma GCC unroll 4
	for (int m = 0; m < n3; m++) {
		__m512 x = q[2 * m], y = 2 * m + 1 < n2 ? q[2 * m + 1] : x;

		r[m] = _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44),
				     _mm512_shuffle_ps(x, y, 0xee));
	}
	#pragma GCC unroll 2
	for (int m = 0; m < (n3 + 1) / 2; m++) {
		__m512 x = r[2 * m], y = 2 * m + 1 < n3 ? r[2 * m + 1] : x;

		out[m] = _mm512_permutexvar_ps(tr, _mm512_add_ps(
			_mm512_shuffle_ps(x, y, 0x88),
			_mm512_shuffle_ps(x, y, 0xdd)));
	}
}
#endif

#endif
