/*
 * kern_int_kqz — Q4_K and Q6_K on 512-bit register tiles (the VNNI build
 * only): kern_int_kq.h's groups, two weight rows per vector.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 *
 * Each weight row is prepared as kern_int_kq.h prepares it (kg_prep: its
 * units in groups of 8, 4, 2, 1 side by side, every vector 8 int32
 * lanes), and the rows go in pairs: vector i of the pair holds vector i
 * of row j in its low half and of row j + 1 in its high half (Q4_K's
 * pairs two by two in quads, their codes in nibbles: kz_at). The
 * activation rows keep kg_act's layout, each 256-bit vector broadcast
 * to both halves. So every step of kg_group runs on both rows at once,
 * with the same integers in each half as kg_group's (exact, in any
 * order), and the float step is quant.h's for both rows: the low half's
 * lanes are row j's acc[0..7], the high half's row j + 1's. A tile is
 * KZ_RT activation rows by KZ_CP pairs; each vector of weights read
 * from the prepared block serves KZ_RT rows, each activation vector
 * KZ_CP pairs. Both types run the same steps (kz_steps): vpdpbusd sums
 * of one scale's codes (Q4_K: a sub-block's 8 steps; Q6_K: each group
 * of 16's 4, the VNNI builds keeping its codes in order), then one
 * int32 multiply by that scale. Q6_K's codes go less 32 and its
 * activations plus 128, so that one vector of offsets a group replaces
 * kg's g steps of the activations' sums (kz_prep_q6).
 */
#if KERN_INT_VNNI == 1

/* Activation rows from which Q4_K and Q6_K take these tiles: where they
 * beat kern_int_kq.h's (bench_kern -k on an AMD EPYC Zen 5, 2 threads,
 * qwen2.5-1.5b's shapes: each call prepares its weight pairs, which
 * costs more than the tiles save below these counts). -DKZ_MIN_M=N: a
 * benchmark build with one switch for both. */
#ifdef KZ_MIN_M
#define KZ_MIN_M_Q4K KZ_MIN_M
#define KZ_MIN_M_Q6K KZ_MIN_M
#else
#define KZ_MIN_M_Q4K 16
#define KZ_MIN_M_Q6K 32
#endif
/* The same with the pairs packed at load (kern_pack): nothing to prepare
 * per call, and each tile requests the next block of pairs while it
 * computes (struct qt_pf), but the prepared pairs hold more bytes than
 * the file (Q4_K's quads 1.37x at K = 1536, Q6_K's pairs 1.42-1.47x), so at
 * the fewest rows kern_int_kq.h, reading the file's bytes, still wins.
 * The 1.5b Q4_K_M's decode on an AMD EPYC Zen 5, 2 threads, rounds
 * alternating (2026-12-06), tok/s: Q6_K's pairs (then Q4_K's too) from
 * 1 row against this build's 6, N = 2 38.9-39.4 against 53.8-57.0, N =
 * 4 61.5-65.8 against 68.4-76.0, N = 6 76.6-85.2 against 61.7-80.8, N =
 * 8 85.0-103.3 against 62.6-67.0 (before the prefetch the direct kernel
 * won up to 11 rows); Q4_K's quads from 2 rows against 6, N = 2
 * 53.3-61.8 against 45.1-55.7, N = 4 76.8-91.9 against 56.5-73.7; from
 * 1 row against 2, N = 1 28.6-33.0 against 29.0-29.2 (even: the direct
 * kernel reads fewer bytes). -DKZ_PK_MIN_M=N: a benchmark build with one
 * switch for both. */
#ifdef KZ_PK_MIN_M
#define KZ_PK_MIN_M_Q4K KZ_PK_MIN_M
#define KZ_PK_MIN_M_Q6K KZ_PK_MIN_M
#else
#define KZ_PK_MIN_M_Q4K 2
#define KZ_PK_MIN_M_Q6K 6
#endif
#define KZ_RT 3     /* activation rows per register tile */
#define KZ_CP 4     /* weight row pairs per register tile */
_Static_assert(KZ_CP == QZ_CP && KZ_RT <= QZ_RT, "zt_finish's tiles");

