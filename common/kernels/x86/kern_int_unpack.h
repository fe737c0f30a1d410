/*
 * kern_int_unpack — weight rows to their integer form (quant_wrow) on 256-bit
 * vectors: the codes of every 32-element type and of the K-quants.
 *
 * Part of kern_int_avx2.c's translation unit (included there once, in
 * order, for each of its builds; not a header of its own): it uses the
 * definitions of the parts before it.
 */
/* ---- unpacking (quant_wrow) ------------------------------------------ */

/* 32 bytes whose byte e is 0x10 when bit e of bits is set. */
INLINE __m256i bits_x10(uint32_t bits)
{
	const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101ll,
						0x0202020202020202ll,
						0x0303030303030303ll);
	const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 32 nibbles of 16 bytes: low ones first, then the high ones. */
INLINE __m256i nibbles16(const uint8_t *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)p);
	__m128i m = _mm_set1_epi8(0x0f);
	return _mm256_setr_m128i(_mm_and_si128(v, m),
				 _mm_and_si128(_mm_srli_epi16(v, 4), m));
}

static int v_unpack(uint32_t wt, const void *row, quant_wrow *w, int n)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m256i iq4 = _mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)quant_iq4nl_values));
	int nb;

	switch (wt) {
	case GGML_TYPE_Q8_0:
	case GGML_TYPE_Q4_0:
	case GGML_TYPE_Q5_0:
	case GGML_TYPE_IQ4_NL:
		nb = n / 32;
		break;
	case GGML_TYPE_Q4_K:
	case GGML_TYPE_Q5_K:
	case GGML_TYPE_Q6_K:
	case GGML_TYPE_IQ4_XS:
		nb = n / QK_K;
		break;
	default:
		return 0;
	}
	if (nb == n / 32) {
		/* unit 32: sc (and mn) are 1 by definition, unread here */
		size_t bb = (size_t)ggml_block_bytes(wt);
		w->unit = 32;
		w->has_min = 0;
		for (int b = 0; b < nb; b++) {
			uint16_t h;
			memcpy(&h, (const uint8_t *)row + (size_t)b * bb, 2);
			w->d[b] = _cvtsh_ss(h);
		}
	} else {
		quant_unpack_scales(wt, row, w, n);
	}
	for (int b = 0; b < nb; b++) {
		int8_t *q = w->q + (size_t)b * (wt >= GGML_TYPE_Q2_K &&
						 wt != GGML_TYPE_IQ4_NL ? QK_K : 32);
		switch (wt) {
		case GGML_TYPE_Q8_0: {
			const ggml_block_q8_0 *k = (const ggml_block_q8_0 *)row + b;
			_mm256_storeu_si256((__m256i *)q, _mm256_loadu_si256(
							  (const __m256i *)k->qs));
			break;
		}
		case GGML_TYPE_Q4_0: {
			const ggml_block_q4_0 *k = (const ggml_block_q4_0 *)row + b;
			_mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(
				nibbles16(k->qs), _mm256_set1_epi8(8)));
			break;
		}
		case GGML_TYPE_IQ4_NL: {
			const ggml_block_iq4_nl *k = (const ggml_block_iq4_nl *)row + b;
			_mm256_storeu_si256((__m256i *)q, _mm256_shuffle_epi8(
							  iq4, nibbles16(k->qs)));
			break;
		}
		case GGML_TYPE_Q5_0: {
			const ggml_block_q5_0 *k = (const ggml_block_q5_0 *)row + b;
			uint32_t qh;
			memcpy(&qh, k->qh, 4);
			__m256i v = _mm256_or_si256(nibbles16(k->qs), bits_x10(qh));
			_mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(
							  v, _mm256_set1_epi8(16)));
			break;
		}
		case GGML_TYPE_Q4_K:
		case GGML_TYPE_Q5_K: {
			int five = wt == GGML_TYPE_Q5_K;
			const uint8_t *blk = (const uint8_t *)row +
					     (size_t)b * (five ? 176 : 144);
			const uint8_t *qs = blk + (five ? 48 : 16);
			__m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
			for (int c = 0; c < 4; c++) {
				__m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
				__m256i lo = _mm256_and_si256(v, m4);
				__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
				if (five) {
					__m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c)));
					__m256i b1 = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
					__m256i x10 = _mm256_set1_epi8(0x10);
					lo = _mm256_or_si256(lo, _mm256_and_si256(x10,
						_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0)));
					hi = _mm256_or_si256(hi, _mm256_and_si256(x10,
						_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1)));
				}
				_mm256_storeu_si256((__m256i *)(q + 64 * c), lo);
				_mm256_storeu_si256((__m256i *)(q + 64 * c + 32), hi);
			}
			break;
		}
		case GGML_TYPE_Q6_K: {
			const ggml_block_q6_K *k = (const ggml_block_q6_K *)row + b;
			const __m256i m3 = _mm256_set1_epi8(0x03);
			const __m256i m30 = _mm256_set1_epi8(0x30);
			const __m256i off = _mm256_set1_epi8(32);
			for (int h = 0; h < 2; h++) {
				__m256i l0 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h));
				__m256i l1 = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h + 32));
				__m256i hb = _mm256_loadu_si256((const __m256i *)(k->qh + 32 * h));
				__m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4);
				__m256i h1 = _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30);
				__m256i h2 = _mm256_and_si256(hb, m30);
				__m256i h3 = _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30);
				int8_t *o = q + 128 * h;
				_mm256_storeu_si256((__m256i *)o, _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(l0, m4), h0), off));
				_mm256_storeu_si256((__m256i *)(o + 32), _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(l1, m4), h1), off));
				_mm256_storeu_si256((__m256i *)(o + 64), _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(
						_mm256_srli_epi16(l0, 4), m4), h2), off));
				_mm256_storeu_si256((__m256i *)(o + 96), _mm256_sub_epi8(
					_mm256_or_si256(_mm256_and_si256(
						_mm256_srli_epi16(l1, 4), m4), h3), off));
			}
			break;
		}
		case GGML_TYPE_IQ4_XS: {
			const ggml_block_iq4_xs *k = (const ggml_block_iq4_xs *)row + b;
			for (int ib = 0; ib < 8; ib++)
				_mm256_storeu_si256((__m256i *)(q + 32 * ib),
						    _mm256_shuffle_epi8(iq4, nibbles16(
							    k->qs + 16 * ib)));
			break;
		}
		}
	}
	return 1;
}
