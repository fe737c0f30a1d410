/*
 * kern_int_q8z — Q8_0 on 512-bit register tiles (the VNNI build only):
 * from QZ_MIN_M activation rows up, every vpdpbusd of a step serves
 * several rows and several weight rows at once, with no sign trick.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 *
 * The layout is Q8_0's units side by side (kern_int_q8.h), in its groups
 * (8 units while 8 remain, then 4, 2, 1: kg_size, no padding), and a
 * 512-bit vector holds TWO weight rows: lanes 0..7 row j, lanes 8..15
 * row j + 1, each half as q8g lays out one row (lane L of a group of g
 * units holds part L / g of unit L % g; step s its elements 4s..4s+3).
 * A group of g units has g steps, so a row has one step per unit. One
 * accumulator serves one activation row and a pair of weight rows; for
 * g < 8 the parts of a unit are summed (qz_fold, exact int32), and its
 * int32 lane l + 8h ends with the S1 of the unit of row j + h whose
 * float lane is l. The float step is quant.h's for both rows at once:
 * lanes 0..7 are row j's acc[0..7], 8..15 row j + 1's, each lane's units
 * in order (groups in order); the lanes outside a group's units have
 * d = da = 0.
 *
 * The integers: vpdpbusd multiplies unsigned by signed bytes. The weight
 * codes go offset by 128 (q + 128 in 0..255), the activations' stay
 * signed, and the offset comes off with the activations' sums:
 *     S1 = sum (q + 128) qa - 128 sum qa,
 * exact in int32 (|S1| <= 32 x 128 x 127): the lane of a unit's part 0
 * starts from -128 times the sum of the unit's activations, its other
 * parts' lanes from 0, and the fold adds them.
 * The float step is quant.h's: fma(d[u] * da[u], (float)S1[u], acc[l]);
 * lanes without a unit have d = da = 0: fma(+0, S, acc) = acc (acc,
 * from +0 by fmas, is never -0). So every result is the reference's bits.
 *
 * Activation rows (kern_vnni_qact, once per matmul call): behind each
 * row's quant_arow bytes, qz_act lays out its steps (32 bytes each, one
 * per unit), then each group's 8 int32 offsets and 8 da. Weight rows:
 * prepared per pair (qz_prep_pair: every group's steps, 64 bytes each,
 * then every group's 16 d as the file's f16, 32 bytes a group, the pair
 * padded to whole lines), 64 units + 32 groups bytes a pair. K = 896
 * (28 units: 8 + 8 + 8 + 4) takes 1,920 bytes a pair, against 1,904 of
 * the file's two rows, and K = 4864 the file's 10,336 (+ 32 to the
 * line). The decode's few rows wait on these bytes: the 0.5b's N = 8
 * decode on an Intel Xeon, 168-171 tok/s when the last group was padded
 * to 8 units (2,304 bytes), 192-195 without (2,048, the d then f32); on
 * an AMD EPYC Zen 5, 2 threads, ten rounds alternating, its N = 1
 * decode 56.0 tok/s (median) with f32 d, 60.2 with f16 (2026-12-06).
 * They are prepared once at load when the matrix is packed
 * (kern_pack), else once per call, in blocks that stay in cache while
 * every tile of activation rows passes over them.
 */
#if KERN_INT_VNNI == 1

/* Activation rows from which Q8_0 takes these tiles: above the rows the
 * direct kernel (kern_int_q8.h, no prepared weights) serves. Each call
 * prepares its weight pairs, which below that costs more than the tiles
 * save (bench_kern -q on an AMD EPYC Zen 5, 2 threads: at 8 rows the
 * direct kernel does 113.7 M column-rows/s on 896 x 4864, these 74.4; at
 * 16 rows these 123.8, the prepared kernel 98.4). -DQZ_MIN_M=N: a
 * benchmark build that moves the switch. */