INLINE int kz_use(uint32_t wtype, int M, int pk)
{
	if (wtype == GGML_TYPE_Q4_K)
		return M >= (pk ? KZ_PK_MIN_M_Q4K : KZ_MIN_M_Q4K);
	if (wtype == GGML_TYPE_Q6_K)
		return M >= (pk ? KZ_PK_MIN_M_Q6K : KZ_MIN_M_Q6K);
	return 0;
}

/* kg_fold in each half. */
INLINE __m512i kz_fold(__m512i x, int g)
{
	if (g <= 1)
		x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, 0xb1));
	if (g <= 2)
		x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, 0x4e));
	if (g <= 4)
		x = _mm512_add_epi32(x, _mm512_shuffle_i64x2(
			x, x, _MM_SHUFFLE(2, 3, 0, 1)));
	return x;
}

INLINE __m512i kz_bcast(const void *p)
{
	return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/*
 * Q4_K's codes (0..15) fill half a byte, so its pairs go two by two in
 * quads (rows 4q .. 4q + 3): each step vector holds pair 2q's codes in
 * the low nibbles and pair 2q + 1's in the high ones, and each pair
 * keeps its own scale, min, d and dm vectors. A step does not split the
 * nibbles: vpdpbusd takes the bytes x = lo + 16 hi whole for the low
 * pair and x & 0xf0 = 16 hi for the high one (one and per two weight
 * vectors, where splitting took an and, a shift and an and, on the
 * ports that run vpdpbusd: bench_kern -k -q -p 1.02-1.09x on an Intel
 * Xeon, 2026-12-07). After a round's 8 steps the low pair's sums
 * take the high's off (S1 lo = sum x a - sum 16 hi a), and the high
 * pair's accumulators, 16 times its S1, shift right by 4 once a group
 * (exact: every term is a multiple of 16, and at most 8 rounds x 63 x
 * 16 x 32 x 15 x 128 < 2^31). So every integer is the one the split
 * nibbles gave. Per group of g units, in
 * 512-bit vectors: g rounds of 8 step vectors and the two pairs' scale
 * vectors; the low pair's m min steps (m = kg_min_steps), the high
 * pair's; the low pair's d and dm, the high pair's. Against pairs of
 * 8-bit codes that is 10 g + 2 m + 4 vectors a quad where two pairs
 * took 20 g + 4: at K = 1536 (the 1.5b's rows) 74 where they took 128,
 * 1.37x the file's bytes where they took 2.37x. At the 1.5b Q4_K_M's
 * N = 8, where the tiles wait on those bytes, its decode went from
 * 91.8-109.3 to 129.4-139.1 tok/s (AMD EPYC Zen 5, 2 threads, rounds
 * alternating).
 * Q6_K's codes (0..63) need their byte: its pairs keep kg's vectors
 * (kg_vecs a group). A layout unit (kz_at) is a pair for Q6_K, a quad
 * for Q4_K.
 */
INLINE int kz_round_vecs(const int kind)
{
	return kind == QK_Q4_K ? 10 : 9;
}

INLINE int kz_group_vecs(int g, const int kind)
{
	return kind == QK_Q4_K ? 10 * g + 2 * kg_min_steps(g, kind) + 4
			       : 9 * g + 2;
}

/* 512-bit vectors of a layout unit of rows of nu units. */
static size_t kz_unit_vecs(int nu, const int kind)
{
	size_t v = 0;

	for (int u0 = 0; u0 < nu; u0 += kg_size(nu - u0))
		v += (size_t)kz_group_vecs(kg_size(nu - u0), kind);
	return v;
}

/* Rows per layout unit. */
INLINE int kz_unit_rows(const int kind)
{
	return kind == QK_Q4_K ? 4 : 2;
}

/* The layout unit that holds pair c of a tile at w (units pv vectors
 * apart). */
INLINE const __m512i *kz_at(const __m512i *w, size_t pv, int c,
			    const int kind)
{
	return w + (size_t)(kind == QK_Q4_K ? c / 2 : c) * pv;
}

/* What follows the rounds of the group of g units at vo of pair c's
 * unit: Q4_K's min steps (the low pair's, then the high pair's), then
 * its d and dm (the same); Q6_K's offsets (one vector), then its d. */
INLINE const __m512i *kz_tail(const __m512i *w, size_t pv, int c,
			      size_t vo, int g, const int kind)
{
	return kz_at(w, pv, c, kind) + vo +
	       (size_t)kz_round_vecs(kind) * (size_t)g;
}

/* Pair c's first min step in that group (Q6_K: its offsets). */
INLINE const __m512i *kz_mins(const __m512i *w, size_t pv, int c,
			      size_t vo, int g, const int kind)
{
	const __m512i *y = kz_tail(w, pv, c, vo, g, kind);

	return kind == QK_Q4_K ? y + (size_t)(c % 2 * kg_min_steps(g, kind))
			       : y;
}

/* Pair c's d (Q4_K: then its dm) in that group. */
INLINE const __m512i *kz_dv(const __m512i *w, size_t pv, int c, size_t vo,
			    int g, const int kind)
{
	const __m512i *y = kz_tail(w, pv, c, vo, g, kind);

	return kind == QK_Q4_K ? y + (size_t)(2 * kg_min_steps(g, kind) +
					      2 * (c % 2))
			       : y + 1;
}

/* kg_steps on the pairs: acc[r][c] += the int32 sums of steps s0 .. s0 +
 * n - 1 of the round at wo (activations at o), times their scale (which,
 * KG_SC_*; Q4_K's in the high words here, as vpdpbusd's q4g_scale takes
 * it): each weight vector
 * serves R rows, each activation vector C pairs. The operands are pinned
 * in registers (IN_REG): else gcc, short of registers for p and acc,
 * loads the weights again for every row. */
INLINE void kz_steps(const struct qtile *t, const __m512i *w, size_t pv,
		     size_t wo, size_t o, const int s0, const int n,
		     const int which, __m512i (*acc)[KZ_CP], const int R,
		     const int C, const int kind)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	const __m512i m4h = _mm512_set1_epi8((char)0xf0);
	__m512i p[KZ_RT][KZ_CP];

	#pragma GCC unroll 8
	for (int s = s0; s < s0 + n; s++) {
		__m512i wv[KZ_CP];

		#pragma GCC unroll 4
		for (int c = 0; c < C; c++) {
			if (kind != QK_Q4_K) {
				wv[c] = _mm512_load_si512(w + c * pv + wo + s);
			} else if (c % 2 == 0) {
				/* the quad's two pairs: the bytes lo + 16 hi
				 * whole and their high nibbles (16 hi) alone
				 * (see the quads above); where the tile has
				 * no high pair, the low pair's nibbles. (That
				 * is only the matrix's last quad, whose high
				 * pair is zero rows as blocks and tasks end
				 * on whole quads: masked so that no result
				 * leans on it, and no test can tell.) */
				__m512i x = _mm512_load_si512(
					kz_at(w, pv, c, kind) + wo + s);

				/* one load: else gcc folds a second load of
				 * the same vector into the and (16 more
				 * 512-bit loads a round, which cost this
				 * CPU's vpdpbusd issue: the 1.5b's prefill
				 * 153.0 / 156.8 -> 158.8 / 158.8 tok/s, its
				 * N = 32 decode 134.6 / 134.3 -> 138.8 /
				 * 137.5, an Intel Xeon, two rounds
				 * alternating, 2026-12-07) */
				IN_REG(x);
				if (c + 1 < C) {
					wv[c] = x;
					wv[c + 1] = _mm512_and_si512(x, m4h);
				} else {
					wv[c] = _mm512_and_si512(x, m4);
				}
			}
			IN_REG(wv[c]);
		}
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++) {
			__m512i a = kz_bcast(t->q[r] + o + 32 * s);

			IN_REG(a);
			#pragma GCC unroll 4
			for (int c = 0; c < C; c++) {
				/* Q6_K: the activations unsigned (+ 128),
				 * the codes signed (- 32; kz_prep_unit) */
				p[r][c] = _mm512_dpbusd_epi32(
					s > s0 ? p[r][c] : _mm512_setzero_si512(),
					kind == QK_Q6_K ? a : wv[c],
					kind == QK_Q6_K ? wv[c] : a);
				IN_REG(p[r][c]);
			}
		}
	}
	if (kind == QK_Q4_K)
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++)
			#pragma GCC unroll 2
			for (int c = 0; c + 1 < C; c += 2)
				p[r][c] = _mm512_sub_epi32(p[r][c], p[r][c + 1]);
	#pragma GCC unroll 4
	for (int c = 0; c < C; c++) {
		__m512i sc = _mm512_load_si512(kz_at(w, pv, c, kind) + wo + 8 +
					       (kind == QK_Q4_K ? c % 2 : 0));

		sc = which == KG_SC_Q4 ? _mm512_srli_epi32(sc, 16)
		   : which == KG_SC_HI ? _mm512_srai_epi32(sc, 16)
				       : _mm512_srai_epi32(_mm512_slli_epi32(
					       sc, 16), 16);
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++)
			acc[r][c] = _mm512_add_epi32(acc[r][c],
				_mm512_mullo_epi32(p[r][c], sc));
	}
}

