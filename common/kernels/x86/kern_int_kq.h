/*
 * kern_int_kq — Q4_K and Q6_K with their units side by side (kg_*), for
 * many tiles of rows.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 */
/*
 * Q4_K and Q6_K with many tiles (kg_use): units side by side, as Q8_0's.
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
 *    Q6_K (codes + 32), AVX2: bytes 2s, 2s + 1 of each half (group of
 *      16) of the sub-block, so that a lane's two words are its two
 *      groups; two steps' maddubs sums add up in int16 (at most 4 x 63 x
 *      127 = 32004) and one madd applies both groups' scales (lane L:
 *      one per word). The VNNI builds (Q6G_PAIRED 0): bytes 4s..4s+3 of
 *      the sub-block, as Q4_K's, so that steps 0-3 are its first group
 *      and 4-7 its second; each group's four dp4 sums (at most 16 x 63 x
 *      127) take its scale with one int32 multiply (the scale vector's
 *      words, sign-extended).
 *  - the steps of the activations' sums (kg_min_steps; laid out by
 *    kg_act) against, in lane L's words:
 *    Q4_K (S2): the mins of sub-blocks 2s, 2s + 1 of lane L's part
 *      (g / 2 steps), against the sums of those sub-blocks (each the sum
 *      of two bsum); with g = 1, one step of its sub-block's min and sum
 *      (and 0 in the other word);
 *    Q6_K (added to S1): -32 sc of groups of 16 2s, 2s + 1 of the part
 *      (g steps), against their bsum (the VNNI build's register tiles
 *      start each lane from an offset instead: kern_int_kqz.h's
 *      kz_prep_q6).
 *  - d and dm (Q4_K: -dmin; Q6_K: 0) at the units' float lanes, 0 in the
 *    others.
 * With g < 8 the lanes L, L + g, ... of a unit are summed (exact int32),
 * so that every lane of unit i holds its S1 and S2; the float step of
 * quant.h then runs in lanes [u0 % 8, u0 % 8 + g), with d = dm = da = 0
 * in the others: fma(+0, x, acc) = acc.
 */
/* Steps of the mins (Q4_K: a pair of sub-blocks per lane, one sub-block
 * when g = 1) or of the offsets (Q6_K: a sub-block per lane). */
INLINE int kg_min_steps(int g, int kind)
{
	return kind == QK_Q6_K ? g : g > 1 ? g / 2 : 1;
}

/* Vectors of a round: its 8 steps, then its scale vector. Q4_K's codes
 * (0..15) go two steps a vector: step s in the low nibbles of vector
 * s % 4, step s + 4 in its high nibbles (kg_codes). A group of g units:
 * its g rounds, its kg_min_steps vectors for the activations' sums (from
 * kg_min_at), then d and dm (from kg_d_at). A Q4_K row takes 1.37x the
 * file's bytes at K = 1536 and 1.30x at K = 8960 (with a byte a code and
 * g vectors for the sums whatever the type, as before: 2.37x, 2.30x). */
INLINE int kg_rv(const int kind)
{
	return kind == QK_Q4_K ? 5 : 9;
}

INLINE int kg_min_at(int g, const int kind)
{
	return kg_rv(kind) * g;
}

INLINE int kg_d_at(int g, const int kind)
{
	return kg_min_at(g, kind) + kg_min_steps(g, kind);
}

/* Vectors of a group of g units. */
INLINE int kg_vecs(int g, const int kind)
{
	return kg_d_at(g, kind) + 2;
}

/* Step s's codes, a byte each, of the round at w. */
INLINE __m256i kg_codes(const __m256i *w, int s, const int kind)
{
	__m256i x;

	if (kind != QK_Q4_K)
		return _mm256_load_si256(w + s);
	x = _mm256_load_si256(w + (s & 3));
	if (s & 4)
		x = _mm256_srli_epi16(x, 4);
	return _mm256_and_si256(x, _mm256_set1_epi8(0x0f));
}

/* Q6_K's codes in byte pairs of its two groups of 16 (maddubs, AVX2) or
 * in order (dp4, the VNNI builds): see above. */
#define Q6G_PAIRED (KERN_INT_VNNI == 0)

/* The kind of a weight type with these rows (Q4_K or Q6_K). */
INLINE int kg_kind(uint32_t wtype)
{
	return wtype == GGML_TYPE_Q4_K ? QK_Q4_K : QK_Q6_K;
}

