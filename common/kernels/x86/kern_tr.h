/*
 * kern_tr — the index that orders a 512-bit pairing tree's results,
 * shared by the integer builds (zt_finish, act_max16, act_codes64) and
 * the float build's attention scores (att_trees).
 *
 * Owns nothing but one inline function; AVX-512 translation units only.
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
#endif

#endif
