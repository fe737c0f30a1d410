/*
 * kern_int_act — activation rows quantized per unit (quant_act_row's
 * operations: 8 lanes at a time in the AVX2 build; the VNNI build's
 * units of 32 a unit to a lane, 16 at a time).
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 */
/* ---- activation rows (quant_act_row's operations) -------------------- */

/* The 32 codes of int32 vectors i[0..3] (values in int8 range), in order. */
INLINE __m256i pack32(const __m256i *i)
{
	__m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]),
				       _mm256_packs_epi32(i[2], i[3]));
	return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2,
								6, 3, 7));
}

INLINE int hsum_i32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
				  _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

/* f rounded to f16 and back (F16C: half.c's bits). */
INLINE float f16_round(float f)
{
	return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

/* Unit u of x (at v) by the reference: NaN, Inf, all zero, or a factor
 * f that overflows (the codes of an infinite product). */
INLINE void act_unit_ref(const float *v, int unit, int u, quant_arow *a)
{
	quant_arow one = {.q = a->q + (size_t)u * unit,
			  .bsum = a->bsum + (size_t)u * unit / 16,
			  .d = a->d + u, .s = a->s + u};

	quant_act_row(v, unit, unit, &one);
}

/* Unit u's scales from its largest magnitude amax, factor f and codes'
 * sum: quant_act_row's, the same operations. */
INLINE void act_unit_scales(quant_arow *a, int u, int unit, float amax,
			    float f, int sum)
{
	if (unit == 32) {
		float d = amax / 127.0f, sd, sh;
		float dh = f16_round(d);
		a->d[u] = dh <= FLT_MAX ? dh : d;
		sd = d * (float)sum;
		sh = f16_round(sd);
		a->s[u] = sh <= FLT_MAX && sh >= -FLT_MAX ? sh : sd;
	} else {
		a->d[u] = 1.0f / f;
		a->s[u] = 0.0f;
	}
}

#if KERN_INT_VNNI == 1
/* 16 lanes' values, lane l the 16-lane vector m[l]'s largest: pairs of
 * vectors share each step (the 128-bit quarters, then their halves,
 * then pairs of floats), as zt_finish's tree does with additions; max is
 * exact, so any order gives the same value. */
INLINE __m512 act_max16(const __m512 *m)
{
	__m512 p[8], q[4], r[2], o;

	#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) /* quarters: [x02|x13, y02|y13] */
		p[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1],
							  0x88),
				     _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1],
							  0xdd));
	#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) /* quarter c: vector 4i + c */
		q[i] = _mm512_max_ps(_mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1],
							  0x88),
				     _mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1],
							  0xdd));
	#pragma GCC unroll 2
	for (int i = 0; i < 2; i++) /* quarter c: 8i + c twice, 8i + 4 + c */
		r[i] = _mm512_max_ps(_mm512_shuffle_ps(q[2 * i], q[2 * i + 1],
						       0x44),
				     _mm512_shuffle_ps(q[2 * i], q[2 * i + 1],
						       0xee));
	/* quarter c, element e: vector c + 4e */
	o = _mm512_max_ps(_mm512_shuffle_ps(r[0], r[1], 0x88),
			  _mm512_shuffle_ps(r[0], r[1], 0xdd));
	return _mm512_permutexvar_ps(v16_tr4(), o);
}

