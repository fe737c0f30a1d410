/*
 * kern_int_att — Q8_0 keys' attention scores in integers (kern.h's
 * kern_att_scores_q8): each query quantized once per 32 (quant_act_row,
 * unit 32, by kern_att_q8_prep), then per key block the exact int32 dot
 * of the codes and one float step, fmaf(da * dk, (float)S, acc), over
 * the blocks in order from +0, times the scale.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it (tr8x8, dp4).
 *
 * Keys go side by side, one a lane, so a lane's sum is one score's and no
 * tree follows: each key block's 32 code bytes are turned into 8 vectors
 * of 4-byte groups (an 8 x 8 int32 transpose: vector j holds bytes 4j ..
 * 4j + 3 of every key), and a step is one dot of 4 bytes a lane against
 * the query's 4 bytes of that group, broadcast. The VNNI build takes 16
 * keys (both 256-bit halves transposed at once) with vpdpbusd on the
 * codes plus 128 and the query's codes, the query's -128 x sum added
 * back; the AVX2 builds (and the emulated one) take 8 with the sign
 * trick (|k| times the query's code with k's sign: pairs of at most
 * 2 x 128 x 127 stay below int16's limit in maddubs). Every S is exact,
 * so every build gives the scalar definition's bits (kern.c's
 * s_att_q8).
 *
 * A short tile repeats its first key in the missing lanes; their
 * results are not stored.
 */

/* The d of key block b of the tile's kb keys from row t0 (ldb blocks
 * apart) as f32, lane t key t, the lanes from kb on 0: the f16 bits
 * gathered, then one conversion (exact, as half_f16_to_f32). */
#if KERN_INT_VNNI == 1
INLINE __m512 attq_dk(const ggml_block_q8_0 *k, size_t ldb, int t0, int kb,
		      int b)
{
	/* 4 bytes at each d: the d and its block's first codes, masked to
	 * the keys there are */
	const __m512i idx = _mm512_mullo_epi32(
		_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
				  14, 15),
		_mm512_set1_epi32((int)(ldb * sizeof(ggml_block_q8_0))));
	__m512i dw = _mm512_mask_i32gather_epi32(
		_mm512_setzero_si512(), (__mmask16)((1u << kb) - 1), idx,
		(const void *)(k + (size_t)t0 * ldb + b), 1);

	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw));
}
#else
INLINE __m256 attq_dk(const ggml_block_q8_0 *k, size_t ldb, int t0, int kb,
		      int b)
{
	_Alignas(16) uint16_t h[8] = {0};

	for (int t = 0; t < kb; t++)
		h[t] = k[(size_t)(t0 + t) * ldb + b].d;
	return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)h));
}
#endif

#if KERN_INT_VNNI == 1
/* 8 x 8 int32 transposes in both 256-bit halves of z[0..7] (tr8x8's
 * steps; the last one crosses 128-bit lanes within each half). */
INLINE void attq_tr16(__m512i *z)
{
	const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
	const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
	__m512i t[8], u[8];

	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
	}
	#pragma GCC unroll 4
	for (int i = 0; i < 2; i++) {
		u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		z[i] = _mm512_permutex2var_epi64(u[i], lo, u[i + 4]);
		z[i + 4] = _mm512_permutex2var_epi64(u[i], hi, u[i + 4]);
	}
}

#define ATTQ_KEYS 16
#else
#define ATTQ_KEYS 8
#endif

/* Queries per pass over a tile of keys (their float lanes in registers). */
#define ATTQ_QB 8

