/*
 * kern_int_q8z — Q8_0 on 512-bit register tiles (the VNNI build only):
 * from QZ_MIN_M activation rows up, every vpdpbusd of a step serves
 * several rows and several weight rows at once, with no sign trick.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 *
 * The layout is Q8_0's units side by side (kern_int_q8.h), in groups of
 * 8 units (the last one padded with zero codes and scales), and a
 * 512-bit vector holds TWO weight rows: lanes 0..7 row j, lanes 8..15
 * row j + 1, lane l of each half unit 8g + l. Step s of a group holds
 * elements 4s..4s+3 of every lane's unit. So one accumulator serves one
 * activation row and a pair of weight rows, its int32 lane l + 8h
 * ending with the S1 of unit 8g + l of row j + h, and its float step is
 * quant.h's for both rows at once: lanes 0..7 are row j's acc[0..7],
 * 8..15 row j + 1's, each lane's units in order (groups in order).
 *
 * The integers: vpdpbusd multiplies unsigned by signed bytes. The weight
 * codes go offset by 128 (q + 128 in 0..255), the activations' stay
 * signed, and the offset comes off with the activations' sums:
 *     S1 = sum (q + 128) qa - 128 sum qa,
 * exact in int32 (|S1| <= 32 x 128 x 127), the accumulator starting
 * from -128 sum qa of its unit (QZ's act layout, from bsum).
 * The float step is quant.h's: fma(d[u] * da[u], (float)S1[u], acc[l]);
 * padded units have d = da = 0 and S1 = 0: fma(+0, +0, acc) = acc (acc,
 * from +0 by fmas, is never -0). So every result is the reference's bits.
 *
 * Activation rows (kern_vnni_qact, once per matmul call): behind each
 * row's quant_arow bytes, qz_act lays out its groups: 8 steps of 32
 * bytes, then the 8 int32 offsets and the 8 da of each group. Weight
 * rows: prepared per pair (struct qzw per group: 8 steps of 64 bytes
 * and the 16 d), once at load when the matrix is packed (kern_pack),
 * else once per call, in blocks that stay in cache while every tile of
 * activation rows passes over them.
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
 * per call, so the tiles win from the direct kernel's last row count
 * (bench_kern -q -p, AMD EPYC Zen 5, 2 threads, million column-rows/s
 * on 896 x 4864: 8 rows 127.4 against the direct kernel's 133.6, on
 * 896 x 151936 144.7 against 123.6; 12 rows 169.1 and 201.8; 6 rows
 * lose: the packed rows of K = 896 carry a padded group, 14% more
 * bytes). -DQZ_PK_MIN_M=N moves it. */
#ifndef QZ_PK_MIN_M
#define QZ_PK_MIN_M Q8_DIRECT_R
#endif
#define QZ_RT 3     /* activation rows per register tile */
#define QZ_CP 4     /* weight row pairs per register tile */

/* A group of 8 units of a pair of weight rows, prepared. */
struct qzw {
	__m512i w[8]; /* step s: codes + 128, row j in bytes 0..31 */
	float d[16];  /* d of the units: row j, then row j + 1 */
};

INLINE int qz_groups(int K)
{
	return (K / 32 + 7) / 8;
}

/* Bytes of an activation row's layout (after its quant_arow). */
INLINE size_t qz_act_bytes(int K)
{
	return (size_t)qz_groups(K) * (256 + 32 + 32);
}

INLINE int qz_use(uint32_t wtype, int M, int pk)
{
	return wtype == GGML_TYPE_Q8_0 && M >= (pk ? QZ_PK_MIN_M : QZ_MIN_M);
}

/* An activation row's layout at z (see above), from a in quant_act_row's
 * order. */
static void qz_act(const quant_arow *a, int K, char *z)
{
	int nu = K / 32, ng = qz_groups(K);
	int8_t *codes = (int8_t *)z;
	int32_t *off = (int32_t *)(z + (size_t)ng * 256);
	float *da = (float *)(z + (size_t)ng * 288);

	for (int g = 0; g < ng; g++) {
		__m256i r[8];

		for (int l = 0; l < 8; l++) {
			int u = 8 * g + l;
			r[l] = u < nu ? _mm256_loadu_si256((const __m256i *)
						    (a->q + 32 * (size_t)u))
				      : _mm256_setzero_si256();
			off[8 * g + l] = u < nu ? -128 * (a->bsum[2 * u] +
							  a->bsum[2 * u + 1])
						: 0;
			da[8 * g + l] = u < nu ? a->d[u] : 0.0f;
		}
		tr8x8(r);
		for (int s = 0; s < 8; s++)
			_mm256_storeu_si256((__m256i *)(codes + 256 * (size_t)g +
							32 * s), r[s]);
	}
}