/* The end of a tile's group of g units (at u0, vector vo of its layout
 * units) whose rounds left acc: Q4_K's high pairs' S1 shifted down, the
 * mins (Q4_K: S2) or the codes' offsets (Q6_K: into S1), then quant.h's
 * float steps into facc. */
INLINE void kz_group_end(const struct qtile *t, const __m512i *w, size_t pv,
			 size_t vo, int u0, __m512i (*acc)[KZ_CP],
			 float (*facc)[KZ_CP][16], const int R, const int C,
			 const int kind, const int g)
{
	__m512i s2[KZ_RT][KZ_CP];
	const int f0 = u0 % 8;

	/* Q4_K's high pairs summed 16 hi: their S1 (the quads above) */
	if (kind == QK_Q4_K)
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++)
			#pragma GCC unroll 2
			for (int c = 1; c < C; c += 2)
				acc[r][c] = _mm512_srai_epi32(acc[r][c],
							      4);
	/* Q4_K's mins (S2; Q6_K's offsets started its lanes) */
	const int m = kg_min_steps(g, kind);
	#pragma GCC unroll 3
	for (int r = 0; r < R && kind == QK_Q4_K; r++) {
		const int16_t *b = t->bsum[r] + (size_t)16 * u0;

		#pragma GCC unroll 4
		for (int c = 0; c < C; c++) {
			const __m512i *y = kz_mins(w, pv, c, vo, g,
						   kind);
			__m512i mn = _mm512_madd_epi16(
				_mm512_load_si512(y), kz_bcast(b));

			for (int s = 1; s < m; s++)
				mn = _mm512_add_epi32(mn, _mm512_madd_epi16(
					_mm512_load_si512(y + s),
					kz_bcast(b + 16 * s)));
			s2[r][c] = mn;
		}
	}
	{
		__m256i mask = kg_mask(u0, g);

		#pragma GCC unroll 3
		for (int r = 0; r < R; r++) {
			__m512 da = _mm512_broadcast_f32x8(_mm256_maskload_ps(
				t->d[r] + u0 - f0, mask));

			#pragma GCC unroll 4
			for (int c = 0; c < C; c++) {
				const __m512i *dv = kz_dv(w, pv, c, vo, g,
							  kind);
				__m512 f = _mm512_load_ps(facc[r][c]);

				f = _mm512_fmadd_ps(_mm512_mul_ps(
					_mm512_load_ps((const float *)dv), da),
					_mm512_cvtepi32_ps(kz_fold(acc[r][c], g)), f);
				if (kind == QK_Q4_K)
					f = _mm512_fmadd_ps(_mm512_mul_ps(
						_mm512_load_ps((const float *)(dv + 1)),
						da), _mm512_cvtepi32_ps(
						kz_fold(s2[r][c], g)), f);
				_mm512_store_ps(facc[r][c], f);
			}
		}
	}
}

