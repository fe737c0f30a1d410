/*
 * kern_int_q8 — Q8_0 and MXFP4 with their units side by side (struct
 * q8g): in registers for a tile, or prepared once per block of rows.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 */
/*
 * Q8_0, units side by side. Its unit is 32 elements: one horizontal sum
 * per 32 products (and per activation row) would cost as much as the
 * products. So the units are laid out side by side, in the weight rows
 * (q8g_prep: packed once at load, or prepared once per block of rows,
 * or built in registers)
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
/* A prepared row (q8g_prep): every group's g steps (32 bytes each),
 * then every group's 8 d (the file's f16: at the units' float lanes, 0
 * in the others; 16 bytes a group), padded to 32 bytes: q8g_row_bytes(nu).
 * K = 896 takes 960 bytes, the file 952; K = 4864 the file's 5,168
 * (+ 16). */

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

/* Groups of a row of nu units: kg_size's, 8 while 8 remain, then the
 * binary digits of the rest (the VNNI tiles' pairs too). */
INLINE int q8g_count(int nu)
{
	return nu / 8 + __builtin_popcount((unsigned)nu & 7);
}

/* Bytes of a prepared row of nu units (see above). */
INLINE size_t q8g_row_bytes(int nu)
{
	return (32 * (size_t)nu + 16 * (size_t)q8g_count(nu) + 31) &
	       ~(size_t)31;
}

/* The 8 f16 d of group gi of the prepared row at w (nu units), behind
 * its steps. */
INLINE __m256 q8g_row_d(const char *w, int nu, int gi)
{
	return _mm256_cvtph_ps(_mm_load_si128(
		(const __m128i *)(w + 32 * (size_t)nu + 16 * (size_t)gi)));
}

/* Activation rows from which the AVX2 builds take Q8_0's rows as packed
 * at load (kern_pack: q8g_prep's, nothing to lay out per call; the VNNI
 * build packs its tiles' pairs instead). -DQ8_PK_MIN_M=N: a benchmark
 * build that moves the switch. */
#ifndef Q8_PK_MIN_M
#define Q8_PK_MIN_M 1
#endif

INLINE int q8_pk_use(int M, int pk)
{
	return KERN_INT_VNNI != 1 && pk && M >= Q8_PK_MIN_M;
}

/* Whether a matmul of M rows of wtype (Q8_0 or MXFP4) reads the file's
 * blocks directly (q8g_block_direct, mx_block_direct: the activations
 * then take q8_act's padded tail), not prepared or packed rows. */
INLINE int q8_direct(uint32_t wtype, int M, int pk)
{
	return wtype == GGML_TYPE_MXFP4 ||
	       (M <= Q8_DIRECT_R && !q8_pk_use(M, pk));
}

/* The groups of one Q8_0 row of nu units at out (32-byte aligned). */
static void q8g_prep(const uint8_t *row, int nu, char *out)
{
	char *dp = out + 32 * (size_t)nu, *end = out + q8g_row_bytes(nu);

	for (int u0 = 0; u0 < nu;) {
		int n = kg_size(nu - u0);
		__m256i w[8];
		__m256 dw;
		if (n == 8)
			q8g_load(row, u0, 8, w, &dw);
		else
			q8g_load_part(row, u0, n, w, &dw);
		for (int s = 0; s < n; s++, out += 32)
			_mm256_store_si256((__m256i *)out, w[s]);
		/* the file's f16 d, back from f32 exactly */
		_mm_store_si128((__m128i *)dp,
				_mm256_cvtps_ph(dw, _MM_FROUND_TO_NEAREST_INT));
		dp += 16;
		u0 += n;
	}
	memset(dp, 0, (size_t)(end - dp));
}

/* An activation row's codes side by side (see struct q8g): src's K codes
 * (quant_act_row's order) laid out at dst, which may be src (in place);
 * pad: its last units (fewer than 8) as a padded tail, packed with a
 * step of 4 cnt bytes. */
