/*
 * kern_att — the attention kernels of query heads that share one KV head
 * (kern.h's kern_att_scores of f16 and f32 keys, and kern_att_values),
 * written once against kern_vec.h's mappings. (Q8_0 keys are scored in
 * integers: kern_int_att.h.)
 *
 * Part of kern_float.c's translation unit (included there once, at the
 * end; not a header of its own), so built at 8 lanes (kern_avx2_att_*)
 * and at 16 (kern_avx512_att_*). Every score is one canonical reduction
 * (16 lanes, lane l taking elements l, l + 16, .. in order, a partial
 * last chunk updating only its lanes below n, then hsum16's tree) and
 * every output element one fmaf chain over the positions in order, so
 * both widths give the scalar definition's bits; the widths differ only
 * in how many chains run side by side (the register file).
 */

/* Keys per score tile: their 8 trees run side by side (att_tree8; at 16
 * lanes att_trees, every tree of the tile at once). */
#define ATT_KB 8
/* f16 keys are converted once per tile into a stack buffer of ATT_KB
 * rows of at most this many elements; wider heads take the per-pair
 * dot. */
#define ATT_HD_MAX 512
#if KERN_VEC_W == 16
/* query heads per score tile (3 x 8 accumulators, 3 queries, a key) and
 * per value tile (8 x 2 accumulators, 2 values, a weight) in 32 zmm */
#define ATT_QH 3
#define ATT_VQ 8
#else
/* 16 ymm: one query's 8 accumulators per half; 4 x 2 for values */
#define ATT_QH 1
#define ATT_VQ 4
#endif

/* Lanes [KERN_VEC_W r, KERN_VEC_W (r + 1)) of the canonical accumulators
 * of the QH queries q[i] against the ATT_KB rows kr over n elements,
 * added to acc[i][j][r] (zero). A partial last chunk updates only its
 * lanes below n (the others keep their value: masked, never fused with
 * a zero). */
INLINE void att_part(const float *const *q, const float *const *kr, int n,
		     int r, V (*acc)[ATT_KB][KV_R], const int QH)
{
	int h = KERN_VEC_W * r, k = 0;

	for (; k + 16 <= n; k += 16) {
		V qv[ATT_QH];

		#pragma GCC unroll 4
		for (int i = 0; i < QH; i++)
			qv[i] = V_LOADU(q[i] + k + h);
		#pragma GCC unroll 8
		for (int j = 0; j < ATT_KB; j++) {
			V kv = V_LOADU(kr[j] + k + h);

			#pragma GCC unroll 4
			for (int i = 0; i < QH; i++)
				acc[i][j][r] = V_FMA(qv[i], kv, acc[i][j][r]);
		}
	}
	if (k + h < n) {
		VM m = V_MASK_BELOW(k + h, n);
		V qv[ATT_QH];

		#pragma GCC unroll 4
		for (int i = 0; i < QH; i++)
			qv[i] = V_MASKLOAD(q[i] + k + h, m);
		#pragma GCC unroll 8
		for (int j = 0; j < ATT_KB; j++) {
			V kv = V_MASKLOAD(kr[j] + k + h, m);

			#pragma GCC unroll 4
			for (int i = 0; i < QH; i++)
				acc[i][j][r] = V_FMA_MASK(qv[i], kv,
							  acc[i][j][r], m);
		}
	}
}

/* hsum16's tree for ATT_KB = 8 reductions at once, from their (l, l + 8)
 * sums a[j] (lower lane always the first operand); the 8 sums in order. */