/* R activation rows (t) against C prepared pairs (pair c in the layout
 * unit kz_at(w, pv, c): units pv vectors apart) of rows of nu units, the
 * results into d (zt_finish); the tile's share of the next block's
 * lines (pf) requested over its units (struct qt_pf). */
INLINE void kz_tile(const struct qtile *t, const __m512i *w, size_t pv,
		    int nu, const struct zt_dst *d, struct qt_pft *pf,
		    const int R, const int C, const int kind)
{
	_Alignas(64) float facc[KZ_RT][KZ_CP][16];
	size_t vo = 0;

	#pragma GCC unroll 3
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++)
			_mm512_store_ps(facc[r][c], _mm512_setzero_ps());
	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0);
		__m512i acc[KZ_RT][KZ_CP];

		/* Q6_K's lanes start from their offsets (kz_prep_unit) */
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++) {
			__m512i a0 = kind == QK_Q6_K
				? _mm512_load_si512(kz_mins(w, pv, c, vo, g,
							    kind))
				: _mm512_setzero_si512();

			#pragma GCC unroll 3
			for (int r = 0; r < R; r++)
				acc[r][c] = a0;
		}
		for (int cc = 0; cc < g; cc++) {
			size_t o = (size_t)QK_K * (u0 + cc);
			size_t wo = vo + (size_t)kz_round_vecs(kind) * cc;

			qt_pf_units(pf, 1);

			if (kind == QK_Q4_K) {
				kz_steps(t, w, pv, wo, o, 0, 8, KG_SC_Q4, acc,
					 R, C, kind);
			} else {
				/* two groups of 16, four steps each */
				kz_steps(t, w, pv, wo, o, 0, 4, KG_SC_LO, acc,
					 R, C, kind);
				kz_steps(t, w, pv, wo, o, 4, 4, KG_SC_HI, acc,
					 R, C, kind);
			}
		}
		/* the group's end, its size a constant in each case (the
		 * mins' steps unrolled, the folds without branches) */
		switch (g) {
#define KZ_END_CASE(n)                                                      \
	case n:                                                             \
		kz_group_end(t, w, pv, vo, u0, acc, facc, R, C, kind, n);   \
		break;
			KZ_END_CASE(8) KZ_END_CASE(4) KZ_END_CASE(2)
			KZ_END_CASE(1)
#undef KZ_END_CASE
		}
		vo += (size_t)kz_group_vecs(g, kind);
		u0 += g;
	}
	__m512 fv[QZ_RT][QZ_CP];

	#pragma GCC unroll 3
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++)
			fv[r][c] = _mm512_load_ps(facc[r][c]);
	zt_finish(d, fv, R, C);
}