/* The groups of weight rows r0 and r1 (NULL: a zero row) of nu units. */
static void qz_prep_pair(const uint8_t *r0, const uint8_t *r1, int nu,
			 struct qzw *out)
{
	const __m512i off = _mm512_set1_epi8((char)0x80);

	for (int u0 = 0; u0 < nu; u0 += 8, out++) {
		int cnt = nu - u0 < 8 ? nu - u0 : 8;
		__m256i w0[8], w1[8];
		__m256 d0, d1 = _mm256_setzero_ps();

		q8g_load(r0, u0, cnt, w0, &d0);
		if (r1) {
			q8g_load(r1, u0, cnt, w1, &d1);
		} else {
			for (int s = 0; s < 8; s++)
				w1[s] = _mm256_setzero_si256();
		}
		for (int s = 0; s < 8; s++)
			_mm512_store_si512(&out->w[s], _mm512_xor_si512(
				_mm512_inserti64x4(_mm512_castsi256_si512(w0[s]),
						   w1[s], 1), off));
		_mm256_store_ps(out->d, d0);
		_mm256_store_ps(out->d + 8, d1);
	}
}

/* R activation rows (their layouts z[r]) against C prepared pairs (pair
 * c's groups at w + c * ng): res[r][2c + h], quant.h's tree done. */
INLINE void qz_tile(const char *const *z, const struct qzw *w, int ng,
		    float (*res)[2 * QZ_CP], const int R, const int C)
{
	__m512 facc[QZ_RT][QZ_CP];

	#pragma GCC unroll 3
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++)
			facc[r][c] = _mm512_setzero_ps();
	for (int g = 0; g < ng; g++) {
		__m512i acc[QZ_RT][QZ_CP];

		#pragma GCC unroll 8
		for (int s = 0; s < 8; s++) {
			__m512i wv[QZ_CP];

			#pragma GCC unroll 4
			for (int c = 0; c < C; c++)
				wv[c] = _mm512_load_si512(&w[(size_t)c * ng + g].w[s]);
			#pragma GCC unroll 3
			for (int r = 0; r < R; r++) {
				__m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256(
					(const __m256i *)(z[r] + 256 * (size_t)g +
							  32 * s)));
				/* step 0 starts from the unit's offset */
				__m512i o = s ? _mm512_setzero_si512()
					      : _mm512_broadcast_i64x4(
						_mm256_loadu_si256((const __m256i *)
							(z[r] + (size_t)ng * 256 +
							 32 * (size_t)g)));
				#pragma GCC unroll 4
				for (int c = 0; c < C; c++)
					acc[r][c] = _mm512_dpbusd_epi32(
						s ? acc[r][c] : o, wv[c], a);
			}
		}
		#pragma GCC unroll 3
		for (int r = 0; r < R; r++) {
			__m512 da = _mm512_broadcast_f32x8(_mm256_loadu_ps(
				(const float *)(z[r] + (size_t)ng * 288) + 8 * g));
			#pragma GCC unroll 4
			for (int c = 0; c < C; c++)
				facc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(
					_mm512_load_ps(w[(size_t)c * ng + g].d), da),
					_mm512_cvtepi32_ps(acc[r][c]), facc[r][c]);
		}
	}
	#pragma GCC unroll 3
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 4
		for (int c = 0; c < C; c++) {
			res[r][2 * c] = tree4(_mm512_castps512_ps256(facc[r][c]));
			res[r][2 * c + 1] = tree4(_mm512_extractf32x8_ps(
				facc[r][c], 1));
		}
}

typedef void (*qz_tile_fn)(const char *const *z, const struct qzw *w, int ng,
			   float (*res)[2 * QZ_CP]);