/* f16 rounding of 16 floats (act_unit_scales' f16_round, 16 at once). */
INLINE __m512 act_f16r(__m512 x)
{
	return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

/* The 64 codes of int32 vectors iv[0..3] (within int8), in order: the
 * packs leave 4 codes of iv[k] at element 4c + k of quarter c, and the
 * permutation puts them at 4k + c. */
INLINE __m512i act_codes64(const __m512i *iv)
{
	return _mm512_permutexvar_epi32(v16_tr4(), _mm512_packs_epi16(
		_mm512_packs_epi32(iv[0], iv[1]),
		_mm512_packs_epi32(iv[2], iv[3])));
}

/* Each quarter's 16 codes of c summed (+ 16 x 128, vpsadbw's offset)
 * into its qword 0. */
INLINE __m512i act_sums16(__m512i c)
{
	c = _mm512_sad_epu8(_mm512_xor_si512(c, _mm512_set1_epi8((char)0x80)),
			    _mm512_setzero_si512());
	return _mm512_add_epi64(c, _mm512_bsrli_epi128(c, 8));
}

/* Units [0, nb) of 32 at x (nb <= 16) quantized into q (32 codes each), bs
 * (2 sums of 16 each), d and s with quant_act_row's operations, a unit
 * to a lane: the largest magnitudes (act_max16), then d, its f16
 * rounding and the factor 127 / amax as lane operations, the codes two
 * units to a vector (vcvtps2dq rounds to nearest even, as rint; packed
 * with saturation, the codes within +-127), each 16 codes' sum from
 * vpsadbw (offset by 128 a code), each unit's sum from its two. Lanes
 * from nb are zeros, never stored. Returns the mask of units those
 * operations serve: the others (NaN, Inf, all zero, a factor that
 * overflows) the caller takes to the reference (act_unit_ref). */
static __mmask16 act_units16(const float *x, int nb, int8_t *q, int16_t *bs,
			     float *d, float *s)
{
	const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
	const __m512 big = _mm512_set1_ps(FLT_MAX);
	const __mmask16 lanes = (__mmask16)((1u << nb) - 1);
	_Alignas(64) float f[16];
	__m512 m[16], amax, dv, dh, fv, sd, sh;
	__m512i sums[8] = {0};
	__m128i bsv[4] = {0};
	__mmask16 bad = 0, ok;

	#pragma GCC unroll 16
	for (int i = 0; i < 16; i++) {
		__m512 v0 = _mm512_setzero_ps(), v1 = v0;

		if (i < nb) {
			v0 = _mm512_loadu_ps(x + 32 * i);
			v1 = _mm512_loadu_ps(x + 32 * i + 16);
		}
		m[i] = _mm512_max_ps(_mm512_and_ps(v0, absm),
				     _mm512_and_ps(v1, absm));
		/* QNaN, +Inf, -Inf, SNaN */
		bad |= (__mmask16)(!!(_mm512_fpclass_ps_mask(v0, 0x99) |
				      _mm512_fpclass_ps_mask(v1, 0x99)) << i);
	}
	amax = act_max16(m);
	dv = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
	dh = act_f16r(dv);
	fv = _mm512_div_ps(_mm512_set1_ps(127.0f), amax);
	ok = (__mmask16)(lanes & ~bad &
			 _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(),
					    _CMP_NEQ_UQ) &
			 _mm512_cmp_ps_mask(fv, _mm512_setzero_ps(),
					    _CMP_NEQ_UQ) &
			 _mm512_cmp_ps_mask(_mm512_and_ps(fv, absm), big,
					    _CMP_LE_OQ));
	_mm512_store_ps(f, fv);
	_mm512_mask_storeu_ps(d, lanes, _mm512_mask_blend_ps(
		_mm512_cmp_ps_mask(dh, big, _CMP_LE_OQ), dv, dh));
	#pragma GCC unroll 8
	for (int p = 0; p < 8; p++) {
		__m512i iv[4], c;

		if (2 * p >= nb)
			break;
		#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			iv[k] = 2 * p + k / 2 < nb ? _mm512_cvt_roundps_epi32(
				_mm512_mul_ps(_mm512_loadu_ps(x + 64 * p + 16 * k),
					      _mm512_set1_ps(f[2 * p + k / 2])),
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
				: _mm512_setzero_si512();
		c = act_codes64(iv);
		if (2 * p + 1 < nb)
			_mm512_storeu_si512(q + 64 * p, c);
		else
			_mm256_storeu_si256((__m256i *)(q + 64 * p),
					    _mm512_castsi512_si256(c));
		sums[p] = act_sums16(c);
	}
	#pragma GCC unroll 4
	for (int p = 0; p < 4; p++) {
		int left = 2 * nb - 8 * p; /* sums of 16 from here */

		if (left <= 0)
			break;
		bsv[p] = _mm_sub_epi16(_mm512_cvtepi64_epi16(
			_mm512_permutex2var_epi64(sums[2 * p],
				_mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14),
				sums[2 * p + 1])), _mm_set1_epi16(16 * 128));
		_mm_mask_storeu_epi16(bs + 8 * p, (__mmask8)(left >= 8 ? 0xff :
						      (1u << left) - 1), bsv[p]);
	}
	/* Q8_1's block sum: d (before rounding) * sum, in f16; the sums from
	 * registers (a load of the masked stores above waits for them) */
	sd = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_madd_epi16(
		_mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
			_mm512_castsi128_si512(bsv[0]), bsv[1], 1), bsv[2], 2),
			bsv[3], 3), _mm512_set1_epi16(1))));
	sh = act_f16r(sd);
	_mm512_mask_storeu_ps(s, lanes, _mm512_mask_blend_ps(
		_mm512_cmp_ps_mask(_mm512_and_ps(sh, absm), big, _CMP_LE_OQ),
		sd, sh));
	return ok;
}