typedef void (*kz_tile_fn)(const struct qtile *t, const __m512i *w,
			   size_t pv, int nu, const struct zt_dst *d,
			   struct qt_pft *pf);

#define KZ_TILE_FN(R, C, K, kind)                                           \
	static void kz_tile_##K##_##R##_##C(const struct qtile *t,          \
					    const __m512i *w, size_t pv,    \
					    int nu, const struct zt_dst *d, \
					    struct qt_pft *pf)              \
	{                                                                   \
		kz_tile(t, w, pv, nu, d, pf, R, C, kind);                   \
	}
#define KZ_TILES(K, kind)                                                   \
	KZ_TILE_FN(1, 1, K, kind) KZ_TILE_FN(1, 2, K, kind)                 \
	KZ_TILE_FN(1, 3, K, kind) KZ_TILE_FN(1, 4, K, kind)                 \
	KZ_TILE_FN(2, 1, K, kind) KZ_TILE_FN(2, 2, K, kind)                 \
	KZ_TILE_FN(2, 3, K, kind) KZ_TILE_FN(2, 4, K, kind)                 \
	KZ_TILE_FN(3, 1, K, kind) KZ_TILE_FN(3, 2, K, kind)                 \
	KZ_TILE_FN(3, 3, K, kind) KZ_TILE_FN(3, 4, K, kind)                 \
	static const kz_tile_fn kz_tiles_##K[KZ_RT][KZ_CP] = {              \
		{kz_tile_##K##_1_1, kz_tile_##K##_1_2, kz_tile_##K##_1_3,   \
		 kz_tile_##K##_1_4},                                        \
		{kz_tile_##K##_2_1, kz_tile_##K##_2_2, kz_tile_##K##_2_3,   \
		 kz_tile_##K##_2_4},                                        \
		{kz_tile_##K##_3_1, kz_tile_##K##_3_2, kz_tile_##K##_3_3,   \
		 kz_tile_##K##_3_4},                                        \
	};
KZ_TILES(q4, QK_Q4_K)
KZ_TILES(q6, QK_Q6_K)
_Static_assert(KZ_RT == 3 && KZ_CP == 4, "kz_tiles' tables");

/* Vector i of kg's prepared rows a and b (256-bit vectors each) as one
 * 512-bit vector: a's in the low half, b's in the high. */
INLINE __m512i kz_join(const __m256i *a, const __m256i *b, size_t i)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(
		_mm256_load_si256(a + i)), _mm256_load_si256(b + i), 1);
}