/* Prepared bytes of a row of nu units. */
static size_t kg_row_bytes(int nu, const int kind)
{
	size_t v = 0;
	for (int u0 = 0; u0 < nu; u0 += kg_size(nu - u0))
		v += kg_vecs(kg_size(nu - u0), kind);
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
	__m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));

	return Q6G_PAIRED ? q6g_order(q) : q;
}

/* The group of g units from u0 of a Q4_K or Q6_K row (kind) into v. */
static void kg_prep_group(const uint8_t *row, int u0, int g, const int kind,
			  __m256i *v)
{
	int f0 = u0 % 8;
	const int rv = kg_rv(kind);
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
		if (kind == QK_Q4_K) {
			for (int s = 0; s < 4; s++)
				_mm256_store_si256(v + rv * c + s, _mm256_or_si256(
					r[s], _mm256_slli_epi16(r[s + 4], 4)));
		} else {
			for (int s = 0; s < 8; s++)
				_mm256_store_si256(v + rv * c + s, r[s]);
		}
	}
	__m256i x[8], y[8];
	for (int L = 0; L < 8; L++) {
		x[L] = sc[L % g];
		y[L] = mn[L % g];
	}
	kg_lanes(x, g, g);
	kg_lanes(y, g, kind == QK_Q4_K && g > 1 ? g / 2 : g);
	for (int c = 0; c < g; c++)
		_mm256_store_si256(v + rv * c + rv - 1, x[c]);
	for (int c = 0; c < kg_min_steps(g, kind); c++)
		_mm256_store_si256(v + kg_min_at(g, kind) + c, y[c]);
	_mm256_store_ps((float *)(v + kg_d_at(g, kind)), _mm256_load_ps(d));
	_mm256_store_ps((float *)(v + kg_d_at(g, kind) + 1), _mm256_load_ps(dm));
}

static void kg_prep(const uint8_t *row, int nu, const int kind, __m256i *v)
{
	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0);
		kg_prep_group(row, u0, g, kind, v);
		v += kg_vecs(g, kind);
		u0 += g;
	}
}

/* An activation row's codes and bsum in the groups' layout for kind, in
 * place. Chunk c of a group's codes is an 8 x 8 transpose (tr8x8) of
 * 4-byte words: row L is chunk c of lane L's part (L / g) of unit L % g
 * (g is 8, 4, 2 or 1: the mask and shift below). */
static void kg_act(quant_arow *a, int K, int kind)
{
	int nu = K / QK_K;
	int8_t tq[8 * QK_K];
	int16_t tb[8 * 16];

	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0), gs = __builtin_ctz((unsigned)g);
		int8_t *q = a->q + (size_t)QK_K * u0;
		int16_t *bs = a->bsum + (size_t)16 * u0;

		memcpy(tq, q, (size_t)QK_K * g);
		memcpy(tb, bs, sizeof(int16_t) * 16 * (size_t)g);
		for (int c = 0; c < g; c++) {
			__m256i r[8];

			#pragma GCC unroll 8
			for (int L = 0; L < 8; L++) {
				r[L] = _mm256_loadu_si256((const __m256i *)(tq +
					256 * (L & (g - 1)) + 32 * g * (L >> gs) +
					32 * c));
				if (kind == QK_Q6_K && Q6G_PAIRED)
					r[L] = q6g_order(r[L]);
			}
			tr8x8(r);
			#pragma GCC unroll 8
			for (int i = 0; i < 8; i++)
				_mm256_storeu_si256((__m256i *)(q + 256 * c +
								32 * i), r[i]);
		}
		for (int i = 0; i < kg_min_steps(g, kind); i++)
			for (int L = 0; L < 8; L++) {
				const int16_t *x = tb + 16 * (L & (g - 1));
				int16_t *y = bs + 16 * i + 2 * L;
				if (kind == QK_Q6_K) {
					/* groups of 16 2i, 2i + 1 of the part */
					memcpy(y, x + 2 * g * (L >> gs) + 2 * i, 4);
				} else if (g > 1) {
					/* sub-blocks 2i, 2i + 1 of the part */
					int b = g * (L >> gs) + 2 * i;
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

/* Which scale of a round's scale vector a run of steps takes: Q4_K's,
 * Q6_K's first group of 16 (the low words, signed) or its second (the
 * high words, signed; the VNNI builds). */
enum { KG_SC_Q4, KG_SC_LO, KG_SC_HI };

/* acc[r] += the sums of steps s0 .. s0 + n - 1 of the round at w
 * (activations at o) times their scale (which): Q4_K's q4g_step and
 * q4g_scale; Q6_K's dp4 sums, then one int32 multiply by its group's
 * scale (sign-extended from its word). */
INLINE void kg_steps(const __m256i *w, const struct qtile *t, size_t o,
		     const int s0, const int n, const int which, __m256i *acc,
		     const int R)
{
	const int kind = which == KG_SC_Q4 ? QK_Q4_K : QK_Q6_K;
	__m256i p[QT_R], sc = _mm256_load_si256(w + kg_rv(kind) - 1);

	#pragma GCC unroll 8
	for (int s = s0; s < s0 + n; s++) {
		__m256i ws = kg_codes(w, s, kind);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			__m256i a = _mm256_loadu_si256((const __m256i *)
						       (t->q[r] + o + 32 * s));
			__m256i p0 = s > s0 ? p[r] : _mm256_setzero_si256();

			p[r] = which == KG_SC_Q4 ? q4g_step(p0, ws, a)
						 : dp4(p0, ws, a);
			IN_REG(p[r]);
		}
	}
	if (which != KG_SC_Q4)
		sc = _mm256_srai_epi32(which == KG_SC_HI ? sc
					: _mm256_slli_epi32(sc, 16), 16);
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		acc[r] = which == KG_SC_Q4 ? q4g_scale(acc[r], p[r], sc)
					   : _mm256_add_epi32(acc[r],
						_mm256_mullo_epi32(p[r], sc));
		IN_REG(acc[r]);
	}
}