#ifndef QZ_MIN_M
#define QZ_MIN_M (Q8_DIRECT_R + 1)
#endif
/* The same with the pairs packed at load (kern_pack): nothing to prepare
 * per call, and each tile requests the next block of pairs while it
 * computes (struct qt_pf), so the tiles win at every row count, 1
 * included, though a compact pair holds 0.8% more bytes than the file's
 * two rows at K = 896 (7.5% with the d in f32, when these counts were
 * measured). The 0.5b's decode on an AMD EPYC Zen 5, 2
 * threads, this build against the direct kernel below 8 rows, three
 * rounds alternating (2026-12-06): N = 1 68.0-75.7 tok/s against
 * 61.2-69.1, N = 2 119-133 against 104-121, N = 4 197-220 against
 * 149-185, N = 6 263-316 against 175-214. (Before the prefetch, the
 * tiles lost below 8 rows.) -DQZ_PK_MIN_M=N moves it. */
#ifndef QZ_PK_MIN_M
#define QZ_PK_MIN_M 1
#endif
#define QZ_RT 3     /* activation rows per register tile */
#define QZ_CP 4     /* weight row pairs per register tile */

/* Bytes of an activation row's layout (after its quant_arow). */
INLINE size_t qz_act_bytes(int K)
{
	int nu = K / 32;

	return (size_t)nu * 32 + (size_t)q8g_count(nu) * 64;
}

/* Bytes of a prepared pair of weight rows: each group its steps (64
 * bytes each) and its 16 d (f32). */
INLINE size_t qz_pair_bytes(int K)
{
	int nu = K / 32;

	return (64 * (size_t)nu + 32 * (size_t)q8g_count(nu) + 63) &
	       ~(size_t)63;
}

/* The f16 d of group gi of the pair at w (nu units): 16 of them, rows j
 * and j + 1 in the halves, behind the pair's steps. */
INLINE __m512 qz_pair_d(const char *w, int nu, int gi)
{
	return _mm512_cvtph_ps(_mm256_load_si256(
		(const __m256i *)(w + 64 * (size_t)nu + 32 * (size_t)gi)));
}

INLINE int qz_use(uint32_t wtype, int M, int pk)
{
	return wtype == GGML_TYPE_Q8_0 && M >= (pk ? QZ_PK_MIN_M : QZ_MIN_M);
}

/* An activation row's layout at z (see above), from a in quant_act_row's
 * order. A whole group's lanes are its units in order: each lane's
 * offset is -128 times its unit's two sums of 16 (one vpmaddwd of the
 * sums against -128), its da the unit's. */
static void qz_act(const quant_arow *a, int K, char *z)
{
	int nu = K / 32, ng = q8g_count(nu), nf = nu / 8;
	int32_t *off = (int32_t *)(z + (size_t)nu * 32);
	float *da = (float *)(z + (size_t)nu * 32 + (size_t)ng * 32);

	q8_act(a->q, (int8_t *)z, K, 0);
	for (int gi = 0; gi < nf; gi++) {
		_mm256_storeu_si256((__m256i *)(off + 8 * gi), _mm256_madd_epi16(
			_mm256_loadu_si256((const __m256i *)(a->bsum + 16 * gi)),
			_mm256_set1_epi16(-128)));
		_mm256_storeu_ps(da + 8 * gi, _mm256_loadu_ps(a->d + 8 * gi));
	}
	for (int u0 = 8 * nf, gi = nf, g; u0 < nu; u0 += g, gi++) {
		g = kg_size(nu - u0);
		for (int L = 0; L < 8; L++) {
			/* lane L holds part L / g of unit u0 + L % g; the
			 * fold adds a unit's parts, so its part 0 carries the
			 * whole unit's offset and the others none */
			int u = u0 + L % g, f = L - u0 % 8; /* f: float lane's */

			off[8 * gi + L] = L < g ? -128 * (a->bsum[2 * u] +
							  a->bsum[2 * u + 1])
						: 0;
			da[8 * gi + L] = f >= 0 && f < g ? a->d[u0 + f] : 0.0f;
		}
	}
}

/* The groups of weight rows r0 and r1 (NULL: a zero row) of nu units at
 * out (qz_pair_bytes). */