/* Step st's codes (a byte each) of Q4_K rounds a and b (kg's layout):
 * a's in the low half, b's in the high. */
INLINE __m512i kz_codes(const __m256i *a, const __m256i *b, int st)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(
		kg_codes(a, st, QK_Q4_K)), kg_codes(b, st, QK_Q4_K), 1);
}

/*
 * Q6_K's pair of kg rows a, b (nu units) as kz lays them out: each
 * group's rounds with the codes less 32 (signed, -32..31: vpdpbusd takes
 * the activations, + 128, as its unsigned operand), the rounds' scale
 * vectors, one vector of offsets, then d (kg's dm, zero for Q6_K, is
 * left out). A lane's products then
 * sum (qa + 128)(q - 32) = qa (q - 32) + 128 (q - 32): its offset, -128
 * times the sum of sc (q - 32) over the lane's codes, takes the second
 * term off, so every lane ends with the integer the mins' steps gave
 * (quant.h's S1, exact in int32: at most 16 x 255 x 32 x 128 x 16 + 128
 * x 128 x 512 x 16 < 2^31), with one vector where kg has g of the
 * activations' sums (9 g + 2 vectors a group against 10 g + 2).
 */
static void kz_prep_q6(const __m256i *a, const __m256i *b, int nu,
		       __m512i *out)
{
	const __m256i *row[2] = {a, b};
	const int rv = kg_rv(QK_Q6_K);
	size_t kv = 0;

	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0);
		__m256i off[2];

		/* per lane: the sum of its 4 codes a step (maddubs, madd
		 * by ones), less 4 x 32, times the scale of the step's
		 * group of 16 (steps 0-3 the low word's, 4-7 the high's) */
		for (int h = 0; h < 2; h++) {
			const __m256i one8 = _mm256_set1_epi8(1);
			const __m256i one16 = _mm256_set1_epi16(1);
			__m256i acc = _mm256_setzero_si256();

			for (int c = 0; c < g; c++) {
				const __m256i *r = row[h] + kv + (size_t)rv * c;
				__m256i sc = _mm256_load_si256(r + rv - 1);
				__m256i sum[2] = {_mm256_setzero_si256(),
						  _mm256_setzero_si256()};

				for (int st = 0; st < 8; st++)
					sum[st / 4] = _mm256_add_epi32(sum[st / 4],
						_mm256_madd_epi16(_mm256_maddubs_epi16(
							_mm256_load_si256(r + st),
							one8), one16));
				acc = _mm256_add_epi32(acc, _mm256_add_epi32(
					_mm256_mullo_epi32(_mm256_sub_epi32(sum[0],
						_mm256_set1_epi32(512)),
						_mm256_srai_epi32(_mm256_slli_epi32(
							sc, 16), 16)),
					_mm256_mullo_epi32(_mm256_sub_epi32(sum[1],
						_mm256_set1_epi32(512)),
						_mm256_srai_epi32(sc, 16))));
			}
			off[h] = _mm256_sub_epi32(_mm256_setzero_si256(),
						  _mm256_slli_epi32(acc, 7));
		}
		for (int c = 0; c < g; c++) {
			for (int st = 0; st < 8; st++)
				_mm512_store_si512(out++, _mm512_sub_epi8(
					kz_join(a, b, kv + (size_t)rv * c + st),
					_mm512_set1_epi8(32)));
			_mm512_store_si512(out++, kz_join(a, b,
				kv + (size_t)rv * c + rv - 1));
		}
		_mm512_store_si512(out++, _mm512_inserti64x4(
			_mm512_castsi256_si512(off[0]), off[1], 1));
		_mm512_store_si512(out++, kz_join(a, b,
			kv + (size_t)kg_d_at(g, QK_Q6_K)));
		kv += kg_vecs(g, QK_Q6_K);
		u0 += g;
	}
}