/* quant_act_row's operations on 512-bit vectors (the VNNI build): units
 * of 32 sixteen at a time (act_units16; the reference takes the units it
 * leaves); units of QK_K one at a time: the largest magnitude and the
 * NaN / Inf test over 16 lanes at a time, the scale from the first
 * element of that magnitude, then each code rounded to nearest even
 * straight from v * f (vcvtps2dq, the same integer as rint then
 * convert), capped at 127 and packed 64 at a time with their sums of 16
 * (act_codes64, act_sums16). */
void KI_NAME(act_row)(const float *x, int n, int unit, quant_arow *a)
{
	const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));

	if (unit == 32) {
		int nu = n / 32;

		for (int u0 = 0; u0 < nu; u0 += 16) {
			int nb = nu - u0 < 16 ? nu - u0 : 16;
			__mmask16 ok = act_units16(x + 32 * (size_t)u0, nb,
						   a->q + 32 * (size_t)u0,
						   a->bsum + 2 * u0,
						   a->d + u0, a->s + u0);

			for (int i = 0; i < nb; i++)
				if (!(ok >> i & 1))
					act_unit_ref(x + 32 * (size_t)(u0 + i),
						     32, u0 + i, a);
		}
		return;
	}
	/* units of QK_K: the scale from the first element of largest
	 * magnitude, the codes capped at 127 */
	for (int u = 0; u < n / unit; u++) {
		const float *v = x + (size_t)u * unit;
		int8_t *q = a->q + (size_t)u * unit;
		int16_t *bs = a->bsum + (size_t)u * unit / 16;
		__m512 mx = _mm512_setzero_ps(), am, fv;
		__mmask16 bad = 0, m;
		float amax, f = 0.0f;
		int k = 0;

		for (k = 0; k < unit; k += 16) {
			__m512 vk = _mm512_loadu_ps(v + k);
			mx = _mm512_max_ps(mx, _mm512_and_ps(vk, absm));
			/* QNaN, +Inf, -Inf, SNaN */
			bad |= _mm512_fpclass_ps_mask(vk, 0x99);
		}
		amax = _mm512_reduce_max_ps(mx);
		if (amax != 0.0f && !bad) {
			am = _mm512_set1_ps(amax);
			k = 0;
			while (!(m = _mm512_cmp_ps_mask(_mm512_and_ps(
					 _mm512_loadu_ps(v + k), absm), am,
					 _CMP_EQ_OQ)))
				k += 16;
			f = -127.0f / v[k + __builtin_ctz((unsigned)m)];
		}
		if (f == 0.0f || f > FLT_MAX || f < -FLT_MAX) {
			act_unit_ref(v, unit, u, a);
			continue;
		}
		fv = _mm512_set1_ps(f);
		for (k = 0; k < unit; k += 64) {
			__m512i iv[4], c;

			#pragma GCC unroll 4
			for (int i = 0; i < 4; i++)
				iv[i] = _mm512_min_epi32(_mm512_cvt_roundps_epi32(
					_mm512_mul_ps(_mm512_loadu_ps(v + k + 16 * i),
						      fv),
					_MM_FROUND_TO_NEAREST_INT |
						_MM_FROUND_NO_EXC),
					_mm512_set1_epi32(127));
			c = act_codes64(iv);
			_mm512_storeu_si512(q + k, c);
			/* the four sums (qwords 0, 2, 4, 6) as int16 */
			_mm_storel_epi64((__m128i *)(bs + k / 16), _mm_sub_epi16(
				_mm256_cvtepi64_epi16(_mm512_castsi512_si256(
					_mm512_permutexvar_epi64(_mm512_setr_epi64(
						0, 2, 4, 6, 1, 3, 5, 7),
						act_sums16(c)))),
				_mm_set1_epi16(16 * 128)));
		}
		act_unit_scales(a, u, unit, amax, f, 0);
	}
}
#else
void KI_NAME(act_row)(const float *x, int n, int unit, quant_arow *a)
{
	const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256i expm = _mm256_set1_epi32(0x7f800000);

	for (int u = 0; u < n / unit; u++) {
		const float *v = x + (size_t)u * unit;
		int8_t *q = a->q + (size_t)u * unit;
		int16_t *bs = a->bsum + (size_t)u * unit / 16;
		__m256 mx8 = _mm256_setzero_ps();
		__m256i bad = _mm256_setzero_si256();
		float amax, f;

		for (int k = 0; k < unit; k += 8) {
			__m256 vk = _mm256_loadu_ps(v + k);
			mx8 = _mm256_max_ps(mx8, _mm256_and_ps(vk, absm));
			bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(
				_mm256_castps_si256(vk), expm), expm));
		}
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx8),
				       _mm256_extractf128_ps(mx8, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
		if (amax == 0.0f || !_mm256_testz_si256(bad, bad)) {
			f = 0.0f;
		} else if (unit == 32) {
			f = 127.0f / amax;
		} else {
			/* the first element of largest magnitude */
			int k = 0, bits;
			__m256 am = _mm256_set1_ps(amax);
			while (!(bits = _mm256_movemask_ps(_mm256_cmp_ps(
					 _mm256_and_ps(_mm256_loadu_ps(v + k), absm),
					 am, _CMP_EQ_OQ))))
				k += 8;
			f = -127.0f / v[k + __builtin_ctz((unsigned)bits)];
		}
		if (f == 0.0f || f > FLT_MAX || f < -FLT_MAX) {
			act_unit_ref(v, unit, u, a);
			continue;
		}
		__m256 fv = _mm256_set1_ps(f);
		int sum = 0;
		for (int k = 0; k < unit; k += 32) {
			__m256i iv[4];
			for (int i = 0; i < 4; i++) {
				/* v * f: the reference's v * id, or is * v */
				__m256 r = _mm256_round_ps(_mm256_mul_ps(
					_mm256_loadu_ps(v + k + 8 * i), fv),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
				if (unit != 32)
					r = _mm256_min_ps(r, _mm256_set1_ps(127.0f));
				iv[i] = _mm256_cvtps_epi32(r);
			}
			_mm256_storeu_si256((__m256i *)(q + k), pack32(iv));
			int s0 = hsum_i32(_mm256_add_epi32(iv[0], iv[1]));
			int s1 = hsum_i32(_mm256_add_epi32(iv[2], iv[3]));
			bs[k / 16] = (int16_t)s0;
			bs[k / 16 + 1] = (int16_t)s1;
			sum += s0 + s1;
		}
		act_unit_scales(a, u, unit, amax, f, sum);
	}
}
#endif /* KERN_INT_VNNI == 1 */
