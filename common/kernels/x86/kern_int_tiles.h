/*
 * kern_int_tiles — the integer matmul's tiles of activation rows against
 * one weight row at a time: the per-type units read directly (Q4_K, Q6_K,
 * Q5_0, the unpacked rows), their trees, and the blocks of rows.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 */
/* ---- integer matmul (quant.h) ------------------------------------------ */

/*
 * Tiles of R <= QT_R activation rows against one weight row at a time:
 * each chunk of the weight row is decoded once into registers and
 * multiplied (maddubs: unsigned weights times signed activations) with
 * the same chunk of every row of the tile, so decoding and weight bytes
 * are paid once per tile. Weight rows go in blocks: a block stays in
 * cache while every tile of rows passes over it. With many tiles
 * (kg_use) Q4_K and Q6_K blocks of rows are first rewritten with their
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

struct qt_pf; /* a block's requests for the next (below) */

/* Keeps v in a register here: without it gcc reassociates the integer
 * sums of a unit, computes every product first and spills them. "v":
 * any of the build's vector registers, all 32 with AVX-512 ("x" named
 * only the first 16, and the 512-bit K-quant tile's round copied its
 * operands in and out of them: 54 register copies a round of 96
 * vpdpbusd, 12 now; bench_kern -k -p the same within the noise on an
 * Intel Xeon, the copies costing no port). */
#define IN_REG(v) __asm__("" : "+v"(v))

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

static void q8_act(const int8_t *src, int8_t *dst, int K, int pad);
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
/* Q4_K's and Q6_K's units side by side (kg_prep, kg_block) for M rows of
 * K, laid out per call: from 4 tiles on; Q6_K's rows longer than one pass
 * of 8 units (2048) from 5 (measured on Zen 3: the packed rows' direct
 * path is faster below).
 * With the rows packed at load (the AVX2 builds: nothing to lay out per
 * call) from KG_PK_MIN_M rows: below, the direct kernels read fewer
 * bytes (the packed Q4_K rows hold 1.37x the file's), which is what a
 * round of 1 or 2 rows waits on. The 1.5b Q4_K_M on an AMD EPYC Zen 5
 * forced to AVX2, three rounds alternating packed (from 1 row) and not:
 * N = 1 22.0-25.0 tok/s against 27.1-31.2, N = 2 41.6-50.6 against
 * 46.3-46.8, N = 4 63.9-73.7 against 62.7-64.4, N = 8 66.1-79.3
 * against 59.1-69.2. -DKG_PK_MIN_M=N: a benchmark build that moves the
 * switch. */
#ifndef KG_PK_MIN_M
#define KG_PK_MIN_M 4
#endif
INLINE int kg_use(uint32_t wt, int M, int K, int pk)
{
	if (wt == GGML_TYPE_Q4_K && M > 3 * QT_R)
		return 1;
	if (wt == GGML_TYPE_Q6_K && M > (K <= 8 * QK_K ? 3 : 4) * QT_R)
		return 1;
	return KERN_INT_VNNI != 1 && pk && M >= KG_PK_MIN_M &&
	       (wt == GGML_TYPE_Q4_K || wt == GGML_TYPE_Q6_K);
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

/*
 * Q8_0's register tiles (kern_int_q8z.h) walk long rows in passes too: a
 * tile of 4 weight pairs over all of K = 4864 holds 44 KB, which with
 * the activation rows overflows L1, so every tile of rows read the
 * pairs again from L2. So a block's tiles run over passes of at most
 * QT_PASS_ELEMS of K: each pass takes every tile of up to QT_PASS_ROWS
 * rows over the same 4 pairs' slice of the pass, whose 16 KB stay in
 * L1, and the tiles' float lanes wait in a small array (QT_PASS_ROWS / 3
 * tiles of 12 vectors) until the next pass. A pass is whole groups of 8
 * units and the lanes carry on from one to the next in order: quant.h's
 * combination, unit by unit, as in one pass. Rows of at most
 * QT_PASS_ELEMS take one pass, as before, and so does a single tile of
 * rows (M <= 3), which reads each pair once. (Call by call, bench_kern -a,
 * AMD EPYC Zen 5, 4864 x 896: 1.01-1.12x at 8 to 200 rows; passes of
 * 4096 the same, of 1024 1.02-1.08x, of 512 0.81-0.89x. The K-quant
 * tiles, whose pairs are longer still, lost up to 11% with passes of
 * 2048 or 4096 at 8 and 32 rows: they keep one.)
 */
#define QT_PASS_ROWS 48

/* Units per pass over rows of nu units (unit elements each): all of
 * them, or the fewest passes of at most QT_PASS_ELEMS, made even in
 * whole groups of 8 units. */
INLINE int qt_pass_units(int nu, int unit)
{
	int most = QT_PASS_ELEMS / unit, n8 = (nu + 7) / 8, np;

	if (nu <= most)
		return nu;
	np = (nu + most - 1) / most;
	return 8 * ((n8 + np - 1) / np);
}

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
		   int j, int jn, const char *w, size_t ws, struct qt_pf *pf,
		   const int R, const int kind)
{
	(void)pf; /* rows as the file has them, or unpacked in cache */
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
 * j, jn, w, ws, pf): fn(mm, t, m0, j, jn, w, ws, pf, R, kind) with R a
 * constant in each case; pf: the requests for the next block of packed
 * rows (struct qt_pf below; NULL: none), which the kinds that read packed
 * rows spread over their rows. */