/* The n rows (1 .. kz_unit_rows) from r0, row_bytes apart, of nu units
 * as a layout unit at out (kz_unit_vecs; rows past n are zero rows),
 * through tmp (kz_unit_rows kg rows). */
static void kz_prep_unit(const uint8_t *r0, size_t row_bytes, int n, int nu,
			 const int kind, __m256i *tmp, __m512i *out)
{
	size_t rb = kg_row_bytes(nu, kind), rv = rb / sizeof(__m256i);
	const int nr = kz_unit_rows(kind);

	for (int i = 0; i < nr; i++) {
		if (i < n)
			kg_prep(r0 + (size_t)i * row_bytes, nu, kind,
				tmp + (size_t)i * rv);
		else
			memset(tmp + (size_t)i * rv, 0, rb);
	}
	if (kind != QK_Q4_K) {
		kz_prep_q6(tmp, tmp + rv, nu, out);
		return;
	}
	/* Q4_K: pairs (rows 0, 1) and (2, 3) of the quad, h = 0, 1 */
	const __m256i *p[2][2] = {{tmp, tmp + rv},
				  {tmp + 2 * rv, tmp + 3 * rv}};
	size_t kv = 0;

	for (int u0 = 0; u0 < nu;) {
		int g = kg_size(nu - u0), m = kg_min_steps(g, kind);

		for (int cc = 0; cc < g; cc++) {
			size_t i0 = kv + (size_t)kg_rv(kind) * cc; /* the round's */

			for (int st = 0; st < 8; st++)
				_mm512_store_si512(out++, _mm512_or_si512(
					kz_codes(p[0][0] + i0, p[0][1] + i0, st),
					_mm512_slli_epi16(kz_codes(p[1][0] + i0,
						p[1][1] + i0, st), 4)));
			for (int h = 0; h < 2; h++) /* the scales */
				_mm512_store_si512(out++, kz_join(p[h][0], p[h][1],
					i0 + (size_t)kg_rv(kind) - 1));
		}
		for (int h = 0; h < 2; h++)
			for (int st = 0; st < m; st++)
				_mm512_store_si512(out++, kz_join(p[h][0], p[h][1],
					kv + (size_t)kg_min_at(g, kind) + (size_t)st));
		for (int h = 0; h < 2; h++)
			for (int e = 0; e < 2; e++) /* d, dm */
				_mm512_store_si512(out++, kz_join(p[h][0], p[h][1],
					kv + (size_t)kg_d_at(g, kind) + (size_t)e));
		kv += kg_vecs(g, kind);
		u0 += g;
	}
}

/* Packed Q4_K / Q6_K (kern_pack): layout unit q (rows q kz_unit_rows ..;
 * zero rows after N's last) is kz_prep_unit's vectors at q
 * kz_unit_vecs. */
static size_t kz_pack_bytes(uint32_t wtype, int K, int N)
{
	const int kind = wtype == GGML_TYPE_Q4_K ? QK_Q4_K : QK_Q6_K;
	const int nr = kz_unit_rows(kind);

	return (size_t)((N + nr - 1) / nr) * kz_unit_vecs(K / QK_K, kind) *
	       sizeof(__m512i);
}

