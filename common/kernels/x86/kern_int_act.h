/*
 * kern_int_act — activation rows quantized per unit (quant_act_row's
 * operations, 8 lanes at a time).
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 */
/* ---- activation rows (quant_act_row's operations, 8 lanes at a time) -- */

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
/* quant_act_row's operations on 512-bit vectors (the VNNI build): per
 * unit, the largest magnitude and the NaN / Inf test over 16 lanes at a
 * time, then each code rounded to nearest even straight from v * f
 * (vcvtps2dq, the same integer as rint then convert), narrowed with
 * saturation (the codes are within +-127), and each 16's sum. */
void KI_NAME(act_row)(const float *x, int n, int unit, quant_arow *a)
{
	const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));

	for (int u = 0; u < n / unit; u++) {
		const float *v = x + (size_t)u * unit;
		int8_t *q = a->q + (size_t)u * unit;
		int16_t *bs = a->bsum + (size_t)u * unit / 16;
		__m512 mx = _mm512_setzero_ps();
		__mmask16 bad = 0;
		float amax, f;

		for (int k = 0; k < unit; k += 16) {
			__m512 vk = _mm512_loadu_ps(v + k);
			mx = _mm512_max_ps(mx, _mm512_and_ps(vk, absm));
			/* QNaN, +Inf, -Inf, SNaN */
			bad |= _mm512_fpclass_ps_mask(vk, 0x99);
		}
		amax = _mm512_reduce_max_ps(mx);
		if (amax == 0.0f || bad) {
			f = 0.0f;
		} else if (unit == 32) {
			f = 127.0f / amax;
		} else {
			/* the first element of largest magnitude */
			__m512 am = _mm512_set1_ps(amax);
			int k = 0;
			__mmask16 m;
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
		__m512 fv = _mm512_set1_ps(f);
		int sum = 0;
		for (int k = 0; k < unit; k += 16) {
			__m512i iv = _mm512_cvt_roundps_epi32(
				_mm512_mul_ps(_mm512_loadu_ps(v + k), fv),
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			int s16;

			if (unit != 32)
				iv = _mm512_min_epi32(iv, _mm512_set1_epi32(127));
			_mm_storeu_si128((__m128i *)(q + k),
					 _mm512_cvtsepi32_epi8(iv));
			s16 = _mm512_reduce_add_epi32(iv);
			bs[k / 16] = (int16_t)s16;
			sum += s16;
		}
		act_unit_scales(a, u, unit, amax, f, sum);
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