static void qz_prep_pair(const uint8_t *r0, const uint8_t *r1, int nu,
			 char *out)
{
	const __m512i off = _mm512_set1_epi8((char)0x80);
	char *dp = out + 64 * (size_t)nu, *end = out + qz_pair_bytes(32 * nu);

	for (int u0 = 0, g; u0 < nu; u0 += g) {
		__m256i w0[8], w1[8];
		__m256 d0, d1 = _mm256_setzero_ps();

		g = kg_size(nu - u0);
		if (g == 8)
			q8g_load(r0, u0, 8, w0, &d0);
		else
			q8g_load_part(r0, u0, g, w0, &d0);
		if (r1 && g == 8) {
			q8g_load(r1, u0, 8, w1, &d1);
		} else if (r1) {
			q8g_load_part(r1, u0, g, w1, &d1);
		} else {
			for (int s = 0; s < 8; s++)
				w1[s] = _mm256_setzero_si256();
		}
		for (int s = 0; s < g; s++, out += 64)
			_mm512_store_si512(out, _mm512_xor_si512(
				_mm512_inserti64x4(_mm512_castsi256_si512(w0[s]),
						   w1[s], 1), off));
		/* the file's f16 d, back from f32 exactly */
		_mm256_store_si256((__m256i *)dp, _mm256_set_m128i(
			_mm256_cvtps_ph(d1, _MM_FROUND_TO_NEAREST_INT),
			_mm256_cvtps_ph(d0, _MM_FROUND_TO_NEAREST_INT)));
		dp += 32;
	}
	memset(dp, 0, (size_t)(end - dp));
}

/* Lanes L, L + g, ... of each 256-bit half summed into each of them
 * (g = 4, 2, 1; kg_fold's, on both rows). */
INLINE __m512i qz_fold(__m512i x, const int g)
{
	if (g <= 1)
		x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, 0xb1));
	if (g <= 2)
		x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, 0x4e));
	if (g <= 4)
		x = _mm512_add_epi32(x, _mm512_shuffle_i64x2(x, x, 0xb1));
	return x;
}

/* Group gi of g units (its steps from st) of R activation rows against C
 * prepared pairs (ps bytes apart from w): facc[r][c] += its float step. */
INLINE void qz_group(const char *const *z, const char *w, size_t ps,
		     int nu, int ng, int st, int gi,
		     __m512 (*facc)[QZ_CP], const int R, const int C,
		     const int g)
{
	__m512i acc[QZ_RT][QZ_CP];
	const char *wg = w + 64 * (size_t)st; /* the group's steps */

	/* a step's activation rows first, then each weight vector against
	 * them (written the other way round, gcc reloaded each weight
	 * vector for every row: 96 loads a group instead of 32, the
	 * 4864 x 896 tiles 10-15% slower in bench_kern) */
	#pragma GCC unroll 8
	for (int s = 0; s < g; s++) {
		__m512i a[QZ_RT];

		#pragma GCC unroll 3
		for (int r = 0; r < R; r++)
			a[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256(
				(const __m256i *)(z[r] + 32 * (size_t)(st + s))));
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++) {
			__m512i wv = _mm512_load_si512(wg + (size_t)c * ps +
						       64 * (size_t)s);

			#pragma GCC unroll 3
			for (int r = 0; r < R; r++) {
				/* step 0 starts from the lanes' offsets */
				__m512i o = s ? acc[r][c] : _mm512_broadcast_i64x4(
					_mm256_loadu_si256((const __m256i *)
						(z[r] + 32 * (size_t)nu +
						 32 * (size_t)gi)));
				acc[r][c] = _mm512_dpbusd_epi32(o, wv, a[r]);
			}
		}
	}
	#pragma GCC unroll 3
	for (int r = 0; r < R; r++) {
		__m512 da = _mm512_broadcast_f32x8(_mm256_loadu_ps(
			(const float *)(z[r] + 32 * (size_t)nu +
					32 * (size_t)ng) + 8 * gi));
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++) {
			__m512 d = qz_pair_d(w + (size_t)c * ps, nu, gi);

			if (g < 8)
				acc[r][c] = qz_fold(acc[r][c], g);
			facc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(d, da),
				_mm512_cvtepi32_ps(acc[r][c]), facc[r][c]);
		}
	}
}

/* Where a register tile's results go: row r at y + r ldy, columns 0 ..
 * cols - 1 (fewer than the tile's 8 where the block ends), plus the bias
 * b (or none). */