INLINE __m256 att_tree8(const __m256 *a)
{
	__m256 b[4], c[2];

	#pragma GCC unroll 8
	for (int j = 0; j < 4; j++) /* (l + 4): [j0 l<4 | j1 l<4] */
		b[j] = _mm256_add_ps(
			_mm256_permute2f128_ps(a[2 * j], a[2 * j + 1], 0x20),
			_mm256_permute2f128_ps(a[2 * j], a[2 * j + 1], 0x31));
	#pragma GCC unroll 8
	for (int j = 0; j < 2; j++) /* (l + 2): [j0 j2 | j1 j3] x 2 lanes */
		c[j] = _mm256_add_ps(
			_mm256_shuffle_ps(b[2 * j], b[2 * j + 1],
					  _MM_SHUFFLE(1, 0, 1, 0)),
			_mm256_shuffle_ps(b[2 * j], b[2 * j + 1],
					  _MM_SHUFFLE(3, 2, 3, 2)));
	/* (0 + 1): [j0 j2 j4 j6 | j1 j3 j5 j7] */
	__m256 d = _mm256_add_ps(
		_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
		_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm256_permutevar8x32_ps(d, _mm256_setr_epi32(0, 4, 1, 5, 2,
							     6, 3, 7));
}

/* Row t of a run of rows at element offset t * ld (kern.c's kv_run_row:
 * a Q8_0 row starts on a block). */
INLINE const char *run_row(const void *base, size_t ld, uint32_t kt, int t)
{
	size_t e = (size_t)t * ld;

	if (kt == GGML_TYPE_Q8_0)
		return (const char *)((const ggml_block_q8_0 *)base +
				      e / GGML_QK8_0);
	return (const char *)base + e * (kt == GGML_TYPE_F16 ? 2 : 4);
}

/* Row t of the keys converted to f32 (f16: exactly, into buf). Q8_0
 * keys are scored in integers (kern_int_att.h), never here. */
INLINE const float *att_row(const void *k, size_t ldk, uint32_t kt, int t,
			    int n, float *buf)
{
	const char *row = run_row(k, ldk, kt, t);
	int e = 0;

	if (kt == GGML_TYPE_F32)
		return (const float *)row;
	/* the type constant in the loop: wload's switch folds away */
	for (; e + KERN_VEC_W <= n; e += KERN_VEC_W)
		V_STOREU(buf + e, wload(row, GGML_TYPE_F16, e));
	for (; e < n; e++)
		buf[e] = half_f16_to_f32(((const uint16_t *)row)[e]);
	return buf;
}

#if KERN_VEC_W == 16
/*
 * The tile's QH x ATT_KB scores (accumulator 8 i + j: query i, key j),
 * each hsum16's tree, done for all of them at once: (l, l + 8) here,
 * pairing two accumulators' 128-bit quarters so that one addition folds
 * both (-> [a's 8 | b's 8]), then v16_tree8's (l, l + 4), (l, l + 2),
 * (0, 1) on those halves, which leaves queries 2o and 2o + 1 in the
 * halves of its vector o. Then the scale, as before. 2.8 operations a
 * score where v_fold16 and att_tree8 took 4.8.
 */
INLINE void att_trees(V (*acc)[ATT_KB][KV_R], int kb, __m256 sc, float *si,
		      int lds, const int QH)
{
	const int n1 = QH * ATT_KB / 2;
	const __mmask8 k = (__mmask8)((1u << kb) - 1);
	__m512 p[ATT_QH * ATT_KB / 2], o[(ATT_QH + 1) / 2];

	/* (l, l + 8): scores 2m and 2m + 1 into p[m]'s halves */
	#pragma GCC unroll 12
	for (int m = 0; m < n1; m++) {
		__m512 x = acc[2 * m / ATT_KB][2 * m % ATT_KB][0];
		__m512 y = acc[(2 * m + 1) / ATT_KB][(2 * m + 1) % ATT_KB][0];

		p[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44),
				     _mm512_shuffle_f32x4(x, y, 0xee));
	}
	v16_tree8(p, n1, o);
	#pragma GCC unroll 2
	for (int m = 0; m < (QH + 1) / 2; m++)
		o[m] = _mm512_mul_ps(o[m], _mm512_broadcast_f32x8(sc));
	#pragma GCC unroll 4
	for (int i = 0; i < QH; i++)
		_mm256_mask_storeu_ps(si + (size_t)i * lds, k,
				      i % 2 ? _mm512_extractf32x8_ps(o[i / 2], 1)
					    : _mm512_castps512_ps256(o[i / 2]));
}
_Static_assert(ATT_KB == 8 && ATT_QH <= 4, "att_trees' pairing");
#endif