#define QZ_TILE_FN(R, C)                                                    \
	static void qz_tile_##R##_##C(const char *const *z,                 \
				      const struct qzw *w, int ng,          \
				      float (*res)[2 * QZ_CP])              \
	{                                                                   \
		qz_tile(z, w, ng, res, R, C);                               \
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

/* Prepared (or packed) bytes of weight rows per block: they stay in L2
 * while every tile of activation rows passes over them. */
#define QZ_PREP_BYTES (160 * 1024)

/* A register tile's results res (R rows, stride floats apart; at most 8
 * columns) into mm->y at rows m0.., columns j0.. (cols of them, fewer
 * where the block ends: at most left), with the bias: one vector store
 * per row, masked only where the block ends (perf: y's rows are far
 * apart and the stores miss; 8 scalar stores a row cost more, and a
 * masked store more than a plain one). */
INLINE void zt_store(const struct kern_mm *mm, int m0, int R, int j0,
		     int left, int cols, const float *res, int stride)
{
	__mmask8 k;
	__m256 b = _mm256_setzero_ps();

	if (cols > left)
		cols = left;
	k = (__mmask8)((1u << cols) - 1);
	if (mm->bias)
		b = _mm256_maskz_loadu_ps(k, mm->bias + j0);
	for (int r = 0; r < R; r++) {
		__m256 v = _mm256_loadu_ps(res + r * stride);
		float *y = mm->y + (size_t)(m0 + r) * mm->ldy + j0;

		if (mm->bias)
			v = _mm256_add_ps(v, b);
		if (cols == 8)
			_mm256_storeu_ps(y, v);
		else
			_mm256_mask_storeu_ps(y, k, v);
	}
}
_Static_assert(2 * QZ_CP <= 8, "zt_store's 8 columns");

/* Packed Q8_0 (kern_pack): pair p (rows 2p, 2p + 1; a zero row after an
 * odd N's last) is qz_prep_pair's groups at p * qz_groups(K). */
static size_t qz_pack_bytes(int K, int N)
{
	return (size_t)((N + 1) / 2) * (size_t)qz_groups(K) *
	       sizeof(struct qzw);
}

static void qz_pack(const struct kern_mm *mm, void *dst, int j0, int j1)
{
	int nu = mm->K / 32, ng = qz_groups(mm->K);

	for (int j = j0; j < j1; j += 2) {
		const uint8_t *r0 = (const uint8_t *)mm->W +
				    (size_t)j * mm->row_bytes;
		qz_prep_pair(r0, j + 1 < mm->N ? r0 + mm->row_bytes : NULL, nu,
			     (struct qzw *)dst + (size_t)(j / 2) * ng);
	}
}

/* Columns [j0, j1) for all M rows: in blocks of pairs that stay in L2
 * while every tile of activation rows passes over them, prepared here
 * or read from the packed copy (j0 is even: a multiple of
 * KERN_MM_COLS). */
static void qz_qmatmul(const struct kern_mm *mm, int j0, int j1)
{
	int nu = mm->K / 32, ng = qz_groups(mm->K);
	size_t ps = (size_t)ng * sizeof(struct qzw); /* bytes per pair */
	size_t zoff = quant_arow_bytes(mm->K, 32);
	int jb = 2 * (int)(QZ_PREP_BYTES / ps);
	struct qzw *buf = NULL;

	jb = jb < 2 ? 2 : jb > 64 ? 64 : jb;
	if (!mm->pk && !(buf = aligned_alloc(64, ps * (size_t)(jb / 2))))
		abort(); /* a block of prepared rows per task */
	for (int j = j0; j < j1; j += jb) {
		int jn = j1 - j < jb ? j1 - j : jb, np = (jn + 1) / 2;
		const struct qzw *blk = buf;

		if (mm->pk) {
			blk = (const struct qzw *)mm->pk + (size_t)(j / 2) * ng;
		} else {
			for (int p = 0; p < np; p++) {
				const uint8_t *r0 = (const uint8_t *)mm->W +
					(size_t)(j + 2 * p) * mm->row_bytes;
				qz_prep_pair(r0, 2 * p + 1 < jn ?
					     r0 + mm->row_bytes : NULL, nu,
					     buf + (size_t)p * ng);
			}
		}
		for (int p0 = 0; p0 < np; p0 += QZ_CP) {
			int C = np - p0 < QZ_CP ? np - p0 : QZ_CP;

			for (int m0 = 0; m0 < mm->M; m0 += QZ_RT) {
				int R = mm->M - m0 < QZ_RT ? mm->M - m0 : QZ_RT;
				const char *z[QZ_RT];
				float res[QZ_RT][2 * QZ_CP];

				for (int r = 0; r < R; r++)
					z[r] = mm->xq + (size_t)(m0 + r) *
						mm->xq_bytes + zoff;
				qz_tiles[R - 1][C - 1](z, blk + (size_t)p0 * ng,
						       ng, res);
				zt_store(mm, m0, R, j + 2 * p0,
					 j + jn - (j + 2 * p0), 2 * C, res[0],
					 2 * QZ_CP);
			}
		}
	}
	free(buf);
}

#endif /* KERN_INT_VNNI == 1 */