struct zt_dst {
	float *y;
	size_t ldy;
	const float *b;
	int cols;
};

/* The tile of R rows from m0 at columns j0..: cols of them, at most
 * left (the block's end). */
INLINE struct zt_dst zt_dst_at(const struct kern_mm *mm, int m0, int j0,
			       int left, int cols)
{
	return (struct zt_dst){mm->y + (size_t)m0 * mm->ldy + j0, mm->ldy,
			       mm->bias ? mm->bias + j0 : NULL,
			       cols < left ? cols : left};
}

/* Row r's 8 results v (the bias b added) into d: one vector store,
 * masked only where the block ends (perf: y's rows are far apart and
 * the stores miss; 8 scalar stores a row cost more, and a masked store
 * more than a plain one). */
INLINE void zt_put(const struct zt_dst *d, int r, __m256 v, __m256 b)
{
	float *y = d->y + (size_t)r * d->ldy;

	if (d->b)
		v = _mm256_add_ps(v, b);
	if (d->cols == 8)
		_mm256_storeu_ps(y, v);
	else
		_mm256_mask_storeu_ps(y, (__mmask8)((1u << d->cols) - 1), v);
}

/*
 * A register tile's end: quant.h's tree (tree4) on both 8-lane halves of
 * each of its R x C float accumulators, the bias, the stores into d.
 * Row r's results are facc[r][c]'s halves h at column 2c + h.
 *
 * A full tile (C = 4: 8 columns a row) does the trees of all its
 * results at once (v16_tree8, kern_tr.h: each level pairs vectors so
 * that one addition does that level's step for several results, every
 * sum the one tree4 does), which leaves a row's 8 results in each half
 * of its vectors, stored from registers. 37 operations for a 3 x 4 tile where 24 tree4s and the
 * round trip through memory took about 180: the tiles' fixed cost, which
 * short rows pay most (bench_kern -p, the two alternating call by call,
 * AMD EPYC Zen 5: Q8_0 K = 896 1.05-1.16x, K = 4864 0.99-1.04x; Q4_K
 * and Q6_K 0.97-1.25x). An edge tile (C < 4) takes tree4 per result.
 */
INLINE void zt_finish(const struct zt_dst *d, __m512 (*facc)[QZ_CP],
		      const int R, const int C)
{
	const int n = C * R;
	__m256 b = d->b ? _mm256_maskz_loadu_ps((__mmask8)((1u << d->cols) - 1),
						d->b) : _mm256_setzero_ps();

	if (C < QZ_CP) {
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++) {
			_Alignas(32) float res[2 * QZ_CP] = {0};

			#pragma GCC unroll 4
			for (int c = 0; c < C; c++) {
				res[2 * c] = tree4(_mm512_castps512_ps256(
					facc[r][c]));
				res[2 * c + 1] = tree4(_mm512_extractf32x8_ps(
					facc[r][c], 1));
			}
			zt_put(d, r, _mm256_load_ps(res), b);
		}
		return;
	}
	__m512 v[QZ_RT * QZ_CP], o[(QZ_RT + 1) / 2];

	/* accumulator k = QZ_CP r + c: row r's results 8 (k % QZ_CP) ..,
	 * so row r in the half r % 2 of o[r / 2] */
	#pragma GCC unroll 12
	for (int k = 0; k < n; k++)
		v[k] = facc[k / QZ_CP][k % QZ_CP];
	v16_tree8(v, n, o);
	#pragma GCC unroll 3
	for (int r = 0; r < R; r++)
		zt_put(d, r, r % 2 ? _mm512_extractf32x8_ps(o[r / 2], 1)
				   : _mm512_castps512_ps256(o[r / 2]), b);
}
_Static_assert(QZ_CP == 4 && QZ_RT <= 4, "zt_finish's pairing");

/* R activation rows (their layouts z[r]) against C prepared pairs of nu
 * units (pair c at w + c ps), units [u_lo, u_hi) of them (a pass,
 * qt_pass_units): the float lanes start from zero at u_lo = 0, else
 * from io, and end in d (zt_finish) at u_hi = nu, else in io; the tile's
 * share of the next block's lines (pf) requested over its units (struct
 * qt_pf). */