/* The scores of QH queries from qi (ldq apart) against the tile's kb rows
 * kr (ATT_KB of them: a short tile repeats its first row, those sums are
 * dropped) into si (lds apart). */
INLINE void att_stile(const float *qi, int ldq, const float *const *kr,
		      int kb, int n, __m256 sc, float *si, int lds, const int QH)
{
	const float *q[ATT_QH];
	V acc[ATT_QH][ATT_KB][KV_R];

	#pragma GCC unroll 4
	for (int i = 0; i < QH; i++) {
		q[i] = qi + (size_t)i * ldq;
		#pragma GCC unroll 8
		for (int j = 0; j < ATT_KB; j++)
			#pragma GCC unroll 2
			for (int r = 0; r < KV_R; r++)
				acc[i][j][r] = V_ZERO();
	}
	#pragma GCC unroll 2
	for (int r = 0; r < KV_R; r++)
		att_part(q, kr, n, r, acc, QH);
#if KERN_VEC_W == 16
	att_trees(acc, kb, sc, si, lds, QH);
#else
	#pragma GCC unroll 4
	for (int i = 0; i < QH; i++) {
		__m256 a[ATT_KB], v;
		float *o = si + (size_t)i * lds, tmp[ATT_KB];

		#pragma GCC unroll 8
		for (int j = 0; j < ATT_KB; j++)
			a[j] = v_fold16(acc[i][j]);
		v = _mm256_mul_ps(att_tree8(a), sc);
		if (kb == ATT_KB) {
			_mm256_storeu_ps(o, v);
		} else {
			_mm256_storeu_ps(tmp, v);
			memcpy(o, tmp, (size_t)kb * sizeof(float));
		}
	}
#endif
}

void KV_NAME(att_scores)(const float *q, int ldq, int nq, const void *k,
			 size_t ldk, uint32_t kt, int nt, int n, float scale,
			 float *s, int lds)
{
	_Alignas(64) float buf[ATT_KB * ATT_HD_MAX];
	__m256 sc = _mm256_set1_ps(scale);
	/* converted rows packed, whole vectors apart */
	int ld = (n + KERN_VEC_W - 1) & ~(KERN_VEC_W - 1);

	if (n > ATT_HD_MAX) {
		for (int i = 0; i < nq; i++)
			for (int t = 0; t < nt; t++)
				s[(size_t)i * lds + t] = dot_type(
					q + (size_t)i * ldq,
					run_row(k, ldk, kt, t), n, kt) * scale;
		return;
	}
	for (int t0 = 0; t0 < nt; t0 += ATT_KB) {
		int kb = nt - t0 < ATT_KB ? nt - t0 : ATT_KB, i = 0;
		const float *kr[ATT_KB];

		for (int j = 0; j < ATT_KB; j++)
			kr[j] = j < kb ? att_row(k, ldk, kt, t0 + j, n,
						 buf + j * ld)
				       : kr[0];
		for (; i + ATT_QH <= nq; i += ATT_QH)
			att_stile(q + (size_t)i * ldq, ldq, kr, kb, n, sc,
				  s + (size_t)i * lds + t0, lds, ATT_QH);
#if ATT_QH > 1
		for (; i < nq; i++)
			att_stile(q + (size_t)i * ldq, ldq, kr, kb, n, sc,
				  s + (size_t)i * lds + t0, lds, 1);
#endif
	}
}

/* KERN_VEC_W (WE = 1) or 2 KERN_VEC_W (WE = 2) elements at e of Q
 * outputs: the chains over the nt rows stay in registers, each row
 * converted once for the Q. */