static void q8_act(const int8_t *src, int8_t *dst, int K, int pad)
{
	int nu = K / 32;

	for (int u0 = 0; u0 < nu;) {
		const int8_t *s = src + 32 * u0;
		int8_t *p = dst + 32 * u0;
		int g = kg_size(nu - u0), cnt = nu - u0;
		int8_t tmp[7 * 32];
		if (g == 8) {
			__m256i r[8];

			#pragma GCC unroll 8
			for (int l = 0; l < 8; l++)
				r[l] = _mm256_loadu_si256(
					(const __m256i *)(s + 32 * l));
			tr8x8(r);
			/* each from its register: stored through the stack
			 * and copied in 64-byte moves (gcc 12's choice), every
			 * copy waited on two stores it could not forward */
			#pragma GCC unroll 8
			for (int i = 0; i < 8; i++)
				_mm256_storeu_si256((__m256i *)(p + 32 * i), r[i]);
		} else if (pad) {
			memcpy(tmp, s, (size_t)32 * cnt);
			for (int i = 0; i < 8; i++)
				for (int l = 0; l < cnt; l++)
					memcpy(p + 4 * (cnt * i + l),
					       tmp + 32 * l + 4 * i, 4);
			return;
		} else {
			memcpy(tmp, s, (size_t)32 * g);
			for (int i = 0; i < g; i++)
				for (int L = 0; L < 8; L++)
					memcpy(p + 32 * i + 4 * L,
					       tmp + 32 * (L % g) + 4 * g * (L / g) +
						       4 * i, 4);
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

/* Weight row j (its groups at wg when prepared, else its blocks, side
 * by side in registers on the way: for one tile of rows) against the R
 * rows of t: res[r]. The last units (fewer than 8) are groups of 4, 2, 1
 * when prepared, else one padded tail (as q8_act lays out the
 * activations for each case). A prepared row requests its share pq of
 * the next block's lines as it goes (packed rows; else pq has none). */
INLINE void q8g_row(const struct kern_mm *mm, const char *wg, int j,
		    const struct qtile *t, float *res, struct qt_pft *pq,
		    const int R, const int how)
{
	const int prep = how & Q8G_PREP, mx = how & Q8G_MX;
	const uint8_t *row = (const uint8_t *)mm->W + (size_t)j * mm->row_bytes;
	const ggml_block_mxfp4 *mb = (const ggml_block_mxfp4 *)row;
	const size_t bb = mx ? sizeof(ggml_block_mxfp4) : sizeof(ggml_block_q8_0);
	const __m256i all = _mm256_set1_epi32(-1);
	const __m256i tbl = mx_table();
	int nu = mm->K / 32, u0 = 0, gi = 0;
	__m256 facc[QT_R];
	__m256i acc[QT_R];

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		facc[r] = _mm256_setzero_ps();
	for (; u0 + 8 <= nu; u0 += 8, gi++) {
		__m256i wr[8];
		__m256 dw;
		if (prep) {
			qt_pf_units(pq, 8);
			dw = q8g_row_d(wg, nu, gi);
			#pragma GCC unroll 8
			for (int s = 0; s < 8; s++)
				wr[s] = _mm256_load_si256((const __m256i *)
							  (wg + 32 * (u0 + s)));
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
	for (; u0 < nu && prep;) {
		int n = kg_size(nu - u0);
		__m256i mask = kg_mask(u0, n);
		qt_pf_units(pq, n);
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r] = _mm256_setzero_si256();
		for (int s = 0; s < n; s++) {
			__m256i w1[1] = {_mm256_load_si256((const __m256i *)
							   (wg + 32 * (u0 + s)))};
			q8g_steps(t, w1, u0 + s, 1, 32, all, acc, R, 0, 0);
		}
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r] = kg_fold(acc[r], n);
		q8g_float(t, u0 - u0 % 8, mask, q8g_row_d(wg, nu, gi++), acc,
			  facc, R);
		u0 += n;
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		res[r] = tree4(facc[r]);
}

INLINE void q8g_block(const struct kern_mm *mm, const struct qtile *t, int m0,
		      int j, int jn, const char *w, size_t ws, struct qt_pf *pf,
		      const int R, const int how)
{
	for (int c = 0; c < jn; c++) {
		float res[QT_R];
		struct qt_pft pq = {0};

		if (pf)
			pq = qt_pf_take(pf, mm->K / 32);
		q8g_row(mm, w + (size_t)c * ws, j + c, t, res, &pq, R, how);
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