INLINE void qz_tile(const char *const *z, const char *w, size_t ps, int nu,
		    int u_lo, int u_hi, __m512 *io, const struct zt_dst *d,
		    struct qt_pft *pf, const int R, const int C)
{
	__m512 facc[QZ_RT][QZ_CP];
	int ng = q8g_count(nu), nf = nu / 8, st = 8 * nf, gi = nf;
	int f1 = u_hi < nu ? u_hi / 8 : nf;

	#pragma GCC unroll 3
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++)
			facc[r][c] = u_lo ? io[QZ_CP * r + c]
					  : _mm512_setzero_ps();
	for (int f = u_lo / 8; f < f1; f++) {
		qt_pf_units(pf, 8);
		qz_group(z, w, ps, nu, ng, 8 * f, f, facc, R, C, 8);
	}
	if (u_hi < nu) {
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++)
			#pragma GCC unroll 4
			for (int c = 0; c < C; c++)
				io[QZ_CP * r + c] = facc[r][c];
		return;
	}
	/* the rest's groups: 4, 2, 1 units */
	if (nu & 4) {
		qt_pf_units(pf, 4);
		qz_group(z, w, ps, nu, ng, st, gi++, facc, R, C, 4);
		st += 4;
	}
	if (nu & 2) {
		qt_pf_units(pf, 2);
		qz_group(z, w, ps, nu, ng, st, gi++, facc, R, C, 2);
		st += 2;
	}
	if (nu & 1) {
		qt_pf_units(pf, 1);
		qz_group(z, w, ps, nu, ng, st, gi, facc, R, C, 1);
	}
	zt_finish(d, facc, R, C);
}

typedef void (*qz_tile_fn)(const char *const *z, const char *w, size_t ps,
			   int nu, int u_lo, int u_hi, __m512 *io,
			   const struct zt_dst *d, struct qt_pft *pf);

#define QZ_TILE_FN(R, C)                                                    \
	static void qz_tile_##R##_##C(const char *const *z, const char *w,  \
				      size_t ps, int nu, int u_lo,          \
				      int u_hi, __m512 *io,                 \
				      const struct zt_dst *d,               \
				      struct qt_pft *pf)                    \
	{                                                                   \
		qz_tile(z, w, ps, nu, u_lo, u_hi, io, d, pf, R, C);         \
	}
QZ_TILE_FN(1, 1) QZ_TILE_FN(1, 2) QZ_TILE_FN(1, 3) QZ_TILE_FN(1, 4)
QZ_TILE_FN(2, 1) QZ_TILE_FN(2, 2) QZ_TILE_FN(2, 3) QZ_TILE_FN(2, 4)
QZ_TILE_FN(3, 1) QZ_TILE_FN(3, 2) QZ_TILE_FN(3, 3) QZ_TILE_FN(3, 4)

static const qz_tile_fn qz_tiles[QZ_RT][QZ_CP] = {
	{qz_tile_1_1, qz_tile_1_2, qz_tile_1_3, qz_tile_1_4},
	{qz_tile_2_1, qz_tile_2_2, qz_tile_2_3, qz_tile_2_4},
	{qz_tile_3_1, qz_tile_3_2, qz_tile_3_3, qz_tile_3_4},
};
_Static_assert(QZ_RT == 3 && QZ_CP == 4, "qz_tiles' table");
_Static_assert(QT_PASS_ROWS % QZ_RT == 0, "qz_passes' tiles");


/* Packed Q8_0 (kern_pack): pair p (rows 2p, 2p + 1; a zero row after an
 * odd N's last) is qz_prep_pair's at p * qz_pair_bytes(K). */
static size_t qz_pack_bytes(int K, int N)
{
	return (size_t)((N + 1) / 2) * qz_pair_bytes(K);
}

static void qz_pack(const struct kern_mm *mm, void *dst, int j0, int j1)
{
	int nu = mm->K / 32;
	size_t ps = qz_pair_bytes(mm->K);

	for (int j = j0; j < j1; j += 2) {
		const uint8_t *r0 = (const uint8_t *)mm->W +
				    (size_t)j * mm->row_bytes;
		qz_prep_pair(r0, j + 1 < mm->N ? r0 + mm->row_bytes : NULL, nu,
			     (char *)dst + (size_t)(j / 2) * ps);
	}
}