/* j0 is a multiple of 4 (kern_pack's tasks), so of the unit's rows. */
static void kz_pack(const struct kern_mm *mm, void *dst, int j0, int j1)
{
	const int kind = mm->wtype == GGML_TYPE_Q4_K ? QK_Q4_K : QK_Q6_K;
	const int nr = kz_unit_rows(kind);
	int nu = mm->K / QK_K;
	size_t pv = kz_unit_vecs(nu, kind);
	__m256i *tmp = aligned_alloc(64, (size_t)nr * kg_row_bytes(nu, kind));

	if (!tmp)
		abort(); /* a unit's rows' worth */
	for (int j = j0; j < j1; j += nr)
		kz_prep_unit((const uint8_t *)mm->W + (size_t)j * mm->row_bytes,
			     mm->row_bytes, mm->N - j < nr ? mm->N - j : nr, nu,
			     kind, tmp, (__m512i *)dst + (size_t)(j / nr) * pv);
	free(tmp);
}

/* Columns [j0, j1) for all M rows: blocks of pairs (as many as fit
 * QT_PREP_BYTES), prepared here or read from the packed copy, every tile
 * of activation rows over each (j0 is a multiple of KERN_MM_COLS, so of
 * a layout unit's rows). */
static void kz_qmatmul(const struct kern_mm *mm, int j0, int j1)
{
	const int kind = mm->wtype == GGML_TYPE_Q4_K ? QK_Q4_K : QK_Q6_K;
	const kz_tile_fn (*tiles)[KZ_CP] = kind == QK_Q4_K ? kz_tiles_q4
							   : kz_tiles_q6;
	const int nr = kz_unit_rows(kind);
	int nu = mm->K / QK_K;
	size_t pv = kz_unit_vecs(nu, kind);
	/* bytes a pair: half a quad's for Q4_K */
	size_t pair = pv * sizeof(__m512i) * 2 / (size_t)nr;
	int jb = qt_block_cols(pair, KZ_CP);
	__m256i *tmp = NULL;
	__m512i *buf = NULL;

	if (!mm->pk) {
		tmp = aligned_alloc(64, (size_t)nr * kg_row_bytes(nu, kind));
		buf = aligned_alloc(64, pv * sizeof(__m512i) *
				   (size_t)(jb / nr));
		if (!tmp || !buf)
			abort(); /* a block of prepared rows per task */
	}
	for (int j = j0; j < j1; j += jb) {
		int jn = j1 - j < jb ? j1 - j : jb, np = (jn + 1) / 2;
		int nun = (jn + nr - 1) / nr; /* layout units */
		const __m512i *blk = buf;

		if (mm->pk)
			blk = (const __m512i *)mm->pk + (size_t)(j / nr) * pv;
		else
			for (int q = 0; q < nun; q++)
				kz_prep_unit((const uint8_t *)mm->W +
					     mm->row_bytes * (size_t)(j + nr * q),
					     mm->row_bytes,
					     jn - nr * q < nr ? jn - nr * q : nr,
					     nu, kind, tmp, buf + (size_t)q * pv);
		/* the next packed block, requested over this one's tiles */
		struct qt_pf pf;

		qt_pf_plan(&pf, mm, pair, blk + (size_t)nun * pv, j, jn, j1,
			   jb, np, KZ_CP, KZ_RT, nu);
		for (int p0 = 0; p0 < np; p0 += KZ_CP) {
			int C = np - p0 < KZ_CP ? np - p0 : KZ_CP;

			for (int m0 = 0; m0 < mm->M; m0 += KZ_RT) {
				int R = mm->M - m0 < KZ_RT ? mm->M - m0 : KZ_RT;
				struct qtile t;
				struct zt_dst d = zt_dst_at(mm, m0, j + 2 * p0,
							    jn - 2 * p0, 2 * C);
				struct qt_pft pt = qt_pf_take(&pf, nu);

				qtile_bind(mm, m0, R, QK_K, &t);
				tiles[R - 1][C - 1](&t, kz_at(blk, pv, p0, kind),
						    pv, nu, &d, &pt);
			}
		}
	}
	free(tmp);
	free(buf);
}

#endif /* KERN_INT_VNNI == 1 */