typedef void (*qblock_fn)(const struct kern_mm *mm, const struct qtile *t,
			  int R, int m0, int j, int jn, const char *w,
			  size_t ws, struct qt_pf *pf);

#define QBLOCK_FN(name, fn, kind)                                            \
	static void name(const struct kern_mm *mm, const struct qtile *t,    \
			 int R, int m0, int j, int jn, const char *w,        \
			 size_t ws, struct qt_pf *pf)                        \
	{                                                                    \
		switch (R) {                                                 \
		case 1: fn(mm, t, m0, j, jn, w, ws, pf, 1, kind); break;     \
		case 2: fn(mm, t, m0, j, jn, w, ws, pf, 2, kind); break;     \
		case 3: fn(mm, t, m0, j, jn, w, ws, pf, 3, kind); break;     \
		case 4: fn(mm, t, m0, j, jn, w, ws, pf, 4, kind); break;     \
		case 5: fn(mm, t, m0, j, jn, w, ws, pf, 5, kind); break;     \
		case 6: fn(mm, t, m0, j, jn, w, ws, pf, 6, kind); break;     \
		case 7: fn(mm, t, m0, j, jn, w, ws, pf, 7, kind); break;     \
		default: fn(mm, t, m0, j, jn, w, ws, pf, QT_R, kind);        \
		}                                                            \
	}
QBLOCK_FN(qblock_q4_K, qblock, QK_Q4_K)
QBLOCK_FN(qblock_q6_K, qblock, QK_Q6_K)
QBLOCK_FN(qblock_q5_0, qblock, QK_Q5_0)
QBLOCK_FN(qblock_gen, qblock, QK_GEN)

_Static_assert(QT_R == 8, "qblock's cases");


#define QT_PREP_BYTES (160 * 1024)

/* Columns per block of weight pairs of pair bytes, for tiles of cp
 * pairs: as many whole tiles as fit QT_PREP_BYTES, at least one, at
 * most 64 columns. A narrower tile reads each activation vector for
 * fewer pairs: K = 8960's 7-pair K-quant blocks ran every second tile
 * on 3 pairs (6% of perf's samples at the 1.5b's N = 32), K = 4864's
 * 14-pair Q8_0 blocks every fourth on 2 (bench_kern -a, 4864 x 896, AMD
 * EPYC Zen 5, 1 thread: 1.00-1.05x with 12). */
INLINE int qt_block_cols(size_t pair, int cp)
{
	int jb = 2 * cp * (int)(QT_PREP_BYTES / ((size_t)cp * pair));

	return jb < 2 * cp ? 2 * cp : jb > 64 ? 64 : jb;
}

/*
 * The register tiles (kern_int_q8z.h, kern_int_kqz.h) run each block of
 * weight pairs against every tile of activation rows: the first pass
 * over a block reads it from memory, the others from L2. Without help
 * that first pass waits on memory while the core idles, and the other
 * passes compute while memory idles: a round takes the time to read the
 * weights plus the time to compute them. So each tile requests some of
 * the NEXT block's lines as it walks K (qt_pf_take, qt_pf_units), the
 * requests spread over the whole block's tiles, and the next block is
 * in L2 when its first pass starts. Spread, not in bursts: 16 KiB
 * requested before each tile stalled on the line fill buffers (an Intel
 * Xeon, docs/performance.md). Only for packed weights (a block prepared
 * per call is in cache already). Pairs longer than QT_PF_PAIR bytes
 * (K = 4864, 8960) are long runs the hardware prefetcher follows: where
 * one tile of rows reads each pair once, in order, it keeps up, and the
 * requests only cost (Q8_0 4864 x 896 at 1 and 2 rows: 0.88-0.99x); with
 * more tiles it does not reach far enough ahead, and they are requested
 * too: call by call (bench_kern -a, AMD EPYC Zen 5), Q6_K 8960 x 1536
 * 1.13-1.19x at 8 rows, 1.04-1.10x at 32, 0.99-1.04x at 200; Q8_0 4864
 * x 896 (with its passes) 1.09-1.21x at 8 to 200 rows; Q4_K 8960 x 1536
 * (its quads of nibbles) 1.15-1.22x at 8 rows, 0.99-1.02x at 32 and 200
 * (with pairs of 8-bit codes it had lost up to 9%, so it was left out
 * until then). Prefetching never changes a result.
 */