/* The C pairs at w (ps bytes apart, nu units) from column j0 (left
 * columns to the block's end) against the tiles of rows [mg, mg +
 * QT_PASS_ROWS), pass by pass (qt_pass_units), the lanes between passes
 * in io. */
static void qz_passes(const struct kern_mm *mm, const char *w, size_t ps,
		      int nu, int mg, int j0, int left, int C,
		      struct qt_pf *pf, __m512 *io)
{
	size_t zoff = quant_arow_bytes(mm->K, 32);
	int m1 = mm->M - mg < QT_PASS_ROWS ? mm->M : mg + QT_PASS_ROWS;
	/* one tile of rows reads each pair once: nothing to keep in L1 */
	int pu = mm->M > QZ_RT ? qt_pass_units(nu, 32) : nu;

	for (int u_lo = 0; u_lo < nu; u_lo += pu) {
		int u_hi = nu - u_lo <= pu ? nu : u_lo + pu;

		for (int m0 = mg, ti = 0; m0 < m1; m0 += QZ_RT, ti++) {
			int R = m1 - m0 < QZ_RT ? m1 - m0 : QZ_RT;
			const char *z[QZ_RT];
			struct zt_dst d = zt_dst_at(mm, m0, j0, left, 2 * C);
			struct qt_pft t = qt_pf_take(pf, u_hi - u_lo);

			for (int r = 0; r < R; r++)
				z[r] = mm->xq + zoff +
				       (size_t)(m0 + r) * mm->xq_bytes;
			qz_tiles[R - 1][C - 1](z, w, ps, nu, u_lo, u_hi,
					       io + QZ_RT * QZ_CP * ti, &d, &t);
		}
	}
}

/* Columns [j0, j1) for all M rows: in blocks of pairs that stay in L2
 * while every tile of activation rows passes over them, prepared here
 * or read from the packed copy (j0 is even: a multiple of
 * KERN_MM_COLS). */
static void qz_qmatmul(const struct kern_mm *mm, int j0, int j1)
{
	int nu = mm->K / 32;
	size_t ps = qz_pair_bytes(mm->K); /* bytes per pair */
	int jb = qt_block_cols(ps, QZ_CP);
	char *buf = NULL;
	/* the tiles' lanes between passes (qz_passes) */
	__m512 io[QT_PASS_ROWS / QZ_RT * QZ_RT * QZ_CP];

	if (!mm->pk && !(buf = aligned_alloc(64, ps * (size_t)(jb / 2))))
		abort(); /* a block of prepared rows per task */
	for (int j = j0; j < j1; j += jb) {
		int jn = j1 - j < jb ? j1 - j : jb, np = (jn + 1) / 2;
		const char *blk = buf;

		if (mm->pk) {
			blk = (const char *)mm->pk + (size_t)(j / 2) * ps;
		} else {
			for (int p = 0; p < np; p++) {
				const uint8_t *r0 = (const uint8_t *)mm->W +
					(size_t)(j + 2 * p) * mm->row_bytes;
				qz_prep_pair(r0, 2 * p + 1 < jn ?
					     r0 + mm->row_bytes : NULL, nu,
					     buf + (size_t)p * ps);
			}
		}
		/* the next packed block, requested over this one's tiles */
		struct qt_pf pf;

		qt_pf_plan(&pf, mm, ps, blk + (size_t)np * ps, j, jn, j1,
			   jb, np, QZ_CP, QZ_RT, nu);
		for (int p0 = 0; p0 < np; p0 += QZ_CP) {
			int C = np - p0 < QZ_CP ? np - p0 : QZ_CP;

			for (int mg = 0; mg < mm->M; mg += QT_PASS_ROWS)
				qz_passes(mm, blk + (size_t)p0 * ps, ps, nu, mg,
					  j + 2 * p0, jn - 2 * p0, C, &pf, io);
		}
	}
	free(buf);
}

#endif /* KERN_INT_VNNI == 1 */