INLINE void att_vtile(float *out, int ldo, const float *s, int lds,
		      const void *v, size_t ldv, const uint32_t kt, int nt,
		      int e, const int Q, const int WE)
{
	V acc[ATT_VQ][2];

	#pragma GCC unroll 8
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 2
		for (int w = 0; w < WE; w++)
			acc[i][w] = V_LOADU(out + (size_t)i * ldo + e +
					    KERN_VEC_W * w);
	for (int t = 0; t < nt; t++) {
		const char *row = run_row(v, ldv, kt, t);
		V x[2];

		#pragma GCC unroll 2
		for (int w = 0; w < WE; w++)
			x[w] = wload(row, kt, e + KERN_VEC_W * w);
		#pragma GCC unroll 8
		for (int i = 0; i < Q; i++) {
			V a = V_SET1(s[(size_t)i * lds + t]);

			#pragma GCC unroll 2
			for (int w = 0; w < WE; w++)
				acc[i][w] = V_FMA(a, x[w], acc[i][w]);
		}
	}
	#pragma GCC unroll 8
	for (int i = 0; i < Q; i++)
		#pragma GCC unroll 2
		for (int w = 0; w < WE; w++)
			V_STOREU(out + (size_t)i * ldo + e + KERN_VEC_W * w,
				 acc[i][w]);
}

INLINE void att_vgroup(float *out, int ldo, const float *s, int lds,
		       const void *v, size_t ldv, const uint32_t kt, int nt,
		       int n, const int Q)
{
	int e = 0;

	for (; e + 2 * KERN_VEC_W <= n; e += 2 * KERN_VEC_W)
		att_vtile(out, ldo, s, lds, v, ldv, kt, nt, e, Q, 2);
	for (; e + KERN_VEC_W <= n; e += KERN_VEC_W)
		att_vtile(out, ldo, s, lds, v, ldv, kt, nt, e, Q, 1);
	for (; e < n; e++)
		for (int i = 0; i < Q; i++) {
			float y = out[(size_t)i * ldo + e];

			for (int t = 0; t < nt; t++)
				y = fmaf(s[(size_t)i * lds + t],
					 wscalar(run_row(v, ldv, kt, t), kt,
						 e), y);
			out[(size_t)i * ldo + e] = y;
		}
}

INLINE void att_values_type(float *out, int ldo, int nq, const float *s,
			    int lds, const void *v, size_t ldv, int nt, int n,
			    const uint32_t kt)
{
	/* up to ATT_VQ outputs per pass: each value row converted once per
	 * pass */
	for (int i = 0; i < nq; i += ATT_VQ) {
		float *o = out + (size_t)i * ldo;
		const float *si = s + (size_t)i * lds;

		switch (nq - i < ATT_VQ ? nq - i : ATT_VQ) {
#define ATT_VCASE(q)                                                        \
	case q:                                                             \
		att_vgroup(o, ldo, si, lds, v, ldv, kt, nt, n, q);          \
		break;
			ATT_VCASE(1) ATT_VCASE(2) ATT_VCASE(3)
#if ATT_VQ > 4
			ATT_VCASE(4) ATT_VCASE(5) ATT_VCASE(6) ATT_VCASE(7)
#endif
#undef ATT_VCASE
		default:
			att_vgroup(o, ldo, si, lds, v, ldv, kt, nt, n, ATT_VQ);
		}
	}
}
_Static_assert(ATT_VQ == 4 || ATT_VQ == 8, "att_values_type's cases");

void KV_NAME(att_values)(float *out, int ldo, int nq, const float *s,
			 int lds, const void *v, size_t ldv, uint32_t kt,
			 int nt, int n)
{
	if (kt == GGML_TYPE_F16)
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_F16);
	else if (kt == GGML_TYPE_Q8_0)
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_Q8_0);
	else
		att_values_type(out, ldo, nq, s, lds, v, ldv, nt, n,
				GGML_TYPE_F32);
}