#define QT_PF_PAIR 8192

struct qt_pf {
	const char *p; /* the next line to request */
	size_t lines;  /* the next block's lines */
	size_t slots;  /* tiles x units of K over this block */
	size_t taken;  /* slots handed out so far */
	size_t given;  /* lines handed out so far */
};

/* One tile's share of the requests: n lines from p, spread over its k
 * units of K (qt_pf_units). */
struct qt_pft {
	const char *p;
	int n, k;  /* lines, units */
	int u, at; /* units done, lines requested */
};

/* The requests for the next block, of bytes at next, spread over the
 * slots (tiles x units of K) of this one; only for packed weights with
 * mm->pf, and for runs (a tile's contiguous bytes) of at most
 * QT_PF_PAIR bytes or more than one tile of rows (see above). */
INLINE void qt_pf_init(struct qt_pf *pf, const struct kern_mm *mm,
		       const void *next, size_t bytes, size_t slots, size_t run,
		       int tiles)
{
	pf->p = next;
	pf->slots = slots;
	pf->lines = mm->pk && mm->pf && (run <= QT_PF_PAIR || tiles > 1) &&
		    slots ? bytes / 64 : 0;
	pf->taken = pf->given = 0;
}

/* The block of columns [j, j + jn) of a task that ends at j1, in blocks
 * of jb columns, np pairs of pair bytes each, ending at next: its tiles
 * (cp pairs by rt rows over mm->M rows, nu units each) request the next
 * block's bytes. */
INLINE void qt_pf_plan(struct qt_pf *pf, const struct kern_mm *mm,
		       size_t pair, const void *next, int j, int jn, int j1,
		       int jb, int np, int cp, int rt, int nu)
{
	int nx = j1 - (j + jn) < jb ? j1 - (j + jn) : jb;
	int tiles = (mm->M + rt - 1) / rt;

	qt_pf_init(pf, mm, next, (size_t)((nx + 1) / 2) * pair,
		   (size_t)((np + cp - 1) / cp) * (size_t)tiles * (size_t)nu,
		   pair, tiles);
}

/*
 * The next tile's share, for k units of K: the block's lines in
 * proportion to the slots (tile x unit) handed out, so that the
 * requests run at one even rate over all of the block's tiles. (They
 * went at a whole line or more per unit, so with fewer lines than slots
 * they all went out over the block's first tiles, at up to 2.4 times
 * the rate, and the tiles waited on the requests themselves: 12% of
 * the Q8_0 3 x 4 tile's perf samples on the instruction after a
 * prefetcht0 at 32 rows. Call by call against that rate, bench_kern -a,
 * AMD EPYC Zen 5: Q8_0 1.00-1.08x at 8 and 32 rows (one 0.98), Q4_K
 * 0.99-1.03x, Q6_K 0.98-1.06x.)
 */
INLINE struct qt_pft qt_pf_take(struct qt_pf *pf, int k)
{
	size_t s1 = pf->taken + (size_t)k, l1 = 0;
	struct qt_pft t = {pf->p, 0, k, 0, 0};

	if (!pf->lines)
		return t;
	if (s1 > pf->slots) /* not with the plan's count; never past it */
		s1 = pf->slots;
	l1 = pf->lines * s1 / pf->slots;
	t.n = (int)(l1 - pf->given);
	pf->taken = s1;
	pf->given = l1;
	pf->p += (size_t)t.n * 64;
	return t;
}

/* Before the tile's next g units: their share of its lines, requested
 * into L1. */
INLINE void qt_pf_units(struct qt_pft *t, int g)
{
	int want;

	t->u += g;
	if (t->at == t->n)
		return;
	want = (int)((long)t->n * t->u / t->k);
	for (; t->at < want; t->at++, t->p += 64)
		_mm_prefetch(t->p, _MM_HINT_T0);
}

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