void KI_NAME(att_q8)(const char *qz, size_t qb, int nq, const void *kv,
		     size_t ldk, int nt, int n, float scale, float *s, int lds)
{
	const ggml_block_q8_0 *k = kv;
	size_t ldb = ldk / 32;
	int nb = n / 32;

	for (int t0 = 0; t0 < nt; t0 += ATTQ_KEYS) {
		int kb = nt - t0 < ATTQ_KEYS ? nt - t0 : ATTQ_KEYS;

		for (int i0 = 0; i0 < nq; i0 += ATTQ_QB) {
			int qn = nq - i0 < ATTQ_QB ? nq - i0 : ATTQ_QB;
			quant_arow a[ATTQ_QB];
#if KERN_INT_VNNI == 1
			__m512 facc[ATTQ_QB];
#else
			__m256 facc[ATTQ_QB];
#endif

			for (int i = 0; i < qn; i++) {
				quant_arow_bind(&a[i], (void *)(qz + (size_t)(i0 + i) *
								     qb), n, 32);
#if KERN_INT_VNNI == 1
				facc[i] = _mm512_setzero_ps();
#else
				facc[i] = _mm256_setzero_ps();
#endif
			}
			for (int b = 0; b < nb; b++) {
#if KERN_INT_VNNI == 1
				const __m512i x80 = _mm512_set1_epi8((char)0x80);
				__m512i T[8];
				__m512 dkv;

				#pragma GCC unroll 8
				for (int p = 0; p < 8; p++) {
					int t1 = p < kb ? p : 0;
					int t2 = p + 8 < kb ? p + 8 : 0;
					const int8_t *c1 = k[(size_t)(t0 + t1) *
							     ldb + b].qs;
					const int8_t *c2 = k[(size_t)(t0 + t2) *
							     ldb + b].qs;

					T[p] = _mm512_xor_si512(
						_mm512_inserti64x4(
							_mm512_castsi256_si512(
								_mm256_loadu_si256(
									(const __m256i *)c1)),
							_mm256_loadu_si256(
								(const __m256i *)c2),
							1),
						x80);
				}
				attq_tr16(T);
				dkv = attq_dk(k, ldb, t0, kb, b);
				for (int i = 0; i < qn; i++) {
					const int8_t *qc = a[i].q + 32 * b;
					/* -128 x the block's code sum */
					__m512i acc = _mm512_set1_epi32(
						-128 * ((int32_t)a[i].bsum[2 * b] +
							a[i].bsum[2 * b + 1]));
					int32_t w;

					#pragma GCC unroll 8
					for (int j = 0; j < 8; j++) {
						memcpy(&w, qc + 4 * j, 4);
						acc = _mm512_dpbusd_epi32(
							acc, T[j],
							_mm512_set1_epi32(w));
					}
					facc[i] = _mm512_fmadd_ps(
						_mm512_mul_ps(_mm512_set1_ps(
								      a[i].d[b]),
							      dkv),
						_mm512_cvtepi32_ps(acc), facc[i]);
				}
#else
				__m256i T[8], A[8];
				__m256 dkv;

				#pragma GCC unroll 8
				for (int p = 0; p < 8; p++)
					T[p] = _mm256_loadu_si256((const __m256i *)k[
						(size_t)(t0 + (p < kb ? p : 0)) *
						ldb + b].qs);
				tr8x8(T);
				#pragma GCC unroll 8
				for (int j = 0; j < 8; j++)
					A[j] = _mm256_sign_epi8(T[j], T[j]);
				dkv = attq_dk(k, ldb, t0, kb, b);
				for (int i = 0; i < qn; i++) {
					const int8_t *qc = a[i].q + 32 * b;
					__m256i acc = _mm256_setzero_si256();
					int32_t w;

					#pragma GCC unroll 8
					for (int j = 0; j < 8; j++) {
						memcpy(&w, qc + 4 * j, 4);
						acc = dp4(acc, A[j], _mm256_sign_epi8(
							_mm256_set1_epi32(w), T[j]));
					}
					facc[i] = _mm256_fmadd_ps(
						_mm256_mul_ps(_mm256_set1_ps(
								      a[i].d[b]),
							      dkv),
						_mm256_cvtepi32_ps(acc), facc[i]);
				}
#endif
			}
			for (int i = 0; i < qn; i++) {
				float *o = s + (size_t)(i0 + i) * lds + t0;
#if KERN_INT_VNNI == 1
				_mm512_mask_storeu_ps(o, (__mmask16)((1u << kb) - 1),
						      _mm512_mul_ps(facc[i],
							_mm512_set1_ps(scale)));
#else
				_Alignas(32) float tmp[8];

				_mm256_store_ps(tmp, _mm256_mul_ps(
					facc[i], _mm256_set1_ps(scale)));
				memcpy(o, tmp, (size_t)kb * sizeof(float));
#endif
			}
		}
	}
}