INLINE void kg_group(const __m256i *v, int g, int u0, const struct qtile *t,
		     __m256 *facc, const int R, const int kind)
{
	__m256i acc[QT_R], s2[QT_R];
	int f0 = u0 % 8;
	const int rv = kg_rv(kind);

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_si256();
	for (int c = 0; c < g; c++) {
		const __m256i *w = v + rv * c;
		size_t o = (size_t)QK_K * (u0 + c);
		__m256i sc = _mm256_load_si256(w + rv - 1);
		if (kind == QK_Q4_K) {
			kg_steps(w, t, o, 0, 8, KG_SC_Q4, acc, R);
		} else if (!Q6G_PAIRED) {
			/* two groups of 16, four steps each */
			kg_steps(w, t, o, 0, 4, KG_SC_LO, acc, R);
			kg_steps(w, t, o, 4, 4, KG_SC_HI, acc, R);
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
		__m256i m = _mm256_madd_epi16(_mm256_load_si256(v + kg_min_at(g, kind)),
					      _mm256_loadu_si256((const __m256i *)b));
		for (int s = 1; s < kg_min_steps(g, kind); s++)
			m = _mm256_add_epi32(m, _mm256_madd_epi16(
				_mm256_load_si256(v + kg_min_at(g, kind) + s),
				_mm256_loadu_si256((const __m256i *)(b + 16 * s))));
		if (kind == QK_Q4_K)
			s2[r] = m;
		else
			acc[r] = _mm256_add_epi32(acc[r], m);
	}
	__m256i mask = kg_mask(u0, g);
	__m256 dwv = _mm256_load_ps((const float *)(v + kg_d_at(g, kind)));
	__m256 dmv = _mm256_load_ps((const float *)(v + kg_d_at(g, kind) + 1));
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
		     int j, int jn, const char *w, size_t ws, struct qt_pf *pf,
		     const int R, const int kind)
{
	int nu = mm->K / QK_K;
	__m256 facc[QT_JB][QT_R];
	size_t vo = 0; /* vectors before the pass */

	for (int u_lo = 0; u_lo < nu; u_lo += 8) {
		size_t vn = 0;
		int un = nu - u_lo < 8 ? nu - u_lo : 8;

		for (int c = 0; c < jn; c++) {
			const __m256i *v = (const __m256i *)(w + (size_t)c * ws) + vo;
			struct qt_pft pq = {0};
			__m256 f[QT_R];

			if (pf)
				pq = qt_pf_take(pf, un);
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				f[r] = u_lo ? facc[c][r] : _mm256_setzero_ps();
			vn = 0;
			for (int u0 = u_lo; u0 < nu && u0 < u_lo + 8;) {
				int g = kg_size(nu - u0);
				qt_pf_units(&pq, g);
				kg_group(v + vn, g, u0, t, f, R, kind);
				vn += kg_vecs(g, kind);
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
